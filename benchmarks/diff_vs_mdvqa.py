"""radvqa's diff family beside Medical-Diff-VQA on the same MIMIC-CXR study pairs: coverage,
presence yes/no agreement, and agreement of the added / missing finding sets
(radvqa.eval.diffcompare says exactly what is counted).

Where a user has the data (credentialed):

    radvqa build mimic-cxr --input /data/mimic-cxr-jpg --input /data/mimic-cxr-reports --out mimic-vqa
    radvqa import medical-diff-vqa /data/medical-diff-vqa --out mdvqa
    python benchmarks/diff_vs_mdvqa.py mimic-vqa mdvqa

With no arguments it runs on the hand-made fixture in tests/data/medical_diff_vqa (what CI does).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from radvqa.eval.diffcompare import compare, format_table

FIX = Path(__file__).resolve().parents[1] / "tests" / "data" / "medical_diff_vqa"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", help="radvqa build of MIMIC-CXR (default: build the fixture)")
    ap.add_argument("mdvqa", nargs="?", help="dataset from `radvqa import medical-diff-vqa` (default: import the fixture)")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        build, md = a.build, a.mdvqa
        if build is None or md is None:
            build, md = f"{tmp}/build", f"{tmp}/mdvqa"
            radvqa = [sys.executable, "-m", "radvqa"]
            subprocess.run(radvqa + ["build", "mimic-cxr", "--input", str(FIX / "mimic"), "--out", build, "--strategies", "qba,diff"],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            subprocess.run(radvqa + ["import", "medical-diff-vqa", str(FIX), "--out", md], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            print("(hand-made fixture: tests/data/medical_diff_vqa)")
        t0 = time.perf_counter()
        res = compare(build, md)
        print(format_table(res))
        print(f"compared in {time.perf_counter() - t0:.2f} s")
        if a.json:
            a.json.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
