"""Writes a small radvqa dataset directory for the viewer tests.

Real pixels and real expert boxes: four NIH ChestX-ray14 images (448x448 copies of the 1024x1024
originals, see README.md) with their radiologist boxes from BBox_List_2017.csv, rescaled to the
stored size (448/1024) as the box contract requires. The QA rows around them are hand-made in the
layout of ``radvqa.model.QA`` (DESIGN.md "QA row"); the report sentences in provenance are
hand-written for the fixture (NIH ships no reports).

``make_dataset(out)`` writes ``out/manifest.json`` (declaring this folder as the image root) and
``out/qa/part-00000.parquet``, ``part-00001.parquet`` with small row groups, so paging crosses
row-group and file boundaries, and ``out/scene_graphs/part-00000.parquet`` (one per study, with the
report sentences the rows' provenance cites).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from radvqa.model import QA, AnswerPart, Box, Image, Report, SceneGraph, Sentence, to_builtins

HERE = Path(__file__).resolve().parent
STORED = 448  # stored JPEG side
ORIGINAL = 1024  # side the NIH boxes are given in

# NIH label -> (ontology-style finding id, default region, laterality from the box side)
FINDING_IDS = {
    "Atelectasis": "atelectasis",
    "Cardiomegaly": "cardiomegaly",
    "Effusion": "pleural_effusion",
    "Infiltrate": "infiltration",
    "Mass": "mass",
    "Pneumothorax": "pneumothorax",
}
NAMES = {v: k.lower() for k, v in FINDING_IDS.items()}
NAMES["pleural_effusion"] = "pleural effusion"
SPLITS = {"732": "train", "1836": "train", "5066": "val", "5089": "test"}
GRADES = ["A++", "A+", "A", "B", "C", "D"]


def _boxes() -> dict[str, list[Box]]:
    out: dict[str, list[Box]] = {}
    with (HERE / "bbox_subset.csv").open(newline="") as fh:
        reader = csv.reader(fh)
        next(reader)  # the header's "Bbox [x,y,w,h]" name spreads over 4 columns (NIH quirk)
        for row in reader:
            image_id = row[0].removesuffix(".png")
            x, y, w, h = (float(v) * STORED / ORIGINAL for v in row[2:6])
            out.setdefault(image_id, []).append(
                Box(image_id=image_id, x1=round(x, 2), y1=round(y, 2), x2=round(x + w, 2),
                    y2=round(y + h, 2), source="expert", reader="nih", label=FINDING_IDS[row[1]])
            )
    return out


def _side(box: Box) -> str:
    # radiological convention: patient's right is on the image's left
    return "right" if (box.x1 + box.x2) / 2 < STORED / 2 else "left"


def make_rows() -> list[QA]:
    rows: list[QA] = []
    boxes = _boxes()
    k = 0
    for image_id in sorted(boxes):
        patient = str(int(image_id.split("_")[0]))
        study = f"nih:{image_id}"
        split = SPLITS[patient]
        common = dict(source="nih", split=split, patient_id=f"nih:{patient}", study_id=study,
                      image_ids=[image_id], image_paths=[f"images/{image_id}.jpg"], modality="CR")
        parts: list[AnswerPart] = []
        for b in boxes[image_id]:
            fid = b.label or ""
            side = _side(b) if fid not in ("cardiomegaly",) else None
            where = f" in the {side} lung" if side else ""
            parts.append(AnswerPart(part_type="main", text=f"There is {NAMES[fid]}{where}.",
                                    tag=f"{NAMES[fid]}" + (f", {side}" if side else ""),
                                    findings=[fid], regions=[f"{side}_lung"] if side else ["heart"],
                                    laterality=side, certainty="present", boxes=[b]))
        parts.append(AnswerPart(part_type="details", level=1, text="The boxes were drawn by an NIH radiologist.",
                                tag="expert boxes"))
        allb = [b for p in parts for b in p.boxes]
        findings = sorted({f for p in parts for f in p.findings})
        regions = sorted({r for p in parts for r in p.regions})

        def add(**kw: object) -> None:
            nonlocal k
            kw.setdefault("grade", GRADES[k % len(GRADES)])
            kw.setdefault("grade_reasons", [] if kw["grade"] == "A++" else ["localization: region box only"])
            rows.append(QA(qa_id=f"viewer-{k:04d}", template_version=1, **common, **kw))  # type: ignore[arg-type]
            k += 1

        add(strategy="qba", question_type="B02_describe_abnormal", template_id="qba.B02.v1",
            question="What abnormal findings does this chest X-ray show?",
            answer=" ".join(p.text for p in parts), findings=findings, regions=regions,
            answer_parts=parts, boxes=allb, provenance=[f"nih-bbox:{image_id}.png"])
        for si, p in enumerate(parts[:-1]):
            fid = p.findings[0]
            add(strategy="qba", question_type="D02_is_there_finding", template_id="qba.D02.v1",
                question=f"Is there {NAMES[fid]} on this image?", answer=f"Yes. {p.text}",
                answer_short="yes", polarity="positive", findings=[fid], regions=p.regions,
                answer_parts=[p], boxes=p.boxes,
                provenance=[f"S{si + 1:02d}: {p.text}", f"nih-bbox:{image_id}.png#{fid}"])
            add(strategy="vindr", question_type="where_is_finding", template_id="vindr.where.v1",
                question=f"Where is the {NAMES[fid]}?", answer=p.text,
                answer_short=p.laterality or "heart", choices=["left", "right", "heart", "none"],
                findings=[fid], regions=p.regions, answer_parts=[p], boxes=p.boxes,
                provenance=[f"nih-bbox:{image_id}.png#{fid}"])
        absent = "pneumothorax" if "pneumothorax" not in findings else "mass"
        add(strategy="qba", question_type="D02_is_there_finding", template_id="qba.D02.v1",
            question=f"Is there {NAMES[absent]} on this image?",
            answer=f"No, there is no {NAMES[absent]}.", answer_short="no", polarity="negative",
            findings=[absent], answer_parts=[AnswerPart(part_type="main", certainty="absent",
                                                        text=f"No {NAMES[absent]} is seen.",
                                                        tag=f"no {NAMES[absent]}", findings=[absent])],
            provenance=[f"S{len(parts):02d}: No {NAMES[absent]}."])
        add(strategy="rin", question_type="C02_describe_abnormal_region", template_id="rin.C02.v1",
            question="Describe abnormal findings in the lungs.",
            answer=" ".join(p.text for p in parts if p.regions != ["heart"]) or "The lungs are clear.",
            findings=[f for f in findings if f != "cardiomegaly"], regions=["lungs"],
            answer_parts=[p for p in parts if p.regions != ["heart"]], provenance=["S01"],
            grade="B", grade_reasons=["regions: default only"])
    return rows


def make_scene_graphs() -> list[SceneGraph]:
    """One scene graph per study with a hand-written report whose sentences S01.. are the ones
    the QA rows' provenance cites (the findings, then the negative)."""
    out: list[SceneGraph] = []
    for image_id, boxes in sorted(_boxes().items()):
        patient = str(int(image_id.split("_")[0]))
        texts = []
        for b in boxes:
            fid = b.label or ""
            side = _side(b) if fid != "cardiomegaly" else None
            texts.append(f"There is {NAMES[fid]}" + (f" in the {side} lung." if side else "."))
        fids = {b.label for b in boxes}
        absent = "pneumothorax" if "pneumothorax" not in fids else "mass"
        texts.append(f"No {NAMES[absent]}.")
        head = "FINDINGS: "
        sentences, pos = [], len(head)
        for i, t in enumerate(texts):
            sentences.append(Sentence(id=f"S{i + 1:02d}", section="FINDINGS", start=pos, end=pos + len(t), text=t))
            pos += len(t) + 1
        text = head + " ".join(texts)
        out.append(SceneGraph(study_id=f"nih:{image_id}", patient_id=f"nih:{patient}", source="nih",
                              images=[Image(id=image_id, path=f"images/{image_id}.jpg", width=STORED, height=STORED)],
                              report=Report(text=text, sentences=sentences), split=SPLITS[patient]))
    return out


def _qa_table(rows: list[QA]) -> pa.Table:
    try:  # the Arrow schema radvqa.io writes, when that area is present
        from radvqa.io.schema import qa_to_table
    except ImportError:
        return pa.Table.from_pylist([to_builtins(r) for r in rows])
    return qa_to_table(rows)


def _sg_table(sgs: list[SceneGraph]) -> pa.Table:
    try:
        from radvqa.io.schema import scene_graphs_to_table
    except ImportError:
        return pa.Table.from_pylist([{k: v for k, v in to_builtins(g).items() if k != "meta"} for g in sgs])
    return scene_graphs_to_table(sgs)


def make_dataset(out: Path, *, row_group_size: int = 4) -> Path:
    """Write the fixture dataset into ``out`` (created); returns ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    rows = make_rows()
    table = _qa_table(rows)
    (out / "qa").mkdir(exist_ok=True)
    half = len(rows) // 2
    pq.write_table(table.slice(0, half), out / "qa" / "part-00000.parquet", row_group_size=row_group_size)
    pq.write_table(table.slice(half), out / "qa" / "part-00001.parquet", row_group_size=row_group_size)
    (out / "scene_graphs").mkdir(exist_ok=True)
    sgs = _sg_table(make_scene_graphs())
    pq.write_table(sgs, out / "scene_graphs" / "part-00000.parquet")
    manifest = {"version": "viewer-fixture", "source": "nih", "seed": 0,
                "image_roots": [str(HERE)], "counts": {"qa": len(rows)}}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return out


def build_sample(base: Path) -> Path:
    """The bundled sample through the real ``radvqa build`` (small shards and row groups so the
    viewer pages across many units), built once per test session under ``base``."""
    from radvqa.run.builder import BuildOptions, build

    out = base / "viewer-sample-build"
    if not (out / "manifest.json").exists():
        build(BuildOptions(out=str(out), shard_studies=15, qa_row_group_rows=300))
    return out


if __name__ == "__main__":
    import sys

    print(make_dataset(Path(sys.argv[1])))
