"""Eval harness: parsers, boxes, metrics, protocols, importers, baselines, report, CLI.

Numbers asserted here are hand-computed (small cases) or were checked against LLaVA-Med
v1.0's own scoring functions applied to the same files (real VQA-RAD data)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from radvqa.cli import app
from radvqa.eval.aggregate import mean_ci
from radvqa.eval.baselines import run_baseline
from radvqa.eval.boxes import boxes_from_text, coerce_boxes, hungarian, iou, matched_iou, to_pixels
from radvqa.eval.dataset import load_qa
from radvqa.eval.evaluate import evaluate
from radvqa.eval.importers import iter_slake, iter_vqa_rad, write_dataset
from radvqa.eval.parsers import Parser
from radvqa.eval.predictions import PredictionError, join, load_predictions
from radvqa.eval.report import write_report
from radvqa.eval.text import Normalizer, llava_normalize, llava_token_prf, token_prf
from radvqa.model import QA, Box

DATA = Path(__file__).parent / "data" / "eval"
VQA_RAD = DATA / "vqa-rad"
LLAVA = VQA_RAD / "predictions" / "llava-med-v1"
CHOICES = ["pleural effusion", "pneumothorax", "nodule", "no finding"]


@pytest.fixture(scope="module")
def parser() -> Parser:
    return Parser()


# --- parsers: every case in a table ------------------------------------------------------

YES_NO = [
    ("Yes.", "yes", "parsed"),
    ("yes", "yes", "parsed"),
    ("No, there is no effusion.", "no", "parsed"),
    ("Human: No", "no", "parsed"),
    ("There is no evidence of pneumothorax.", "no", "parsed"),
    ("The lungs are free of consolidation.", "no", "parsed"),
    ("Pneumothorax isn't seen.", "no", "parsed"),
    ("There is a small left pleural effusion.", "yes", "parsed"),
    ("The image shows cardiomegaly.", "yes", "parsed"),
    ("Negative.", "no", "parsed"),
    ("Correct, it is present.", "yes", "parsed"),
    # "no" must never be found inside other words
    ("Normal.", None, "unparsed"),
    ("nodule", None, "unparsed"),
    ("abnormal", None, "unparsed"),
    ("I know", None, "unparsed"),
    # uncertainty before negation; refusals; ambiguity: unparsed, never guessed
    ("Pneumothorax cannot be excluded.", None, "unparsed"),
    ("It is possibly an effusion.", None, "unparsed"),
    ("I'm sorry, I cannot see the image.", None, "unparsed"),
    ("As an AI, I can't provide a diagnosis.", None, "unparsed"),
    ("yes or no", None, "unparsed"),
    ("Hmm, yes and no.", None, "unparsed"),
    ("", None, "unparsed"),
    ("<think>no wait</think> Yes", "yes", "parsed"),
]


@pytest.mark.parametrize("text,value,status", YES_NO)
def test_yes_no_parser(parser: Parser, text: str, value: str | None, status: str) -> None:
    r = parser.parse("yes_no", text)
    assert (r.value, r.status) == (value, status), r


MC = [
    ("B", "B", "parsed"),
    ("b", "B", "parsed"),
    ("(B)", "B", "parsed"),
    ("B.", "B", "parsed"),
    ("B. Pneumothorax", "B", "parsed"),
    ("Option B", "B", "parsed"),
    ("option c", "C", "parsed"),
    ("The answer is (D).", "D", "parsed"),
    ("Answer: A", "A", "parsed"),
    ("I think it is pneumothorax.", "B", "parsed"),
    ("There is a pleural effusion.", "A", "parsed"),  # "effusion" also not a separate option
    ("No finding", "D", "parsed"),
    # "The" is not option T, "A nodule" is not option A (but names option C's text)
    ("The lungs are clear", None, "unparsed"),
    ("A nodule is seen", "C", "parsed"),
    ("E", None, "unparsed"),  # not an option
    ("A or B", None, "unparsed"),
    ("Option A or option B", None, "unparsed"),
    ("(A) or (C)", None, "unparsed"),
    ("pneumothorax or nodule", None, "unparsed"),
    ("I cannot tell, sorry.", None, "unparsed"),
]


@pytest.mark.parametrize("text,value,status", MC)
def test_choice_parser(parser: Parser, text: str, value: str | None, status: str) -> None:
    r = parser.parse("choice", text, CHOICES)
    assert (r.value, r.status) == (value, status), r


COUNT = [
    ("2", "2"),
    ("There are two nodules.", "2"),
    ("Three.", "3"),
    ("There are no nodules.", "0"),
    ("none", "0"),
    ("several", None),
]


@pytest.mark.parametrize("text,value", COUNT)
def test_count_parser(parser: Parser, text: str, value: str | None) -> None:
    assert parser.parse("count", text).value == value


def test_missing_prediction(parser: Parser) -> None:
    assert parser.parse("yes_no", None).status == "missing"
    with pytest.raises(ValueError):
        parser.parse("nonsense", "x")


NORM = [
    ("The X-ray shows 3.5 cm, two nodules.", "xray shows 3.5 cm 2 nodules"),
    ("  An  EFFUSION!! ", "effusion"),
    ("T2-weighted MRI", "t2 mri"),
]


@pytest.mark.parametrize("text,out", NORM)
def test_radvqa_normalizer(text: str, out: str) -> None:
    assert Normalizer()(text) == out


LLAVA_NORM = [
    ("no, there is (a) 3.5 cm lesion. yes!", "no there is 3.5 cm lesion yes"),
    ("left-sided", "left sided"),  # hyphen not touching a space: replaced by a space
    ("left - sided", "left sided"),  # hyphen touching a space: deleted
    ("one or two", "1 or 2"),
    ("1,000 cells, yes", "1000 cells yes"),
    # the v1.0 quirk: only the first 32 periods are removed
    ("." * 40, "." * 8),
]


@pytest.mark.parametrize("text,out", LLAVA_NORM)
def test_llava_normalize(text: str, out: str) -> None:
    assert llava_normalize(text) == out


def test_token_prf_hand_computed() -> None:
    p, r, f = token_prf("left pleural effusion".split(), "small left pleural effusion".split())
    assert (p, r) == (1.0, 0.75) and f == pytest.approx(6 / 7)
    assert token_prf([], []) == (1.0, 1.0, 1.0)
    assert token_prf(["a"], []) == (0.0, 0.0, 0.0)
    # LLaVA-Med counts the prediction's repeats as true positives
    p, r, f = llava_token_prf("liver liver liver", "liver kidney")
    assert (p, r) == (1.0, 0.75)


# --- boxes -------------------------------------------------------------------------------

def test_box_formats() -> None:
    size = (200, 100)
    assert to_pixels([[0.1, 0.2, 0.5, 0.6]], "norm1", size)[0] == [[20.0, 20.0, 100.0, 60.0]]
    assert to_pixels([[100, 200, 500, 600]], "norm1000", size)[0] == [[20.0, 20.0, 100.0, 60.0]]
    assert to_pixels([[50, 60, 10, 20]], "pixels", size)[0] == [[10.0, 20.0, 50.0, 60.0]]  # reordered
    assert to_pixels([[-5, 10, 250, 90]], "pixels", size)[0] == [[0.0, 10.0, 200.0, 90.0]]  # clipped
    assert to_pixels([[0.1, 0.1, 0.2, 0.2]], "auto", size)[0] == [[20.0, 10.0, 40.0, 20.0]]
    assert to_pixels([[100, 100, 900, 900]], "auto", size)[0] == [[20.0, 10.0, 180.0, 90.0]]  # outside image -> norm1000
    boxes, err = to_pixels([[0.1, 0.1, 0.2, 0.2]], "norm1", None)
    assert boxes == [] and "image size" in err
    assert boxes_from_text("<box>(100,200),(300,400)</box>") == ([[100.0, 200.0, 300.0, 400.0]], "norm1000")
    assert boxes_from_text("<|box_start|>(1,2),(3,4)<|box_end|>") == ([[1.0, 2.0, 3.0, 4.0]], "norm1000")
    assert boxes_from_text('{"bbox_2d": [10, 20, 30, 40], "label": "nodule"}') == ([[10.0, 20.0, 30.0, 40.0]], None)
    assert coerce_boxes([1, 2, 3, 4]) == [[1.0, 2.0, 3.0, 4.0]]
    assert coerce_boxes([{"x1": 1, "y1": 2, "x2": 3, "y2": 4}]) == [[1.0, 2.0, 3.0, 4.0]]
    with pytest.raises(ValueError):
        coerce_boxes([[1, 2, 3]])


def test_iou_and_hungarian() -> None:
    assert iou([0, 0, 10, 10], [5, 0, 15, 10]) == pytest.approx(50 / 150)
    assert iou([0, 0, 10, 10], [20, 20, 30, 30]) == 0.0
    rng = np.random.default_rng(1)
    for _ in range(100):
        n, m = (int(x) for x in rng.integers(1, 6, 2))
        c = rng.random((n, m))
        got = sum(c[a, b] for a, b in hungarian(c))
        if n <= m:
            best = min(sum(c[i, j] for i, j in zip(range(n), p)) for p in itertools.permutations(range(m), n))
        else:
            best = min(sum(c[i, j] for j, i in zip(range(m), p)) for p in itertools.permutations(range(n), m))
        assert got == pytest.approx(best)
    # greedy would pair gold 0 with pred 0 (IoU 0.5) and leave gold 1 unmatched; Hungarian does not
    gold = [[0, 0, 10, 10], [5, 0, 15, 10]]
    pred = [[5, 0, 15, 10], [0, 0, 10, 10]]
    s, per = matched_iou(gold, pred)
    assert s == pytest.approx(1.0) and per == [pytest.approx(1.0), pytest.approx(1.0)]
    s, per = matched_iou([[0, 0, 10, 10], [20, 20, 30, 30]], [[20, 20, 30, 30]])
    assert s == 0.5 and per == [0.0, 1.0]
    assert matched_iou([], []) == (1.0, [])
    assert matched_iou([[0, 0, 1, 1]], [])[0] == 0.0


def test_bootstrap_deterministic() -> None:
    v = np.array([1.0] * 30 + [0.0] * 10)
    a, b = mean_ci(v, 500, 7), mean_ci(v, 500, 7)
    assert a == b and a["mean"] == 0.75
    assert a["ci95"][0] < 0.75 < a["ci95"][1]
    # 0/1 scores: exact binomial (Clopper-Pearson); 30/40 -> [0.5880, 0.8731] (published tables)
    assert "Clopper-Pearson" in a["ci_method"] and np.allclose(a["ci95"], [0.5880, 0.8731], atol=1e-4)
    # #17: 2 of 2 right printed [100.0, 100.0]; the exact interval is [15.8, 100]
    two = mean_ci(np.array([1.0, 1.0]), 1000, 0)
    assert np.allclose(two["ci95"], [0.1581, 1.0], atol=1e-4)
    # a non-0/1 score below MIN_BOOTSTRAP_N gets no interval, and says why
    few = mean_ci(np.array([0.2, 0.9, 0.4]), 1000, 0)
    assert few["ci95"] is None and few["ci_method"].startswith("none (n < ")
    f1 = mean_ci(np.linspace(0, 1, 50), 1000, 3)
    assert "scipy" in f1["ci_method"] and f1["ci95"][0] < 0.5 < f1["ci95"][1] and f1 == mean_ci(np.linspace(0, 1, 50), 1000, 3)
    big = mean_ci(np.array([0.25, 0.75] * 40_000), 1000, 0)
    assert big["ci_method"] == "normal" and big["mean"] == 0.5


# --- a small hand-made dataset with every kind of question -------------------------------

def _qa(qid: str, **kw: object) -> QA:
    base = dict(qa_id=qid, source="synthetic", split="test", patient_id="p1", study_id="s1", strategy="qba",
                question_type="D02_has_finding", template_id="qba.D02", template_version=1, question="q?", answer="a",
                image_ids=["img1"], image_paths=["images/img1.png"])
    base.update(kw)
    return QA(**base)  # type: ignore[arg-type]


def _box(x1: float, y1: float, x2: float, y2: float) -> Box:
    return Box(image_id="img1", x1=x1, y1=y1, x2=x2, y2=y2)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("small")
    (root / "images").mkdir()
    Image.new("L", (100, 100)).save(root / "images" / "img1.png")
    rot = ["pneumothorax", "nodule", "no finding", "pleural effusion"]
    qas = [
        _qa("q01", question="Is there a pleural effusion?", answer="Yes, there is a pleural effusion.", answer_short="yes", polarity="positive", findings=["pleural_effusion"]),
        _qa("q02", question="Is there no pneumothorax?", answer="No.", answer_short="no", polarity="negative", findings=["pneumothorax"]),
        _qa("q03", question="Is there a nodule?", answer="Yes.", answer_short="yes", polarity="positive", findings=["nodule"]),
        _qa("q04", question="Is there no effusion?", answer="No.", answer_short="no", polarity="negative", findings=["pleural_effusion"]),
        _qa("q05", strategy="rin", question_type="pathology_mc", template_id="rin.mc", question="Which?", answer="Pneumothorax.", answer_short="B", choices=CHOICES),
        _qa("q06", strategy="rin", question_type="pathology_mc", template_id="rin.mc", question="Which?", answer="Pneumothorax.", answer_short="A", choices=rot),
        _qa("q07", strategy="rin", question_type="pathology_mc", template_id="rin.mc", study_id="s2", question="Which?", answer="Nodule.", answer_short="C", choices=CHOICES),
        _qa("q08", strategy="rin", question_type="pathology_mc", template_id="rin.mc", study_id="s2", question="Which?", answer="Nodule.", answer_short="B", choices=rot),
        _qa("q09", strategy="vindr", question_type="how_many", template_id="vindr.how_many", question="How many nodules?", answer="There are 2 nodules.", answer_short="2", findings=["nodule"]),
        _qa("q10", question_type="B01_describe_all", template_id="qba.B01", question="Describe.", answer="Small left pleural effusion."),
        _qa("q11", strategy="vindr", question_type="where", template_id="vindr.where", question="Where is the nodule?", answer="Upper left.", boxes=[_box(10, 10, 50, 50)]),
        _qa("q12", strategy="vindr", question_type="where", template_id="vindr.where", question="Where are the nodules?", answer="Two places.", boxes=[_box(10, 10, 50, 50), _box(60, 60, 90, 90)]),
        _qa("q13", strategy="vindr", question_type="where", template_id="vindr.where", question="Where is the mass?", answer="Lower right.", boxes=[_box(60, 60, 90, 90)]),
        _qa("q14", strategy="vindr", question_type="where", template_id="vindr.where", question="Where is the effusion?", answer="There is none.", polarity="negative"),
        _qa("q15", strategy="vindr", question_type="where", template_id="vindr.where", question="Where is the opacity?", answer="Left base (no box in the source).", polarity="positive"),
    ]
    write_dataset(root, qas, "synthetic", [], {})
    preds = [
        {"qa_id": "q01", "prediction": "Yes, there is a small effusion."},
        {"qa_id": "q02", "prediction": "There is no pneumothorax."},
        {"qa_id": "q03", "prediction": "Normal study."},
        {"qa_id": "q05", "prediction": "(B)"},
        {"qa_id": "q06", "prediction": "The answer is C"},
        {"qa_id": "q07", "prediction": "Option c"},
        {"qa_id": "q08", "prediction": "nodule"},
        {"qa_id": "q09", "prediction": "There are two nodules."},
        {"qa_id": "q10", "prediction": "Left pleural effusion."},
        {"qa_id": "q11", "prediction": "Upper left.", "boxes": [[10, 10, 50, 50]]},
        {"qa_id": "q12", "prediction": "Here: <box>(100,100),(500,500)</box>"},
        {"qa_id": "q13", "prediction": "Lower right."},
        {"qa_id": "q14", "prediction": "There is none."},
        {"qa_id": "q15", "prediction": "Left base."},
        {"qa_id": "zzz", "prediction": "yes"},
    ]
    pf = root / "preds.jsonl"
    pf.write_text("".join(json.dumps(p) + "\n" for p in preds))
    return root, pf


def test_small_dataset_numbers(small: tuple[Path, Path]) -> None:
    root, pf = small
    rep = evaluate(root, pf, bootstrap=200)
    p = rep["predictions"]
    assert (p["matched"], p["missing"], p["missing_ids"], p["unmatched_ids"]) == (14, 1, ["q04"], ["zzz"])
    c = rep["overall"]["closed"]
    # q01 q02 q05 q07 q08 q09 right; q03 unparsed, q04 missing, q06 wrong
    assert (c["correct"], c["n"], c["unparsed"], c["missing"]) == (6, 9, 1, 1)
    assert c["ci95"][0] <= 6 / 9 <= c["ci95"][1]
    pol = rep["overall"]["closed_by_polarity"]
    assert (pol["positive"]["correct"], pol["positive"]["n"]) == (1, 2)
    assert (pol["negative"]["correct"], pol["negative"]["n"]) == (1, 2)
    mc = rep["multiple_choice"]
    assert mc["groups_with_rotations"] == 2 and mc["circular_accuracy"] == 0.5 and mc["single_pass_accuracy"] == 0.75
    assert rep["yes_no_confusion"] == {"yes": {"yes": 1, "no": 0, "unparsed": 1, "missing": 0},
                                       "no": {"yes": 0, "no": 1, "unparsed": 0, "missing": 1}}
    g = rep["grounding"]
    # per-question IoU: q11 1.0, q12 0.5 (norm1000 tag -> pixels of the 100x100 file; 1 of 2 gold boxes),
    # q13 0 (no box), q14 negative and no box drawn -> 1
    assert g["all_questions"]["n"] == 4 and g["all_questions"]["mean_iou"] == pytest.approx(0.625)
    assert g["all_questions"]["iou_ge_0.5"] == 0.75
    assert g["positive_questions"]["n"] == 3 and g["positive_questions"]["mean_iou"] == pytest.approx(0.5)
    assert g["positive_questions"]["iou_ge_0.3"] == pytest.approx(2 / 3)
    assert g["parsed_answers"]["n"] == 2 and g["parsed_answers"]["mean_iou"] == pytest.approx(0.75)
    assert g["parsed_answers"]["iou_ge_0.5"] == 1.0
    assert g["ungroundable"]["n"] == 1 and g["negatives"] == {"n": 1, "no_box_predicted": 1}  # q15: positive, no gold box
    assert rep["parse_failures"]["yes_no"]["unparsed"] == 1 and rep["parse_failures"]["yes_no"]["missing"] == 1
    by_strategy = rep["breakdowns"]["strategy"]
    assert by_strategy["rin"]["closed"]["correct"] == 3 and by_strategy["vindr"]["closed"]["n"] == 1
    assert rep["breakdowns"]["finding"]["pleural_effusion"]["closed"]["n"] == 2
    per = rep["_per_question"]["scores"]
    assert per.tok_f1[rep["_per_question"]["qa_id"].index("q10")] == pytest.approx(6 / 7)
    # same input, same seed: same report
    rep2 = evaluate(root, pf, bootstrap=200)
    for k in ("overall", "grounding", "breakdowns", "multiple_choice"):
        assert rep[k] == rep2[k]


def test_report_files(small: tuple[Path, Path], tmp_path: Path) -> None:
    root, pf = small
    rep = evaluate(root, pf, bootstrap=50)
    paths = write_report(rep, tmp_path / "r")
    metrics = json.loads(paths["metrics.json"].read_text())
    assert metrics["closed_accuracy"] == pytest.approx(6 / 9) and metrics["missing_predictions"] == 1
    assert metrics["mean_iou_positive_questions"] == pytest.approx(0.5)
    html = paths["report.html"].read_text()
    assert "<table>" in html and "data:image/png;base64," in html and "http" not in html.split("<body>")[1].split("predictions:")[0]
    md = paths["report.md"].read_text()
    assert "| closed accuracy | 66.7 |" in md and "1 missing (scored wrong)" in md
    lines = paths["per_question.jsonl"].read_text().splitlines()
    assert len(lines) == 15 and json.loads(lines[3])["status"] == "missing"
    # multiple choice as a table: single pass over the 4 choice questions (75.0), circular
    # over the 2 groups with rotations (50.0), not a JSON dump
    assert "| single pass (every choice question) | 4 | 75.0 | - |" in md
    assert "| circular (groups with rotations; 2 rotations: 2) | 2 | 50.0 |" in md
    assert '"groups_with_rotations"' not in md
    # same input and seed: byte-identical report files (timings live in timings.json)
    write_report(evaluate(root, pf, bootstrap=50), tmp_path / "r2")
    for name in ("report.json", "metrics.json", "report.md", "report.html", "per_question.jsonl"):
        assert (tmp_path / "r" / name).read_bytes() == (tmp_path / "r2" / name).read_bytes(), name


def test_prediction_file_errors(tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text('{"qa_id": "a", "prediction": "yes"}\n{"qa_id": "a", "prediction": "no"}\n')
    with pytest.raises(PredictionError, match=":2: duplicate"):
        load_predictions(f)
    f.write_text('{"qa_id": "a", "prediction": "yes"}\nnot json\n')
    with pytest.raises(PredictionError, match=":2: not JSON"):
        load_predictions(f)
    f.write_text('{"key": "a", "out": "yes"}\n')
    with pytest.raises(PredictionError, match="cannot find the id field"):
        load_predictions(f)
    p = load_predictions(f, id_field="key", text_field="out")
    assert p.by_id["a"].text == "yes"


# --- real data: VQA-RAD and LLaVA-Med's answer files -------------------------------------

@pytest.fixture(scope="module")
def vqarad(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("vqarad")
    m = write_dataset(out, iter_vqa_rad(VQA_RAD), "vqa-rad", [str(VQA_RAD)], {})
    assert m["counts"]["qa"] == 2248 and m["counts"]["rejected"] == 0
    return out


def test_vqa_rad_import(vqarad: Path) -> None:
    rows = load_qa(vqarad)
    test = [i for i, s in enumerate(rows["split"]) if s == "test"]
    assert len(test) == 451
    assert sum(rows["answer_short"][i] is not None for i in test) == 272  # closed
    assert len({rows["image_ids"][i][0] for i in test}) == 203
    i = rows["qa_id"].index("vqa-rad:0")
    assert (rows["answer_short"][i], rows["question_type"][i], rows["regions"][i]) == ("yes", "PRES", ["head"])


# (file, closed right / 272, v1-script accuracy %, v1-script denominator, open recall %) — the
# script figures equal those of LLaVA-Med's own run_eval.py functions on the same files.
LLAVA_MED = [
    ("answer-file.jsonl", 132, 72.73, 176, 17.53),
    ("answer-file-1epoch.jsonl", 66, 28.51, 221, 2.04),
    ("answer-file-llava-zeorshot.jsonl", 82, 34.98, 223, 12.04),
]


@pytest.mark.parametrize("name,closed,script,script_n,recall", LLAVA_MED)
def test_llava_med_protocol_on_real_answers(vqarad: Path, name: str, closed: int, script: float, script_n: int, recall: float) -> None:
    rep = evaluate(vqarad, LLAVA / name, protocol="llava-med", bootstrap=0, audit=False)
    assert rep["predictions"]["id_field"] == "question_id" and rep["predictions"]["joined_by"] == "native"
    assert rep["evaluated"]["rows"] == 451 and rep["predictions"]["missing"] == 0
    lm = rep["llava_med"]
    assert (lm["closed_correct"], lm["closed_n"], lm["open_n"]) == (closed, 272, 179)
    assert round(100 * lm["closed_accuracy_v1_script"], 2) == script and lm["closed_n_v1_script"] == script_n
    assert round(100 * lm["open_recall"], 2) == recall


def test_radvqa_protocol_on_real_answers(vqarad: Path) -> None:
    rep = evaluate(vqarad, LLAVA / "answer-file.jsonl", bootstrap=0)
    c = rep["overall"]["closed"]
    # one definition of closed for both protocols: VQA-RAD test is 272 closed / 179 open (#17: 274)
    assert (c["correct"], c["n"], c["unparsed"]) == (99, 272, 55)
    assert rep["overall"]["open"]["n"] == 179
    assert rep["yes_no_confusion"]["yes"] == {"yes": 57, "no": 37, "unparsed": 24, "missing": 0}
    sa = rep["shortcut_audit"]
    assert sa["baseline"].startswith("text-only bag-of-words") and round(sa["overall_closed_gap_pp"], 2) == -20.59
    pres = next(r for r in sa["by_question_type"] if r["question_type"] == "PRES")
    assert pres["n"] == 119 and pres["gap_pp"] < 0


def test_baselines_on_vqa_rad(vqarad: Path) -> None:
    rows = load_qa(vqarad)
    ids, preds, info = run_baseline(rows, "bow")
    assert info["train_rows"] == 1797 and len(ids) == 451
    assert run_baseline(rows, "bow")[1] == preds  # deterministic
    assert set(p for i, p in zip(ids, preds) if rows["answer_short"][rows["qa_id"].index(i)] in ("yes", "no")) <= {"yes", "no"}
    r1 = run_baseline(rows, "random", seed=3)[1]
    assert r1 == run_baseline(rows, "random", seed=3)[1] and r1 != run_baseline(rows, "random", seed=4)[1]
    prior = run_baseline(rows, "prior")[1]
    assert prior[ids.index("vqa-rad:10")] == "no"  # "no" is the majority closed answer in train


def test_slake_import() -> None:
    recs = list(iter_slake(DATA / "slake"))
    qas = [r for r in recs if isinstance(r, QA)]
    rej = [r for r in recs if not isinstance(r, QA)]
    assert sorted(q.qa_id for q in qas) == ["slake:1", "slake:11", "slake:12", "slake:13", "slake:2", "slake:4"]
    assert sorted(r.reason for r in rej) == ["empty question", "q_lang 'zh' not selected (--lang en)", "q_lang 'zh' not selected (--lang en)"]
    by = {q.qa_id: q for q in qas}
    assert by["slake:12"].split == "test" and by["slake:12"].answer_short == "yes" and by["slake:13"].answer_short is None
    nod = by["slake:12"].boxes
    assert [(b.label, b.x1, b.y1, b.x2, b.y2) for b in nod] == [("nodule", 40.0, 10.0, 48.0, 16.0)]
    assert [b.label for b in by["slake:2"].boxes] == ["cardiomegaly", "nodule"]
    assert by["slake:13"].modality == "X-Ray" and by["slake:13"].regions == ["lung"]


# --- CLI ---------------------------------------------------------------------------------

def test_cli_end_to_end(tmp_path: Path) -> None:
    r = CliRunner()
    res = r.invoke(app, ["import", "vqa-rad", str(VQA_RAD), "--out", str(tmp_path / "vr")])
    assert res.exit_code == 0, res.output
    assert "2248 questions" in res.output and (tmp_path / "vr" / "manifest.json").is_file()
    assert (tmp_path / "vr" / "rejected.jsonl").read_text() == ""
    res = r.invoke(app, ["baseline", "text-only", str(tmp_path / "vr"), "--out", str(tmp_path / "bow.jsonl")])
    assert res.exit_code == 0, res.output
    assert len((tmp_path / "bow.jsonl").read_text().splitlines()) == 451
    res = r.invoke(app, ["eval", str(tmp_path / "vr"), "-p", str(LLAVA / "answer-file.jsonl"), "--protocol", "llava-med",
                         "--out", str(tmp_path / "rep"), "--bootstrap", "0", "--baseline", str(tmp_path / "bow.jsonl"), "--no-plots"])
    assert res.exit_code == 0, res.output
    m = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    assert m["llava_med_closed_n_v1_script"] == 176 and round(m["llava_med_open_recall"], 4) == 0.1753
    rep = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert rep["shortcut_audit"]["baseline"].endswith("bow.jsonl")
    res = r.invoke(app, ["baseline", "random", str(tmp_path / "vr"), "--out", str(tmp_path / "rnd.jsonl"), "--seed", "1"])
    assert res.exit_code == 0
    res = r.invoke(app, ["import", "slake", str(DATA / "slake"), "--out", str(tmp_path / "sl")])
    assert res.exit_code == 0 and "3 rejected" in res.output
    # bad input: a clear error, exit code 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n")
    res = r.invoke(app, ["eval", str(tmp_path / "vr"), "-p", str(bad), "--out", str(tmp_path / "x")])
    assert res.exit_code == 1 and "not JSON" in res.output
    res = r.invoke(app, ["eval", str(tmp_path), "-p", str(bad), "--out", str(tmp_path / "x")])
    assert res.exit_code == 1 and "no qa/ folder" in res.output


def test_prediction_errors_name_the_line(tmp_path: Path) -> None:
    f = tmp_path / "p.jsonl"
    f.write_text('{"qa_id": "a", "prediction": "yes"}\n\n{"prediction": "no"}\n')
    with pytest.raises(PredictionError, match=r":3: .*qa_id"):
        load_predictions(f)
    f.write_text('{"qa_id": "a", "prediction": "yes"}\n{"qa_id": "b", "prediction": 3}\n')
    with pytest.raises(PredictionError, match=r":2: "):
        load_predictions(f)


# --- tags: multi-part answers and VinDr-style F1 ------------------------------------------

def test_tag_matcher_negation() -> None:
    from radvqa.eval.tags import TagMatcher

    m = TagMatcher({"pleural_effusion": ["pleural effusion", "effusion"], "pneumothorax": ["pneumothorax"]},
                   {"left_lung": ["left lung"]})
    assert m.tags("Small left pleural effusion, no pneumothorax.") == ({"pleural_effusion"}, set())
    assert m.tags("No pleural effusion. Pneumothorax in the left lung.") == ({"pneumothorax"}, {"left_lung"})
    assert m.tags("Pneumothorax isn't seen but an effusion is present") == ({"pleural_effusion"}, set())
    assert m.tags("effusional") == (set(), set())  # whole tokens only


def test_tag_f1_and_vindr_f1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import radvqa.eval.tags as tags

    m = tags.TagMatcher({"pleural_effusion": ["pleural effusion", "effusion"], "pneumothorax": ["pneumothorax"],
                         "nodule": ["nodule"]}, {"left_lung": ["left lung"], "right_lung": ["right lung"]})
    monkeypatch.setattr(tags, "default_matcher", lambda: m)
    parts = [
        {"part_type": "main", "text": "Left pleural effusion.", "findings": ["pleural_effusion"], "regions": ["left_lung"], "certainty": "present"},
        {"part_type": "details", "text": "No pneumothorax.", "findings": ["pneumothorax"], "regions": [], "certainty": "absent"},
        {"part_type": "related", "text": "Nodule in the right lung.", "findings": ["nodule"], "regions": ["right_lung"], "certainty": "present"},
    ]
    from radvqa.model import AnswerPart

    qas = [
        _qa("m1", question_type="B01_describe_all", question="Describe.", answer="Left pleural effusion. No pneumothorax. Nodule in the right lung.",
            answer_parts=[AnswerPart(**p) for p in parts]),  # type: ignore[arg-type]
        _qa("v1", strategy="vindr", question_type="is_there", question="Is there a nodule?", answer="Yes.", answer_short="yes", findings=["nodule"]),
        _qa("v2", strategy="vindr", question_type="is_there", question="Is there a pneumothorax?", answer="No.", answer_short="no", findings=["pneumothorax"]),
        _qa("v3", strategy="vindr", question_type="what", question="What is seen?", answer="A nodule.", findings=["nodule"], polarity="positive"),
    ]
    write_dataset(tmp_path / "d", qas, "s", [], {})
    pf = tmp_path / "p.jsonl"
    pf.write_text("".join(json.dumps({"qa_id": q, "prediction": t}) + "\n" for q, t in [
        # tags: effusion right, pneumothorax negated (not a tag), nodule missed, left lung right, extra "right lung"? no
        ("m1", "Pleural effusion in the left lung, no pneumothorax."),
        ("v1", "Yes."), ("v2", "Yes."), ("v3", "A nodule and an effusion."),
    ]))
    rep = evaluate(tmp_path / "d", pf, bootstrap=0)
    t = rep["tags"]["multi_part"]
    assert t["questions"] == 1
    # findings: gold {effusion, nodule}, predicted {effusion}: P 1, R 1/2
    assert (t["findings"]["tp"], t["findings"]["fp"], t["findings"]["fn"]) == (1, 0, 1)
    # regions: gold {left_lung, right_lung}, predicted {left_lung}
    assert (t["regions"]["tp"], t["regions"]["fp"], t["regions"]["fn"]) == (1, 0, 1)
    v = rep["tags"]["vindr_f1"]
    # v1 tp nodule; v2 fp pneumothorax; v3 tp nodule + fp effusion -> P 2/4, R 2/2, F1 2/3
    assert (v["tp"], v["fp"], v["fn"]) == (2, 2, 0) and v["f1"] == pytest.approx(2 / 3)


SHORT = [
    # (gold answer_short, question, prediction, correct, status)
    ("left", "Is the lesion on the left or right?", "The lesion is on the left side.", 1.0, "parsed"),
    ("left", "Is the lesion on the left or right?", "Left and right.", 0.0, "unparsed"),
    ("left", "Is the lesion on the left or right?", "Right.", 0.0, "parsed"),
    ("nodule, pleural effusion", "What is seen?", "A pleural effusion and a nodule.", 1.0, "parsed"),
    ("nodule, pleural effusion", "What is seen?", "A nodule.", 0.0, "parsed"),
    ("none", "Where is the nodule?", "There is no nodule.", 1.0, "parsed"),
    ("none", "Where is the nodule?", "Left upper zone.", 0.0, "parsed"),
    ("mri", "What modality?", "This is an MRI scan.", 1.0, "parsed"),
]


@pytest.mark.parametrize("gold,question,pred,correct,status", SHORT)
def test_short_label_scoring(gold: str, question: str, pred: str, correct: float, status: str) -> None:
    from radvqa.eval.predictions import Prediction
    from radvqa.eval.scoring import Scorer

    rows = {"qa_id": ["x"], "answer_short": [gold], "choices": [None], "question_type": ["what"], "question": [question],
            "answer": [gold], "boxes": [[]], "image_ids": [["i"]], "image_paths": [[]]}
    s = Scorer().score(rows, [Prediction(pred)])
    assert (s.kind[0], s.correct[0], s.status[0]) == ("short", correct, status)


def test_null_prediction_keeps_tool_error(tmp_path: Path) -> None:
    write_dataset(tmp_path / "d", [_qa("a", answer_short="yes", answer="Yes.")], "s", [], {})
    (tmp_path / "p.jsonl").write_text('{"qa_id": "a", "prediction": null, "error": "HTTP 500 after 5 retries"}\n')
    rep = evaluate(tmp_path / "d", tmp_path / "p.jsonl", bootstrap=0)
    pf = rep["parse_failures"]["yes_no"]
    assert pf["missing"] == 1 and rep["overall"]["closed"]["correct"] == 0
    assert rep["_per_question"]["scores"].reason[0] == "prediction is null (HTTP 500 after 5 retries)"


def test_compact_columns_keep_values_and_share_strings(tmp_path: Path) -> None:
    """Per-question floats live in 8-byte arrays (None kept as None on read); repeated
    category strings of the QA rows are one shared object; predictions are columns."""
    from radvqa.eval.dataset import interned_pylist
    from radvqa.eval.predictions import PredictionStore
    from radvqa.eval.scoring import FloatColumn, InternedList

    import pyarrow as pa

    col = FloatColumn([0.5, None, 1.0])
    assert list(col) == [0.5, None, 1.0] and col[1] is None and col.numpy()[2] == 1.0 and len(col) == 3
    vals = interned_pylist(pa.chunked_array([["qba", None, "qba"], ["rin", "qba"]]))
    assert vals == ["qba", None, "qba", "rin", "qba"] and vals[0] is vals[2] is vals[4]
    reasons = InternedList()
    for k in range(3):
        reasons.append("".join(["no ", "prediction"]))  # equal strings built apart
    reasons.append(None)
    assert reasons[0] is reasons[2] and reasons[3] is None
    f = tmp_path / "p.jsonl"
    f.write_text('{"qa_id": "a", "prediction": "yes"}\n{"qa_id": "b", "prediction": "x", "boxes": [[1, 2, 3, 4]]}\n')
    p = load_predictions(f)
    assert isinstance(p.by_id, PredictionStore) and p.by_id.extras.keys() == {1}
    j = join(["b", "c", "a"], p)
    assert [None if x is None else x.text for x in j.preds] == ["x", None, "yes"]
    assert j.preds[0].boxes == [[1, 2, 3, 4]] and j.missing_ids == ["c"] and j.preds.texts() == ["x", None, "yes"]


def test_category_columns_read_like_lists(small: tuple[Path, Path]) -> None:
    """load_qa's CatColumns (codes + table) read, slice, take and group like the lists they
    replace; batching the read (batch_size=4 over 15 rows) changes nothing."""
    from collections import defaultdict

    from radvqa.eval.dataset import CatColumn

    root, _ = small
    whole = load_qa(root)
    batched = load_qa(root, batch_size=4)
    for c, col in whole.items():
        assert list(col) == list(batched[c]), c
    st = whole["strategy"]
    assert isinstance(st, CatColumn) and st.codes.dtype.itemsize == 1
    plain = list(st)
    naive: dict[str, list[int]] = defaultdict(list)
    for i, v in enumerate(plain):
        if v:
            naive[v].append(i)
    assert st.groups() == dict(naive)
    assert list(st.take([3, 0])) == [plain[3], plain[0]] and st[1:3] == plain[1:3] and st[2] == plain[2]
