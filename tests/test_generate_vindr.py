"""vindr strategy on box-labelled images (NIH / VinDr style)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "data" / "generate"))
from helpers import box_sg, mini_ontology  # noqa: E402

from radvqa.generate import GenerateOptions, Generator  # noqa: E402

TYPES = {"where", "what", "is_there", "how_many", "which", "yes_no"}


def _gen(**kw) -> Generator:
    return Generator(mini_ontology(), GenerateOptions(strategies=("vindr",), **kw))


def _many(n=300, **kw):
    g = _gen(**kw)
    rows = []
    for i in range(n):
        rows += g.generate(box_sg(study_id=f"vindr-cxr:img{i}", patient=f"vindr-cxr:img{i}", readers=3,
                                  source="vindr-cxr"))
    return rows


def test_six_types_and_positive_share_near_target():
    rows = _many()
    assert {r.question_type for r in rows} == TYPES
    pos = sum(r.polarity == "positive" for r in rows) / len(rows)
    assert abs(pos - 0.417) <= 0.05, pos
    c = Counter(r.question_type for r in rows)
    # "what" has no negative item on an image with findings on both sides, so it is rarer here
    assert min(c.values()) / len(rows) > 0.05, c


def test_positive_share_is_configurable():
    rows = _many(200, vindr_positive_share=0.7)
    pos = sum(r.polarity == "positive" for r in rows) / len(rows)
    assert abs(pos - 0.7) <= 0.05, pos
    with pytest.raises(ValueError):
        _gen(vindr_positive_share=1.5)


def test_answers_boxes_and_reasoning_from_facts():
    rows = _many(60)
    for r in rows:
        assert r.reasoning and r.answer.endswith(".")
        if r.polarity == "positive":
            assert r.boxes and all(b.source == "expert_fused" for b in r.boxes)  # fused preferred
            assert "3 of 3 readers" in r.reasoning
        assert len({r.qa_id for r in rows}) == len(rows)
    where = [r for r in rows if r.question_type == "where" and r.polarity == "positive"]
    # nodule box (60..110, 80..130 of 448) lies left of the image mid-line: the patient's right, upper
    nod = [r for r in where if r.findings == ["nodule"]]
    assert nod and nod[0].answer_short == "the right upper zone"
    eff = [r for r in where if r.findings == ["pleural_effusion"]]
    assert eff and eff[0].answer_short == "the left lower zone"
    hm = [r for r in rows if r.question_type == "how_many" and r.polarity == "positive"]
    assert hm and all(r.answer_short == "1" for r in hm)
    which = [r for r in rows if r.question_type == "which" and r.polarity == "positive" and r.findings == ["nodule"]]
    assert which and which[0].answer_short == "right"
    yn = [r for r in rows if r.question_type == "yes_no"]
    for r in yn:  # side questions: yes only for the side the box is on
        side = "right" if "right" in r.question else "left"
        expected = (r.findings == ["nodule"] and side == "right") or (r.findings == ["pleural_effusion"] and side == "left")
        assert (r.answer_short == "yes") == expected, (r.question, r.answer)


def test_negatives_come_from_absent_classes():
    rows = _many(60)
    for r in rows:
        if r.polarity == "negative" and r.question_type != "what":
            assert r.findings
            if r.question_type != "yes_no":  # yes/no may ask a present finding on the wrong side
                assert r.findings[0] not in ("nodule", "pleural_effusion")
            assert r.findings[0] in {"aortic_enlargement", "atelectasis", "cardiomegaly", "consolidation",
                                     "nodule", "pleural_effusion", "pneumothorax", "lung_opacity",
                                     "fracture", "pneumonia"}


def test_no_finding_images_keep_the_share():
    """A "No finding" image: its whole-image question is positive (the answer is the dataset's "No
    finding" label), every other question negative; mixed with abnormal images the share holds."""
    g = _gen()
    normal = []
    for i in range(150):
        normal += g.generate(box_sg(study_id=f"vindr-cxr:n{i}", patient=f"vindr-cxr:n{i}", findings=[],
                                    source="vindr-cxr"))
    pos = [r for r in normal if r.polarity == "positive"]
    assert pos and all(r.question_type == "what" and r.answer_short == "no finding" and "this image" in r.question
                       for r in pos)
    assert all(r.question_type != "what" or r.answer_short == "no finding" for r in normal)
    mixed = normal + _many(100)
    share = sum(r.polarity == "positive" for r in mixed) / len(mixed)
    assert abs(share - 0.417) <= 0.05, share


def test_report_only_study_is_not_vindr():
    from helpers import cxr_report_sg
    assert _gen().generate(cxr_report_sg()) == []


def test_blank_labels_are_not_negatives():
    """CheXpert-style sources leave classes blank (not mentioned): only a stated 0 is a negative."""
    import msgspec

    from radvqa.model import Observation

    sg = box_sg(study_id="chexpert:p1/s1", patient="chexpert:p1", source="chexpert", findings=[("nodule", None)])
    sg = msgspec.structs.replace(sg, observations=[*sg.observations, Observation(
        id="O9", finding="pneumothorax", certainty="absent", source="label", from_report=False)])
    rows = []
    for seed in range(30):
        rows += Generator(mini_ontology(), GenerateOptions(strategies=("vindr",), seed=seed)).generate(sg)
    negs = {r.findings[0] for r in rows if r.polarity == "negative" and r.findings}
    assert negs == {"pneumothorax"}
