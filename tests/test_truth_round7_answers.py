"""Issue 13, round 7 (seeds 63-66 audits): what answers state. The catch-all "other lesion" is never
stated by its id; one lesion or effusion is stated once; places the report does not give are not
made up (alveolar opacity in the interstitium, a right apical lesion in both apices, an aortic
calcification in the heart); no region is called normal, nor a finding absent, while an unsided
finding may lie there; labels no more specific than the report. Each regression uses the real
OpenI report the audit marked (tests/data/openi_issue13r7b, unmodified XMLs, R2Gen train/val)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from openi_truth import build_rows, rows_of

DATA = Path(__file__).parent / "data" / "openi_issue13r7b"


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    return build_rows(DATA, tmp_path_factory.mktemp("r7") / "out")


def _answers(rows, n: int) -> list[str]:
    return [r["answer"] for r in rows_of(rows, n)]


@pytest.mark.parametrize("n", [2034, 2002, 3658, 2715])
def test_other_lesion_is_never_stated(rows, n):
    assert not any("other lesion" in a.lower() for a in _answers(rows, n))


def test_2715_rib_deformities_keep_the_ribs_abnormal(rows):
    # the deformity is left unsaid, but no answer calls the right ribs (or the bones) normal
    for r in rows_of(rows, 2715):
        q, a = r["question"].lower(), r["answer"].lower()
        if re.search(r"\bribs?\b|bony thorax|\bbones\b", q):
            assert not re.search(r"\bnormal\b|nothing abnormal|no abnormal", a), (q, a)


def test_2002_rib_deformity_beside_the_possible_fracture_is_said_once(rows):
    bony = [r["answer"] for r in rows_of(rows, 2002)
            if "device" not in r["question"] and "bony thorax" in r["question"]]
    assert bony and all("rib fracture" in a and "lesion" not in a for a in bony)


def test_1868_three_effusion_mentions_are_stated_once(rows):
    # both sides stated: the bilateral copy adds nothing and is not said again
    for a in _answers(rows, 1868):
        a = a.lower()
        assert not ("bilateral pleural effusion" in a and ("left pleural effusion" in a or "right pleural effusion" in a)), a
    assert any("small left pleural effusion" in a.lower() and "small right pleural effusion" in a.lower()
               for a in _answers(rows, 1868))


def test_3182_one_hilar_lesion_is_stated_once(rows):
    for a in _answers(rows, 3182):
        assert not ("nodule" in a and "mass" in a), a


def test_3455_alveolar_opacity_is_not_in_the_interstitium(rows):
    for a in _answers(rows, 3455):
        assert not re.search(r"alveolar opacity[^.]*\.[^.]*interstitium", a.lower()), a


def test_189_apical_scarring_versus_nodule_is_not_in_both_apices(rows):
    for a in _answers(rows, 189):
        assert not re.search(r"(scarring|nodule)[^.]*\.[^.]*in the lung apices", a.lower()), a


def test_1924_calcified_aorta_is_not_in_the_heart(rows):
    answers = _answers(rows, 1924)
    assert not any("cardiac silhouette" in a and "alcification" in a for a in answers)
    assert any("aortic atherosclerosis" in a.lower() for a in answers)


def test_3829_unsided_interstitial_markings_keep_either_lung_from_normal(rows):
    for r in rows_of(rows, 3829):
        q = r["question"].lower()
        if "right lung" in q or "left lung" in q:
            assert not re.search(r"\bnormal\b|nothing abnormal|no abnormal|^no\b", r["answer"].lower()), r


def test_701_a_right_negative_does_not_answer_any_lung_opacity(rows):
    for r in rows_of(rows, 701):
        if "lung opacity" in r["question"].lower():
            assert not r["answer"].startswith("No"), r


def test_2192_unspecified_shunt_is_no_ventriculoperitoneal_shunt(rows):
    answers = _answers(rows, 2192)
    assert not any("ventriculoperitoneal" in a for a in answers)
    assert any("shunt catheter" in a for a in answers)


def test_159_shoulder_osteophytes_are_not_the_spine(rows):
    answers = _answers(rows, 159)
    assert not any("of the spine" in a for a in answers)
    assert any("degenerative joint disease" in a for a in answers)


def test_2627_postsurgical_changes_are_no_surgical_material(rows):
    # left unsaid (they need not be hardware), and no answer says the chest holds no device
    for r in rows_of(rows, 2627):
        a = r["answer"].lower()
        assert "surgical material" not in a, r
        if "chest" in r["question"].lower() and "device" in r["question"].lower():
            assert not a.startswith("no"), r


def test_no_question_asks_about_the_catch_all(rows):
    assert not any("other lesion" in r["question"].lower() for r in rows)
