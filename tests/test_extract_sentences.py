"""The hand-written sentence table (tests/data/extract/sentences.yaml): negation, both kinds of
uncertainty, scope ends, laterality, regions, severity, size, change, implicit normals,
exclusions. Each row is one test case."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from radvqa.extract import get_extractor
from radvqa.ontology import load_ontology

ROWS = yaml.safe_load((Path(__file__).parent / "data" / "extract" / "sentences.yaml").read_text())["rows"]
KEYS = {"lat": "laterality", "reg": "regions", "sev": "severity", "size": "size_mm", "chg": "change",
        "qual": "qualifier", "tmp": "temporal"}


@pytest.fixture(scope="module")
def ex():
    return get_extractor("rules", ontology=load_ontology())


def _matches(o, certainty: str, attrs: dict[str, str]) -> bool:
    if o.certainty != certainty:
        return False
    for k, v in attrs.items():
        field = KEYS[k]
        got = getattr(o, field)
        if field == "qualifier":
            v = v.replace("_", " ")  # "qual=typical_findings_of": one token in the table
        if field == "regions":
            if v not in got:
                return False
        elif v == "none":  # the field must be empty ("lat=none": no side)
            if got is not None:
                return False
        elif field == "size_mm":
            if got is None or abs(got - float(v)) > 1e-6:
                return False
        elif got != v:
            return False
    return True


def test_table_is_big_enough_and_covers_every_topic():
    assert len(ROWS) >= 150
    topics = {r[0] for r in ROWS}
    assert {"negation", "negation_post", "uncertain_dominant", "uncertain", "scope", "laterality", "region",
            "severity", "size", "change", "implicit", "exclusion", "no_new"} <= topics


@pytest.mark.parametrize("topic, text, expected", ROWS, ids=[f"{i:03d}-{r[0]}" for i, r in enumerate(ROWS)])
def test_sentence(ex, topic, text, expected):
    e = ex.extract(text, "t")
    assert e.error is None
    got = [(o.finding, o.certainty, o.laterality, o.regions, o.severity, o.size_mm, o.change, o.qualifier, o.temporal)
           for o in e.observations]
    if expected.strip() == "-":
        assert e.observations == [], got
        return
    for item in expected.split(";"):
        item = item.strip()
        if item.startswith("!"):
            assert all(o.finding != item[1:] for o in e.observations), (item, got)
            continue
        head, *kv = item.split()
        finding, certainty = head.split(":")
        attrs = dict(x.split("=", 1) for x in kv)
        cands = [o for o in e.observations if o.finding == finding]
        assert any(_matches(o, certainty, attrs) for o in cands), (item, got)
