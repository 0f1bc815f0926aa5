"""#17: exports that training code loads as they are.

LLaVA: one JSON array (``json.load``) by default, JSON Lines on request, one image key, ``--split``,
side file beside the output named after it; rows without an image file skipped and counted unless
kept; boxes normalisable when the file is absent (NIH's released 1024x1024 space); nothing partial
left after a failure. COCO ``--out x.json`` writes that file. qba-json: one JSON Lines file per split."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from radvqa.cli import app
from radvqa.io.export import export
from radvqa.io.parquet import read_qa
from radvqa.model import Box, Image, Label, Study
from radvqa.run.builder import BuildOptions, build

MINIMAL = "radvqa.run.minimal:MinimalPipeline"


def studies() -> list[Study]:
    out = []
    for p in range(16):
        sid = f"t:s{p:02d}"
        with_file = p % 4 != 0  # every fourth study: labels only, no image file
        # the image without a file keeps the space its boxes are in (original size), as NIH's does
        img = Image(id=f"{sid}-f", path=f"img/{sid}.png" if with_file else None, width=400 if with_file else None,
                    height=300 if with_file else None, view="PA",
                    original_width=None if with_file else 1024, original_height=None if with_file else 1024)
        boxes = [Box(image_id=img.id, x1=100, y1=60, x2=200, y2=150, source="expert", reader="r1", label="nodule")] if p % 2 == 0 else []
        out.append(Study(id=sid, patient_id=f"t:p{p:02d}", source="t", images=[img], boxes=boxes,
                         labels=[Label(scheme="nih14", name="Nodule", value=1 if boxes else 0, findings=["nodule"])]))
    return out


@pytest.fixture(scope="module")
def ds(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("x") / "out"
    build(BuildOptions(source="t", out=str(out), pipeline=MINIMAL, shard_studies=8), records=studies())
    return out


def test_llava_is_a_json_array_with_side_file_beside_it(ds: Path, tmp_path: Path) -> None:
    rows = read_qa(ds)
    no_image = sum(1 for q in rows if not any(q.image_paths))
    assert 0 < no_image < len(rows)
    dest = tmp_path / "train" / "llava.json"
    res = export(ds, "llava", dest)
    recs = json.loads(dest.read_text())  # LLaVA's loader: json.load on a JSON array
    assert isinstance(recs, list) and len(recs) == res["records"] == len(rows) - no_image
    assert res["skipped_no_image"] == no_image
    assert all(isinstance(r["image"], str) and r["image"] for r in recs) and not any("images" in r for r in recs)
    info = json.loads((tmp_path / "train" / "llava.info.json").read_text())
    assert info["records"] == len(recs) and info["skipped_no_image"] == no_image and "'image'" in info["image_key"]
    assert not (tmp_path / "export_info.json").exists() and not (tmp_path / "train" / "export_info.json").exists()
    # JSON Lines on request
    res2 = export(ds, "llava", tmp_path / "l.json", jsonl=True)
    lines = (tmp_path / "l.json").read_text().splitlines()
    assert len(lines) == res2["records"] and json.loads(lines[0])["id"] == recs[0]["id"]


def test_llava_keep_imageless_normalises_boxes_from_original_size(ds: Path, tmp_path: Path) -> None:
    res = export(ds, "llava", tmp_path / "all.json", keep_imageless=True)
    recs = json.loads((tmp_path / "all.json").read_text())
    assert res["skipped_no_image"] == 0 and len(recs) == len(read_qa(ds))
    textonly = [r for r in recs if "image" not in r]
    assert textonly and all("<image>" not in r["conversations"][0]["value"] for r in textonly)
    boxed = [r for r in textonly if r["boxes"]]
    # box 100,60,200,150 in the 1024x1024 space the file-less image keeps
    assert boxed and "<box>[97, 58, 195, 146]</box>" in boxed[0]["conversations"][1]["value"]


def test_split_option(ds: Path, tmp_path: Path) -> None:
    splits = {q.split for q in read_qa(ds)}
    assert len(splits) >= 2
    sp = sorted(splits)[0]
    export(ds, "llava", tmp_path / "s.json", split=sp)
    recs = json.loads((tmp_path / "s.json").read_text())
    assert recs and {r["meta"]["split"] for r in recs} == {sp}


def test_failed_export_leaves_nothing_and_keeps_the_old_file(ds: Path, tmp_path: Path, monkeypatch) -> None:
    dest = tmp_path / "llava.json"
    dest.write_text("[]\n")
    import radvqa.io.export as ex

    monkeypatch.setattr(ex, "_image_sizes", lambda out: {})  # every box: size unknown -> error mid-way
    with pytest.raises(ValueError, match="image size unknown"):
        export(ds, "llava", dest)
    assert dest.read_text() == "[]\n"
    assert [p.name for p in tmp_path.iterdir()] == ["llava.json"]


def test_coco_out_file_and_imageless_skipped(ds: Path, tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["export", str(ds), "--format", "coco", "--out", str(tmp_path / "x.json")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "x.json").is_file()
    doc = json.loads((tmp_path / "x.json").read_text())
    assert doc["images"] and all(im["file_name"] and im["width"] for im in doc["images"])
    assert "4 images without an image file skipped" in r.output


def test_qba_json_one_jsonl_per_split(ds: Path, tmp_path: Path) -> None:
    res = export(ds, "qba-json", tmp_path / "qba")
    rows = read_qa(ds)
    names = sorted(p.name for p in (tmp_path / "qba").iterdir())
    splits = sorted({q.split for q in rows})
    assert names == sorted([f"qa_{s}.jsonl" for s in splits] + [f"scene_graphs_{s}.jsonl" for s in splits] + ["export_info.json"])
    n = 0
    for s in splits:
        for line in (tmp_path / "qba" / f"qa_{s}.jsonl").read_text().splitlines():
            doc = json.loads(line)
            assert doc["split"] == s
            n += len(doc["questions"])
    assert n == res["records"] == len(rows)
    # a second export replaces the first (its own earlier output), a foreign folder is refused
    export(ds, "qba-json", tmp_path / "qba")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    with pytest.raises(FileExistsError):
        export(ds, "qba-json", tmp_path / "mine")


def test_image_counts_in_manifest_stats_and_card(ds: Path) -> None:
    """#17: the build summary, manifest, card and `stats` count rows and images with and without
    an image file; `stats` counts files found, not image ids."""
    from radvqa.io.stats import compute_stats

    rows = read_qa(ds)
    without = sum(1 for q in rows if not (q.image_paths and all(q.image_paths)))
    c = json.loads((ds / "manifest.json").read_text())["counts"]
    assert c["qa_rows_without_image"] == without and c["qa_rows_with_image"] == len(rows) - without
    assert c["image_files"] == 12 and c["images_without_file"] == 4
    s = compute_stats(ds)
    assert s["images"] == 12 and s["image_records"] == 16 and s["qa_rows_without_image"] == without
    card = (ds / "README.md").read_text()
    assert f"| qa_rows_without_image | {without:,} |" in card and "| image_files | 12 |" in card
    assert "Warning" not in card  # most rows have their image here


def test_most_rows_without_image_warns_loudly(tmp_path: Path) -> None:
    import yaml

    out = tmp_path / "o"
    recs = [Study(id=f"t:s{p}", patient_id=f"t:p{p}", source="t", images=[Image(id=f"i{p}", view="PA")],
                  labels=[Label(scheme="nih14", name="Nodule", value=1, findings=["nodule"])]) for p in range(6)]
    build(BuildOptions(source="odd: 'name'", out=str(out), pipeline=MINIMAL), records=recs)
    card = (out / "README.md").read_text()
    assert "> **Warning:**" in card and "have no image file" in card
    r = CliRunner().invoke(app, ["stats", str(out)], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "warning:" in r.output and "have no image file" in r.output
    # the card's YAML header is real YAML (yaml.safe_dump), whatever the source is called
    meta = yaml.safe_load(card.split("---\n")[1])
    assert meta["pretty_name"] == "radvqa odd: 'name'" and meta["configs"][0]["config_name"] == "qa"
