"""Throughput of the gold-graph sources (issue 16, deliverable 2) at the real datasets' sizes, on
the hand-made fixtures replicated under new ids (the real files are credentialed):

- RadGraph: the fixture reports repeated to N records in one graph file (600 = the v1 release);
- Lunguage: the fixture's patient series repeated to M studies (1,473 = v1.0.0, ~12 rows each);
- for each: reading (source -> Study with annotations) and the extract step that names the
  annotations (``extract_annotated``), studies per second of one process, with the 1-minute load
  average (a shared machine: lower bounds).

    python benchmarks/bench_goldgraphs.py [--radgraph 600] [--lunguage 1473]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
G = ROOT / "tests" / "data" / "sources" / "goldgraphs"


def radgraph_file(d: Path, n: int) -> Path:
    base = {}
    for f in ("train.json", "dev.json"):
        base |= json.loads((G / "radgraph" / f).read_text())
    recs = list(base.values())
    out = {f"p{11 + i % 9}/p{12000000 + i // 2}/s{60000000 + i}.txt": recs[i % len(recs)] for i in range(n)}
    p = d / "radgraph.json"
    p.write_text(json.dumps(out))
    return p


def lunguage_file(d: Path, m: int) -> Path:
    with open(G / "lunguage" / "Lunguage.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    head, body = rows[0], [r for r in rows[1:] if r[1] in ("s50000101", "s50000102", "s50000103")]
    si, pi = head.index("study_id"), head.index("subject_id")
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(head)
    for k in range(m):
        series, which = divmod(k, 3)
        for r in body:
            if r[si] == f"s5000010{which + 1}":
                r2 = list(r)
                r2[si], r2[pi] = f"s{70000000 + k}", f"p{13000000 + series}"
                w.writerow(r2)
    p = d / "Lunguage.csv"
    p.write_text(buf.getvalue())
    return p


def measure(name: str, path: Path, onto) -> None:
    from radvqa.extract.annotated import extract_annotated, term_mapper
    from radvqa.model import Study
    from radvqa.sources import get_source

    term_mapper(onto)  # compile the rules extractor outside the timing
    t0 = time.perf_counter()
    stream = get_source(name).iter_records([path], ontology=onto)
    studies = [r for r in stream if isinstance(r, Study)]
    t1 = time.perf_counter()
    n_obs = sum(len(extract_annotated(s, onto).observations) for s in studies)
    t2 = time.perf_counter()
    c = stream.counts
    print(f"{name}: {c.read} records read, {len(studies)} studies, {n_obs} observations stated; "
          f"read {len(studies) / (t1 - t0):,.0f} studies/s, name annotations (extract_annotated) "
          f"{len(studies) / (t2 - t1):,.0f} studies/s; load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--radgraph", type=int, default=600)
    ap.add_argument("--lunguage", type=int, default=1473)
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from radvqa.ontology import load_ontology

    onto = load_ontology()
    with tempfile.TemporaryDirectory() as d:
        measure("radgraph", radgraph_file(Path(d), a.radgraph), onto)
        measure("lunguage", lunguage_file(Path(d), a.lunguage), onto)


if __name__ == "__main__":
    main()
