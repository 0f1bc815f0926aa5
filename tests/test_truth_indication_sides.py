"""The indication's answer reads every statement of the finding it names, not the first one.

A reader of the R2Gen test reports (session 12, seed 103) found "The right lung is clear. There is a
recurrence moderate-sized left pleural effusion." with the indication "Pleural effusion" answered,
at grade A++: "The study does not show what the indication asks about. There is no right pleural
effusion in the right lung." The answer took the finding's first fact (the right side's "no"). The
fix is a rule of the generator (a sided "no" leaves the other side unsaid), tested here on
hand-written reports and on the R2Gen train report with the same construction (CXR2454; in the
train + val build 7 indication rows change: that one now right, 6 one-sided "no" answers dropped)."""

from __future__ import annotations

from pathlib import Path

import pytest

from openi_truth import WITH_INDICATION, build_rows, write_reports

REPORTS = {
    # a sided "no" first, the other side's effusion after it
    1: ("Effusion", "The heart is normal. The right lung is clear. There is a small left pleural effusion. "
        "No pneumothorax.", "Small left pleural effusion."),
    # only one side said "no": the other side is unsaid, so no answer either way
    2: ("Effusion", "The heart is normal. No right pleural effusion. No pneumothorax.", "No acute disease."),
    # both said "no" (an unsided negative): "does not show" holds
    3: ("Effusion", "The heart is normal. No pleural effusion. No pneumothorax.", "No acute disease."),
    # a known disease or a procedure the indication names, a report silent about it
    11: ("COPD", "The heart is normal. The lungs are clear. No pleural effusion or pneumothorax.", "No acute disease."),
    12: ("Status post valve replacement, dyspnea", "The heart is normal. The lungs are clear.", "No acute disease."),
}


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> dict[int, list[dict]]:
    d = write_reports(tmp_path_factory.mktemp("ind") / "xml", REPORTS, WITH_INDICATION)
    got = build_rows(d, d.parent / "out")
    return {n: [r for r in got if r["study_id"] == f"openi:CXR{n}" and r["question_type"] == "A_indication"]
            for n in REPORTS}


def test_the_other_sides_effusion_answers_the_indication(rows: dict[int, list[dict]]) -> None:
    ans = [r["answer"] for r in rows[1]]
    assert ans, "the indication names a finding the report states: it gets a row"
    assert all("left pleural effusion" in a and "does not show" not in a for a in ans), ans


def test_a_one_sided_no_does_not_answer_the_indication(rows: dict[int, list[dict]]) -> None:
    assert rows[2] == [], [r["answer"] for r in rows[2]]


def test_an_unsided_no_still_answers_it(rows: dict[int, list[dict]]) -> None:
    ans = [r["answer"] for r in rows[3]]
    assert ans and all("no pleural effusion" in a.lower() for a in ans), ans


def test_cxr2454_train_report(tmp_path: Path) -> None:
    """The same construction in an R2Gen train report (tests/data/openi_indication_sides)."""
    got = [r for r in build_rows(Path(__file__).parent / "data" / "openi_indication_sides", tmp_path / "out")
           if r["question_type"] == "A_indication"]
    assert got and all("does not show" not in r["answer"] and "left pleural effusion" in r["answer"] for r in got), \
        [r["answer"] for r in got]


# ---- a known disease or a procedure the indication names: silence is no "no" --------------------

@pytest.mark.parametrize("n", [11, 12])
def test_a_report_silent_about_a_named_condition_does_not_deny_it(rows: dict[int, list[dict]], n: int) -> None:
    bad = [r["answer"] for r in rows[n]
           if "chronic obstructive" in r["answer"].lower() or "valve" in r["answer"].lower()]
    assert not bad, bad
