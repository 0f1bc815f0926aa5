"""radvqa.extract"""
