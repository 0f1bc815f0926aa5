"""radvqa.io"""
