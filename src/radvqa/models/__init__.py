"""radvqa.models"""
