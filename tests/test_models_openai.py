"""radvqa predict with the openai adapter against a real local HTTP server on loopback (127.0.0.1) (sockets, threads)."""

from __future__ import annotations

import base64
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from radvqa.models.base import AdapterError
from radvqa.models.images import ImagePrep
from radvqa.models.predict import PredictError, PredictOptions, Predictor, read_done
from radvqa.models.registry import get_adapter

DATA = Path(__file__).parent / "data" / "models" / "vqa20"
N_ROWS = 20
N_MISSING = 1  # rows whose image is absent on purpose


class FakeServer:
    """OpenAI-compatible /v1/chat/completions. `script` is a list of (status, headers) served
    before normal answers, to inject failures."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.script: list[tuple[int, dict[str, str]]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:  # keep pytest output clean
                pass

            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n))
                with outer.lock:
                    outer.requests.append(body)
                    outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                    failure = outer.script.pop(0) if outer.script else None
                if self.path != "/v1/chat/completions":
                    self.send_response(404)
                    self.end_headers()
                    return
                if failure:
                    status, hdrs = failure
                    self.send_response(status)
                    for k, v in hdrs.items():
                        self.send_header(k, v)
                    msg = b'{"error": "injected"}'
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    self.wfile.write(msg)
                    return
                text = outer.answer(body)
                out = json.dumps({
                    "id": "x", "object": "chat.completion", "model": body["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 3},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @staticmethod
    def answer(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"][-1]["text"]
        if "letter of the correct option" in prompt:
            return "B"
        if "bounding box" in prompt:
            # a box in the pixels of the image as shown (the prompt states its size)
            return "The finding is in the upper right.\n[100, 50, 200, 150]"
        if prompt.startswith(("Is", "Do", "is", "Are")):
            return "Yes, it is present."
        return "A short answer."

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


def make(server: FakeServer, tmp_path: Path, **kw: Any) -> Predictor:
    adapter = get_adapter("openai:test-vlm", base_url=server.url, backoff_base_s=0.001,
                          max_retries=kw.pop("max_retries", 4), timeout_s=10)
    opts = PredictOptions(cache_dir=str(tmp_path / "cache"), progress=False,
                          prep=kw.pop("prep", ImagePrep(max_side=224)), **kw)
    return Predictor(adapter, opts)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_requests_carry_model_prompt_and_image_data_urls(server, tmp_path):
    out = tmp_path / "p.jsonl"
    s = make(server, tmp_path, concurrency=3).run(DATA, out)
    assert s.written == N_ROWS and s.requests == N_ROWS - N_MISSING
    assert len(server.requests) == N_ROWS - N_MISSING
    for body in server.requests:
        assert body["model"] == "test-vlm" and body["temperature"] == 0
        user = body["messages"][-1]["content"]
        urls = [p["image_url"]["url"] for p in user if p["type"] == "image_url"]
        assert urls and all(re.match(r"data:image/(png|jpeg);base64,", u) for u in urls)
        raw = base64.b64decode(urls[0].split(",", 1)[1])
        assert raw[:2] == b"\xff\xd8" or raw[:4] == b"\x89PNG"  # a real image, decodable bytes
        assert body["messages"][0]["role"] == "system"
    prompts = [b["messages"][-1]["content"][-1]["text"] for b in server.requests]
    assert any("Is there a widened mediastinum?" in p and '"yes" or "no"' in p for p in prompts)
    mc = [p for p in prompts if "Options:" in p]
    assert len(mc) == 1 and "B. Mass" in mc[0]
    two = [b for b in server.requests if sum(p["type"] == "image_url" for p in b["messages"][-1]["content"]) == 2]
    assert len(two) == 1 and "prior study" in two[0]["messages"][-1]["content"][-1]["text"]
    # output: one line per row, dataset order, missing image reported, not skipped
    import pyarrow.parquet as pq
    ids = pq.read_table(DATA / "qa").column("qa_id").to_pylist()
    got = lines(out)
    assert [g["qa_id"] for g in got] == ids
    missing = [g for g in got if g.get("error")]
    assert len(missing) == 1 and "image not found: vqa-rad/does-not-exist.jpg" in missing[0]["error"]
    assert missing[0]["prediction"] is None
    meta = json.loads((tmp_path / "p.jsonl.meta.json").read_text())
    assert meta["model"] == "openai:test-vlm" and meta["prompt_set"] == "default@1"
    assert meta["status"] == "complete" and meta["counts"]["written"] == N_ROWS
    assert meta["box_convention"] == "pixels" and "stored file" in meta["box_output"]


def test_boxes_mapped_to_stored_pixels(server, tmp_path):
    # NIH images are stored at 448 px; sent at 224 px, so a model box doubles
    out = tmp_path / "p.jsonl"
    make(server, tmp_path).run(DATA, out)
    where = [g for g in lines(out) if g.get("family") == "box" and g["qa_id"] and g.get("image_size") == [448, 448]]
    assert where, "grounding rows should have boxes"
    for g in where:
        assert g["boxes_raw"] == [[100.0, 50.0, 200.0, 150.0]]
        assert g["boxes"] == [[200.0, 100.0, 400.0, 300.0]]
    prompts = [b["messages"][-1]["content"][-1]["text"] for b in server.requests]
    assert any("(224x224 pixels" in p for p in prompts)


def test_retries_on_500_and_429_honouring_retry_after(server, tmp_path):
    server.script = [(500, {}), (429, {"Retry-After": "1"}), (503, {})]
    p = make(server, tmp_path, limit=1)
    waits = p.adapter.client.retry_waits  # every backoff the client chose
    out = tmp_path / "p.jsonl"
    s = p.run(DATA, out)
    assert s.errors == 0 and len(server.requests) == 4  # 3 failures + 1 success
    assert waits[1] == 1.0  # Retry-After honoured exactly
    assert 0 < waits[0] < 0.01 and 0 < waits[2] < 0.01  # exponential backoff from 1 ms base
    assert lines(out)[0]["prediction"] == "Yes, it is present."


def test_gives_up_after_retries_and_records_error(server, tmp_path):
    server.script = [(500, {})] * 3
    p = make(server, tmp_path, limit=1, max_retries=2)
    out = tmp_path / "p.jsonl"
    s = p.run(DATA, out)
    got = lines(out)
    assert s.errors == 1 and got[0]["prediction"] is None
    assert "HTTP 500" in got[0]["error"] and "after 3 attempts" in got[0]["error"]
    # no retry for a 400: a bad request stays bad
    server.script = [(400, {})]
    s = make(server, tmp_path, limit=1, overwrite=True).run(DATA, out)
    assert len(server.requests) == 4 and "HTTP 400" in lines(out)[0]["error"]


def test_cache_hit_sends_no_second_request(server, tmp_path):
    make(server, tmp_path).run(DATA, tmp_path / "a.jsonl")
    first = len(server.requests)
    s = make(server, tmp_path).run(DATA, tmp_path / "b.jsonl")
    assert len(server.requests) == first  # all from cache
    assert s.cache_hits == N_ROWS - N_MISSING
    a, b = lines(tmp_path / "a.jsonl"), lines(tmp_path / "b.jsonl")
    assert [x["prediction"] for x in a] == [x["prediction"] for x in b]
    assert all(x.get("cached") for x in b if not x.get("error"))
    # another prompt-relevant parameter (image size) is another key: asked again
    make(server, tmp_path, prep=ImagePrep(max_side=200)).run(DATA, tmp_path / "c.jsonl")
    assert len(server.requests) > first


def test_resume_asks_only_unanswered_rows_without_duplicates(server, tmp_path):
    out = tmp_path / "p.jsonl"
    make(server, tmp_path, limit=8).run(DATA, out)
    assert len(server.requests) == 8
    # simulate a kill mid-write: a torn last line
    with out.open("a") as fh:
        fh.write('{"qa_id": "torn", "predic')
    p = make(server, tmp_path, resume=True)
    p.cache = None  # prove resume alone avoids the requests, not the cache
    s = p.run(DATA, out)
    assert s.skipped_done == 8
    assert len(server.requests) == 8 + (N_ROWS - 8 - N_MISSING)
    got = lines(out)
    ids = [g["qa_id"] for g in got]
    assert len(ids) == len(set(ids)) == N_ROWS
    # resuming a finished file sends nothing; the error row (missing image) is retried, still missing
    s = make(server, tmp_path, resume=True).run(DATA, out)
    assert s.written == N_MISSING and len(server.requests) == 8 + N_ROWS - 8 - N_MISSING
    assert len(lines(out)) == N_ROWS


def test_existing_output_needs_resume_or_overwrite_and_same_model(server, tmp_path):
    out = tmp_path / "p.jsonl"
    make(server, tmp_path, limit=2).run(DATA, out)
    with pytest.raises(PredictError, match="--resume"):
        make(server, tmp_path, limit=2).run(DATA, out)
    other = Predictor(get_adapter("openai:other", base_url=server.url),
                      PredictOptions(resume=True, progress=False))
    with pytest.raises(PredictError, match="different model"):
        other.run(DATA, out)


def test_split_and_limit(server, tmp_path):
    out = tmp_path / "p.jsonl"
    s = make(server, tmp_path, split="validate").run(DATA, out)
    assert s.written == 1 and len(lines(out)) == 1
    s = make(server, tmp_path, limit=5, overwrite=True).run(DATA, out)
    assert s.written == 5


def test_api_key_from_env_sent_but_never_written(server, tmp_path, monkeypatch):
    monkeypatch.setenv("MY_VLM_KEY", "sk-secret-123")
    a = get_adapter("openai:test-vlm", base_url=server.url, api_key_env="MY_VLM_KEY")
    out = tmp_path / "p.jsonl"
    Predictor(a, PredictOptions(limit=2, progress=False, cache_dir=str(tmp_path / "c"))).run(DATA, out)
    assert server.headers[0]["authorization"] == "Bearer sk-secret-123"
    for f in (out, tmp_path / "p.jsonl.meta.json"):
        assert "sk-secret-123" not in f.read_text()
    assert "sk-secret" not in repr(a)
    monkeypatch.delenv("MY_VLM_KEY")
    with pytest.raises(AdapterError, match="MY_VLM_KEY"):
        get_adapter("openai:test-vlm", base_url=server.url, api_key_env="MY_VLM_KEY")


def test_bad_specs_and_options():
    with pytest.raises(AdapterError, match="KIND:NAME"):
        get_adapter("gpt-4o")
    with pytest.raises(AdapterError, match="unknown model kind"):
        get_adapter("foo:bar")
    with pytest.raises(AdapterError, match="--device does not apply"):
        get_adapter("openai:x", device="cuda")


def test_cli_predict_end_to_end(server, tmp_path):
    from typer.testing import CliRunner

    from radvqa.cli import app

    out = tmp_path / "cli.jsonl"
    args = ["predict", str(DATA), "--model", "openai:test-vlm", "--base-url", server.url,
            "--out", str(out), "--limit", "4", "--cache-dir", str(tmp_path / "c"), "--no-progress"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "4 predictions" in r.output and len(lines(out)) == 4
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2 and "--resume" in r.output
    r = CliRunner().invoke(app, args[:-1] + ["--resume", "--no-progress"])
    assert r.exit_code == 0 and "4 already done" in r.output


def test_interrupted_run_resumes_without_duplicates(server, tmp_path):
    out = tmp_path / "p.jsonl"
    p = make(server, tmp_path, concurrency=2)
    p.cache = None
    real = p.adapter.generate
    calls = {"n": 0}

    def dying(reqs):
        calls["n"] += 1
        if calls["n"] == 7:
            raise KeyboardInterrupt  # Ctrl-C in the middle of the run
        return real(reqs)

    p.adapter.generate = dying
    with pytest.raises(KeyboardInterrupt):
        p.run(DATA, out)
    meta = json.loads((tmp_path / "p.jsonl.meta.json").read_text())
    assert meta["status"] == "interrupted"
    for t in threading.enumerate():  # requests already in flight finish in the background
        if t.name.startswith("radvqa-predict"):
            t.join(5)
    before = len(server.requests)
    kept, done, _ = read_done(out)
    assert 0 < len(done) < N_ROWS
    q = make(server, tmp_path, resume=True)
    q.cache = None
    s = q.run(DATA, out)
    got = lines(out)
    ids = [g["qa_id"] for g in got]
    assert len(ids) == len(set(ids)) == N_ROWS
    # only rows without a good line were asked again
    answered_before = len(done)
    assert len(server.requests) - before == N_ROWS - N_MISSING - answered_before
    assert s.skipped_done == answered_before


def test_duplicate_qa_ids_predicted_once_and_counted(server, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pq.read_table(DATA / "qa")
    d = tmp_path / "dup"
    (d / "qa").mkdir(parents=True)
    paths = [[str((DATA / "images" / p).resolve()) for p in ps] for ps in t.column("image_paths").to_pylist()]
    t = t.set_column(t.schema.get_field_index("image_paths"), "image_paths", pa.array(paths))
    pq.write_table(pa.concat_tables([t.slice(0, 3), t.slice(0, 2)]), d / "qa" / "part-00000.parquet")
    out = tmp_path / "p.jsonl"
    s = make(server, tmp_path).run(d, out)
    assert s.duplicates == 2 and s.written == 3 and len(server.requests) == 3
    assert len({g["qa_id"] for g in lines(out)}) == 3
