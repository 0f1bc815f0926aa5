"""Fixtures shared by the NIH-14 label tests (test_nih14_mapping.py, test_nih14_r2.py): the
ontology, the rules extractor in both hedge modes, and the NIH-14 labeler, built once per module."""

from __future__ import annotations

import pytest

from radvqa.extract import get_extractor
from radvqa.extract.labels import Labeler
from radvqa.ontology import load_ontology


@pytest.fixture(scope="module")
def onto():
    return load_ontology()


@pytest.fixture(scope="module")
def keep(onto):
    return get_extractor("rules", ontology=onto)


@pytest.fixture(scope="module")
def commit(onto):
    return get_extractor("rules", ontology=onto, hedges="commit")


@pytest.fixture(scope="module")
def labeler(onto):
    return Labeler(onto, "nih14")
