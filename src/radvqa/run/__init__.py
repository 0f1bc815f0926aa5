"""radvqa.run"""
