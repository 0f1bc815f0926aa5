"""radvqa.quality"""
