"""Alternatives whose every side is the asked finding do not leave it in doubt.

A reader of the R2Gen test reports (session 12, seed 107) marked "Left basilar subsegmental
atelectasis versus scar noted" asked "Does this chest X-ray show any lung opacity?" and answered
"This cannot be excluded. ..." as a certainty error: atelectasis and scarring are both opacities on
the film, so the opacity is stated; only its kind is open. The same construction is in six R2Gen
train + val reports (CXR813, CXR1214, CXR2403, CXR2777, CXR3748, CXR3995); their 12 lung-opacity rows
are no longer written (qba ``_sides_all_under``; scarring counts as an opacity through
templates/common.yaml ``film_forms``). Rows asking about each side ("any atelectasis?") stay hedged."""

from __future__ import annotations

from pathlib import Path

import pytest

from openi_truth import build_rows, write_reports

DATA = Path(__file__).parent / "data" / "openi_alternatives_opacity"

REPORTS = {
    # both sides are opacities: no "possibly" about the opacity
    1: ("Heart size is normal. Right basilar scarring or atelectasis. No pleural effusion.", "No acute disease."),
    # one side is no opacity (an effusion): the opacity stays open
    2: ("Heart size is normal. Left basilar atelectasis versus small pleural effusion.", "No acute disease."),
}


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    d = write_reports(tmp_path_factory.mktemp("alt") / "xml", REPORTS)
    (d / "813.xml").write_bytes((DATA / "813.xml").read_bytes())
    return build_rows(d, d.parent / "out", unvouched="omit")  # the default build


def _opacity_rows(rows: list[dict], sid: str) -> list[dict]:
    return [r for r in rows if r["study_id"] == sid and "lung opacity" in r["question"].lower()
            and r["question_type"].startswith("D0")]


@pytest.mark.parametrize("sid", ["openi:CXR1", "openi:CXR813"])
def test_no_possibly_for_an_opacity_either_side_is(rows: list[dict], sid: str) -> None:
    got = _opacity_rows(rows, sid)
    assert not [r for r in got if r["answer"].startswith(("Possibly", "This cannot be excluded", "The finding is uncertain"))], \
        [(r["question"], r["answer"]) for r in got]


def test_the_sides_stay_hedged(rows: list[dict]) -> None:
    got = [r for r in rows if r["study_id"] == "openi:CXR813" and r["question_type"] == "D02_has_finding"
           and "atelectasis" in r["question"]]
    assert got and all(r["answer"].startswith(("Possibly", "This cannot be excluded")) for r in got), \
        [r["answer"] for r in got]


def test_an_alternative_that_is_no_opacity_keeps_the_opacity_open(rows: list[dict]) -> None:
    got = _opacity_rows(rows, "openi:CXR2")
    assert got and all("cannot be excluded" in r["answer"] or "may be present" in r["answer"] for r in got), \
        [(r["question"], r["answer"]) for r in got]
