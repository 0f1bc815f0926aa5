"""REFLACX adapter throughput and memory (issue 15 target: >= 20,000 readings/s in one process,
memory flat in the number of rows).

    python benchmarks/bench_reflacx.py [--sizes 5000,20000,40000] [--dir /tmp/reflacx-bench]

Generates a REFLACX-layout ``main_data`` (generated values, the real file layout of
../shared/FORMATS.md section 1: CRLF CSVs, phase 1 images read by 5 radiologists, phase 3 images
read once, 0-3 ellipses per reading, a chest box and a dictation each), then reads it with
``radvqa.sources.reflacx`` in fresh child processes, one table size after the other, and prints
readings/s (wall and per CPU-second), studies/s, the readings the external sort spilled to disk and
each child's peak RSS (ru_maxrss): memory is flat when the peak does not grow with the size (the
adapter holds one sorted run of 4,096 readings, whatever the table's length). The 1-minute load average is printed beside
the figures: on a shared machine they are lower bounds. Files are read from the page cache after the
first pass (a warm-up read is done first), as on any machine that reads the data more than once.
Before/after: run it twice on the same ``--dir`` (the data is reused), once with each source tree on
PYTHONPATH; the children read with whichever radvqa that path imports.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

P1 = ["Airway wall thickening", "Atelectasis", "Consolidation", "Emphysema", "Enlarged cardiac silhouette", "Fibrosis",
      "Fracture", "Groundglass opacity", "Mass", "Nodule", "Other", "Pleural effusion", "Pleural thickening",
      "Pneumothorax", "Pulmonary edema", "Quality issue", "Support devices", "Wide mediastinum"]
P23 = ["Abnormal mediastinal contour", "Acute fracture", "Atelectasis", "Consolidation", "Enlarged cardiac silhouette",
       "Enlarged hilum", "Groundglass opacity", "Hiatal hernia", "High lung volume / emphysema",
       "Interstitial lung disease", "Lung nodule or mass", "Other", "Pleural abnormality", "Pneumothorax",
       "Pulmonary edema", "Support devices"]
BOOL = {"Support devices", "Quality issue"}
HEAD = "id,split,eye_tracking_data_discarded,image,dicom_id,subject_id,image_size_x,image_size_y"
TEXT = "Left basilar opacity, likely atelectasis. Small right pleural effusion. Heart size is normal."


def generate(main: Path, readings: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    main.mkdir(parents=True)
    n = 0
    study = 50000000
    with open(main / "metadata_phase_1.csv", "w", newline="") as m1, open(main / "metadata_phase_3.csv", "w", newline="") as m3:
        m1.write(HEAD + "," + ",".join(P1) + "\r\n")
        m3.write(HEAD + "," + ",".join(P23) + "\r\n")
        while n < readings:
            study += 1
            subj = str(10000000 + study % 900000)
            dicom = f"{study:08x}-{rng.getrandbits(32):08x}-{rng.getrandbits(32):08x}"
            phase, cols, out = (1, P1, m1) if rng.random() < 0.04 else (3, P23, m3)
            for _ in range(5 if phase == 1 else 1):
                n += 1
                rid = f"P{phase}{'00' if phase == 3 else f'{study % 59 + 2:02d}'}R{n:06d}"
                chosen = rng.sample([c for c in cols if c not in BOOL and c != "Other"], rng.randint(0, 3))
                certs = {c: rng.randint(1, 5) for c in chosen}
                vals = [("True" if rng.random() < 0.3 else "False") if c in BOOL else ("" if c == "Other" else str(certs.get(c, 0)))
                        for c in cols]
                img = f"physionet.org/files/mimic-cxr/2.0.0/files/p{subj[:2]}/p{subj}/s{study}/{dicom}.dcm"
                out.write(f"{rid},train,False,{img},{dicom},{subj},2544,3056," + ",".join(vals) + "\r\n")
                d = main / rid
                d.mkdir()
                lines = ["xmin,ymin,xmax,ymax,certainty," + ",".join(cols)]
                for c in chosen:
                    x, y = rng.randint(0, 2000), rng.randint(0, 2500)
                    lines.append(f"{x},{y},{x + rng.randint(50, 500)},{y + rng.randint(50, 500)},{certs[c]},"
                                 + ",".join(str(k == c) for k in cols))
                (d / "anomaly_location_ellipses.csv").write_bytes(("\r\n".join(lines) + "\r\n").encode())
                (d / "chest_bounding_box.csv").write_bytes(b"xmin,ymin,xmax,ymax\r\n210,180,2350,2900\r\n")
                (d / "transcription.txt").write_text(TEXT)


def run(main: str, limit: int | None) -> None:
    from radvqa.model import Study
    from radvqa.ontology import load_ontology
    from radvqa.sources import get_source

    onto = load_ontology()
    src = get_source("reflacx")
    # as `radvqa build` reads its sources (run/builder.py: gc threshold raised for the read phase)
    import gc

    from radvqa.run.worker import GC_THRESHOLD

    gc.set_threshold(GC_THRESHOLD, 20, 10)
    cpu = time.process_time()
    t = time.perf_counter()
    studies = readings = rejects = 0
    for rec in src.iter_records([Path(main)], ontology=onto, limit=limit):
        if isinstance(rec, Study):
            studies += 1
            readings += rec.meta["readings"].count(",") + 1
        else:
            rejects += 1
    dt = time.perf_counter() - t
    cpu = time.process_time() - cpu
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"studies {studies:>7}  readings {readings:>7}  rejects {rejects:>3}  {dt:6.2f} s  "
          f"{readings / dt:>8,.0f} readings/s ({readings / cpu:,.0f} per CPU-s)  {studies / dt:>8,.0f} studies/s  "
          f"spilled {getattr(src, 'spilled', 0):>6}  peak RSS {rss:5.0f} MB  "
          f"load {os.getloadavg()[0]:.2f}", flush=True)


def child(main: Path, limit: int | None) -> str:
    code = ("import sys; sys.path.insert(0, %r); import bench_reflacx as b; b.run(%r, %r)"
            % (str(Path(__file__).parent), str(main), limit))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="5000,20000,40000", help="comma-separated numbers of readings")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--repeat", type=int, default=2, help="runs per case (the best is the figure to quote)")
    a = ap.parse_args()
    import tempfile

    base = a.dir or Path(tempfile.mkdtemp(prefix="reflacx-bench-"))
    try:
        # two table sizes, each read whole: peak RSS of the larger one against the smaller one shows
        # how memory grows with the number of readings
        for n in (int(x) for x in a.sizes.split(",")):
            main_data = base / f"main_data_{n}"
            if (main_data / ".complete").exists():  # generated by an earlier run with --dir: same seed, same files
                print(f"reusing {n:,} readings under {main_data}", flush=True)
            else:
                if main_data.exists():
                    shutil.rmtree(main_data)
                t = time.perf_counter()
                generate(main_data, n)
                (main_data / ".complete").write_text("")
                print(f"generated {n:,} readings in {time.perf_counter() - t:.1f} s under {main_data}", flush=True)
            child(main_data, None)  # warm-up: page cache
            for _ in range(a.repeat):
                print(f"{n:>7,} readings: ", child(main_data, None), end="")
    finally:
        if a.dir is None:
            shutil.rmtree(base)

if __name__ == "__main__":
    main()
