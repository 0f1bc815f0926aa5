"""rin strategy (RadImageNet-style CT / MR tasks): MC options, letters, distractors, closed +/-."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "data" / "generate"))
from helpers import mini_ontology, rin_sg  # noqa: E402

from radvqa.generate import GenerateOptions, Generator  # noqa: E402
from radvqa.generate.vocab import Vocab  # noqa: E402

KNEE = {"anterior cruciate ligament tear", "meniscal tear", "bone contusion", "joint effusion",
        "cartilage lesion", "no pathology seen"}


def _rows(n=800):
    g = Generator(mini_ontology(), GenerateOptions(strategies=("rin",)))
    rows = []
    paths = ["acl_tear", "meniscal_tear", None, "bone_contusion"]
    for i in range(n):
        rows += g.generate(rin_sg(study_id=f"radimagenet:MR/knee/{i}.png", pathology=paths[i % 4]))
    return rows


def test_all_tasks_present_and_answers_right():
    rows = _rows(8)
    types = {r.question_type for r in rows}
    assert types == {"abnormality", "anatomy_open", "anatomy_closed_pos", "anatomy_closed_neg", "anatomy_mc",
                     "pathology_open", "pathology_closed_pos", "pathology_closed_neg", "pathology_mc"}
    for r in rows:
        if r.question_type == "anatomy_open":
            assert r.answer_short == "knee" and "knee" not in r.question
        if r.question_type == "anatomy_closed_pos":
            assert r.answer_short == "yes" and "knee" in r.question
        if r.question_type == "anatomy_closed_neg":
            assert r.answer_short == "no" and "knee" not in r.question
        if r.question_type == "pathology_closed_neg":
            assert r.answer_short == "no"
    normal = [r for r in rows if r.question_type == "abnormality" and r.answer_short == "no"]
    assert normal and all(r.polarity == "negative" for r in normal)


def test_mc_letters_uniform_options_distinct_same_anatomy():
    rows = _rows()
    mc = [r for r in rows if r.question_type in ("anatomy_mc", "pathology_mc")]
    assert len(mc) > 1000
    for kind in ("anatomy_mc", "pathology_mc"):
        sub = [r for r in mc if r.question_type == kind]
        c = Counter(r.answer_short for r in sub)
        assert set(c) == {"A", "B", "C", "D"}
        for letter in "ABCD":
            assert abs(c[letter] / len(sub) - 0.25) <= 0.05, (kind, c)
    for r in mc:
        assert r.choices and len(r.choices) == 4 and len(set(r.choices)) == 4
        correct = r.choices["ABCD".index(r.answer_short)]
        assert correct.lower() in r.answer.lower()
        if r.question_type == "pathology_mc":
            assert set(r.choices) <= KNEE  # distractors from the same anatomy
            assert "no pathology seen" in r.choices
            if r.findings == ["acl_tear"]:
                assert correct == "anterior cruciate ligament tear"
            if not r.findings:
                assert correct == "no pathology seen"
        for letter, opt in zip("ABCD", r.choices):
            assert f"{letter}) {opt[:1].upper()}{opt[1:]}" in r.question


def test_vocab_reads_anatomy_pathologies():
    v = Vocab(mini_ontology())
    assert v.anatomy_pathologies["knee"] == ("acl_tear", "bone_contusion", "cartilage_lesion", "joint_effusion",
                                             "meniscal_tear")
    assert "MR" in v.amodalities["knee"]


def test_rin_does_not_apply_to_chest_reports():
    from helpers import cxr_report_sg
    g = Generator(mini_ontology(), GenerateOptions(strategies=("rin",)))
    assert g.generate(cxr_report_sg()) == []
