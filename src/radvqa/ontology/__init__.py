"""radvqa.ontology"""
