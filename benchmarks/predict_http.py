"""Throughput of `radvqa predict` against a local OpenAI-compatible server with a fixed answer latency,
at several --concurrency values (run from the repository root):

    .venv/bin/python benchmarks/predict_http.py [--latency 0.05] [--rows 200]

Prints one line per concurrency: rows/s and the speed-up over concurrency 1. It measures the runner
(streaming, image encoding, ordered writing, retries off), not a model.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--concurrency", default="1,4,16")
    args = ap.parse_args()

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):  # noqa: ANN002
            pass

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            time.sleep(args.latency)
            body = json.dumps({"choices": [{"message": {"content": "yes"}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"

    from radvqa.models.images import ImagePrep
    from radvqa.models.predict import PredictOptions, Predictor
    from radvqa.models.registry import get_adapter
    from radvqa.models.smoke import _repeat_dataset

    here = Path(__file__).resolve().parents[1] / "tests" / "data" / "models" / "vqa20"
    with tempfile.TemporaryDirectory() as tmp:
        data = _repeat_dataset(here, Path(tmp) / "d", max(1, args.rows // 20))
        base = None
        for c in [int(x) for x in args.concurrency.split(",")]:
            a = get_adapter("openai:bench", base_url=url, concurrency=c)
            s = Predictor(a, PredictOptions(progress=False, overwrite=True, prep=ImagePrep(max_side=512))).run(
                data, Path(tmp) / f"p{c}.jsonl"
            )
            base = base or s.rows_per_s
            print(json.dumps({"concurrency": c, "latency_s": args.latency, "rows": s.written,
                              "requests": s.requests, "rows_per_s": round(s.rows_per_s, 1),
                              "speedup": round(s.rows_per_s / base, 2)}))
    httpd.shutdown()


if __name__ == "__main__":
    main()
