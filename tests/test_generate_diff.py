"""diff strategy: a patient's consecutive studies; the reference must be strictly earlier."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).parent / "data" / "generate"))
from helpers import box_sg, cxr_report_sg, mini_ontology, normal_report_sg  # noqa: E402

from radvqa.generate import GenerateOptions, Generator  # noqa: E402
from radvqa.model import Observation  # noqa: E402


@pytest.fixture()
def gen() -> Generator:
    return Generator(mini_ontology(), GenerateOptions(strategies=("diff",)))


def one(rows, qtype, finding=None):
    out = [r for r in rows if r.question_type == qtype and (finding is None or finding in r.findings)]
    assert len(out) == 1, (qtype, finding, [r.question for r in rows])
    return out[0]


def nih(study, time, findings):
    return box_sg(study_id=f"nih-cxr14:{study}", patient="nih-cxr14:7", time=time, findings=findings)


def test_new_and_resolved_from_label_studies(gen):
    before = nih("a", "1", [("pleural_effusion", [300, 300, 420, 420]), ("nodule", [60, 80, 110, 130])])
    after = nih("b", "2", [("nodule", [60, 80, 110, 130]), ("atelectasis", [250, 250, 300, 300])])
    rows = gen.generate(after, before)
    assert all(r.reference_study_id == "nih-cxr14:a" and r.study_id == "nih-cxr14:b" for r in rows)
    assert all("reference:nih-cxr14:a" in r.provenance for r in rows)
    w = one(rows, "what_changed")
    assert set(w.findings) == {"pleural_effusion", "atelectasis"} and w.polarity == "positive"
    assert sorted(p.tag for p in w.answer_parts) == ["atelectasis, new", "pleural effusion, resolved"]
    assert one(rows, "new_findings").answer_short == "yes"
    assert one(rows, "resolved_findings").answer_short == "yes"
    assert one(rows, "finding_change", "pleural_effusion").answer_short == "resolved"
    assert one(rows, "finding_change", "atelectasis").answer_short == "new"
    assert one(rows, "finding_change", "nodule").answer_short == "persistent"
    # the resolved finding's part points at the earlier image's box, and both images are listed
    res = one(rows, "resolved_findings")
    assert res.boxes and res.image_ids == ["nih-cxr14:b/x1", "nih-cxr14:a/x1"]
    assert res.boxes[0].image_id == "nih-cxr14:a/x1"
    # complete label sets: absence is stated, not implied (no B); NIH's mined labels with an expert
    # box are A, not A++ (a label, not the radiologist's words: issue 13)
    assert w.grade == "A" and "label:with_expert_box->A" in w.grade_reasons
    assert not any(r.startswith("negative:implied") for r in w.grade_reasons)


def test_nothing_changed(gen):
    before = nih("a", "1", [("nodule", [60, 80, 110, 130])])
    after = nih("b", "2", [("nodule", [60, 80, 110, 130])])
    rows = gen.generate(after, before)
    w = one(rows, "what_changed")
    assert w.answer.startswith("Nothing has changed") and w.polarity == "negative"
    assert one(rows, "new_findings").answer_short == "no"


def _report_pair(prior_sev, now_sev, change):
    later = cxr_report_sg(study_id="openi:later", patient="openi:p9", time="2024-02-01")
    obs = []
    for o in later.observations:
        if o.finding == "pleural_effusion":
            o = msgspec.structs.replace(o, severity=now_sev, change=change)
        obs.append(o)
    later = msgspec.structs.replace(later, observations=obs)
    prior = cxr_report_sg(study_id="openi:earlier", patient="openi:p9", time="2024-01-01")
    pobs = [msgspec.structs.replace(o, severity=prior_sev) if o.finding == "pleural_effusion" else o
            for o in prior.observations]
    return later, msgspec.structs.replace(prior, observations=pobs)


def test_level_change_and_change_words_agree(gen):
    later, prior = _report_pair("small", "large", "increased")
    rows = gen.generate(later, prior)
    fc = one(rows, "finding_change", "pleural_effusion")
    assert fc.answer_short == "increased" and "from small to large" in fc.answer
    assert one(rows, "increased_findings").answer_short == "yes"
    assert one(rows, "decreased_findings").answer_short == "no"
    lc = one(rows, "level_change", "pleural_effusion")
    assert lc.answer_short == "yes" and "increased from small to large" in lc.answer
    w = one(rows, "what_changed")
    assert w.findings == ["pleural_effusion"]


def test_decreased_by_change_word_without_levels(gen):
    later, prior = _report_pair(None, None, "decreased")
    rows = gen.generate(later, prior)
    fc = one(rows, "finding_change", "pleural_effusion")
    assert fc.answer_short == "decreased" and "{" not in fc.answer and "from" not in fc.answer


def test_conflicting_change_word_is_left_out(gen):
    # severities say it grew, the report says it decreased: contradictory -> no question about it
    later, prior = _report_pair("small", "large", "decreased")
    rows = gen.generate(later, prior)
    assert not [r for r in rows if r.question_type == "finding_change" and "pleural_effusion" in r.findings]
    w = one(rows, "what_changed")
    assert "pleural_effusion" not in w.findings
    assert w.grade == "C" and any(r.startswith("change:conflict:pleural_effusion") for r in w.grade_reasons)


def test_new_finding_against_prior_report(gen):
    later = cxr_report_sg(study_id="openi:l", patient="openi:p3", time="2")
    prior = msgspec.structs.replace(normal_report_sg(study_id="openi:e", patient="openi:p3"), study_time="1")
    rows = gen.generate(later, prior)
    fc = one(rows, "finding_change", "pleural_effusion")
    assert fc.answer_short == "new" and fc.grade == "A++"  # the prior report negated it explicitly
    at = one(rows, "finding_change", "atelectasis")
    assert at.answer_short == "new" and "negative:implied->B" in at.grade_reasons  # prior was silent


@pytest.mark.parametrize("t_prior, t_main", [("2", "2"), ("3", "2"), (None, "2")])
def test_reference_not_earlier_is_rejected(gen, t_prior, t_main):
    before = nih("a", t_prior, [("nodule", [60, 80, 110, 130])]) if t_prior else \
        msgspec.structs.replace(nih("a", "1", []), study_time=None)
    after = nih("b", t_main, [])
    assert gen.generate(after, before) == []
    [rej] = gen.take_rejects()
    assert rej.stage == "generate" and rej.reason.startswith("diff:") and "nih-cxr14:a" in rej.ref


def test_other_patient_is_rejected(gen):
    before = box_sg(study_id="nih-cxr14:z", patient="nih-cxr14:other", time="1")
    assert gen.generate(nih("b", "2", []), before) == []
    assert "belongs to patient" in gen.take_rejects()[0].reason


def test_no_prior_no_diff_rows(gen):
    assert gen.generate(nih("b", "2", [])) == []
    assert Observation  # noqa: B018


def test_silent_later_report_resolution_is_graded_implied_with_all_strategies():
    """Resolved because the later report no longer mentions it: graded B even when qba ran first
    on the same study (its implied negatives must not count as stated ones)."""
    g = Generator(mini_ontology(), GenerateOptions())
    prior = cxr_report_sg(study_id="openi:e2", patient="openi:p4", time="1")
    later = msgspec.structs.replace(normal_report_sg(study_id="openi:l2", patient="openi:p4"), study_time="2")
    rows = [r for r in g.generate(later, prior) if r.strategy == "diff"]
    at = one(rows, "finding_change", "atelectasis")
    assert at.answer_short == "resolved" and "negative:implied->B" in at.grade_reasons
    eff = one(rows, "finding_change", "pleural_effusion")  # the later report negates it explicitly
    assert eff.answer_short == "resolved" and "negative:implied->B" not in eff.grade_reasons


def test_no_new_findings_beside_a_hedged_new_finding_is_graded_c(gen):
    # h16a's read of Lunguage rows: the later report hedges a finding the prior did not have, and
    # "Are there any new findings? No" came out A++ (diff counted only present findings)
    prior = msgspec.structs.replace(normal_report_sg(study_id="openi:e2", patient="openi:p4"), study_time="1")
    later = msgspec.structs.replace(normal_report_sg(study_id="openi:l2", patient="openi:p4"), study_time="2")
    hedged = Observation(id="O99", finding="pleural_effusion", certainty="uncertain")
    later = msgspec.structs.replace(later, observations=[*later.observations, hedged])
    nf = one(gen.generate(later, prior), "new_findings")
    assert nf.answer_short == "no"
    assert nf.grade == "C" and "change:uncertain_new:pleural_effusion->C" in nf.grade_reasons
    # without the hedged finding the same "no" keeps its grade
    prior2 = msgspec.structs.replace(normal_report_sg(study_id="openi:e3", patient="openi:p5"), study_time="1")
    later2 = msgspec.structs.replace(normal_report_sg(study_id="openi:l3", patient="openi:p5"), study_time="2")
    assert one(gen.generate(later2, prior2), "new_findings").grade != "C"
