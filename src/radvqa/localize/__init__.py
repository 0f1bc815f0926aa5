"""radvqa.localize"""
