"""Score radvqa's Chest ImaGenome-derived region boxes and its report extractor's region-attribute
pairs against Chest ImaGenome's hand-checked gold standard (issue 15, deliverable 5).

    python benchmarks/imagenome_gold.py --imagenome DIR --mimic DIR [--json OUT] [--uncertain-as yes|no]

DIR for ``--imagenome``: the chest-imagenome 1.0.0 root (``gold_dataset/`` and
``silver_dataset/scene_graph/`` unzipped, or a folder of the gold images' ``*_SceneGraph.json``);
``--mimic``: a MIMIC-CXR root holding the reports tree ``files/pXX/pN/sM.txt``. Both are credentialed
(PhysioNet); defaults point into ``../shared/data``, where they are not, so a user passes their own.
CI runs it on the hand-made fixture ``tests/data/imagenome_gold`` (tests/test_imagenome_gold.py).

1. **Boxes**: every row of ``gold_bbox_coordinate_annotations_1000images.csv`` (``image_id`` with a
   ``.dcm`` suffix, stripped; ``bbox_name``; ``original_x1, original_x2, original_y1, original_y2``:
   note that order, the columns are read by name) is matched to the region box radvqa's
   ``chest-imagenome`` source builds from the silver scene graph of the same image (``objects[]``
   ``original_*``, region = the ontology region whose ``imagenome_name`` is the bbox_name).
   Reported: gold boxes, share with a radvqa box (coverage), mean IoU over matched ones, share with
   IoU >= 0.5 and >= 0.75, per region and overall. Rows of several annotators for the same box are
   each scored (the file's merge of the four annotators is kept as shipped).
2. **Region-attribute pairs**: ``gold_attributes_relations_500pts_500studies1st.txt`` (TSV; columns
   used: ``patient_id, study_id, bbox, relation, label_name, categoryID``) gives per study the set of
   (bbox, attribute, yes/no). radvqa's rules extractor reads the study's MIMIC report; each
   observation gives (region, finding, certainty) -> (the bbox_name of the region or its nearest
   boxed ancestor, each ImaGenome attribute name the ontology's ``imagenome`` scheme maps to that
   finding, present -> yes / absent -> no / uncertain -> ``--uncertain-as``, default yes). Category
   ``nlp`` (normal/abnormal) and bbox ``unknown`` rows are left out of the region-level score and
   the study-level score (bbox ignored) keeps ``unknown``. Precision / recall / F1 over the
   (study, bbox, attribute, yes/no) tuples, micro, for the attributes radvqa can name at all (gold
   attributes the ontology does not map are counted apart, as not comparable), and per category.

UNVERIFIED (../shared/FORMATS.md section 9): the gold TSV's exact column set and the encoding of
``relation`` (read as 1/0, yes/no or true/false); whether hedged statements are "yes" in the gold.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

GOLD_BOXES = "gold_bbox_coordinate_annotations_1000images.csv"
GOLD_ATTRS = "gold_attributes_relations_500pts_500studies1st.txt"
_YES = {"1": 1, "1.0": 1, "yes": 1, "true": 1, "0": 0, "0.0": 0, "no": 0, "false": 0}


def find(root: Path, name: str) -> Path | None:
    for cand in (root / name, root / "gold_dataset" / name):
        if cand.is_file():
            return cand
    hits = sorted(root.rglob(name))
    return hits[0] if hits else None


# --------------------------------------------------------------------------- gold files


def read_gold_boxes(path: Path) -> list[dict[str, Any]]:
    """Gold boxes: image_id (no .dcm), bbox_name, x1, y1, x2, y2 (original pixels), annotator."""
    out = []
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            try:
                x1, x2 = float(row["original_x1"]), float(row["original_x2"])
                y1, y2 = float(row["original_y1"]), float(row["original_y2"])
            except (KeyError, TypeError, ValueError):
                continue  # a row without original coordinates cannot be compared
            iid = row["image_id"].strip()
            iid = iid[:-4] if iid.endswith(".dcm") else iid
            out.append({"image_id": iid, "bbox_name": row["bbox_name"].strip().lower(), "box": (x1, y1, x2, y2),
                        "annotator": (row.get("annotator") or "").strip()})
    return out


def read_gold_attributes(path: Path) -> list[dict[str, Any]]:
    """Gold attribute rows: patient_id, study_id, bbox, label_name, relation (1/0), category."""
    out = []
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            rel = _YES.get(str(row.get("relation", "")).strip().lower())
            if rel is None:
                continue
            out.append({"patient_id": str(row["patient_id"]).strip().lstrip("p"),
                        "study_id": str(row["study_id"]).strip().lstrip("s"),
                        "bbox": str(row.get("bbox", "unknown")).strip().lower() or "unknown",
                        "label_name": str(row["label_name"]).strip().lower(), "relation": rel,
                        "category": str(row.get("categoryID", "")).strip().lower()})
    return out


# --------------------------------------------------------------------------- radvqa side


def radvqa_region_boxes(scene_graphs: list[Path], onto: Any) -> dict[tuple[str, str], tuple[float, float, float, float]]:
    """(image_id, bbox_name) -> box, from radvqa's chest-imagenome source (standalone mode)."""
    from radvqa.model import Study
    from radvqa.sources import get_source

    out: dict[tuple[str, str], tuple[float, float, float, float]] = {}
    if not scene_graphs:
        return out
    for rec in get_source("chest-imagenome").iter_records(scene_graphs, ontology=onto):
        if not isinstance(rec, Study):
            continue
        for b in rec.region_boxes:
            name = onto.regions[b.label].imagenome_name if b.label in onto.regions else None
            if name:
                out.setdefault((b.image_id, name.lower()), (b.x1, b.y1, b.x2, b.y2))
    return out


def imagenome_names(onto: Any) -> dict[str, list[str]]:
    """finding id -> the ImaGenome attribute names the ontology's imagenome scheme maps to it."""
    inv: dict[str, list[str]] = defaultdict(list)
    scheme = onto.schemes.get("imagenome")
    for name, fids in (scheme.labels.items() if scheme else ()):
        for fid in fids:
            if name.lower() not in inv[fid]:
                inv[fid].append(name.lower())
    for f in onto.findings.values():
        n = getattr(f, "imagenome_name", None)
        if n and n.lower() not in inv[f.id]:
            inv[f.id].append(n.lower())
    return dict(inv)


def region_bbox(onto: Any, rid: str) -> str | None:
    """The ImaGenome bbox_name of a region, or of its nearest ancestor that has one."""
    for r in [rid, *onto.region_ancestors(rid)]:
        reg = onto.regions.get(r)
        if reg is not None and reg.imagenome_name:
            return reg.imagenome_name.lower()
    return None


def radvqa_pairs(reports: dict[str, str], onto: Any, uncertain_as: int = 1) -> dict[str, set[tuple[str, str, int]]]:
    """study_id -> {(bbox or "unknown", attribute, yes/no)} from radvqa's rules extractor."""
    from radvqa.extract import get_extractor

    names = imagenome_names(onto)
    ex = get_extractor("rules", ontology=onto)
    out: dict[str, set[tuple[str, str, int]]] = {}
    for sid in sorted(reports):
        e = ex.extract(reports[sid], sid)
        pairs: set[tuple[str, str, int]] = set()
        for o in e.observations:
            rel = {"present": 1, "absent": 0}.get(o.certainty, uncertain_as)
            boxes = sorted({b for r in o.regions if (b := region_bbox(onto, r))}) or ["unknown"]
            for attr in names.get(o.finding, ()):
                for b in boxes:
                    pairs.add((b, attr, rel))
        out[sid] = pairs
    return out


def read_reports(mimic: Path, studies: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """study_id -> report text (files/pXX/pN/sM.txt), and the studies whose report is missing."""
    root = mimic / "files" if (mimic / "files").is_dir() else mimic
    out, missing = {}, []
    for sid, pid in sorted(studies.items()):
        f = root / f"p{pid[:2]}" / f"p{pid}" / f"s{sid}.txt"
        try:
            out[sid] = f.read_text(encoding="utf-8")
        except (FileNotFoundError, UnicodeDecodeError):
            missing.append(sid)
    return out, missing


# --------------------------------------------------------------------------- scores


def iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    ix = min(a[2], b[2]) - max(a[0], b[0])
    iy = min(a[3], b[3]) - max(a[1], b[1])
    if ix <= 0 or iy <= 0:
        return 0.0
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def score_boxes(gold: list[dict[str, Any]], ours: dict[tuple[str, str], tuple[float, ...]]) -> dict[str, Any]:
    per: dict[str, list[float | None]] = defaultdict(list)
    for g in gold:
        b = ours.get((g["image_id"], g["bbox_name"]))
        per[g["bbox_name"]].append(None if b is None else iou(g["box"], b))

    def summary(vals: list[float | None]) -> dict[str, Any]:
        m = [v for v in vals if v is not None]
        return {"gold": len(vals), "matched": len(m), "coverage": round(len(m) / len(vals), 4) if vals else None,
                "mean_iou": round(sum(m) / len(m), 4) if m else None,
                "iou_ge_0.5": round(sum(v >= 0.5 for v in m) / len(m), 4) if m else None,
                "iou_ge_0.75": round(sum(v >= 0.75 for v in m) / len(m), 4) if m else None}

    return {"overall": summary([v for vs in per.values() for v in vs]),
            "per_region": {k: summary(per[k]) for k in sorted(per)}}


def prf(tp: int, fp: int, fn: int) -> dict[str, Any]:
    p = tp / (tp + fp) if tp + fp else None
    r = tp / (tp + fn) if tp + fn else None
    f = 2 * p * r / (p + r) if p and r else (0.0 if p is not None and r is not None else None)
    return {"tp": tp, "fp": fp, "fn": fn, "precision": None if p is None else round(p, 4),
            "recall": None if r is None else round(r, 4), "f1": None if f is None else round(f, 4)}


def score_pairs(gold: list[dict[str, Any]], ours: dict[str, set[tuple[str, str, int]]], known: set[str]) -> dict[str, Any]:
    """Micro P/R/F1 over (study, bbox, attribute, yes/no), region level (gold bbox known, category
    not nlp) and study level (bbox ignored). ``known``: attribute names radvqa can produce."""
    cat_of: dict[str, str] = {}
    g_region: set[tuple[str, str, str, int]] = set()
    g_study: set[tuple[str, str, int]] = set()
    not_comparable: Counter[str] = Counter()
    for g in gold:
        if g["category"] == "nlp" or g["label_name"] in ("normal", "abnormal"):
            continue
        if g["label_name"] not in known:
            not_comparable[g["label_name"]] += 1
            continue
        cat_of[g["label_name"]] = g["category"]
        g_study.add((g["study_id"], g["label_name"], g["relation"]))
        if g["bbox"] != "unknown":
            g_region.add((g["study_id"], g["bbox"], g["label_name"], g["relation"]))
    studies = {g["study_id"] for g in gold}
    o_region = {(sid, b, a, r) for sid, ps in ours.items() if sid in studies for b, a, r in ps if b != "unknown"}
    o_study = {(sid, a, r) for sid, ps in ours.items() if sid in studies for _b, a, r in ps}

    def block(gs: set[Any], os_: set[Any]) -> dict[str, Any]:
        res = {"all": prf(len(gs & os_), len(os_ - gs), len(gs - os_))}
        for rel, name in ((1, "yes"), (0, "no")):
            g1 = {t for t in gs if t[-1] == rel}
            o1 = {t for t in os_ if t[-1] == rel}
            res[name] = prf(len(g1 & o1), len(o1 - g1), len(g1 - o1))
        cats = sorted({cat_of.get(t[-2], "") for t in gs | os_})
        res["per_category"] = {}
        for c in cats:
            g1 = {t for t in gs if cat_of.get(t[-2], "") == c}
            o1 = {t for t in os_ if cat_of.get(t[-2], "") == c}
            res["per_category"][c or "(not in gold)"] = prf(len(g1 & o1), len(o1 - g1), len(g1 - o1))
        return res

    return {"studies": len(studies), "region_level": block(g_region, o_region), "study_level": block(g_study, o_study),
            "gold_rows_not_comparable": sum(not_comparable.values()),
            "not_comparable_attributes": dict(not_comparable.most_common(15))}


# --------------------------------------------------------------------------- driver


def run(imagenome: Path, mimic: Path, uncertain_as: int = 1) -> dict[str, Any]:
    from radvqa.ontology import load_ontology

    onto = load_ontology()
    t0 = time.perf_counter()
    res: dict[str, Any] = {"imagenome": str(imagenome), "mimic": str(mimic)}
    gb = find(imagenome, GOLD_BOXES)
    if gb is not None:
        gold_boxes = read_gold_boxes(gb)
        wanted = {g["image_id"] for g in gold_boxes}
        graphs = _scene_graphs(imagenome, wanted)
        ours = radvqa_region_boxes(graphs, onto)
        res["boxes"] = score_boxes(gold_boxes, ours)
        res["boxes"]["gold_images"] = len(wanted)
        res["boxes"]["scene_graphs_found"] = len(graphs)
    ga = find(imagenome, GOLD_ATTRS)
    if ga is not None:
        gold = read_gold_attributes(ga)
        studies = {g["study_id"]: g["patient_id"] for g in gold}
        reports, missing = read_reports(mimic, studies)
        ours_p = radvqa_pairs(reports, onto, uncertain_as)
        known = {n for names in imagenome_names(onto).values() for n in names}
        # studies without a report cannot be scored: left out of both sides, and counted
        gold = [g for g in gold if g["study_id"] in reports]
        res["attributes"] = score_pairs(gold, ours_p, known)
        res["attributes"]["studies_without_report"] = len(missing)
        res["attributes"]["uncertain_as"] = "yes" if uncertain_as else "no"
    if "boxes" not in res and "attributes" not in res:
        raise SystemExit(f"no {GOLD_BOXES} or {GOLD_ATTRS} under {imagenome}")
    res["seconds"] = round(time.perf_counter() - t0, 3)
    return res


def _scene_graphs(root: Path, wanted: set[str]) -> list[Path]:
    """The scene-graph files of the wanted images (looked up by name: the silver folder holds 243k)."""
    dirs = [d for d in (root, root / "scene_graph", root / "silver_dataset" / "scene_graph", root / "gold_dataset")
            if d.is_dir()]
    out = []
    for iid in sorted(wanted):
        for d in dirs:
            f = d / f"{iid}_SceneGraph.json"
            if f.is_file():
                out.append(f)
                break
    return out


def main() -> None:
    shared = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--imagenome", type=Path, default=shared / "chest-imagenome")
    ap.add_argument("--mimic", type=Path, default=shared / "mimic-cxr")
    ap.add_argument("--uncertain-as", choices=("yes", "no"), default="yes")
    ap.add_argument("--json", type=Path, default=None, help="write the full result here")
    a = ap.parse_args()
    if not a.imagenome.exists():
        sys.exit(f"{a.imagenome} not found: pass --imagenome with your chest-imagenome 1.0.0 folder (credentialed, PhysioNet)")
    res = run(a.imagenome, a.mimic, 1 if a.uncertain_as == "yes" else 0)
    if a.json:
        a.json.write_text(json.dumps(res, indent=1))
    b = res.get("boxes")
    if b:
        o = b["overall"]
        print(f"boxes: {o['gold']} gold rows on {b['gold_images']} images ({b['scene_graphs_found']} scene graphs found); "
              f"coverage {o['coverage']}, mean IoU {o['mean_iou']}, IoU>=0.5 {o['iou_ge_0.5']}, IoU>=0.75 {o['iou_ge_0.75']}")
    at = res.get("attributes")
    if at:
        for lvl in ("region_level", "study_level"):
            s = at[lvl]["all"]
            print(f"attributes {lvl}: {at['studies']} studies; P {s['precision']} R {s['recall']} F1 {s['f1']} "
                  f"(tp {s['tp']}, fp {s['fp']}, fn {s['fn']}); yes F1 {at[lvl]['yes']['f1']}, no F1 {at[lvl]['no']['f1']}")
        print(f"gold rows with attributes radvqa cannot name: {at['gold_rows_not_comparable']}; "
              f"studies without a report: {at['studies_without_report']}")
    print(f"{res['seconds']} s, load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
