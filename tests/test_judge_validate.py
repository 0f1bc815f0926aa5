"""`radvqa judge validate`: the judge's RadNLI accuracy and ReXVal Kendall tau. No real model can
run here, so the judge is a local OpenAI-compatible HTTP server started by the test (loopback
only) that answers by fixed rules; every expected figure below was worked out by hand from those
rules and the fixtures in tests/data/judge_validation."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import combinations
from pathlib import Path

import pytest
from typer.testing import CliRunner

from radvqa.cli import app
from radvqa.quality.judge_validate import kendall_with_ci, make_judge, read_radnli, read_rexval, validate_radnli, validate_rexval

FIX = Path(__file__).parent / "data" / "judge_validation"
NEG = re.compile(r"\bno\b", re.I)


def _answer(system: str, user: str) -> str:
    if "Candidate report" in user:
        k = int(re.search(r"\[(\d+)\]", user).group(1))
        counts = {c: "0" for c in ("false_finding", "omitted_finding", "wrong_location", "wrong_severity", "false_comparison", "omitted_comparison")}
        counts["false_finding"] = "4+" if k >= 4 else str(k)
        counts["omitted_finding"] = str(k - 4) if k > 4 else "0"
        return json.dumps(counts)
    premise = re.search(r"Sentences cited as the answer's source:\n(.*)\n", user).group(1)
    hyp = re.search(r"Answer: (.*)", user).group(1).strip()
    if "garbled" in hyp:
        return "this is not JSON"
    if premise.strip() == hyp:
        v = "aligned"
    elif bool(NEG.search(premise)) != bool(NEG.search(hyp)):
        v = "contradicting"
    else:
        v = "not_inferable"
    return json.dumps({"entailment": v, "relevance": "relevant", "completeness": "complete",
                       "question_clarity": "clear", "answer_clarity": "clear"})


@pytest.fixture(scope="module")
def server():
    class H(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            msgs = body["messages"]
            content = _answer(msgs[0]["content"], msgs[1]["content"])
            data = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()


def test_radnli_accuracy_and_recall(server, tmp_path):
    j = make_judge(server, "test-judge", "radnli", tmp_path / "cache", max_retries=0)
    r = validate_radnli(j, read_radnli(FIX / "radnli_dev_v1.jsonl"))
    j.close()
    # pairs 1, 2, 6, 7 right; 3, 4, 5 wrong; 8 unjudged (the reply is not JSON, asked twice)
    assert (r["pairs"], r["judged"], r["unjudged"]) == (8, 7, 1)
    assert r["accuracy_over_judged"] == pytest.approx(4 / 7)
    assert r["accuracy_over_all"] == pytest.approx(4 / 8)
    rec = {k: (v["n"], v["recall"]) for k, v in r["per_class_recall"].items()}
    assert rec == {"entailment": (3, pytest.approx(1 / 3)), "neutral": (2, 0.5), "contradiction": (2, 1.0)}


def _tau_b_by_hand(x, y):
    c = d = tx = ty = 0
    for (a, b), (p, q) in combinations(list(zip(x, y)), 2):
        s = (a - p) * (b - q)
        if a == p and b == q:
            continue
        if a == p:
            tx += 1
        elif b == q:
            ty += 1
        elif s > 0:
            c += 1
        else:
            d += 1
    return (c - d) / (((c + d + tx) * (c + d + ty)) ** 0.5)


def test_kendall_matches_hand_count():
    assert kendall_with_ci([1, 2, 3, 4], [1, 3, 2, 4], boot=0)["tau_b"] == pytest.approx(4 / 6)  # 5 concordant, 1 discordant
    x, y = [0, 1, 2, 2, 3, 5], [0, 2, 1, 2, 3, 3]
    assert kendall_with_ci(x, y, boot=0)["tau_b"] == pytest.approx(_tau_b_by_hand(x, y))


def test_rexval_tau(server, tmp_path):
    j = make_judge(server, "test-judge", "rexval", tmp_path / "cache", max_retries=0)
    items = read_rexval(FIX / "rexval")
    assert len(items) == 12 and [it.raters for it in items[:4]] == [0, 1, 2, 3]
    r = validate_rexval(j, items, boot=200)
    assert (r["judged"], r["tau_b"]) == (12, pytest.approx(1.0))  # the judge's totals equal the raters' means
    sig = read_rexval(FIX / "rexval", significant_only=True)
    r2 = validate_rexval(j, sig, boot=200)
    j.close()
    judge_totals = [0, 1, 2, 3, 1, 0, 4, 2, 0, 2, 1, 5]
    assert r2["tau_b"] == pytest.approx(_tau_b_by_hand(judge_totals, [it.raters for it in sig]))
    assert r2["ci95"][0] <= r2["tau_b"] <= r2["ci95"][1]


def test_cli(server, tmp_path):
    out = tmp_path / "v.json"
    r = CliRunner().invoke(app, ["judge", "validate", "--judge-url", server, "--judge-model", "m", "--radnli", str(FIX / "radnli_dev_v1.jsonl"),
                                 "--rexval", str(FIX / "rexval"), "--cache-dir", str(tmp_path / "c"), "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert "RadNLI: accuracy 57.1% of 7 judged" in r.output and "ReXVal: Kendall tau-b 1.0" in r.output
    assert json.loads(out.read_text())["rexval"]["judged"] == 12
    r = CliRunner().invoke(app, ["judge", "validate", "--judge-url", server, "--judge-model", "m"])
    assert r.exit_code == 2
