"""Issue 13 round 5, seed-61/62 hand audits: an answer names a place or a side only where the report
states it for that finding. Default regions never read as a stated place (a region question they
answer is graded down), a group's side or a neighbour's place is not shared across a conflict,
"slightly improved" grades the change not the finding, a projection (nipple shadow) lies in no
lobe, and no answer repeats a place (its ancestor, or the side's own words). Each regression uses
the real OpenI report the audit marked (tests/data/openi_issue13l2, unmodified XMLs, R2Gen
train/val)."""

from __future__ import annotations

from pathlib import Path

import pytest

from openi_truth import build_rows, rows_of

DATA = Path(__file__).parent / "data" / "openi_issue13l2"


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    return build_rows(DATA, tmp_path_factory.mktemp("issue13l2") / "out")


_of = rows_of


def _never(rows, n: int, *words: str) -> None:
    for r in _of(rows, n):
        a = r["answer"].lower()
        for w in words:
            assert w not in a, (n, r["question"], r["answer"])


def test_default_region_is_no_stated_place(rows):
    # granulomatous disease has default regions [lungs, hila]; the report names neither: no
    # region question says it is in the hila (nor in the lungs), and none calls them normal
    for n in (2808, 2484):
        mine = _of(rows, n)
        assert any("granulomatous" in r["answer"].lower() for r in mine)
        for r in mine:
            q = r["question"].lower()
            if r["question_type"].startswith("C") and ("hila" in q or "lungs" in q):
                assert "granulomatous" not in r["answer"].lower(), (n, r["question"], r["answer"])
                assert r["polarity"] != "negative" or "hila" not in q, (n, r["question"], r["answer"])
            if "hila" not in q:  # never rendered as a place (a region question's lead echoes its question)
                assert "hila" not in r["answer"].lower(), (n, r["question"], r["answer"])
    # a region holding every default region holds the finding by its name
    assert any("granulomatous" in r["answer"].lower() and "chest" in r["question"].lower()
               and r["question_type"].startswith("C") for r in _of(rows, 2808) + _of(rows, 2484))


def test_a_side_is_said_only_where_stated(rows):
    _never(rows, 1868, "bilateral infiltration")
    assert any("right infiltration" in r["answer"].lower() for r in _of(rows, 1868))
    _never(rows, 808, "bilateral scarring")
    _never(rows, 1525, "bilateral lung cavit")


def test_a_change_word_is_no_severity(rows):
    _never(rows, 3165, "minimal bilateral lung opacity", "mild lung opacity", "minimal lung opacity")


def test_a_projection_lies_in_no_lobe(rows):
    nipple = [r for r in _of(rows, 412) if "nipple" in r["answer"].lower()]
    assert nipple
    for r in nipple:
        # the sentence after the nipple shadow's, where its place would be said
        nxt = (r["answer"].lower().split("nipple shadow", 1)[1].split(".") + ["", ""])[1]
        assert not (nxt.startswith((" it is located", " the nipple shadow")) and "lobe" in nxt), r["answer"]


def test_no_place_repeated_or_misplaced(rows):
    _never(rows, 3168, "and the ribs")
    _never(rows, 701, "right lung opacity in the right lung", "right lung opacity is seen in the right lung")
    for n in (1051, 3223):
        for r in _of(rows, n):
            a = r["answer"].lower()
            for sent in a.split("."):
                assert not ("mediastinal widening" in sent and "cardiac silhouette" in sent), (n, r["answer"])
