"""CXReasonBench: import of the hand-made fixture (tests/data/cxreasonbench, invented values in the
release's layout), the Wilson maths against hand-computed values, and `radvqa eval`'s
stage-conditional figures on predictions whose outcome per turn is fixed below, with the open
turns judged by a local OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pyarrow.parquet as pq
import pytest

from radvqa.eval.cxreasonbench import (case_stages, gold_letters, import_cxreasonbench, parse_options, task_metrics,
                                       turn_outcome, upper_options, wilson)
from radvqa.eval.evaluate import evaluate
from radvqa.eval.judge import Judge, JudgeConfig
from radvqa.eval.parsers import Parser
from radvqa.eval.report import write_report

FIX = Path(__file__).parent / "data" / "cxreasonbench" / "CXReasonBench"


# --- Wilson maths (hand values: p = k/n, centre = (p + z²/2n) / (1 + z²/n), half width
# h = z sqrt(p(1-p)/n + z²/4n²) / (1 + z²/n), z = 1.96) ---------------------------------------------

def test_wilson_against_hand_values() -> None:
    w = wilson(2, 4)
    # 2/4: centre 0.9802 / 1.9604 = 0.5; h = 1.96 * sqrt(0.0625 + 0.060025) / 1.9604 = 0.349964
    assert w["naive"] == 0.5
    assert w["wilson_centre"] == pytest.approx(0.5, abs=1e-9)
    assert (w["lower"], w["upper"]) == (pytest.approx(0.150036, abs=1e-6), pytest.approx(0.849964, abs=1e-6))
    assert w["adjusted_wilson"] == pytest.approx(0.5 * (1 - 0.349964), abs=1e-6)  # 0.325018
    assert w["adjusted_wilson_csv"] == pytest.approx(0.5 - 1.96 * 0.349964, abs=1e-5)  # -0.18593
    w = wilson(1, 3)
    # 1/3: centre 0.973603 / 2.280533 = 0.426918; h = 1.96 * sqrt(0.074074 + 0.106711) / 2.280533 = 0.365428
    assert w["wilson_centre"] == pytest.approx(0.426918, abs=1e-6)
    assert (w["lower"], w["upper"]) == (pytest.approx(0.061490, abs=1e-6), pytest.approx(0.792345, abs=1e-6))
    assert w["adjusted_wilson"] == pytest.approx(0.270910, abs=1e-6)
    w = wilson(5, 5)
    assert w["upper"] == pytest.approx(1.0) and w["naive"] == 1.0 and w["adjusted_wilson"] < 1.0
    assert wilson(0, 5)["adjusted_wilson"] == 0.0  # the authors print 0 when nothing is right
    assert wilson(0, 0) is None


def test_options_and_letters() -> None:
    q = upper_options("Is it? (a) Yes (b) No, not at all (c) I don't know")
    assert q == "Is it? (A) Yes (B) No, not at all (C) I don't know"
    assert parse_options(q) == ["Yes", "No, not at all", "I don't know"]
    assert parse_options("Pick (A) one (C) two") is None  # letters not A, B, ...
    assert upper_options("rib(s) seen (a) x") == "rib(s) seen (A) x"
    assert gold_letters("(B) 2nd image, (D) 4th image") == ["B", "D"] and gold_letters("(c)") == ["C"]


def test_stage_gating_and_custom_idk() -> None:
    # init answered (even wrongly) opens the path; a failed part closes the stage and what follows
    assert case_stages([("init", 0), ("criteria", 1), ("criteria", 0), ("bodypart", 1), ("final", 1)]) == \
        {"init": 0, "criteria": 0, "bodypart": 0, "final": 0}
    assert case_stages([("init", -1), ("criteria", 1)]) == {"init": -1, "criteria": 0}
    assert case_stages([("init", 1), ("criteria", 1), ("custom_criteria", 0), ("bodypart", 1)]) == \
        {"init": 1, "criteria": 1, "custom_criteria": -1, "bodypart": 0}
    p = Parser()
    meta = {"stage": "init", "scoring": "choice", "idk": "C", "gold": "A", "options": {}}
    assert turn_outcome(meta, 0.0, None, "Honestly, I do not know.", p) == -1
    assert turn_outcome(meta, 0.0, "C", "(C)", p) == -1
    assert turn_outcome(meta, 0.0, "B", "(B) No", p) == 0
    anyof = {"stage": "final", "scoring": "any_of", "gold": "A,B", "options": {"A": "Yes, small", "B": "Yes, large", "C": "No"}}
    assert turn_outcome(anyof, None, None, "FINAL ANSWER: (B) Yes, large", p) == 1
    assert turn_outcome(anyof, None, None, "(C) No", p) == 0
    assert turn_outcome(anyof, None, None, "(A) or (B)", p) == 0  # ambiguous: one option must be chosen


def test_task_metrics_hand_case() -> None:
    # no custom criteria: 4 cases past init, 1 IDK
    cases = [{"init": 1, "criteria": 1, "bodypart": 1, "measurement": 1, "final": 1},
             {"init": 0, "criteria": 1, "bodypart": 1, "measurement": 0, "final": 0},
             {"init": -1, "criteria": 0, "bodypart": 0, "measurement": 0, "final": 0},
             {"init": 1, "criteria": 0, "bodypart": 0, "measurement": 0, "final": 0},
             {"init": 0, "criteria": 1, "bodypart": 1, "measurement": 1, "final": 1}]
    m = task_metrics(cases)
    s = m["stages"]
    assert (m["idk_init"], m["pass_init"]) == (1, 4)
    assert [(s[k]["correct"], s[k]["trials"]) for k in ("criteria", "bodypart", "measurement", "final", "binary", "consistency")] == \
        [(3, 4), (3, 3), (2, 3), (2, 2), (2, 4), (1, 2)]
    assert m["stage_score"] == pytest.approx((4 + 2 + 0 + 4) / 4)
    assert m["furthest_stage_counts"] == {"0": 1, "1": 0, "2": 1, "3": 0, "4": 2}


# --- import --------------------------------------------------------------------------------------

def _rows(d: Path) -> list[dict[str, Any]]:
    return pq.read_table(d / "qa").to_pylist()


def test_import_fixture(tmp_path: Path) -> None:
    m = import_cxreasonbench(FIX, tmp_path / "d")
    c = m["counts"]
    # cardiomegaly 5 cases x 6 turns, inspiration 4 x 7; d6 (no stage3) and d3's path2 / re-path1 rejected
    assert (c["qa"], c["rejected"]) == (58, 3)
    assert (c["closed"], c["open"]) == (50, 8)
    assert m["cxreasonbench"] == {"cases": 9, "turns_by_scoring": {"choice": 50, "any_of": 4, "judge": 4},
                                  "cases_by_task": {"cardiomegaly": 5, "inspiration": 4}}
    assert json.loads((tmp_path / "d" / "manifest.json").read_text())["cxreasonbench"]["cases"] == 9
    rej = [json.loads(x) for x in (tmp_path / "d" / "rejected.jsonl").read_text().splitlines()]
    assert [r["ref"] for r in rej] == ["cardiomegaly/d6", "cardiomegaly/d3/path2", "cardiomegaly/d3/re-path1"]
    assert rej[0]["reason"] == "no path1/stage3 question file" and "model-adaptive" in rej[1]["reason"]
    rows = {r["qa_id"]: r for r in _rows(tmp_path / "d")}
    init = rows["cxreasonbench:cardiomegaly:d1:init"]
    assert init["question"] == "Is cardiomegaly present on this chest X-ray? (A) Yes (B) No (C) I don't know"
    assert (init["answer_short"], init["choices"], init["image_paths"]) == ("A", ["Yes", "No", "I don't know"], ["p10/p100001/s50000001/d1.jpg"])
    body = rows["cxreasonbench:cardiomegaly:d1:bodypart"]
    assert body["image_paths"][0] == "p10/p100001/s50000001/d1.jpg" and len(body["image_paths"]) == 5
    assert body["image_paths"][1] == "segmask_bodypart/cardiomegaly/d1/opt_1.png"
    # earlier turns (reference answers) come first, in the protocol's order
    q = body["question"]
    assert q.index("A: (A) Yes") < q.index("A: (A) Cardiothoracic ratio") < q.index("A: (A) Greater than 0.5") < q.index("Current question:")
    assert q.endswith("Which image shows the heart? (A) 1st image (B) 2nd image (C) 3rd image (D) 4th image")
    assert "images 2 to 5" in q
    two = rows["cxreasonbench:inspiration:e1:bodypart:1"]
    assert two["answer_short"] is None and "scoring=judge" in two["provenance"] and "gold=B,D" in two["provenance"]
    fin = rows["cxreasonbench:inspiration:e1:final"]
    assert "scoring=any_of" in fin["provenance"] and fin["answer_short"] is None
    assert [r["question_type"] for r in _rows(tmp_path / "d")[:6]] == ["init", "criteria", "criteria", "bodypart", "measurement", "final"]


def test_import_from_zip_is_the_same(tmp_path: Path) -> None:
    base = tmp_path / "CXReasonBench"
    base.mkdir()
    (base / "dx_by_dicoms.json").write_bytes((FIX / "dx_by_dicoms.json").read_bytes())
    with zipfile.ZipFile(base / "qa.zip", "w") as z:
        for f in sorted((FIX / "qa").rglob("*.json")):
            z.write(f, "qa/" + f.relative_to(FIX / "qa").as_posix())
    import_cxreasonbench(base, tmp_path / "z")
    import_cxreasonbench(FIX, tmp_path / "d")
    assert _rows(tmp_path / "z") == _rows(tmp_path / "d")


def test_bad_cases_are_rejected_with_reasons(tmp_path: Path) -> None:
    import shutil

    base = tmp_path / "CXReasonBench"
    shutil.copytree(FIX, base)
    qa = base / "qa" / "cardiomegaly" / "path1"
    (qa / "init" / "basic" / "d9.json").write_text('{"question": "Q? (a) Yes (b) No", "answer": "(a) Yes", "img_path": ["x.jpg"]}')
    (qa / "stage3" / "basic" / "d2.json").write_text("{not json")
    (qa / "stage1" / "ctr" / "d4.json").write_text('{"question": ["a? (a) x (b) y", "b? (a) x (b) y"], "answer": ["(a) x"], "img_path": []}')
    m = import_cxreasonbench(base, tmp_path / "d")
    rej = {r["ref"]: r["reason"] for r in map(json.loads, (tmp_path / "d" / "rejected.jsonl").read_text().splitlines())}
    assert rej["cardiomegaly/d9"] == "path-1 questions of a case not in dx_by_dicoms.json"
    assert rej["cardiomegaly/d2"].startswith("path1/stage3: ") and rej["cardiomegaly/d4"] == "path1/stage1: 2 questions but 1 answers"
    assert m["counts"]["qa"] == 58 - 12 and m["counts"]["rejected"] == 3 + 3


def test_import_errors(tmp_path: Path) -> None:
    from radvqa.eval.importers import ImportError_

    with pytest.raises(ImportError_, match="no CXReasonBench questions"):
        import_cxreasonbench(tmp_path, tmp_path / "o")


# --- eval ----------------------------------------------------------------------------------------

class _Judge(BaseHTTPRequestHandler):
    def log_message(self, *a: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cand = body["messages"][1]["content"].split("Candidate answer:")[1].strip()
        verdict = "correct" if "2nd and 4th" in cand else "incorrect"
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": f'{{"verdict": "{verdict}"}}'}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def judge_url() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Judge)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


RIGHT = {  # a right answer per (task, turn), in the models' own styles
    ("cardiomegaly", "init"): None, ("cardiomegaly", "criteria:0"): "FINAL ANSWER: (A) Cardiothoracic ratio",
    ("cardiomegaly", "criteria:1"): "A", ("cardiomegaly", "bodypart"): "FINAL ANSWER: (B) 2nd image",
    ("cardiomegaly", "measurement"): "The ratio is (C) 0.58.", ("cardiomegaly", "final"): None,
    ("inspiration", "init"): "(A) Yes", ("inspiration", "criteria"): "Posterior ribs",
    ("inspiration", "custom_criteria"): "(A) 9 ribs", ("inspiration", "bodypart:0"): "(A) 1st image",
    ("inspiration", "bodypart:1"): "The 2nd and 4th images.", ("inspiration", "measurement"): "C",
    ("inspiration", "final"): "FINAL ANSWER: (B) Yes, well above the threshold",
}
INIT = {"d1": "FINAL ANSWER: (A) Yes", "d2": "B", "d3": "FINAL ANSWER: (C)", "d4": "(B) No", "d5": "(B) No"}
FINAL = {"d1": "(A) Yes", "d2": "(A) Yes", "d3": "(B) No", "d4": "(B) No", "d5": "(A) Yes"}
WRONG = {  # (case, turn) -> a wrong answer; everything else right
    ("d2", "measurement"): "(A) 0.38",   # d2: fails measurement (its right final is never reached)
    ("d4", "criteria:1"): "(B) Greater than 0.7",  # d4: fails the second criteria part
    ("e2", "custom_criteria"): "(B) 6 ribs",  # e2: custom criteria wrong -> "I don't know", leaves the case
    ("e3", "criteria"): "(B) Vertebrae",  # e3: fails criteria
    ("e4", "bodypart:1"): "Only the 1st image.",  # e4: judged incorrect
}


def _predictions(d: Path, out: Path) -> None:
    lines = []
    for r in _rows(d):
        _, task, case, *turn = r["qa_id"].split(":")
        t = ":".join(turn)
        if (case, t) in WRONG:
            text = WRONG[(case, t)]
        elif t == "init" and task == "cardiomegaly":
            text = INIT[case]
        elif t == "final" and task == "cardiomegaly":
            text = FINAL[case]
        else:
            text = RIGHT[(task, t)]
        lines.append(json.dumps({"qa_id": r["qa_id"], "prediction": text}))
    out.write_text("\n".join(lines) + "\n")


def test_eval_stage_conditional(tmp_path: Path, judge_url: str) -> None:
    d = tmp_path / "d"
    import_cxreasonbench(FIX, d)
    pf = tmp_path / "p.jsonl"
    _predictions(d, pf)
    judge = Judge(JudgeConfig(url=judge_url, model="m", cache_dir=str(tmp_path / "cache")))
    rep = evaluate(d, pf, judge=judge, bootstrap=0, audit=False)
    judge.close()
    cb = rep["cxreasonbench"]
    assert (cb["cases"], cb["turns"], cb["open_turns"], cb["open_turns_unjudged"]) == (9, 58, 4, 0)
    cm, ins = cb["tasks"]["cardiomegaly"], cb["tasks"]["inspiration"]

    def ct(t: dict[str, Any]) -> list[tuple[int, int]]:
        return [(t["stages"][k]["correct"], t["stages"][k]["trials"]) for k in
                ("criteria", "bodypart", "measurement", "final", "binary", "consistency")]

    # cardiomegaly: d3 IDK at init; d1, d5 reach final (level 4), d2 fails measurement (2), d4 criteria (0);
    # consistency: final right with the init diagnosis right = d1 only, over 2 measurement passes
    assert (cm["cases"], cm["idk_init"], cm["pass_init"]) == (5, 1, 4)
    assert ct(cm) == [(3, 4), (3, 3), (2, 3), (2, 2), (2, 4), (1, 2)]
    assert cm["stage_score"] == pytest.approx(10 / 4)
    assert cm["stages"]["binary"]["adjusted_wilson"] == pytest.approx(0.325018, abs=1e-6)
    # inspiration (custom criteria): e2 leaves at custom (IDK); body part 1/2 (e4's judged part wrong);
    # binary over pass_custom (2) + failed criteria (1) = 3; levels e1 4, e4 1, e3 0
    assert (ins["idk_init"], ins["idk_custom"], ins["scored_cases"]) == (0, 1, 3)
    assert ct(ins) == [(3, 4), (1, 2), (1, 1), (1, 1), (1, 3), (1, 1)]
    assert ins["stage_score"] == pytest.approx(5 / 3)
    assert ins["stages"]["binary"]["adjusted_wilson"] == pytest.approx(0.270910, abs=1e-6)
    tot = cb["total"]
    assert tot["tasks"] == 2
    assert tot["binary_naive"] == pytest.approx((2 / 4 + 1 / 3) / 2)
    assert tot["binary_adjusted_wilson"] == pytest.approx((0.325018 + 0.270910) / 2, abs=1e-6)
    assert tot["stage_score"] == pytest.approx((10 / 4 + 5 / 3) / 2)
    assert cb["perception"]["tasks"] == 1 and cb["measurement"]["tasks"] == 1
    assert cb["perception"]["stage_score"] == pytest.approx(5 / 3)
    paths = write_report(rep, tmp_path / "r", plots=False)
    md = paths["report.md"].read_text()
    assert "## CXReasonBench (stage-conditional)" in md and "| 50.0 / 32.5 (2/4) |" in md


def test_eval_without_judge_counts_open_turns_as_failed(tmp_path: Path) -> None:
    d = tmp_path / "d"
    import_cxreasonbench(FIX, d)
    pf = tmp_path / "p.jsonl"
    _predictions(d, pf)
    cb = evaluate(d, pf, bootstrap=0, audit=False)["cxreasonbench"]
    assert (cb["open_turns"], cb["open_turns_unjudged"]) == (4, 4) and "no --judge-url" in cb["open_note"]
    ins = cb["tasks"]["inspiration"]
    assert (ins["stages"]["bodypart"]["correct"], ins["stages"]["bodypart"]["trials"]) == (0, 2)
    assert ins["stages"]["final"] is None and ins["stage_score"] == pytest.approx(2 / 3)


def test_cli_import_and_eval(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from radvqa.cli import app

    r = CliRunner().invoke(app, ["import", "cxreasonbench", str(FIX), "--out", str(tmp_path / "d")])
    assert r.exit_code == 0, r.output
    assert "9 cases, 58 turns (50 one-option, 4 any-of-several, 4 for the judge), 3 rejected" in r.output
    pf = tmp_path / "p.jsonl"
    _predictions(tmp_path / "d", pf)
    r = CliRunner().invoke(app, ["eval", str(tmp_path / "d"), "-p", str(pf), "-o", str(tmp_path / "r"), "--no-plots", "--no-audit"])
    assert r.exit_code == 0, r.output
    # without a judge e1's judged body part is not passed: binary = (2/4 + 0/3) / 2 (naive); stage score (2.5 + 2/3) / 2
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert metrics["cxreasonbench_stage_score"] == pytest.approx((2.5 + 2 / 3) / 2)
    assert metrics["cxreasonbench_binary_adjusted_wilson"] == pytest.approx((0.325018 + 0.0) / 2, abs=1e-6)
    r = CliRunner().invoke(app, ["import", "cxreasonbench", str(tmp_path / "nothing"), "--out", str(tmp_path / "x")])
    assert r.exit_code == 1 and "not found" in r.output
