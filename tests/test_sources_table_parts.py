"""Table sources read in row ranges (#19): a CSV/CSV.gz table cut at line starts by
``tables.plan_line_ranges``, each part read by ``iter_part``; the parts, concatenated, are the
records one reader yields (same studies, same rejects with the same line numbers, same counts)."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import msgspec
import pytest

from radvqa.io.stats import image_counts
from radvqa.run.builder import build
from radvqa.sources import sample_inputs, tables
from radvqa.sources.base import read_csv_rows
from radvqa.sources.nih import NIHSource
from radvqa.sources.tables import plan_line_ranges
from test_run_build import files_bytes, opts  # noqa: E402


def _nih_inputs(tmp: Path, *, gz: bool = False, crlf: bool = False) -> list[Path]:
    """The sample's NIH tables, with the damage a table has in the wild spread over its length:
    a duplicate Image Index far after its first copy, a short row, an empty index, blank lines, a
    non-UTF-8 line, and box rows on images the table does not list (one of them on a short row)."""
    src = next(p for p in sample_inputs() if p.name == "nih-cxr14")
    d = tmp / "nih"
    d.mkdir()
    lines = (src / "Data_Entry_2017_v2020.csv").read_bytes().splitlines()
    header, rows = lines[0], lines[1:]
    rows.insert(30, rows[2])  # duplicate of an early row
    rows.insert(10, b"00099999_000.png,Mass,0")  # too few columns, its box row is not "unlisted"
    rows.insert(20, b",Mass,0,1,50,M,PA,1,1,1,1")  # empty Image Index
    rows.insert(25, b"")
    rows.insert(40, b"00098765_000.png,Mass,0,98765,\xff\xfe,M,PA,1,1,1,1")  # not UTF-8
    rows.append(b"00012345_000.png,NotALabel,0,12345,40,M,PA,1,1,1,1")  # unknown label
    eol = b"\r\n" if crlf else b"\n"
    text = eol.join([header, *rows]) + eol + eol
    entry = d / ("Data_Entry_2017.csv.gz" if gz else "Data_Entry_2017.csv")
    entry.write_bytes(gzip.compress(text, mtime=0) if gz else text)
    boxes = (src / "BBox_List_2017.csv").read_text()
    boxes += "00099999_000.png,Mass,1,2,3,4\n00077777_000.png,Mass,1,2,3,4\n00000732_005.png,Mass,1\n"
    (d / "BBox_List_2017.csv").write_text(boxes)
    shutil.copy(src / "images.csv", d / "images.csv")
    shutil.copytree(src / "images", d / "images")
    return [entry, d / "BBox_List_2017.csv", d / "images.csv", d / "images"]


def _encoded(records) -> list[bytes]:  # noqa: ANN001
    return [msgspec.json.encode(r) for r in records]


@pytest.mark.parametrize("gz,crlf", [(False, False), (True, False), (False, True)])
def test_nih_parts_equal_one_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gz: bool, crlf: bool) -> None:
    monkeypatch.setattr(tables, "MIN_PART_ROWS", 1)
    inputs = _nih_inputs(tmp_path, gz=gz, crlf=crlf)
    one = NIHSource()
    whole = _encoded(stream := one.iter_records(inputs))
    reasons = "\n".join(r.decode() for r in whole if b'"reason"' in r)
    for why in ("duplicate Image Index", "too few columns", "empty Image Index", "not UTF-8",
                "unknown nih14 label", "does not list", "box row has 3 cells"):
        assert why in reasons, why
    assert reasons.count("does not list") == 1  # the short row's box is not "unlisted"
    for n in (2, 3, 7, 64):
        specs = NIHSource().plan_parts(inputs, n)
        assert specs is not None and 2 <= len(specs) <= n
        got: list[bytes] = []
        read = 0
        for spec in specs:
            part = NIHSource()
            got += _encoded(s := part.iter_part(inputs, spec))
            read += s.counts.read
            assert s.counts.unaccounted() == 0
        assert got == whole, n
        assert read == stream.counts.read  # every row read by exactly one part


def test_line_ranges_cut_at_line_starts(tmp_path: Path) -> None:
    rows = [f"r{i},{'x' * (i % 37)}" for i in range(500)]
    p = tmp_path / "t.csv"
    p.write_text("a,b\n" + "\n".join(rows) + "\n")
    specs = plan_line_ranges(p, 8, min_rows=10)
    assert specs is not None and len(specs) == 8
    data = p.read_bytes()
    seen: list[tuple[int, list[str] | None, str | None]] = []
    for s in specs:
        assert s["lo"] == 0 or data[s["lo"] - 1:s["lo"]] == b"\n"
        assert data[:s["lo"]].count(b"\n") == s["line0"]
        seen += list(read_csv_rows(p, s["lo"], s["hi"], s["line0"]))
    assert seen == list(read_csv_rows(p))
    # too few rows for 8 parts of 100: fewer parts; for 2 parts of 300: whole
    assert len(plan_line_ranges(p, 8, min_rows=100) or []) == 5
    assert plan_line_ranges(p, 8, min_rows=300) is None
    # a quote anywhere: a line start may be inside a quoted field, so the table is read whole
    q = tmp_path / "q.csv"
    q.write_text("a,b\n" + "\n".join(rows[:250] + ['r,"two\nlines"'] + rows[250:]) + "\n")
    assert plan_line_ranges(q, 8, min_rows=10) is None
    # a damaged .gz: read whole, so one reader says where the damage starts
    z = tmp_path / "z.csv.gz"
    z.write_bytes(gzip.compress(p.read_bytes())[:-40])
    assert plan_line_ranges(z, 8, min_rows=10) is None


def test_nih_build_in_parts_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The build reads the NIH table in row ranges with 2 workers (4 parts): the same files and
    rejected.jsonl as one reader, and the same study counts."""
    monkeypatch.setattr(tables, "MIN_PART_ROWS", 5)  # the parts are planned in this process
    inputs = [str(p) for p in _nih_inputs(tmp_path, gz=True)]
    one = build(opts(tmp_path / "n1", source="nih-cxr14", inputs=inputs, workers=1), records=None)
    two = build(opts(tmp_path / "n2", source="nih-cxr14", inputs=inputs, workers=2), records=None)
    assert one["timings"]["read_parts"] == 1 and two["timings"]["read_parts"] == 4
    assert files_bytes(tmp_path / "n2") == files_bytes(tmp_path / "n1")
    assert (tmp_path / "n2" / "rejected.jsonl").read_bytes() == (tmp_path / "n1" / "rejected.jsonl").read_bytes()
    assert one["counts"] == two["counts"] and one["counts"]["studies_in"] > 40
    # the image counts the workers took of their shards add up to one pass over the output
    whole = image_counts(tmp_path / "n2")
    assert {k: two["counts"][k] for k in whole} == whole and whole["qa_rows_with_image"] > 0


_CHEXPERT_HEADER = ("Path,Sex,Age,Frontal/Lateral,AP/PA,No Finding,Enlarged Cardiomediastinum,Cardiomegaly,"
                    "Lung Opacity,Lung Lesion,Edema,Consolidation,Pneumonia,Atelectasis,Pneumothorax,"
                    "Pleural Effusion,Pleural Other,Fracture,Support Devices")


def _chexpert_inputs(tmp: Path, gz: bool) -> list[Path]:
    """A CheXpert train table of 60 patients (1-3 studies of 1-3 views each, consecutive rows),
    with rejected rows inside and between studies, a study whose rows come back later (duplicate),
    a short row, a blank and a non-UTF-8 line; and a valid table repeating a train study."""
    root = tmp / "CheXpert-v1.0-small"
    root.mkdir()
    lines: list[bytes] = []
    for p in range(1, 61):
        for s in range(1, 2 + p % 3):
            for v in range(1, 2 + (p + s) % 3):
                lab = ",".join(("1.0", "", "-1.0", "0.0")[(p * s + v + j) % 4] for j in range(14))
                lines.append(f"CheXpert-v1.0-small/train/patient{p:05d}/study{s}/view{v}_frontal.jpg,"
                             f"Female,{40 + p},Frontal,AP,{lab}".encode())
        if p == 7:
            lines.append(b"not/a/path.jpg,Male,41,Frontal,AP" + b"," * 14)  # between studies
        if p == 20:
            lines.insert(len(lines) - 1, b"CheXpert-v1.0-small/train/patient00020/study1/x.jpg,F,1")  # short, inside
        if p == 33:
            lines.append(b"")
            lines.append(b"CheXpert-v1.0-small/train/patient00033/study1/view9_frontal.jpg,F\xff,1,Frontal,AP" + b"," * 14)
        if p == 45:
            lines.append(lines[20])  # patient 5's study again, far from its run: a duplicate
    text = (_CHEXPERT_HEADER.encode() + b"\n" + b"\n".join(lines) + b"\n")
    train = root / ("train.csv.gz" if gz else "train.csv")
    train.write_bytes(gzip.compress(text, mtime=0) if gz else text)
    valid = root / "valid.csv"
    valid.write_bytes(_CHEXPERT_HEADER.encode() + b"\n" + lines[3].replace(b"/train/", b"/valid/") + b"\n"
                      + lines[0] + b"\n")
    return [train, valid]


@pytest.mark.parametrize("gz", [False, True])
def test_chexpert_parts_equal_one_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gz: bool) -> None:
    from radvqa.sources.chexpert import CheXpertSource

    monkeypatch.setattr(tables, "MIN_PART_ROWS", 1)
    inputs = _chexpert_inputs(tmp_path, gz)
    whole = _encoded(stream := CheXpertSource().iter_records(inputs))
    reasons = "\n".join(r.decode() for r in whole if b'"reason"' in r)
    for why in ("is not .../patientN/studyM/file", "duplicate study", "3 cells, header has", "not UTF-8"):
        assert why in reasons, why
    assert sum(b'"reason"' not in r for r in whole) > 100
    for n in (2, 3, 7, 64):
        specs = CheXpertSource().plan_parts(inputs, n)
        assert specs is not None and len(specs) >= 3  # train in parts, then valid whole
        got: list[bytes] = []
        read = 0
        for spec in specs:
            got += _encoded(s := CheXpertSource().iter_part(inputs, spec))
            read += s.counts.read
            assert s.counts.unaccounted() == 0
        assert got == whole, n
        assert read == stream.counts.read
