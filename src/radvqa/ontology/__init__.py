"""radvqa.ontology: findings, regions, anatomies, modifiers and label-scheme maps as versioned YAML
data (``data/*.yaml``), validated at load.

    from radvqa.ontology import load_ontology
    onto = load_ontology()                       # package data, cached
    onto.findings["pleural_effusion"].synonyms
    onto.map_label("nih14", "Effusion")          # ["pleural_effusion"]
    onto.ancestors("consolidation")              # ["lung_opacity", ...]
"""

from __future__ import annotations

from radvqa.ontology.core import DATA_DIR, Ontology, check_ontology, load_ontology
from radvqa.ontology.loader import OntologyError, normalize_term
from radvqa.ontology.types import Anatomy, CheckResult, Finding, Modifiers, Region, Scheme

__all__ = [
    "DATA_DIR",
    "Anatomy",
    "CheckResult",
    "Finding",
    "Modifiers",
    "Ontology",
    "OntologyError",
    "Region",
    "Scheme",
    "check_ontology",
    "load_ontology",
    "normalize_term",
]
