"""Fixtures shared by the truth-round tests (tests/test_truth_r*.py): the rules extractor and the
qba generator on the real ontology, one per test module (a module defining its own wins)."""

from __future__ import annotations

import pytest

from radvqa.extract.rules import RulesExtractor
from radvqa.ontology import load_ontology


@pytest.fixture(scope="module")
def ex() -> RulesExtractor:
    return RulesExtractor(load_ontology())


@pytest.fixture(scope="module")
def gen():  # noqa: ANN201 - radvqa.generate.engine.Generator, imported where used
    from radvqa.generate import GenerateOptions
    from radvqa.generate.engine import Generator

    return Generator(load_ontology(), GenerateOptions(strategies=("qba",)))
