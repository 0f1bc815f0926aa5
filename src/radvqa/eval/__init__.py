"""radvqa.eval"""
