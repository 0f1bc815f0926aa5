"""The judge protocol against a real local HTTP server on loopback (127.0.0.1) (sockets, http.server in a thread):
request shape (model, temperature 0, versioned prompt), verdict parsing, retries on 500,
failures counted as unjudged, and the on-disk cache (a rerun sends no request)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest

from radvqa.eval.evaluate import evaluate
from radvqa.eval.importers import write_dataset
from radvqa.eval.judge import Judge, JudgeConfig, load_prompt
from radvqa.model import QA


class _Handler(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]] = []
    fail_once: set[str] = set()

    def log_message(self, *a: Any) -> None:  # keep test output quiet
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Handler.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
        user = body["messages"][1]["content"]
        cand = user.split("Candidate answer:")[1].strip()
        if cand.startswith("flaky") and cand not in _Handler.fail_once:
            _Handler.fail_once.add(cand)
            self.send_response(500)
            self.end_headers()
            return
        if cand.startswith("broken"):
            self.send_response(400)
            self.end_headers()
            return
        if cand.startswith("garbage"):
            content = "I think it is fine."
        elif "effusion" in cand:
            content = '{"verdict": "correct"}'
        elif "maybe" in cand:
            content = '{"verdict": "partially_correct"}'
        else:
            content = '{"verdict": "incorrect"}'
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def server() -> Iterator[str]:
    _Handler.requests = []
    _Handler.fail_once = set()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def test_judge_verdicts_cache_and_failures(server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_KEY", "secret-token")
    cfg = JudgeConfig(url=server, model="judge-m", api_key_env="JUDGE_KEY", cache_dir=str(tmp_path), retries=2, concurrency=2)
    j = Judge(cfg)
    items = [
        ("Describe.", "Left pleural effusion.", "left effusion"),
        ("Describe.", "Left pleural effusion.", "maybe something"),
        ("Describe.", "Left pleural effusion.", "a fracture"),
        ("Describe.", "Left pleural effusion.", "flaky effusion"),  # 500 once, then answered
        ("Describe.", "Left pleural effusion.", "garbage reply"),  # no verdict -> unjudged
        ("Describe.", "Left pleural effusion.", "broken request"),  # 400 -> unjudged, no retry
        ("Describe.", "Left pleural effusion.", None),  # missing prediction -> unjudged, no request
    ]
    v = j.judge_many(items)
    assert [x.score for x in v] == [1.0, 0.5, 0.0, 1.0, None, None, None]
    assert v[4].error.startswith("no valid verdict") and v[5].error.startswith("HTTP 400") and v[6].error == "no prediction"
    reqs = _Handler.requests
    assert len(reqs) == 7  # 6 candidates + 1 retry of the 500
    body = reqs[0]["body"]
    assert reqs[0]["path"] == "/v1/chat/completions" and body["model"] == "judge-m" and body["temperature"] == 0
    assert body["messages"][0]["content"] == load_prompt()["system"]
    assert reqs[0]["auth"] == "Bearer secret-token"
    # rerun: judged items come from the cache, failures are asked again
    j2 = Judge(cfg)
    v2 = j2.judge_many(items)
    assert [x.score for x in v2] == [1.0, 0.5, 0.0, 1.0, None, None, None]
    assert all(x.cached for x in v2[:4]) and len(_Handler.requests) == 9
    j.close()
    j2.close()


def test_eval_with_judge(server: str, tmp_path: Path) -> None:
    qas = [
        QA(qa_id=f"q{i}", source="s", split="test", patient_id="p", study_id="s", strategy="qba", question_type="B01",
           template_id="t", template_version=1, question="Describe the study.", answer="Left pleural effusion.")
        for i in range(3)
    ]
    write_dataset(tmp_path / "d", qas, "s", [], {})
    pf = tmp_path / "p.jsonl"
    pf.write_text("\n".join(json.dumps({"qa_id": q, "prediction": t}) for q, t in [("q0", "effusion on the left"), ("q1", "garbage")]) + "\n")
    judge = Judge(JudgeConfig(url=server, model="m", cache_dir=str(tmp_path / "cache")))
    rep = evaluate(tmp_path / "d", pf, judge=judge, bootstrap=0)
    judge.close()
    jr = rep["judge"]
    assert (jr["questions"], jr["judged"], jr["unjudged"]) == (3, 1, 2)
    assert jr["unjudged_reasons"] == {"no prediction": 1, "no valid verdict in reply: 'I think it is fine.'": 1}
    assert jr["score_over_judged"] == 1.0 and jr["score_over_all"] == pytest.approx(1 / 3) and jr["prompt_version"] == 1
