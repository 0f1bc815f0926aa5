"""Rebuilds the bundled sample (src/radvqa/data/sample) from ../shared/data, deterministically.

    .venv/bin/python tests/data/sources/make_sample.py [SHARED_DATA_DIR]

OpenI: 40 unmodified XMLs from the R2Gen *train* split, chosen by MeSH major heading quotas (normals,
effusion, cardiomegaly, devices, nodules, ...) with a seeded RNG. NIH ChestX-ray14: 30 of the boxed,
448x448 mirror images (every box label covered; the two patients with two mirrored images included),
their Data_Entry rows, all their BBox rows, images.csv rows; plus the Data_Entry rows (labels only)
of the neighbouring follow-ups of 4 of those patients, so longitudinal questions have consecutive
studies.
"""

from __future__ import annotations

import csv
import gzip
import random
import shutil
import sys
import tarfile
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "src/radvqa/data/sample"

OPENI_QUOTA = [
    ("normal", 8), ("Pleural Effusion", 4), ("Cardiomegaly", 4), ("Catheters, Indwelling", 2),
    ("Implanted Medical Device", 1), ("Surgical Instruments", 2), ("Nodule", 3),
    ("Calcified Granuloma", 2), ("Opacity", 2), ("Pulmonary Atelectasis", 2), ("Scoliosis", 1),
    ("Pneumothorax", 2), ("Emphysema", 1), ("Pulmonary Edema", 1), ("Hernia, Hiatal", 1),
    ("Fractures, Bone", 1), ("Consolidation", 1), ("Mass", 1), ("Pneumonia", 1),
]
NIH_PER_LABEL = 3
NIH_TOTAL = 30
NIH_LONGITUDINAL_PATIENTS = 4
NIH_NEIGHBOURS = 2  # follow-ups on each side of the imaged one


def openi(shared: Path) -> None:
    split = {r["report_id"]: r["split"] for r in csv.DictReader(open(shared / "iu-xray/r2gen_split.csv"))}
    blobs: dict[str, tuple[str, bytes]] = {}
    heads: dict[str, set[str]] = {}
    with tarfile.open(shared / "iu-xray/NLMCXR_reports.tgz") as tf:
        for m in tf:
            if not m.name.endswith(".xml"):
                continue
            data = tf.extractfile(m).read()  # type: ignore[union-attr]
            root = ET.fromstring(data)
            uid = root.find("uId").get("id")  # type: ignore[union-attr]
            findings = [e for e in root.iter("AbstractText") if e.get("Label") == "FINDINGS" and (e.text or "").strip()]
            if split.get(uid) != "train" or not findings or root.find("parentImage") is None:
                continue
            blobs[uid] = (Path(m.name).name, data)
            heads[uid] = {(x.text or "").split("/")[0].strip() for x in root.iterfind("MeSH/major")}
    rng = random.Random(0)
    chosen: list[str] = []
    ids = sorted(blobs, key=lambda u: int(u[3:]))
    for head, n in OPENI_QUOTA:
        pool = [u for u in ids if head in heads[u] and u not in chosen]
        chosen += rng.sample(pool, n)
    d = OUT / "openi"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    for u in chosen:
        name, data = blobs[u]
        (d / name).write_bytes(data)  # unmodified bytes (CC BY-NC-ND: no derivatives)
    print("openi", len(chosen))


def nih(shared: Path) -> None:
    src = shared / "nih-cxr14"
    sizes = list(csv.DictReader(open(src / "images.csv")))
    bbox_rows = list(csv.reader(open(src / "BBox_List_2017.csv")))
    boxes: dict[str, list[list[str]]] = defaultdict(list)
    for r in bbox_rows[1:]:
        boxes[r[0]].append(r)
    with gzip.open(src / "Data_Entry_2017_v2020.csv.gz", "rt", newline="") as f:
        entry_rows = list(csv.reader(f))
    header, entries = entry_rows[0], entry_rows[1:]
    by_image = {r[0]: r for r in entries}
    by_patient: dict[str, list[list[str]]] = defaultdict(list)
    for r in entries:
        by_patient[r[3]].append(r)

    mirrored = sorted(s["image_index"] for s in sizes)
    rng = random.Random(0)
    pats: dict[str, list[str]] = defaultdict(list)
    for i in mirrored:
        pats[i[:8]].append(i)
    chosen: list[str] = [i for p, v in sorted(pats.items()) if len(v) > 1 for i in v]
    labels = sorted({r[1] for r in bbox_rows[1:]})
    for lab in labels:
        pool = [i for i in mirrored if i not in chosen and any(b[1] == lab for b in boxes[i])]
        chosen += rng.sample(pool, min(NIH_PER_LABEL, len(pool)))
    rest = [i for i in mirrored if i not in chosen]
    chosen += rng.sample(rest, NIH_TOTAL - len(chosen))
    chosen.sort()

    # patients with many follow-ups among the chosen ones: add neighbouring follow-ups (labels only)
    cands = sorted({i[:8] for i in chosen}, key=lambda p: (-len(by_patient[str(int(p))]), p))
    extra: list[str] = []
    for p in cands[:NIH_LONGITUDINAL_PATIENTS]:
        rows = sorted(by_patient[str(int(p))], key=lambda r: int(r[2]))
        fus = [int(r[2]) for r in rows]
        for i in [c for c in chosen if c[:8] == p]:
            k = fus.index(int(by_image[i][2]))
            for r in rows[max(0, k - NIH_NEIGHBOURS): k + NIH_NEIGHBOURS + 1]:
                if r[0] not in chosen and r[0] not in extra:
                    extra.append(r[0])

    d = OUT / "nih-cxr14"
    shutil.rmtree(d, ignore_errors=True)
    (d / "images").mkdir(parents=True)
    keep = sorted(set(chosen) | set(extra))
    with open(d / "Data_Entry_2017_v2020.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        for i in keep:
            w.writerow(by_image[i])
    with open(d / "BBox_List_2017.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(bbox_rows[0])  # the malformed header, as shipped
        for i in chosen:
            for r in boxes[i]:
                w.writerow(r)
    with open(d / "images.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(sizes[0]), lineterminator="\n")
        w.writeheader()
        for s in sorted(sizes, key=lambda s: s["image_index"]):
            if s["image_index"] in chosen:
                w.writerow(s)
                shutil.copyfile(src / "images" / s["file"], d / "images" / s["file"])
    print("nih images", len(chosen), "label-only follow-ups", len(extra), "boxes", sum(len(boxes[i]) for i in chosen))


if __name__ == "__main__":
    shared = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared/data"
    openi(shared)
    nih(shared)
