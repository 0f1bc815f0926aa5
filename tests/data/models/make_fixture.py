"""Rebuild tests/data/models/vqa20 from ../shared/data (run from the repository root):

    .venv/bin/python tests/data/models/make_fixture.py [SHARED_DATA_DIR]

20 QA rows in radvqa's QA layout: 13 real VQA-RAD test questions (official phrase_type
test_freeform/test_para) on 3 images, 4 grounding questions on 2 NIH ChestX-ray14 images with the
NIH expert box rescaled to the stored 448 px JPEG, 1 multiple-choice row, 1 two-image row, plus
one row whose image is missing on purpose (predict must report it, never skip it).
"""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from radvqa.model import QA, Box, to_builtins

HERE = Path(__file__).resolve().parent
OUT = HERE / "vqa20"
VQA_IMAGES = ["synpic17738.jpg", "synpic32962.jpg", "synpic31757.jpg"]
NIH_IMAGES = ["00014716_007", "00026261_001"]


def qid(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def main(shared: Path) -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    (OUT / "qa").mkdir(parents=True)
    (OUT / "images" / "vqa-rad").mkdir(parents=True)
    (OUT / "images" / "nih").mkdir(parents=True)
    rows: list[QA] = []
    data = json.loads((shared / "vqa-rad" / "VQA_RAD Dataset Public.json").read_text())
    for name in VQA_IMAGES:
        shutil.copy(shared / "vqa-rad" / "images" / name, OUT / "images" / "vqa-rad" / name)
    picked = [
        x for x in data
        if x["image_name"] in VQA_IMAGES and x["phrase_type"] in ("test_freeform", "test_para")
    ][:13]
    for x in picked:
        closed = x["answer_type"] == "CLOSED"
        ans = str(x["answer"]).strip()
        rows.append(QA(
            qa_id=qid("vqa-rad", str(x["qid"])), source="vqa-rad", split="test",
            patient_id=x["image_name"], study_id=x["image_name"], strategy="import",
            question_type=("closed_" if closed else "open_") + x["question_type"].lower(),
            template_id="vqa-rad", template_version=1, question=x["question"], answer=ans,
            answer_short=ans.lower() if closed else None,
            image_ids=[x["image_name"]], image_paths=[f"vqa-rad/{x['image_name']}"],
            provenance=[f"vqa-rad qid {x['qid']}"],
        ))
    # NIH boxes are in original 1024 px; the stored JPEGs are 448 px (images.csv): rescale
    sizes = {r["image_index"]: r for r in csv.DictReader(open(shared / "nih-cxr14" / "images.csv"))}
    boxes: dict[str, tuple[str, list[float]]] = {}
    with open(shared / "nih-cxr14" / "BBox_List_2017.csv") as fh:
        rd = csv.reader(fh)
        next(rd)
        for r in rd:
            stem = r[0][:-4]
            if stem in NIH_IMAGES and stem not in boxes:
                boxes[stem] = (r[1], [float(v) for v in r[2:6]])
    for stem in NIH_IMAGES:
        meta = sizes[stem + ".png"]
        s = int(meta["width"]) / int(meta["source_width"])
        shutil.copy(shared / "nih-cxr14" / "images" / meta["file"], OUT / "images" / "nih" / meta["file"])
        label, (x, y, w, h) = boxes[stem]
        box = Box(image_id=stem, x1=round(x * s, 2), y1=round(y * s, 2), x2=round((x + w) * s, 2),
                  y2=round((y + h) * s, 2), source="expert", label=label.lower())
        common = dict(source="nih-cxr14", split="test", patient_id=stem.split("_")[0],
                      study_id=stem, template_id="nih-box", template_version=1, strategy="vindr",
                      image_ids=[stem], image_paths=[f"nih/{meta['file']}"])
        rows.append(QA(qa_id=qid("nih", stem, "where"), question_type="where_finding",
                       question=f"Where is the {label.lower()} in this chest X-ray?",
                       answer=f"The {label.lower()} is in the marked region.", boxes=[box], **common))
        rows.append(QA(qa_id=qid("nih", stem, "is"), question_type="is_there_finding",
                       question=f"Is there {label.lower()} in this chest X-ray?", answer="Yes.",
                       answer_short="yes", polarity="positive", **common))
    first = rows[-1]
    rows.append(QA(qa_id=qid("nih", "mc"), source="nih-cxr14", split="test", patient_id=first.patient_id,
                   study_id=first.study_id, strategy="vindr", question_type="which_finding",
                   template_id="nih-mc", template_version=1,
                   question="Which finding is present in this chest X-ray?",
                   choices=["Pneumothorax", boxes[NIH_IMAGES[1]][0], "Cardiomegaly", "No finding"],
                   answer=f"B. {boxes[NIH_IMAGES[1]][0]}", answer_short="B",
                   image_ids=first.image_ids, image_paths=first.image_paths))
    rows.append(QA(qa_id=qid("nih", "diff"), source="nih-cxr14", split="validate",
                   patient_id="pair", study_id=NIH_IMAGES[1], strategy="diff",
                   question_type="difference", template_id="nih-diff", template_version=1,
                   question="What has changed compared to the reference image?",
                   answer="Not known (two different patients; a fixture for two-image prompts).",
                   image_ids=NIH_IMAGES[::-1],
                   image_paths=[f"nih/{sizes[s + '.png']['file']}" for s in NIH_IMAGES[::-1]]))
    rows.append(QA(qa_id=qid("missing"), source="vqa-rad", split="test", patient_id="x",
                   study_id="x", strategy="import", question_type="open_pres", template_id="vqa-rad",
                   template_version=1, question="Is this image here?", answer="no",
                   image_ids=["gone"], image_paths=["vqa-rad/does-not-exist.jpg"]))
    assert len(rows) == 20, len(rows)
    table = pa.Table.from_pylist([to_builtins(r) for r in rows])
    pq.write_table(table, OUT / "qa" / "part-00000.parquet")
    (OUT / "manifest.json").write_text(json.dumps(
        {"version": "fixture-1", "source": "vqa-rad+nih-cxr14", "image_root": "images",
         "counts": {"qa": len(rows)}}, indent=2) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[3] / ".." / "shared" / "data")
