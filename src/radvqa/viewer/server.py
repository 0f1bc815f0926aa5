"""The local browsing server: stdlib ``ThreadingHTTPServer``, a small JSON API and the page.

Routes (GET and HEAD; anything else is 404/405, never a directory listing):
  /                       the page (static/index.html)
  /static/app.js|app.css  page assets, from package data (a fixed list, not a folder)
  /api/facets             value counts per facet + manifest summary
  /api/query?...          filtered page of rows: strategy, question_type, finding, region, grade,
                          split, polarity, source (repeat or comma-separate for OR), q (words in
                          the question), offset, limit
  /api/study?id=STUDY     report text and sentences of one study (scene_graphs/)
  /files/<root>/<path>    an image file (by suffix) under the dataset folder (d) or a declared image
                          root (r0, ...); nothing else there (Parquet, manifest, rejects) is served
  /render/<root>/<path>   the same files, DICOM/TIFF as an 8-bit PNG

When bound to a loopback address the server also refuses requests whose Host header is not a
loopback name, so a web page elsewhere cannot reach it through DNS rebinding.
"""

from __future__ import annotations

import ipaddress
import json
import mimetypes
import shutil
import socket
import sys
import threading
from functools import lru_cache
from pathlib import Path
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from radvqa.viewer.images import ImageError, encode
from radvqa.viewer.query import FACETS, MAX_LIMIT, Filters, QueryError, ViewerDataset

ASSETS = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1", "[::1]"}


RENDER_MAX_SIDE = 2048


@lru_cache(maxsize=32)
def render_cached(path: str, mtime_ns: int) -> bytes:
    """PNG copy of a DICOM/TIFF file (cached by path and modification time)."""
    del mtime_ns  # part of the cache key only
    return encode(Path(path), max_side=RENDER_MAX_SIDE, fmt="PNG")


def asset_text(name: str) -> str:
    return resources.files("radvqa.viewer").joinpath("static", name).read_text(encoding="utf-8")


def parse_query(qs: str) -> tuple[Filters, int, int]:
    """Filters, offset and limit from a query string (shared with the tests)."""
    params = parse_qs(qs, keep_blank_values=False)
    facets: dict[str, list[str]] = {}
    for name in FACETS:
        vals: list[str] = []
        for raw in params.pop(name, []):
            vals.extend(v for v in raw.split(",") if v)
        if vals:
            facets[name] = vals
    text = " ".join(params.pop("q", []))
    offset = _int(params.pop("offset", ["0"])[-1], "offset")
    limit = _int(params.pop("limit", ["20"])[-1], "limit")
    params.pop("_", None)  # cache-buster some clients add
    if params:
        raise QueryError(f"unknown parameter(s): {', '.join(sorted(params))}")
    return Filters.make(facets, text), offset, limit


def _int(raw: str, name: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise QueryError(f"{name} must be an integer, got {raw!r}") from None


class ViewerServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, data: ViewerDataset, host: str = "127.0.0.1", port: int = 0,
                 *, verbose: bool = False):
        self.data = data
        self.verbose = verbose
        self.loopback_only = _is_loopback(host)
        if ":" in host:  # an IPv6 literal such as ::1
            self.address_family = socket.AF_INET6
            host = host.strip("[]")
        super().__init__((host, port), _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = f"[{host}]" if ":" in str(host) else host
        return f"http://{shown}:{port}/"


class _Handler(BaseHTTPRequestHandler):
    server: ViewerServer
    server_version = "radvqa-view"
    sys_version = ""
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        if self.server.verbose:
            sys.stderr.write("%s - %s\n" % (self.address_string(), format % args))

    def do_HEAD(self) -> None:  # noqa: N802
        self._dispatch(head=True)

    def do_GET(self) -> None:  # noqa: N802
        self._dispatch(head=False)

    def _method_not_allowed(self) -> None:
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, b"method not allowed\n", "text/plain", extra={"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _method_not_allowed  # noqa: N815

    # ------------------------------------------------------------------------------------------
    def _dispatch(self, head: bool) -> None:
        self._head = head
        if self.server.loopback_only and not self._host_ok():
            self._send(HTTPStatus.FORBIDDEN, b"forbidden host\n", "text/plain")
            return
        raw = self.path
        if "\\" in raw or "\x00" in raw or not raw.startswith("/"):
            self._not_found()
            return
        parts = urlsplit(raw)
        path = parts.path
        try:
            if path in ("/", "/index.html"):
                self._send(HTTPStatus.OK, asset_text("index.html").encode(), "text/html; charset=utf-8",
                           extra={"Content-Security-Policy": PAGE_CSP})
            elif path.startswith("/static/") and path[len("/static/"):] in ASSETS:
                name = path[len("/static/"):]
                self._send(HTTPStatus.OK, asset_text(name).encode(), ASSETS[name])
            elif path == "/api/facets":
                self._json(self.server.data.facets())
            elif path == "/api/query":
                filters, offset, limit = parse_query(parts.query)
                page = self.server.data.query(filters, offset, limit)
                self._json({"total": page.total, "offset": page.offset, "limit": page.limit,
                            "max_limit": MAX_LIMIT, "filters": filters.as_dict(),
                            "items": [self.server.data.present(r) for r in page.rows]})
            elif path == "/api/study":
                sid = parse_qs(parts.query).get("id", [""])[-1]
                study = self.server.data.study(sid) if sid else None
                if study is None:
                    self._not_found()
                else:
                    self._json(study)
            elif path.startswith("/files/"):
                self._file(path[len("/files/"):])
            elif path.startswith("/render/"):
                self._render(path[len("/render/"):])
            else:
                self._not_found()
        except QueryError as exc:
            self._json({"error": str(exc)}, HTTPStatus.BAD_REQUEST)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the browser went away mid-response

    def _host_ok(self) -> bool:
        host = (self.headers.get("Host") or "").strip().lower()
        if not host:
            return True  # HTTP/1.0 clients send none; nothing to rebind
        if host.startswith("["):
            name = host[: host.find("]") + 1]
        else:
            name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
        return name in LOOPBACK_NAMES

    def _gate(self, rest: str) -> Path | None:
        # the path is percent-decoded exactly once here; the gate then refuses "..", "//",
        # hidden names and symlinks out, so "%2e%2e" and "%2f" tricks land on 404 too
        key, _, rel = rest.partition("/")
        try:
            return self.server.data.gate.resolve(unquote(key), unquote(rel, errors="strict"))
        except UnicodeDecodeError:  # bytes that are no UTF-8 name
            return None

    def _render(self, rest: str) -> None:
        real = self._gate(rest)
        if real is None:
            self._not_found()
            return
        try:
            body = render_cached(str(real), real.stat().st_mtime_ns)
        except (ImageError, OSError) as exc:
            self._send(HTTPStatus.UNPROCESSABLE_ENTITY, f"{exc}\n".encode(), "text/plain; charset=utf-8")
            return
        self._send(HTTPStatus.OK, body, "image/png", extra={"Cache-Control": "private, max-age=300"})

    def _file(self, rest: str) -> None:
        real = self._gate(rest)
        if real is None:
            self._not_found()
            return
        ctype = mimetypes.guess_type(real.name)[0] or "application/octet-stream"
        try:
            fh = real.open("rb")
        except OSError:
            self._not_found()
            return
        with fh:
            size = real.stat().st_size
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(size))
            self.send_header("X-Content-Type-Options", "nosniff")
            # files are data, never pages that run in the viewer's origin
            self.send_header("Content-Security-Policy", "sandbox; default-src 'none'")
            self.send_header("Cache-Control", "private, max-age=300")
            self.end_headers()
            if not self._head:
                shutil.copyfileobj(fh, self.wfile, 1 << 16)

    def _json(self, obj: Any, status: HTTPStatus = HTTPStatus.OK) -> None:
        body = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self._send(status, body, "application/json; charset=utf-8", extra={"Cache-Control": "no-store"})

    def _not_found(self) -> None:
        self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")

    def _send(self, status: HTTPStatus, body: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not getattr(self, "_head", False):
            self.wfile.write(body)


def _is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def start_in_thread(server: ViewerServer) -> threading.Thread:
    """Serve in a daemon thread (tests, notebooks); stop with ``server.shutdown()``."""
    t = threading.Thread(target=server.serve_forever, name="radvqa-view", daemon=True)
    t.start()
    return t
