"""`radvqa import medical-diff-vqa`: the QA table in radvqa's layout, the main/reference order
check (the v1.0 defect), the optional v1.0.1-style fix, and captioning metrics in `radvqa eval`.
Fixture: tests/data/medical_diff_vqa (hand-made, real layout; see its README)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from radvqa.cli import app
from radvqa.eval.diffvqa import _caption, import_medical_diff_vqa, swap_difference_answer
from radvqa.eval.importers import ImportError_

FIX = Path(__file__).parent / "data" / "medical_diff_vqa"
DATA_ROWS = 17  # data rows in the fixture's QA table (13 usable + 4 bad)


def _rows(out: Path) -> list[dict]:
    return pq.read_table(out / "qa").to_pylist()


def test_import_counts_and_order_check(tmp_path: Path) -> None:
    m = import_medical_diff_vqa(FIX, tmp_path / "o")
    c = m["counts"]
    assert (c["qa"], c["rejected"]) == (13, 4)
    assert c["qa"] + c["rejected"] == DATA_ROWS  # nothing lost silently
    reasons = [json.loads(line)["reason"] for line in (tmp_path / "o" / "rejected.jsonl").read_text().splitlines()]
    assert any("unknown question_type 'comparison'" in r for r in reasons)
    assert any("4 cells, expected 7" in r for r in reasons)
    oc = m["medical_diff_vqa"]["order_check"]
    assert oc["pairs"] == 5
    assert oc["pairs_by_order"] == {"ok": 1, "reversed": 2, "tie": 1, "unknown": 1}
    assert oc["difference_rows_fixed"] == 0
    assert m["medical_diff_vqa"]["release_guess"].startswith("v1.0 ")
    rows = {r["qa_id"]: r for r in _rows(tmp_path / "o")}
    # by default nothing is changed: the reversed pair keeps its ids and answer, flagged
    rev = [r for r in rows.values() if r["grade_reasons"] == ["order:reversed"]]
    assert {r["study_id"] for r in rev} == {"mimic-cxr:50000012", "mimic-cxr:50000042"}
    assert all(r["question_type"] == "difference" for r in rev)
    # the non-difference rows of a reversed pair are about the main image alone: not flagged
    assert all(not r["grade_reasons"] for r in rows.values() if r["question_type"] != "difference")
    # closed = yes/no answers
    assert {r["answer_short"] for r in rows.values() if r["answer_short"] is not None} == {"yes", "no"}
    diff = next(r for r in rows.values() if r["study_id"] == "mimic-cxr:50000002" and r["question_type"] == "difference")
    assert diff["reference_study_id"] == "mimic-cxr:50000001"
    assert diff["image_ids"] == ["a0000002-aaaaaaaa-bbbbbbbb-cccccccc-dddddddd", "a0000001-aaaaaaaa-bbbbbbbb-cccccccc-dddddddd"]
    assert diff["patient_id"] == "mimic:10000001"


def test_fix_order_swaps_difference_rows(tmp_path: Path) -> None:
    m = import_medical_diff_vqa(FIX / "mimic_pair_questions.csv", tmp_path / "o", studies=FIX / "mimic_all.csv", fix_order=True, release="1.0")
    oc = m["medical_diff_vqa"]["order_check"]
    assert (oc["difference_rows_fixed"], oc["difference_rows_unfixable"]) == (1, 1)
    assert m["medical_diff_vqa"]["release"] == "1.0"
    rows = _rows(tmp_path / "o")
    fixed = next(r for r in rows if r["grade_reasons"] == ["order:fixed"])
    assert (fixed["study_id"], fixed["reference_study_id"]) == ("mimic-cxr:50000011", "mimic-cxr:50000012")
    assert fixed["answer"] == (
        "the level of pleural effusion has changed from moderate to small. "
        "the main image has an additional finding of cardiomegaly than the reference image. "
        "the main image is missing the findings of atelectasis, edema, and pneumonia than the reference image."
    )
    assert any("answer was" in p for p in fixed["provenance"])
    unfixed = next(r for r in rows if r["grade_reasons"] == ["order:reversed-unfixed"])
    assert unfixed["answer"] == "something else entirely."
    # the presence question of the reversed pair still asks about its own main study
    pres = next(r for r in rows if r["question"] == "is there pneumothorax?")
    assert pres["study_id"] == "mimic-cxr:50000012"


def test_tables_recognised_by_columns_renamed_and_gzipped(tmp_path: Path) -> None:
    d = tmp_path / "in"
    d.mkdir()
    with open(FIX / "mimic_pair_questions.csv", "rb") as f, gzip.open(d / "pairs-v1.csv.gz", "wb") as g:
        shutil.copyfileobj(f, g)
    shutil.copy(FIX / "mimic_all.csv", d / "studies_table.csv")
    m = import_medical_diff_vqa(d, tmp_path / "o")
    assert m["counts"]["qa"] == 13
    assert m["medical_diff_vqa"]["order_check"]["pairs_by_order"]["reversed"] == 2
    with pytest.raises(ImportError_, match="neither the QA table"):
        import_medical_diff_vqa(FIX / "README.md", tmp_path / "o2")
    with pytest.raises(ImportError_, match="expected one QA table"):
        import_medical_diff_vqa(FIX / "mimic_all.csv", tmp_path / "o3")


def test_without_study_table_says_order_not_checked(tmp_path: Path) -> None:
    m = import_medical_diff_vqa(FIX / "mimic_pair_questions.csv", tmp_path / "o")
    assert "not checked" in m["medical_diff_vqa"]["order_check"]["note"]
    assert all(not r["grade_reasons"] for r in _rows(tmp_path / "o"))


_NAMES = st.lists(st.sampled_from(["atelectasis", "pleural effusion", "edema", "cardiomegaly", "lung opacity", "hernia"]),
                  unique=True, max_size=4)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(_NAMES, _NAMES, st.lists(st.tuples(st.sampled_from(["edema", "pleural effusion"]), st.sampled_from(["mild", "small"]), st.sampled_from(["moderate", "severe"])), max_size=2))
def test_swap_is_an_involution_on_generator_answers(adding: list[str], missing: list[str], levels: list[tuple[str, str, str]]) -> None:
    missing = [m for m in missing if m not in adding]
    answer = "".join(f"the level of {n} has changed from {a} to {b}. " for n, a, b in levels) + _caption(adding, missing)
    if not answer:
        answer = "nothing has changed."
    once = swap_difference_answer(answer)
    assert once is not None
    assert swap_difference_answer(once) == answer
    if adding:
        assert f"missing the finding{'s' if len(adding) > 1 else ''} of" in once


@pytest.mark.timeout(900)  # METEOR starts a JVM that loads its paraphrase tables
def test_cli_and_captioning_metrics_in_eval(tmp_path: Path) -> None:
    pytest.importorskip("pycocoevalcap")
    out = tmp_path / "o"
    r = CliRunner().invoke(app, ["import", "medical-diff-vqa", str(FIX), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "2 reversed" in r.output
    rows = _rows(out)
    # perfect answers: every captioning metric at its maximum
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps({"qa_id": x["qa_id"], "text": x["answer"]}) + "\n" for x in rows))
    r = CliRunner().invoke(app, ["eval", str(out), "-p", str(preds), "--split", "all", "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "rep" / "report.json").read_text())
    cap = rep["captioning"]["overall"]
    assert cap["n"] == 10
    assert cap["bleu_1"] == pytest.approx(1.0, abs=1e-6)
    assert cap["rouge_l"] == pytest.approx(1.0)
    if cap.get("meteor") is not None:
        assert cap["meteor"] == pytest.approx(1.0, abs=1e-6)
    assert "Captioning metrics" in (tmp_path / "rep" / "report.md").read_text()
    # a wrong answer lowers them
    preds.write_text("".join(json.dumps({"qa_id": x["qa_id"], "text": "nothing has changed."}) + "\n" for x in rows))
    r = CliRunner().invoke(app, ["eval", str(out), "-p", str(preds), "--split", "all", "--out", str(tmp_path / "rep2")])
    rep2 = json.loads((tmp_path / "rep2" / "report.json").read_text())
    assert rep2["captioning"]["overall"]["bleu_1"] < 0.5


def test_diff_family_compared_with_medical_diff_vqa(tmp_path: Path) -> None:
    """The fixture's MIMIC reports (tests/data/medical_diff_vqa/mimic) were written so that each
    figure below can be checked by hand: pair 50000002/50000001 adds a pneumothorax on both sides;
    for 50000012/50000011 Medical-Diff-VQA claims atelectasis, edema and pneumonia added and
    cardiomegaly missing, and the reports support all but pneumonia; "is there edema?" on 50000002
    is no on both sides; "is there pneumothorax?" on 50000012 is hedged in its report."""
    from radvqa.eval.diffcompare import compare

    r = CliRunner().invoke(app, ["build", "mimic-cxr", "--input", str(FIX / "mimic"), "--out", str(tmp_path / "b"), "--strategies", "qba,diff"])
    assert r.exit_code == 0, r.output
    import_medical_diff_vqa(FIX, tmp_path / "m")
    res = compare(tmp_path / "b", tmp_path / "m")
    cov = res["coverage"]
    assert (cov["pairs"], cov["pairs_with_both_studies_built"], cov["pairs_radvqa_asks_diff_questions_about"]) == (5, 2, 1)
    p = res["presence"]
    assert (p["compared"], p["agree"], p["radvqa_uncertain_left_out"]) == (1, 1, 1)
    d = res["difference"]
    assert (d["pairs_compared"], d["added_set_exact"], d["missing_set_exact"]) == (2, 1, 2)
    assert d["items_tp_fp_fn"] == [4, 0, 1]
