"""radvqa.viewer"""
