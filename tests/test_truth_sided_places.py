"""A sided finding placed only by an unsided word lies in that side's place.

"Right-sided small pleural effusion" was read as a right effusion in "the pleura" (no side), so the
right pleura's list ("What is seen in the right pleura?") left it out and, graded A++, said only the
blunted right costophrenic angle beside it; "Small right pleural effusion" was placed in the right
pleura. A test-pool reader of session 13 (seed 126) marked two such rows. Only the finding's own
default place takes the side ("pleura" -> "right_pleura", "lungs" -> "right_lung"); a place the
words named keeps its reading. Hand-written reports (no train + val report has the omission)."""

from __future__ import annotations

from pathlib import Path

import pytest

from openi_truth import build_rows, findings_in, rows_of, write_reports


@pytest.mark.parametrize(("text", "finding", "region"), [
    ("Right-sided small pleural effusion.", "pleural_effusion", "right_pleura"),
    ("Small pleural effusion on the left.", "pleural_effusion", "left_pleura"),
    ("Right-sided hilar enlargement.", "hilar_enlargement", "right_hilum"),
])
def test_the_default_place_takes_the_side(ex, text: str, finding: str, region: str) -> None:
    got = [o for o in findings_in(ex, text) if o.finding == finding]
    assert got and got[0].regions == [region], got


def test_two_sides_keep_the_whole_place(ex) -> None:
    got = [o for o in findings_in(ex, "Bilateral pleural effusions.") if o.finding == "pleural_effusion"]
    assert got and got[0].laterality == "bilateral" and got[0].regions == ["pleura"], got


def test_the_sides_list_names_the_effusion(tmp_path: Path) -> None:
    data = write_reports(tmp_path / "in", {
        1: ("The heart is normal. There is blunting of the right costophrenic angle. No pneumothorax.",
            "Right-sided small pleural effusion."),
    })
    rows = [r for r in rows_of(build_rows(data, tmp_path / "out"), 1)
            if r["question_type"] in ("C01_describe_region", "C02_describe_abnormal_region")
            and "right pleura" in r["question"]]
    assert rows
    for r in rows:
        assert "pleural effusion" in r["answer"], r["answer"]


@pytest.mark.parametrize("text", [
    "The left chest pacemaker is unchanged with both XXXX tips overlying the right ventricle.",
    "Left chest pacemaker with both lead tips in the right ventricle.",
])
def test_two_leads_are_no_two_sides(ex, text: str) -> None:
    # an outside-pool reader (session 13, seed 128) marked "There are bilateral pacemakers" for a
    # left pacemaker whose "both ... tips" lie in the right ventricle (hand-written sentences)
    got = [o for o in findings_in(ex, text) if o.finding == "pacemaker"]
    assert got and all(o.laterality == "left" for o in got), got



def test_the_hearts_chambers_are_no_side(tmp_path: Path) -> None:
    # a left chest pacemaker whose leads end in the right atrium and ventricle was left unsaid (its
    # sentence "named both sides"), so "What devices are seen?" said only the sternotomy
    # (outside-pool readers of seeds 108, 116, 141); CXR1232 (R2Gen train, round 26's folder) the same
    import shutil
    (tmp_path / "in").mkdir()
    shutil.copy(Path(__file__).parent / "data" / "openi_issue13r26" / "1232.xml", tmp_path / "in")
    rows = rows_of(build_rows(tmp_path / "in", tmp_path / "out", unvouched="omit"), 1232)
    dev = [r for r in rows if r["question_type"] == "B12_describe_device"]
    assert dev, "the device list is said (it was withheld beside the unsaid pacemaker)"
    for r in dev + [r for r in rows if r["question_type"] == "B13_has_devices"]:
        assert "left pacemaker" in r["answer"].lower(), r["answer"]
