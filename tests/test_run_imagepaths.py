"""Portable image paths: stored paths are relative to the first of the manifest's ``image_roots``
that holds the file, resolve back to existing files, and the output still validates."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from radvqa.io.export import export
from radvqa.io.validate import validate
from radvqa.model import Image, Study
from radvqa.run.builder import build
from radvqa.run.imagepaths import PathRelativizer, image_roots_for


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("paths") / "out"
    build(source="sample", out=str(out))
    return out


def _qa_paths(out: Path) -> list[str]:
    t = pq.read_table(out / "qa", columns=["image_paths"])
    return [p for row in t.column("image_paths").to_pylist() for p in row if p]  # "" = no file


def _sg_paths(out: Path) -> list[str]:
    t = pq.read_table(out / "scene_graphs", columns=["images"])
    return [im["path"] for row in t.column("images").to_pylist() for im in row if im["path"]]


def test_manifest_declares_absolute_image_roots(sample: Path) -> None:
    m = json.loads((sample / "manifest.json").read_text())
    roots = m["image_roots"]
    assert roots and all(os.path.isabs(r) and os.path.isdir(r) for r in roots)
    assert roots == image_roots_for(m["inputs"])


def test_stored_paths_are_relative_and_resolve_through_first_holding_root(sample: Path) -> None:
    roots = json.loads((sample / "manifest.json").read_text())["image_roots"]
    paths = set(_qa_paths(sample)) | set(_sg_paths(sample))
    assert paths, "the sample has images"
    for p in paths:
        assert not os.path.isabs(p) and "\\" not in p and not p.startswith(".."), p
        holders = [r for r in roots if os.path.isfile(os.path.join(r, p))]
        assert holders, f"{p} resolves under no image root"
    # the bundled sample's files live inside the package, yet no row names that location
    assert not any(str(Path(roots[0]).parent) in p for p in paths)


def test_relative_output_still_validates(sample: Path) -> None:
    rep = validate(sample)
    assert rep.ok, rep


def test_consumers_resolve_stored_paths(sample: Path) -> None:
    from radvqa.models.rows import ImageResolver, QADataset
    from radvqa.viewer.paths import FileGate, declared_image_roots, load_manifest

    p = _qa_paths(sample)[0]
    ds = QADataset.open(sample)
    got = ImageResolver(ds.image_roots()).resolve(p)
    assert got is not None and got.is_file()
    gate = FileGate(sample, declared_image_roots(load_manifest(sample), sample))
    url, real = gate.url_for(p)
    assert url and real is not None and real.resolve() == got.resolve()


def test_export_keeps_relative_paths_or_resolves_them(sample: Path, tmp_path: Path) -> None:
    export(sample, "llava", tmp_path / "rel" / "l.jsonl")
    rec = json.loads((tmp_path / "rel" / "l.jsonl").read_text().splitlines()[0])
    info = json.loads((tmp_path / "rel" / "l.info.json").read_text())
    assert not os.path.isabs(rec["image"]) and info["image_roots"]
    export(sample, "llava", tmp_path / "abs" / "l.jsonl", absolute_images=True)
    rec = json.loads((tmp_path / "abs" / "l.jsonl").read_text().splitlines()[0])
    assert os.path.isabs(rec["image"]) and os.path.isfile(rec["image"])
    export(sample, "coco", tmp_path / "coco", absolute_images=True)
    coco = json.loads((tmp_path / "coco" / "instances.json").read_text())
    assert all(os.path.isfile(im["file_name"]) for im in coco["images"] if im["file_name"])


def test_relativizer_rules(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "a" / "b"
    (b / "img").mkdir(parents=True)
    (b / "img" / "x.png").write_bytes(b"x")
    other = tmp_path / "elsewhere.png"
    other.write_bytes(b"y")
    csv = b / "labels.csv"
    csv.write_text("id\n")
    # a file input's root is its folder; duplicates collapse, order kept
    assert image_roots_for([csv, b, a]) == [str(b), str(a)]
    rel = PathRelativizer([str(b), str(a)], cwd=str(tmp_path))
    assert rel(str(b / "img" / "x.png")) == "img/x.png"  # first root holding it wins
    assert PathRelativizer([str(a), str(b)])(str(b / "img" / "x.png")) == "b/img/x.png"
    assert rel(str(other)) == str(other)  # under no root: stays absolute
    assert rel(str(b / "img" / ".." / "img" / "x.png")) == "img/x.png"  # normalised first
    assert rel("b/img/x.png") == "img/x.png"  # relative to cwd (tmp_path) and existing there
    assert rel("img/x.png") == "img/x.png"  # relative to a root already
    assert rel("missing/y.png") == "missing/y.png"  # nowhere: kept as the source gave it
    st = Study(id="s", patient_id="p", source="t", images=[Image(id="i", path=str(b / "img" / "x.png"))])
    assert rel.study(st).images[0].path == "img/x.png"
