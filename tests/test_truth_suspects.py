"""No implied "no X" beside a stated finding that may be X (qba.yaml ``indication_suspects``, round
12's rule for the indication, applied to the finding questions in session 12).

An outside-pool reader (session 12, seed 108) marked "Does this image show any interstitial lung
disease? No." for a report of chronic scarring and inflammatory opacities in a patient with known
fibrotic lung disease; R2Gen train + val held the same class: "No pneumonia is seen. There is
bilateral infiltration." (CXR1100), "There is no interstitial lung disease. An interstitial opacity
is seen." (CXR2183), "No pulmonary fibrosis is seen. ... Right scarring is seen." (CXR1595); 8 studies
of the train + val build change. Tested on those three train reports and on hand-written ones
(whose implied negatives the sampler may not draw: they guard the fix, the train reports test it)."""

from __future__ import annotations

import re

import pytest

from openi_truth import build_rows, write_reports

REPORTS = {
    1: ("Heart size is normal. Bilateral interstitial opacities. No pleural effusion.", "Interstitial opacities."),
    2: ("Heart size is normal. Patchy bilateral infiltrates. No pleural effusion.", "Bilateral infiltrates."),
    3: ("Heart size is normal. Right apical scarring. No pleural effusion.", "No acute disease."),
    # a control: nothing that may be one of them, so their implied "no" may still be drawn
    4: ("Heart size is normal. The lungs are clear. No pleural effusion.", "No acute disease."),
}

DENIED = {
    1: r"no (interstitial lung disease|pulmonary fibrosis)",
    2: r"no pneumonia|no infection",
    3: r"no (interstitial lung disease|pulmonary fibrosis)",
}


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    d = write_reports(tmp_path_factory.mktemp("sus") / "xml", REPORTS)
    return build_rows(d, d.parent / "out", unvouched="keep")


@pytest.mark.parametrize("n", sorted(DENIED))
def test_no_implied_no_beside_a_finding_that_may_be_it(rows: list[dict], n: int) -> None:
    bad = [r["answer"] for r in rows if r["study_id"] == f"openi:CXR{n}" and r["polarity"] == "negative"
           and re.search(DENIED[n], r["answer"], re.I)]
    assert not bad, bad


def test_the_studies_still_get_rows(rows: list[dict]) -> None:
    assert {r["study_id"] for r in rows} >= {f"openi:CXR{n}" for n in REPORTS}


TRAIN = {1100: r"no (pneumonia|infection)", 1595: r"no (pulmonary fibrosis|interstitial lung disease)",
         2183: r"no (interstitial lung disease|pulmonary fibrosis)"}


@pytest.fixture(scope="module")
def train_rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    from pathlib import Path

    return build_rows(Path(__file__).parent / "data" / "openi_suspects", tmp_path_factory.mktemp("sus_t") / "out",
                      unvouched="omit")  # the default build, where these rows were drawn


@pytest.mark.parametrize("n", sorted(TRAIN))
def test_train_reports(train_rows: list[dict], n: int) -> None:
    got = [r for r in train_rows if r["study_id"] == f"openi:CXR{n}"]
    assert got
    bad = [r["answer"] for r in got if r["polarity"] == "negative" and re.search(TRAIN[n], r["answer"], re.I)]
    assert not bad, bad


# ---- a stated "no X" beside a stated film form of X ---------------------------------------------

def test_no_infiltrate_denied_beside_a_stated_consolidation(tmp_path) -> None:
    """"Consolidation ... persists in both lower lobes. ... No XXXX infiltrates." (a test-pool reader,
    session 12, seed 114: "There is bilateral consolidation ... There is no infiltration"): an
    infiltrate may be a consolidation (common.yaml ``open_finding_forms``), so the negative, whose
    masked word was probably "new", is not said (facts.resolve_conflicts). No train + val report
    holds the construction (the train + val build does not change); hand-written."""
    d = write_reports(tmp_path / "xml", {
        5: ("Consolidation persists in both lower lobes. Heart size is normal. No XXXX infiltrates.",
            "Persistent bibasilar airspace disease."),
        6: ("Heart size is normal. No infiltrates. No pleural effusion.", "No acute disease."),  # control
    })
    rows = build_rows(d, tmp_path / "out", unvouched="keep")
    said = [r["answer"] for r in rows if r["study_id"] == "openi:CXR5" and "infiltrat" in r["answer"].lower()]
    assert not said, said
    assert any(r["study_id"] == "openi:CXR6" and "no infiltrat" in r["answer"].lower() for r in rows)
