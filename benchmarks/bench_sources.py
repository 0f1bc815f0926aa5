"""Source adapter throughput and memory (issue 4: >= 20,000 studies/s on one core; a 200,000-row
label table builds with bounded memory).

    .venv/bin/python benchmarks/bench_sources.py [--data ../shared/data] [--rows 200000]

1. nih-cxr14 over the real Data_Entry_2017_v2020.csv.gz (112,120 images = studies) + BBox_List.
2. chexpert over a generated 200,000-row train.csv in the real column layout (label values drawn
   with a fixed seed), read twice in child processes: the first 20,000 studies, and all rows; their
   peak resident memory (ru_maxrss) is compared (streaming: it must not grow with the table).
3. mimic-cxr over generated metadata/chexpert tables of the same size, sorted by subject_id as the
   release is (merge-joined while streaming), first 20,000 studies vs all: RSS must stay flat.
Prints one line per case: studies, seconds, studies/s, and peak RSS of the child process.
"""

from __future__ import annotations

import argparse
import gzip
import random
import sys
import tempfile
import time
import resource
import subprocess
from pathlib import Path

from radvqa.model import Study
from radvqa.sources import get_source

LABELS = ["No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Opacity", "Lung Lesion", "Edema",
          "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax", "Pleural Effusion", "Pleural Other",
          "Fracture", "Support Devices"]


def run(name: str, source: str, inputs: list[Path], onto, limit: int | None = None) -> float:
    src = get_source(source)
    t = time.perf_counter()
    n = r = 0
    for rec in src.iter_records(inputs, ontology=onto, limit=limit):
        if isinstance(rec, Study):
            n += 1
        else:
            r += 1
    dt = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{name:<38} studies {n:>7}  rejects {r:>4}  {dt:6.2f} s  {n / dt:>8,.0f} studies/s  peak RSS {rss:5.0f} MB",
          flush=True)
    return rss


def child(name: str, source: str, inputs: list[Path], limit: int | None = None) -> float:
    """Run one case in a fresh process so its peak RSS is its own."""
    code = (
        "import sys; from pathlib import Path; sys.path.insert(0, %r); import bench_sources as b; "
        "from radvqa.ontology import load_ontology; "
        "b.run(%r, %r, [Path(p) for p in %r], load_ontology(), %r)"
    ) % (str(Path(__file__).parent), name, source, [str(p) for p in inputs], limit)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    print(out, end="")
    return float(out.rsplit("peak RSS", 1)[1].split()[0])


def make_chexpert(path: Path, rows: int) -> None:
    rng = random.Random(0)
    vals = ["", "", "", "1.0", "0.0", "-1.0"]
    with open(path, "w") as f:
        f.write("Path,Sex,Age,Frontal/Lateral,AP/PA," + ",".join(LABELS) + "\n")
        i = 0
        p = 0
        while i < rows:
            p += 1
            for s in range(1, rng.randint(1, 4) + 1):
                lab = ",".join(rng.choice(vals) for _ in LABELS)
                for v in range(1, rng.randint(1, 2) + 1):
                    f.write(f"CheXpert-v1.0-small/train/patient{p:05d}/study{s}/view{v}_frontal.jpg,Female,60,Frontal,AP,{lab}\n")
                    i += 1


def make_mimic(d: Path, rows: int) -> None:
    rng = random.Random(0)
    vals = ["", "", "", "1.0", "0.0", "-1.0"]
    with gzip.open(d / "mimic-cxr-2.0.0-metadata.csv.gz", "wt") as m, gzip.open(d / "mimic-cxr-2.0.0-chexpert.csv.gz", "wt") as c:
        m.write("dicom_id,subject_id,study_id,ViewPosition,Rows,Columns,StudyDate,StudyTime\n")
        c.write("subject_id,study_id," + ",".join(LABELS) + "\n")
        for i in range(rows):
            subj, study = 10000000 + i // 4, 50000000 + i
            m.write(f"d{i}a,{subj},{study},PA,3056,2544,2180{(i % 12) + 1:02d}01,120000\n")
            c.write(f"{subj},{study}," + ",".join(rng.choice(vals) for _ in LABELS) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    ap.add_argument("--rows", type=int, default=200_000)
    a = ap.parse_args()
    nih = Path(a.data) / "nih-cxr14"
    if (nih / "Data_Entry_2017_v2020.csv.gz").exists():
        child("nih-cxr14 (real, 112,120 rows)", "nih-cxr14", [nih / "Data_Entry_2017_v2020.csv.gz", nih / "BBox_List_2017.csv"])
    else:
        print(f"skipping nih-cxr14: {nih} not found", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp) / "train.csv"
        make_chexpert(t, a.rows)
        small = child("chexpert, first 20,000 studies", "chexpert", [t], 20_000)
        big = child(f"chexpert, all {a.rows:,} rows", "chexpert", [t])
        print(f"chexpert streaming: peak RSS all rows / first 20k studies = {big / small:.2f}")
        d = Path(tmp) / "mimic"
        d.mkdir()
        make_mimic(d, a.rows)
        child("mimic-cxr, first 20,000 studies", "mimic-cxr", [d], 20_000)
        child(f"mimic-cxr, {a.rows:,} studies", "mimic-cxr", [d])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
