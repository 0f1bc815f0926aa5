"""The probe family (negation / side question pairs) on hand-made scene graphs, and the
pair-consistency metric of `radvqa eval` against hand-computed values."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "data" / "generate"))

from helpers import _sent, cxr_report_sg, mini_ontology  # noqa: E402

from radvqa.eval.evaluate import evaluate  # noqa: E402
from radvqa.eval.importers import write_dataset  # noqa: E402
from radvqa.eval.pairs import pair_consistency, wilson_interval  # noqa: E402
from radvqa.generate import STRATEGIES, GenerateOptions, Generator  # noqa: E402
from radvqa.model import QA, Image, Observation, Report, SceneGraph, Span  # noqa: E402


@pytest.fixture(scope="module")
def onto():
    return mini_ontology()


def _gen(onto, **kw) -> Generator:
    return Generator(onto, GenerateOptions(strategies=("probe",), seed=0, cap_scale=10, **kw))


def _pairs(rows: list[QA]) -> dict[str, list[QA]]:
    out: dict[str, list[QA]] = {}
    for r in rows:
        out.setdefault(r.provenance[0], []).append(r)
    return out


def test_not_in_the_default_set() -> None:
    assert "probe" not in STRATEGIES and "probe" not in GenerateOptions().strategies


def test_pairs_from_a_report(onto) -> None:
    rows = _gen(onto).generate(cxr_report_sg())
    # five negation pairs (two present findings, a device, two stated negatives), two side pairs
    # (effusion and atelectasis: "left" written in their sentences); wording index drawn per pair
    assert len(rows) == 14 and len(_pairs(rows)) == 7
    for r in rows:
        assert r.strategy == "probe" and r.grade == "A++" and r.answer_short in ("yes", "no")
        assert r.provenance[0].startswith("probe_pair:") and r.provenance[1].startswith("S0")
    by = _pairs(rows)
    for pid, (a, b) in by.items():
        assert a.answer_short != b.answer_short  # a pair always asks one "yes" and one "no"
        assert a.findings == b.findings and a.grade == b.grade and a.provenance == b.provenance
        assert a.answer.split(" ", 1)[1] == b.answer.split(" ", 1)[1]  # same evidence statement
        if pid.startswith("probe_pair:negation"):
            # same wording index: the two questions differ only in present/absent
            assert b.question in (a.question.replace("present", "absent"), a.question.replace("evidence of", "no evidence of"))
    texts = {r.question: r.answer for r in rows}
    eff = [t for t in texts if "pleural effusion" in t and "side" not in t and "sided" not in t]
    assert len(eff) == 2
    side = sorted(t for t in texts if "effusion" in t and ("side" in t))
    assert side in (["Is the pleural effusion on the left side?", "Is the pleural effusion on the right side?"],
                    ["Is the pleural effusion left-sided?", "Is the pleural effusion right-sided?"])
    left = next(t for t in side if "left" in t)
    assert texts[left] == "Yes. There is a small left pleural effusion."
    assert texts[next(t for t in side if "right" in t)] == "No. There is a small left pleural effusion."
    ptx = [r for r in rows if r.findings == ["pneumothorax"]]
    assert {(r.template_id, r.answer_short) for r in ptx} == {("probe.negation_present", "no"), ("probe.negation_absent", "yes")}


def _sg(sentences: list[str], obs: list[tuple[str, str, str | None, int]]) -> SceneGraph:
    """Scene graph from sentences and (finding, certainty, side, sentence index) observations."""
    text = "FINDINGS: " + " ".join(sentences)
    ss = [_sent(text, f"S{i + 1:02d}", s, "FINDINGS") for i, s in enumerate(sentences)]
    o = [Observation(id=f"O{k + 1:02d}", finding=f, certainty=c, laterality=side,
                     evidence=[Span(start=ss[i].start, end=ss[i].end, text=ss[i].text, sentence_id=ss[i].id)])
         for k, (f, c, side, i) in enumerate(obs)]
    return SceneGraph(study_id="openi:CXRp", patient_id="openi:pp", source="openi",
                      images=[Image(id="openi:CXRp/i1", path="i1.png", width=100, height=100, view="PA")],
                      report=Report(text=text, sentences=ss), observations=o)


def test_what_gives_no_pair(onto) -> None:
    sg = _sg(["Possible pneumonia.", "No lung opacity.", "Right lower lobe consolidation.",
              "Small pleural effusion.", "No left pneumothorax.", "Right pneumothorax.",
              "Nodules in the left lung.", "Nodules in the right lung."],
             [("pneumonia", "uncertain", None, 0),        # hedged: no pair
              ("lung_opacity", "absent", None, 1),        # a child (consolidation) is stated: no pair
              ("consolidation", "present", "right", 2),   # negation + side pair
              ("pleural_effusion", "present", "left", 3), # side not written: negation pair only
              ("pneumothorax", "absent", "left", 4),      # "no left pneumothorax": asked with its side
              ("pneumothorax", "present", "right", 5),    # negation + side (the left one is absent)
              ("nodule", "present", "left", 6),           # stated on both sides: one negation pair, no side pair
              ("nodule", "present", "right", 7)])
    rows = _gen(onto).generate(sg)
    by = _pairs(rows)
    kinds = sorted((k.split(":")[1], rs[0].findings[0]) for k, rs in by.items())
    assert kinds == [("negation", "consolidation"), ("negation", "nodule"), ("negation", "pleural_effusion"),
                     ("negation", "pneumothorax"), ("negation", "pneumothorax"),
                     ("side", "consolidation"), ("side", "pneumothorax")]
    qs = {r.question: r.answer_short for r in rows if r.template_id.startswith("probe.negation")}
    left_ptx = {q: a for q, a in qs.items() if "left pneumothorax" in q}
    assert sorted(left_ptx.values()) == ["no", "yes"] and len(left_ptx) == 2
    assert all(("present" in q) == (a == "no") for q, a in left_ptx.items() if "present" in q or "absent" in q)


def test_global_negatives_bilateral_and_plural(onto) -> None:
    sg = _sg(["No acute cardiopulmonary abnormality.", "No bilateral pleural effusion.", "Sternotomy wires.",
              "There are no acute bony findings."],
             [("pneumothorax", "absent", None, 0), ("consolidation", "absent", None, 0),  # expanded from a
              ("cardiomegaly", "absent", None, 0),                                       # global "normal": no pair
              ("pleural_effusion", "absent", "bilateral", 1),  # asked without "bilateral"
              ("sternotomy_wires", "present", None, 2),        # plural: "Are ..."
              ("fracture", "absent", None, 3)])                # unnamed, narrowed by "acute": no pair
    qs = sorted(r.question for r in _gen(onto).generate(sg))
    # (seed 0 draws the "present / absent" wording for the wires' pair, "evidence of" for the effusion's)
    assert qs == ["Are sternotomy wires absent?", "Are sternotomy wires present?",
                  "Is there evidence of pleural effusion?", "Is there no evidence of pleural effusion?"]


def test_hedged_and_label_only_give_no_pair(onto) -> None:
    sg = _sg(["Left pleural effusion or atelectasis."], [("pleural_effusion", "present", "left", 0)])
    assert _gen(onto).generate(sg) == []  # an alternative ("or") grades B
    lab = SceneGraph(study_id="nih:1", patient_id="nih:p", source="nih-cxr14",
                     images=[Image(id="nih:1/x", path="x.png", width=10, height=10, view="PA")],
                     observations=[Observation(id="O01", finding="nodule", certainty="present", source="label",
                                               from_report=False)])
    assert _gen(onto).generate(lab) == []  # a label without a box has no evidence


def test_deterministic_and_cap_counts_pairs(onto) -> None:
    a = Generator(onto, GenerateOptions(strategies=("probe",), seed=3)).generate(cxr_report_sg())
    b = Generator(onto, GenerateOptions(strategies=("probe",), seed=3)).generate(cxr_report_sg())
    assert [r.qa_id for r in a] == [r.qa_id for r in b] and len({r.qa_id for r in a}) == len(a)
    neg = [r for r in a if r.template_id.startswith("probe.negation")]
    assert len(neg) == 8  # cap 4 pairs of the 5 candidates, both rows of each


# --- pair consistency ---------------------------------------------------------------------------

def test_wilson_interval_hand_values() -> None:
    # 2 of 3: centre (0.666667 + 0.640267) / 2.280533 = 0.573082, half width 0.365428
    lo, hi = wilson_interval(2, 3)
    assert (lo, hi) == (pytest.approx(0.207654, abs=1e-6), pytest.approx(0.938510, abs=1e-6))
    assert wilson_interval(0, 0) is None


def test_pair_consistency_counts() -> None:
    pairs = {"a1": "negation:p1", "a2": "negation:p1", "b1": "negation:p2", "b2": "negation:p2",
             "c1": "side:p3", "c2": "side:p3", "d1": "side:p4"}
    ids = ["a1", "a2", "b1", "b2", "c1", "c2", "d1", "x"]
    correct = [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    r = pair_consistency(pairs, ids, correct)
    assert (r["pairs"], r["consistent_pairs"], r["incomplete_pairs"]) == (3, 2, 1)
    assert r["rate"] == pytest.approx(2 / 3) and r["question_accuracy"] == pytest.approx(5 / 6)
    assert r["by_kind"]["negation"]["pairs"] == 2 and r["by_kind"]["negation"]["consistent_pairs"] == 1
    assert r["by_kind"]["side"]["rate"] == 1.0


def test_eval_reports_pair_consistency(onto, tmp_path: Path) -> None:
    rows = _gen(onto).generate(cxr_report_sg())
    write_dataset(tmp_path / "d", rows, "openi", [], {})
    # right on every row except one row of the pneumothorax pair; "yes" to everything gets no pair
    ptx = next(r.qa_id for r in rows if r.findings == ["pneumothorax"])
    pf = tmp_path / "p.jsonl"
    pf.write_text("".join(json.dumps({"qa_id": r.qa_id, "prediction": ("Yes." if r.answer_short == "no" else "No.")
                                      if r.qa_id == ptx else r.answer}) + "\n" for r in rows))
    rep = evaluate(tmp_path / "d", pf, bootstrap=0, audit=False)
    pp = rep["probe_pairs"]
    assert (pp["pairs"], pp["consistent_pairs"]) == (7, 6) and pp["rate"] == pytest.approx(6 / 7)
    assert pp["by_kind"]["negation"]["consistent_pairs"] == 4 and pp["by_kind"]["side"]["rate"] == 1.0
    yes = tmp_path / "yes.jsonl"
    yes.write_text("".join(json.dumps({"qa_id": r.qa_id, "prediction": "Yes"}) + "\n" for r in rows))
    pp = evaluate(tmp_path / "d", yes, bootstrap=0, audit=False)["probe_pairs"]
    assert pp["consistent_pairs"] == 0 and pp["question_accuracy"] == pytest.approx(0.5)
