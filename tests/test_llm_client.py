"""The shared OpenAI-compatible client (radvqa.llm.client) against misbehaving servers (issue #20):
every server here is a real local HTTP server the test starts on loopback (127.0.0.1, real sockets,
http.server in a thread); nothing leaves the machine.

Checked: a redirect is never followed (the key never reaches another origin), a server echoing the
key gets it masked, ``user:password@`` in --base-url is not written, a server dripping a byte per
second is cut off at --timeout, a reply whose content is a dict is an error line (not a crash), and
Retry-After is honoured.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import pytest

from radvqa.llm.client import ChatClient, redact, redact_url
from radvqa.models.predict import PredictOptions, Predictor
from radvqa.models.registry import get_adapter

DATA = Path(__file__).parent / "data" / "models" / "vqa20"
KEY = "sk-test-SECRET-0123456789"


class _Server:
    """Loopback server; ``handle(handler)`` answers each POST; requests are recorded."""

    def __init__(self, handle: Callable[[BaseHTTPRequestHandler], None]) -> None:
        self.requests: list[dict[str, Any]] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length", 0))
                self.rfile.read(n)
                outer.requests.append({"path": self.path, "auth": self.headers.get("Authorization")})
                handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def __enter__(self) -> _Server:
        return self

    def __exit__(self, *a: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _send(h: BaseHTTPRequestHandler, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
    body = json.dumps(obj).encode()
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(body)))
    for k, v in (headers or {}).items():
        h.send_header(k, v)
    h.end_headers()
    h.wfile.write(body)


def _ok(text: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}


def _predict(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> tuple[list[dict], str]:
    monkeypatch.setenv("H20_KEY", KEY)
    a = get_adapter("openai:m", base_url=url, api_key_env="H20_KEY", backoff_base_s=0.001,
                    max_retries=kw.pop("max_retries", 1), timeout_s=kw.pop("timeout_s", 10))
    out = tmp_path / "p.jsonl"
    Predictor(a, PredictOptions(limit=2, progress=False, **kw)).run(DATA, out)
    written = out.read_text() + (tmp_path / "p.jsonl.meta.json").read_text()
    return [json.loads(x) for x in out.read_text().splitlines()], written


def test_redirect_to_another_origin_is_not_followed_and_the_key_stays(tmp_path, monkeypatch):
    with _Server(lambda h: _send(h, 200, _ok("stolen answer"))) as other:
        with _Server(lambda h: _send(h, 302, {}, {"Location": other.url + "/chat/completions"})) as first:
            rows, written = _predict(first.url, tmp_path, monkeypatch)
        assert other.requests == []  # the other origin saw nothing, so no key either
    assert all(r["prediction"] is None and "HTTP 302" in r["error"] and "not followed" in r["error"] for r in rows)
    assert "stolen" not in written and KEY not in written


def test_error_body_echoing_the_key_is_redacted(tmp_path, monkeypatch):
    def echo(h: BaseHTTPRequestHandler) -> None:
        _send(h, 401, {"error": f"invalid key {h.headers.get('Authorization')}", "yours": KEY})

    with _Server(echo) as srv:
        rows, written = _predict(srv.url, tmp_path, monkeypatch)
        assert srv.requests[0]["auth"] == f"Bearer {KEY}"  # the key was sent to the right server
    assert all("HTTP 401" in r["error"] for r in rows)
    assert KEY not in written and "***" in rows[0]["error"]


def test_credentials_in_base_url_are_not_written(tmp_path, monkeypatch):
    with _Server(lambda h: _send(h, 200, _ok("yes"))) as srv:
        url = srv.url.replace("http://", "http://alice:hunter2pw@")
        rows, written = _predict(url, tmp_path, monkeypatch)
    assert [r["prediction"] for r in rows] == ["yes", "yes"]
    assert "hunter2pw" not in written and "alice" not in written
    assert redact_url("https://u:p@h.example/v1?api_key=zz") == "https://***@h.example/v1"
    assert redact("see https://u:pw@host/x and Bearer abc.def") == "see https://***@host/x and Bearer ***"


def test_dripping_server_is_cut_off_at_the_timeout():
    stop = threading.Event()

    def drip(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "10000")
        h.end_headers()
        for _ in range(10000):
            if stop.is_set():
                return
            try:
                h.wfile.write(b" ")
                h.wfile.flush()
            except OSError:
                return
            time.sleep(0.2)

    with _Server(drip) as srv:
        c = ChatClient(srv.url, timeout_s=1.0, max_retries=0)
        t0 = time.monotonic()
        res = c.chat({"model": "m", "messages": []})
        took = time.monotonic() - t0
        stop.set()
    assert res.content is None and "timed out" in res.error and res.attempts == 1
    assert took < 3.0  # each read got a byte within 0.2 s: only a whole-response deadline stops it


def test_content_as_dict_is_an_error_line_not_a_crash(tmp_path, monkeypatch):
    with _Server(lambda h: _send(h, 200, _ok({"answer": "yes"}))) as srv:
        rows, _ = _predict(srv.url, tmp_path, monkeypatch)
    assert len(rows) == 2 and all("message content is dict" in r["error"] for r in rows)


def test_retry_after_is_honoured_and_counted():
    calls = {"n": 0}

    def flaky(h: BaseHTTPRequestHandler) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            _send(h, 429, {"error": "slow down"}, {"Retry-After": "1"})
        else:
            _send(h, 200, _ok("fine"))

    with _Server(flaky) as srv:
        c = ChatClient(srv.url, max_retries=2, backoff_base_s=0.001)
        res = c.chat({"model": "m", "messages": []})
    assert res.content == "fine" and res.attempts == 2 and c.retry_waits == [1.0]
