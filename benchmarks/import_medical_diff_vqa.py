"""Throughput of `radvqa import medical-diff-vqa` (QA rows per second, one process) and peak RSS,
on a generated QA table in the real layout (the real one is credentialed). Rows are distinct
(study ids, answers) so nothing is flattered by repetition.

    python benchmarks/import_medical_diff_vqa.py --rows 300000
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import resource
import tempfile
import time
from pathlib import Path

from radvqa.eval.diffvqa import _caption, import_medical_diff_vqa

TYPES = ["abnormality", "presence", "view", "location", "level", "type"]
FINDINGS = ["atelectasis", "pleural effusion", "edema", "cardiomegaly", "lung opacity", "pneumothorax", "pneumonia", "hernia"]


def make(d: Path, rows: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    n_pairs = rows // 4
    with open(d / "mimic_pair_questions.csv", "w", newline="") as f, open(d / "mimic_all.csv", "w", newline="") as g:
        w, s = csv.writer(f), csv.writer(g)
        w.writerow(["study_id", "subject_id", "ref_id", "question_type", "question", "answer", "split"])
        s.writerow(["subject_id", "study_id", "dicom_id", "view", "split", "study_date", "study_order"])
        written = 0
        for p in range(n_pairs):
            subj, main, ref = 10_000_000 + p, 50_000_000 + 2 * p, 50_000_001 + 2 * p
            reversed_ = rng.random() < 0.48
            s.writerow([subj, ref, f"d{ref}", "postero-anterior", "train", 21000101, 2.0 if reversed_ else 1.0])
            s.writerow([subj, main, f"d{main}", "postero-anterior", "train", 21000202, 1.0 if reversed_ else 2.0])
            split = rng.choice(["train", "train", "train", "val", "test"])
            for _ in range(3):
                t = rng.choice(TYPES)
                f_ = rng.choice(FINDINGS)
                w.writerow([main, subj, ref, t, f"is there {f_} ({p})?", rng.choice(["yes", "no", f"{f_} {p}"]), split])
                written += 1
            add = rng.sample(FINDINGS, rng.randint(0, 2))
            miss = [x for x in rng.sample(FINDINGS, rng.randint(0, 2)) if x not in add]
            w.writerow([main, subj, ref, "difference", "what has changed compared to the reference image?",
                        _caption(add, miss) or "nothing has changed.", split])
            written += 1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=300_000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        make(d, a.rows)
        for fix in (False, True):
            t0 = time.perf_counter()
            c0 = time.process_time()
            m = import_medical_diff_vqa(d, d / f"out{int(fix)}", fix_order=fix)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            oc = m["medical_diff_vqa"]["order_check"]
            print(f"fix_order={fix}: {m['counts']['qa']:,} QA rows, {oc['pairs']:,} pairs "
                  f"({oc['pairs_by_order']['reversed']:,} reversed, {oc['difference_rows_fixed']:,} fixed) "
                  f"in {wall:.2f} s wall / {cpu:.2f} s CPU: {m['counts']['qa'] / wall:,.0f} rows/s wall, "
                  f"{m['counts']['qa'] / cpu:,.0f} rows per CPU-s")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MiB; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
