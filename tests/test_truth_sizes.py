"""A size measured on one place's lesion is not the size of lesions elsewhere (#13).

Held-out audit (session 8): "a 5 mm granuloma in the right midlung" and "right hilar granulomas"
were stated as one granuloma "in the mid lung zone and the hilum" that "measures 5 mm". When the
generator states copies of one finding and side together (facts.merge_facts), a size is kept only
when the copies that name a place name the same place (or one of its ancestors)."""

from __future__ import annotations

import pytest

from radvqa.generate import GenerateOptions, Generator
from radvqa.model import Observation, Span
from radvqa.ontology import load_ontology

from openi_truth import scene_graph

S1 = "There is a 5 mm calcified granuloma in the right midlung."
S2 = "Right hilar granulomas are noted."


@pytest.fixture(scope="module")
def gen():
    return Generator(load_ontology(), GenerateOptions(strategies=("qba",), unvouched="keep"))


def _ev(sid: str, text: str) -> list[Span]:
    return [Span(start=0, end=len(text), text=text, sentence_id=sid)]


def _rows(gen, second_regions: list[str]) -> list:
    obs = [Observation(id="O01", finding="calcified_granuloma", certainty="present", laterality="right",
                       regions=["right_mid_lung_zone"], size_mm=5.0, evidence=_ev("S01", S1), source="report"),
           Observation(id="O02", finding="calcified_granuloma", certainty="present", laterality="right",
                       regions=second_regions, evidence=_ev("S02", S2), source="report")]
    rows = [r for r in gen.generate(scene_graph(obs, [S1, S2])) if r.polarity == "positive"]
    assert rows
    return rows


def test_a_size_is_not_spread_over_lesions_in_other_places(gen):
    rows = _rows(gen, ["right_hilum"])
    merged = [r for r in rows if "hil" in r.answer and "mid lung" in r.answer]
    assert merged, [r.answer for r in rows]  # the two copies are stated together ...
    for r in merged:  # ... and no size is given to both places
        assert "5 mm" not in r.answer, r.answer


def test_a_size_stays_when_the_other_copy_names_no_other_place(gen):
    rows = _rows(gen, ["lungs"])  # an ancestor of the measured place: one place named twice
    assert any("5 mm" in r.answer for r in rows), [r.answer for r in rows]


def test_a_place_and_its_ancestor_are_said_once(gen):
    # "poorly defined lung nodule in the right upper lobe" -> regions right upper lobe + lungs: the
    # answer says "in the right upper lobe", not "in the right upper lobe and the lungs"
    s = "There is a poorly defined lung nodule in the right upper lobe measuring approximately 7 mm."
    obs = [Observation(id="O01", finding="nodule", certainty="present", laterality="right",
                       regions=["right_upper_lobe", "lungs"], size_mm=7.0, evidence=_ev("S01", s), source="report")]
    rows = [r for r in gen.generate(scene_graph(obs, [s])) if r.polarity == "positive"]
    assert any("right upper lobe" in r.answer for r in rows), [r.answer for r in rows]
    assert not any("and the lungs" in r.answer for r in rows), [r.answer for r in rows]
