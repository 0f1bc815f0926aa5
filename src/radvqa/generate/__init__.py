"""radvqa.generate"""
