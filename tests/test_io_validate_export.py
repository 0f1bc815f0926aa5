"""`radvqa validate` catches broken outputs; `radvqa export` writes the four formats with the right
content; `radvqa stats` counts from the files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from radvqa.cli import app
from radvqa.io.export import export
from radvqa.io.parquet import ShardWriter, read_qa
from radvqa.io.schema import codec
from radvqa.io.stats import compute_stats
from radvqa.io.validate import validate
from radvqa.model import Box, Image, Label, Study
from radvqa.run.builder import BuildOptions, build

MINIMAL = "radvqa.run.minimal:MinimalPipeline"


def studies() -> list[Study]:
    out = []
    for p in range(12):
        for k in range(2):
            sid = f"t:s{p:02d}{k}"
            imgs = [Image(id=f"{sid}-f", path=f"img/{sid}-f.png", width=400, height=300, view="PA")]
            if k == 1:
                imgs.append(Image(id=f"{sid}-l", path=f"img/{sid}-l.png", width=300, height=300, view="LATERAL"))
            labels, boxes = [], []
            if p % 3 == 0:
                labels.append(Label(scheme="nih14", name="Nodule", value=1, findings=["nodule"]))
                boxes.append(Box(image_id=f"{sid}-f", x1=100, y1=60, x2=200, y2=150, source="expert", reader="r1", label="nodule"))
            out.append(Study(id=sid, patient_id=f"t:p{p:02d}", source="t", images=imgs, labels=labels, boxes=boxes,
                             study_time=f"2020-0{k + 1}-01"))
    return out


@pytest.fixture(scope="module")
def ds(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("v") / "out"
    build(BuildOptions(source="t", out=str(out), pipeline=MINIMAL, shard_studies=6), records=studies())
    assert validate(out).ok, validate(out).errors()
    return out


def copy(ds: Path, tmp_path: Path) -> Path:
    d = tmp_path / "copy"
    shutil.copytree(ds, d)
    return d


def test_validate_ok_and_cli(ds: Path) -> None:
    r = CliRunner().invoke(app, ["validate", str(ds)])
    assert r.exit_code == 0, r.output
    assert "FAIL" not in r.output


def test_validate_catches_truncated_shard(ds: Path, tmp_path: Path) -> None:
    d = copy(ds, tmp_path)
    f = sorted((d / "qa").glob("part-*.parquet"))[1]
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    rep = validate(d)
    assert not rep.checks["readable"].ok
    assert any(f.name in e and "corrupt or truncated" in e for e in rep.errors())
    assert not rep.checks["counts"].ok  # rows missing vs the manifest
    r = CliRunner().invoke(app, ["validate", str(d)])
    assert r.exit_code == 1


def test_validate_catches_flipped_bytes(ds: Path, tmp_path: Path) -> None:
    d = copy(ds, tmp_path)
    f = sorted((d / "scene_graphs").glob("part-*.parquet"))[0]
    b = bytearray(f.read_bytes())
    b[200:260] = b"\x00" * 60  # inside the first data page: the page CRC no longer matches
    f.write_bytes(bytes(b))
    rep = validate(d)
    assert not rep.checks["readable"].ok, rep.errors()


def _rewrite(f: Path, rows: list) -> None:
    f.unlink()
    with ShardWriter(f, "qa") as w:
        w.extend(rows)


def test_validate_catches_leaked_patient_and_duplicate_ids(ds: Path, tmp_path: Path) -> None:
    d = copy(ds, tmp_path)
    f = sorted((d / "qa").glob("part-*.parquet"))[0]
    rows = codec("qa").from_table(pq.read_table(f))
    victim = rows[0].patient_id
    other = "test" if rows[0].split != "test" else "train"
    rows[0].split = other  # one row of this patient in another split
    rows[1].qa_id = rows[2].qa_id  # and a duplicate id
    _rewrite(f, rows)
    rep = validate(d)
    assert not rep.checks["leakage"].ok
    assert any(victim in e and "splits" in e for e in rep.checks["leakage"].problems)
    assert not rep.checks["ids"].ok
    assert any(rows[2].qa_id in e for e in rep.checks["ids"].problems)
    assert rep.checks["readable"].ok and rep.checks["counts"].ok


def test_validate_catches_box_outside_image_and_schema(ds: Path, tmp_path: Path) -> None:
    d = copy(ds, tmp_path)
    f = sorted((d / "qa").glob("part-*.parquet"))[0]
    rows = codec("qa").from_table(pq.read_table(f))
    r = next(q for q in rows if q.boxes)
    r.boxes[0] = Box(image_id=r.boxes[0].image_id, x1=350, y1=10, x2=450, y2=50)  # image is 400 wide
    _rewrite(f, rows)
    rep = validate(d)
    assert any("outside its image (400x300)" in p for p in rep.checks["boxes"].problems)
    # a shard with another schema
    g = sorted((d / "qa").glob("part-*.parquet"))[1]
    t = pq.read_table(g).drop_columns(["grade"])
    pq.write_table(t, g)
    rep = validate(d)
    assert any("missing column 'grade'" in p for p in rep.checks["schema"].problems)


def test_validate_catches_manifest_mismatch_and_leftover_tmp(ds: Path, tmp_path: Path) -> None:
    d = copy(ds, tmp_path)
    m = json.loads((d / "manifest.json").read_text())
    m["counts"]["qa_rows"] += 1
    m["counts"]["studies_rejected"] += 1
    (d / "manifest.json").write_text(json.dumps(m))
    (d / "qa" / ".part-00009.parquet.tmp").write_bytes(b"x")
    rep = validate(d)
    probs = " ".join(rep.errors())
    assert "qa_rows" in probs and "studies_in" in probs and "unfinished temporary shard" in probs


def test_export_jsonl(ds: Path, tmp_path: Path) -> None:
    res = export(ds, "jsonl", tmp_path / "qa.jsonl")
    lines = (tmp_path / "qa.jsonl").read_text().splitlines()
    assert res["records"] == len(lines) > 0
    import msgspec

    from radvqa.model import QA

    assert [msgspec.json.decode(x, type=QA) for x in lines] == read_qa(ds)


def test_export_llava_boxes_declared(ds: Path, tmp_path: Path) -> None:
    export(ds, "llava", tmp_path / "l" / "llava.jsonl")
    recs = [json.loads(x) for x in (tmp_path / "l" / "llava.jsonl").read_text().splitlines()]
    info = json.loads((tmp_path / "l" / "llava.info.json").read_text())
    assert info["box_format"] == "norm1000" and "<box>" in info["box_syntax"]
    boxed = [r for r in recs if r["boxes"]]
    assert boxed
    r = boxed[0]
    human, gpt = r["conversations"]
    assert human["from"] == "human" and human["value"].startswith("<image>\n")
    assert gpt["from"] == "gpt"
    # box 100,60,200,150 on a 400x300 image -> 250,200,500,500 per mille
    assert "<ref>nodule</ref><box>[250, 200, 500, 500]</box>" in gpt["value"]
    assert r["boxes"][0]["bbox"] == [100.0, 60.0, 200.0, 150.0]
    two = [x for x in recs if isinstance(x["image"], list)]  # one key: a list for several images
    assert two and all(x["conversations"][0]["value"].count("<image>") == len(x["image"]) for x in two)
    assert all("images" not in x for x in recs)
    assert all(x["image"].startswith("img/") if isinstance(x["image"], str) else all(p.startswith("img/") for p in x["image"])
               for x in recs)
    export(ds, "llava", tmp_path / "p" / "llava.jsonl", box_format="pixels")
    px = [json.loads(x) for x in (tmp_path / "p" / "llava.jsonl").read_text().splitlines() if '"bbox"' in x]
    assert any("<box>[100, 60, 200, 150]</box>" in x["conversations"][1]["value"] for x in px)


def test_export_qba_json_layout(ds: Path, tmp_path: Path) -> None:
    res = export(ds, "qba-json", tmp_path / "qba", per_study=True)
    files = sorted((tmp_path / "qba" / "qa").glob("p[0-9][0-9]/*/*.qa.json"))
    assert len(files) == res["studies"] == 24
    doc = json.loads(files[0].read_text())
    assert set(doc) == {"patient_id", "study_id", "split", "questions"}
    q = doc["questions"][0]
    assert {"question_id", "question_type", "question_strategy", "question", "answers", "question_quality"} <= set(q)
    assert q["answers"][0]["answer_type"] == "main_answer"
    with_loc = [a for f in files for qq in json.loads(f.read_text())["questions"] for a in qq["answers"] if a["localization"]]
    assert with_loc and list(with_loc[0]["localization"].values())[0]["bboxes"][0] == [100.0, 60.0, 200.0, 150.0]
    assert len(list((tmp_path / "qba" / "scene_data").glob("p*/*/*.scene_graph.json"))) == 24
    total = sum(len(json.loads(f.read_text())["questions"]) for f in files)
    assert total == res["records"] == len(read_qa(ds))


def test_export_coco(ds: Path, tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["export", str(ds), "--format", "coco", "--out", str(tmp_path / "c")])
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "c" / "instances.json").read_text())
    assert len(doc["images"]) == 36  # 24 frontal + 12 lateral
    assert [c["name"] for c in doc["categories"]] == ["nodule"]
    anns = doc["annotations"]
    assert len(anns) == 8  # patients 0,3,6,9 x 2 studies
    a = anns[0]
    assert a["bbox"] == [100.0, 60.0, 100.0, 90.0] and a["area"] == 9000.0 and a["iscrowd"] == 0
    img = next(i for i in doc["images"] if i["id"] == a["image_id"])
    assert img["width"] == 400 and img["file_name"].startswith("img/")


def test_export_bad_format(ds: Path) -> None:
    r = CliRunner().invoke(app, ["export", str(ds), "--format", "xml"])
    assert r.exit_code == 1 and "unknown export format" in r.output


def test_stats(ds: Path) -> None:
    s = compute_stats(ds)
    m = json.loads((ds / "manifest.json").read_text())["counts"]
    assert s["qa_rows"] == m["qa_rows"]
    assert s["scene_graphs"] == 24 and s["images"] == 36
    assert s["by_strategy"] == dict(sorted(m["qa_by_strategy"].items(), key=lambda kv: (-kv[1], kv[0])))
    assert s["yes_no_by_question_type"]["B03_is_abnormal"] == {"yes": 8, "no": 16}
    r = CliRunner().invoke(app, ["stats", str(ds), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["qa_rows"] == s["qa_rows"]


def test_llava_box_on_reference_study_image() -> None:
    from radvqa.io.export import llava_record
    from radvqa.model import QA

    q = QA(qa_id="d1", source="t", split="train", patient_id="p", study_id="s2", strategy="diff",
           question_type="difference", template_id="x", template_version=1, question="What changed?",
           answer="A new nodule.", image_ids=["i2", "i1"], image_paths=["b.png", "a.png"], reference_study_id="s1",
           boxes=[Box(image_id="i1", x1=0, y1=0, x2=50, y2=100, label="nodule")])
    rec = llava_record(q, "norm1000", {("s2", "i2"): (100, 100), ("s1", "i1"): (200, 200)})
    assert rec["image"] == ["b.png", "a.png"]
    assert rec["conversations"][1]["value"].endswith("<ref>nodule</ref><box>[0, 0, 250, 500]</box> (image 2)")
    with pytest.raises(ValueError, match="image size unknown"):
        llava_record(q, "norm1000", {})
