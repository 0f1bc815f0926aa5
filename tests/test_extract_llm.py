"""LLM backend against a real local HTTP server on loopback (127.0.0.1) (http.server in a thread, real sockets) that
returns canned chat-completions answers and records the requests it got."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from radvqa.extract import get_extractor
from radvqa.extract.llm import PROMPT_VERSION
from radvqa.ontology import load_ontology

REPORT = "INDICATION: cough, evaluate for pneumonia.\nFINDINGS: Right basilar atelectasis. No pneumothorax."


class _Server:
    def __init__(self, answers):  # answers: list of (status, content or None) served in order, last repeats
        self.answers = list(answers)
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):  # keep test output clean
                pass

            def do_POST(self):  # noqa: N802
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n))
                with outer.lock:
                    outer.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                    status, content = outer.answers.pop(0) if len(outer.answers) > 1 else outer.answers[0]
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                payload = json.dumps({"id": "x", "object": "chat.completion",
                                      "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}).encode()
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


GOOD = json.dumps({
    "observations": [
        {"finding": "atelectasis", "certainty": "present", "laterality": "right", "regions": [], "severity": None,
         "size_mm": None, "change": None, "evidence": "Right basilar atelectasis"},
        {"finding": "pneumothorax", "certainty": "absent", "laterality": None, "regions": [], "severity": None,
         "size_mm": None, "change": None, "evidence": "No pneumothorax"},
    ],
    "indication_evaluate": ["pneumonia"],
})


@pytest.fixture(scope="module")
def onto():
    return load_ontology()


def test_llm_backend_fills_the_scene_graph_and_sends_a_json_schema_request(onto, tmp_path):
    with _Server([(200, GOOD)]) as srv:
        ex = get_extractor("llm", ontology=onto, url=srv.url, model="m1", api_key="k", cache_dir=tmp_path)
        res = ex.extract(REPORT, "s1")
    assert res.error is None
    assert [(o.finding, o.certainty, o.laterality) for o in res.observations] == [
        ("atelectasis", "present", "right"), ("pneumothorax", "absent", None)]
    ev = res.observations[0].evidence[0]
    assert REPORT[ev.start:ev.end] == "Right basilar atelectasis" and ev.sentence_id is not None
    assert res.indication is not None and res.indication.evaluate == ["pneumonia"]
    assert res.extractor.startswith("llm:m1:")
    req = srv.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["auth"] == "Bearer k"
    assert req["body"]["model"] == "m1"
    rf = req["body"]["response_format"]
    assert rf["type"] == "json_schema"
    assert "atelectasis" in rf["json_schema"]["schema"]["properties"]["observations"]["items"]["properties"]["finding"]["enum"]
    assert REPORT in req["body"]["messages"][-1]["content"]


def test_cache_hit_makes_no_request(onto, tmp_path):
    with _Server([(200, GOOD)]) as srv:
        ex = get_extractor("llm", ontology=onto, url=srv.url, model="m1", cache_dir=tmp_path)
        a = ex.extract(REPORT, "s1")
        b = ex.extract(REPORT, "s1")
        assert len(srv.requests) == 1
        # another model is another cache key
        ex2 = get_extractor("llm", ontology=onto, url=srv.url, model="m2", cache_dir=tmp_path)
        ex2.extract(REPORT, "s1")
        assert len(srv.requests) == 2
    assert a.observations == b.observations


def test_invalid_json_is_retried_then_reported_not_dropped(onto):
    with _Server([(200, "not json"), (200, GOOD)]) as srv:
        ex = get_extractor("llm", ontology=onto, url=srv.url, model="m", backoff=0.0, retries=3)
        ok = ex.extract(REPORT, "s1")
        assert ok.error is None and len(srv.requests) == 2
    with _Server([(200, '{"observations": [{"finding": "not_a_finding"}]}')]) as srv:
        ex = get_extractor("llm", ontology=onto, url=srv.url, model="m", backoff=0.0, retries=2)
        bad = list(ex.extract_many([("a", REPORT), ("b", REPORT + " ")]))
        assert len(srv.requests) == 4  # two reports x two attempts
    assert [b.error is not None for b in bad] == [True, True]
    assert "invalid JSON" in bad[0].error and "2 attempt" in bad[0].error


def test_server_errors_are_retried_with_backoff(onto):
    with _Server([(503, GOOD), (500, GOOD), (200, GOOD)]) as srv:
        ex = get_extractor("llm", ontology=onto, url=srv.url, model="m", backoff=0.01, retries=3)
        res = ex.extract(REPORT, "s1")
    assert res.error is None and len(srv.requests) == 3


def test_unreachable_server_and_bad_text_give_errors(onto):
    ex = get_extractor("llm", ontology=onto, url="http://127.0.0.1:9/v1", model="m", backoff=0.0, retries=1, timeout=2)
    res = ex.extract(REPORT, "s1")
    assert res.error is not None and "cannot reach" in res.error
    assert ex.extract("   ", "s2").error is not None


def test_many_reports_in_order_with_concurrency(onto):
    with _Server([(200, GOOD)]) as srv:
        ex = get_extractor("llm", ontology=onto, url=srv.url, model="m", concurrency=4)
        texts = [(f"s{i}", REPORT + f" Note {i}.") for i in range(12)]
        out = list(ex.extract_many(texts, batch_size=5))
    assert len(out) == 12 and len(srv.requests) == 12
    assert [o.report.text for o in out] == [t for _, t in texts]


def test_extract_cli_with_llm_backend(tmp_path):
    import csv

    from typer.testing import CliRunner

    from radvqa.cli import app
    from radvqa.model import SceneGraph, from_json

    src = tmp_path / "r.csv"
    with src.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "text"])
        w.writerow(["a", REPORT])
        w.writerow(["b", ""])
    out = tmp_path / "o.jsonl"
    with _Server([(200, GOOD)]) as srv:
        res = CliRunner().invoke(app, ["extract", str(src), "--out", str(out), "--extractor", "llm", "--llm-url", srv.url,
                                       "--llm-model", "m", "--cache-dir", str(tmp_path / "cache")])
    assert res.exit_code == 0, res.output
    graphs = [from_json(x, SceneGraph) for x in out.read_bytes().splitlines()]
    assert [g.study_id for g in graphs] == ["a"] and graphs[0].extractor == f"llm:m:{PROMPT_VERSION}"
    assert "empty" in (tmp_path / "o.jsonl.rejected.jsonl").read_text()
    res = CliRunner().invoke(app, ["extract", str(src), "--out", str(out), "--extractor", "llm"])
    assert res.exit_code != 0 and "--llm-url" in res.output


QUALIFIED = json.dumps({
    "observations": [
        {"finding": "pneumothorax", "certainty": "absent", "laterality": None, "regions": [], "severity": None,
         "size_mm": None, "change": None, "temporal": None, "qualifier": None, "evidence": "No pneumothorax"},
        # a model that puts "absent" beside a qualifier: a qualified negative is uncertain
        {"finding": "pleural_effusion", "certainty": "absent", "laterality": None, "regions": [], "severity": None,
         "size_mm": None, "change": None, "temporal": None, "qualifier": "large", "evidence": "large pleural effusion"},
    ],
    "indication_evaluate": [],
})


def test_llm_schema_and_prompt_carry_the_conventions_and_the_qualifier(onto):
    from radvqa.extract.llm import PROMPT_VERSION, SYSTEM_PROMPT

    text = "FINDINGS: No pneumothorax or large pleural effusion."
    with _Server([(200, QUALIFIED)]) as srv:
        res = get_extractor("llm", ontology=onto, url=srv.url, model="m").extract(text, "s")
    items = srv.requests[0]["body"]["response_format"]["json_schema"]["schema"]["properties"]["observations"]["items"]
    assert "qualifier" in items["required"] and "temporal" in items["required"]
    assert PROMPT_VERSION != "1" and res.extractor.endswith(":" + PROMPT_VERSION)
    for rule in ("X or Y", "qualifier", "rule out X", "bibasilar", "tracheostomy tube"):
        assert rule in SYSTEM_PROMPT
    got = {o.finding: (o.certainty, o.qualifier) for o in res.observations}
    assert got == {"pneumothorax": ("absent", None), "pleural_effusion": ("uncertain", "large")}
