"""radvqa.sources"""
