"""Time `radvqa score-extraction` (radvqa.eval.radgraph.score): N gold reports, made by replicating
the hand-made RadGraph / RadGraph2 fixtures under distinct report ids, scored in one process
(the rules extractor runs on every text; its sentence cache makes replicated text cheap, so this
measures the scorer's own overhead more than the extractor's).

    python benchmarks/score_extraction.py --reports 1000
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from radvqa.eval.radgraph import score

FIX = Path(__file__).resolve().parents[1] / "tests" / "data" / "radgraph"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reports", type=int, default=1000)
    a = ap.parse_args()
    base = {**json.loads((FIX / "train.json").read_text()), **json.loads((FIX / "radgraph2_train.json").read_text())}
    items = list(base.values())
    big = {f"p{i % 90 + 10}/p{10_000_000 + i}/s{50_000_000 + i}.txt": items[i % len(items)] for i in range(a.reports)}
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "gold.json"
        p.write_text(json.dumps(big))
        score(FIX / "train.json")  # warm: ontology and extractor loaded once
        t0, c0 = time.perf_counter(), time.process_time()
        res = score(p, "radgraph2")
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"{res['reports']:,} gold reports scored in {wall:.2f} s wall / {cpu:.2f} s CPU "
          f"({res['reports'] / cpu:,.0f} reports per CPU-s); load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
