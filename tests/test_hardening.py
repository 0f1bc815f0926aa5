"""Issue #20's reproducers: malformed inputs give one clear line naming the file (and row) or a
reject line with a reason -- never a traceback -- and every record read is accounted for
(records read = studies out + rejected, the read count kept by the adapter itself)."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import tarfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from radvqa.cli import app
from radvqa.model import Reject, Study
from radvqa.sources import get_source
from radvqa.sources.base import SourceError, pixel_dim

SAMPLE = Path(__file__).resolve().parents[1] / "src" / "radvqa" / "data" / "sample"
XMLS = sorted((SAMPLE / "openi").glob("*.xml"))


@pytest.fixture(scope="module")
def onto():
    from radvqa.ontology import load_ontology

    return load_ontology()


def read(source: str, inputs: list[Path], onto, **kw):
    stream = get_source(source).iter_records(inputs, ontology=onto, **kw)
    recs = list(stream)
    studies = [r for r in recs if isinstance(r, Study)]
    rejects = [r for r in recs if isinstance(r, Reject)]
    c = stream.counts
    # the adapter's own count of records read: none vanished without a reject line
    assert c.read is None or c.read == c.studies + c.rejects, c.as_dict()
    return studies, rejects, c


def cli(*args: str):
    r = CliRunner().invoke(app, list(args), env={"COLUMNS": "1000"})  # error lines unwrapped
    # a clean exit (0, or an error line with exit code 1/2), never an exception escaping
    assert r.exception is None or isinstance(r.exception, SystemExit), r.output
    assert "Traceback" not in r.output
    return r


def _tgz(path: Path, files: list[Path]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for f in files:
            tf.add(f, arcname=f"ecgen-radiology/{f.name}")
    return path


# -- OpenI -----------------------------------------------------------------------------------------
def test_corrupt_random_empty_and_truncated_tgz_are_one_line(tmp_path, onto):
    good = _tgz(tmp_path / "good.tgz", XMLS).read_bytes()  # 40 reports: damage lands mid-archive
    cases = {"random.tgz": os.urandom(3000), "empty.tgz": b"", "trunc.tgz": good[: len(good) // 2]}
    corrupt = bytearray(good)
    for i in range(64):  # 64 bytes XORed mid-file
        corrupt[len(good) // 2 + i] ^= 0xFF
    cases["corrupt.tgz"] = bytes(corrupt)
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        try:
            studies, rejects, c = read("openi", [tmp_path / name], onto)
        except SourceError as e:  # nothing readable: one line naming the file
            assert name in str(e) and "not a readable tar/tgz archive" in str(e) and "\n" not in str(e)
            continue
        # members before the damage were read: the rest is one reject line, never a quiet end
        assert name in ("trunc.tgz", "corrupt.tgz") and 0 < c.read < len(XMLS), (name, c.as_dict())
        assert any(name in r.ref and "archive damaged after" in r.reason for r in rejects), rejects
    r = cli("build", "openi", "--input", str(tmp_path / "random.tgz"), "--out", str(tmp_path / "o"))
    assert r.exit_code == 1 and "error:" in r.output and "random.tgz: not a readable tar/tgz archive" in r.output


def test_invalid_header_mid_archive_is_not_a_quiet_end(tmp_path, onto):
    # tarfile stops iterating at an invalid header past the first: the members after it must not
    # vanish without a reject line
    t = tmp_path / "r.tar"
    with tarfile.open(t, "w") as tf:
        for f in XMLS[:6]:
            tf.add(f, arcname=f.name)
    with tarfile.open(t) as tf:
        third = tf.getmembers()[3]
    data = bytearray(t.read_bytes())
    data[third.offset: third.offset + 100] = b"\x07" * 100  # the 4th header: garbage
    (tmp_path / "bad.tar").write_bytes(bytes(data))
    studies, rejects, c = read("openi", [tmp_path / "bad.tar"], onto)
    assert c.read == 4 and any("archive damaged after 3 member(s)" in r.reason for r in rejects), rejects


def test_damage_after_some_members_keeps_them_and_rejects_the_rest(tmp_path, onto):
    # an uncompressed tar cut inside its last member: the members before are read
    t = tmp_path / "r.tar"
    with tarfile.open(t, "w") as tf:
        for f in XMLS[:5]:
            tf.add(f, arcname=f.name)
    data = t.read_bytes()
    cut = tmp_path / "cut.tar"
    with tarfile.open(t) as tf:
        last = tf.getmembers()[-1]
    cut.write_bytes(data[: last.offset_data + 10])
    studies, rejects, c = read("openi", [cut], onto)
    assert len(studies) + len([r for r in rejects if "empty report" in r.reason]) == 4
    assert any("archive damaged after 4 member(s)" in r.reason for r in rejects)


def test_bogus_xml_encoding_and_symlink_loop_are_rejects(tmp_path, onto):
    d = tmp_path / "xml"
    d.mkdir()
    (d / "1.xml").write_bytes(b'<?xml version="1.0" encoding="x-bogus-enc"?><eCitation><uId id="CXR1"/></eCitation>')
    shutil.copy(XMLS[0], d / "2.xml")
    os.symlink("3.xml", d / "3.xml")  # a link to itself: ELOOP on read
    os.symlink(".", d / "self")  # a folder loop: not walked into
    studies, rejects, c = read("openi", [d], onto)
    assert len(studies) == 1 and c.read == 2 + 1
    reasons = {Path(r.ref).name: r.reason for r in rejects}
    assert "unknown encoding" in reasons["1.xml"] and "symbolic links" in reasons["3.xml"]
    r = cli("build", "openi", "--input", str(d), "--out", str(tmp_path / "o"))
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "o" / "manifest.json").read_text())["counts"]
    assert m["records_read"] == m["studies_in"] == m["studies_out"] + m["studies_rejected"] == 3


def test_tar_link_members_are_rejected_not_skipped(tmp_path, onto):
    t = tmp_path / "links.tgz"
    with tarfile.open(t, "w:gz") as tf:
        tf.add(XMLS[0], arcname="a.xml")
        for name, kind in (("b.xml", tarfile.SYMTYPE), ("c.xml", tarfile.LNKTYPE)):
            ti = tarfile.TarInfo(name)
            ti.type, ti.linkname = kind, "a.xml"
            tf.addfile(ti)
    studies, rejects, c = read("openi", [t], onto)
    assert len(studies) == 1 and c.read == 3
    assert sorted(r.reason.split(" to ")[0] for r in rejects) == [
        "archive member is a hard link", "archive member is a symbolic link"]


# -- generic CSV / JSONL ---------------------------------------------------------------------------
def test_jsonl_lists_and_numbers_in_cells(tmp_path, onto):
    f = tmp_path / "r.jsonl"
    f.write_text('{"id":["a"],"text":"x"}\n'
                 '{"id":"b","text":"Small left pleural effusion.","date":2020}\n'
                 '{"id":"c","text":"Small left pleural effusion.","split":7}\n'
                 '{"id":"d","text":{"nested":1}}\n')
    studies, rejects, c = read("csv", [f], onto)
    assert [s.id for s in studies] == ["csv:b", "csv:c"] and studies[0].study_time == "2020"
    assert [r.ref.rsplit(":", 1)[1] for r in rejects] == ["1", "4"]
    assert "'id' is a JSON list" in rejects[0].reason and c.read == 4


# -- NIH -------------------------------------------------------------------------------------------
def test_nih_zero_source_width_and_unlisted_box_rows(tmp_path, onto):
    root = tmp_path / "nih"
    shutil.copytree(SAMPLE / "nih-cxr14", root)
    sizes = (root / "images.csv").read_text().splitlines()
    sizes[1] = sizes[1].replace(",1024,1024,", ",0,1024,", 1)
    (root / "images.csv").write_text("\n".join(sizes) + "\n")
    with open(root / "BBox_List_2017.csv", "a") as f:
        f.write("99999999_000.png,Nodule,10,10,20,20\n")  # an image Data_Entry does not list
        f.write("99999999_001.png,Nodule,x,10,20,20\n")  # a bad box row: not a study
    studies, rejects, c = read("nih-cxr14", [root], onto)
    rows = [r for r in rejects if r.stage == "source-row"]
    assert c.rejects == 0 and c.row_rejects == len(rows) == 3 and c.read == len(studies)
    assert any("a size is not positive" in r.reason for r in rows)
    assert any("99999999_000.png: box row for an image" in r.reason for r in rows)
    first = next(s for s in studies if s.images[0].id == sizes[1].split(",")[0])
    assert first.images[0].width == 448 and first.boxes  # size from the file, boxes still scaled
    r = cli("build", "nih-cxr14", "--input", str(root), "--out", str(tmp_path / "o"))
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "o" / "manifest.json").read_text())["counts"]
    assert m["studies_in"] == m["records_read"] == len(studies)  # box rows do not inflate studies_in
    assert m["rejected_lines"] == 3 and m["rejects_by_stage"] == {"source-row": 3}


# -- table cells -----------------------------------------------------------------------------------
@pytest.mark.parametrize("cell", ["inf", "1e400", "nan", "-5", "0", "abc"])
def test_pixel_sizes_never_overflow(cell):
    with pytest.raises(ValueError):
        pixel_dim(cell)
    assert pixel_dim("2048.0") == 2048 and pixel_dim(" ") is None


def test_padchest_infinite_rows_and_deep_labels_cell(tmp_path, onto):
    from test_sources_datasets import PADCHEST_COLS, _pad_row

    rows = [
        _pad_row("a.png", "s1", "p1", "['pleural effusion']", rows="inf"),
        _pad_row("b.png", "s2", "p2", "['pleural effusion']", rows="1e400"),
        _pad_row("c.png", "s3", "p3", "-" * 100000 + "1"),
        _pad_row("d.png", "s4", "p4", "['pleural effusion']"),
    ]
    t = tmp_path / "PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv"
    t.write_text(PADCHEST_COLS + "\n" + "\n".join(rows) + "\n")
    studies, rejects, _ = read("padchest", [t], onto)
    assert [s.id for s in studies] == ["padchest:s4"] and len(rejects) == 3
    assert "Rows_DICOM" in rejects[0].reason and "malformed list cell" in rejects[2].reason


def test_mimic_infinite_rows(tmp_path, onto):
    from test_sources_datasets import _mimic

    root = _mimic(tmp_path)
    meta = root / "mimic-cxr-2.0.0-metadata.csv.gz"
    text = gzip.open(meta, "rt").read().replace(",3056,2544,21800506", ",inf,2544,21800506", 1)
    with gzip.open(meta, "wt") as f:
        f.write(text)
    studies, rejects, _ = read("mimic-cxr", [root], onto)
    assert any("non-numeric Rows/Columns 'inf'" in r.reason for r in rejects)


def test_dicom_bad_pixel_spacing_is_a_note(tmp_path, onto):
    pydicom = pytest.importorskip("pydicom")
    from test_sources_datasets import write_dicom

    f = write_dicom(tmp_path / "d" / "a.dcm", spacing=(0.25, 0.25))
    data = f.read_bytes()
    assert data.count(b"0.25\\0.25") == 1
    f.write_bytes(data.replace(b"0.25\\0.25", b"abcd\\efgh"))  # same length: a valid file, a bad value
    assert pydicom.dcmread(f).Rows == 32
    studies, rejects, _ = read("dicom", [tmp_path / "d"], onto)
    notes = [s.meta.get("pixel_spacing_note") for s in studies] + [r.reason for r in rejects]
    assert any(n and "PixelSpacing" in n for n in notes)


# -- eval and predict inputs -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("hard") / "ds"
    r = cli("build", "--out", str(out))
    assert r.exit_code == 0, r.output
    return out


@pytest.mark.parametrize("content,where", [
    (b'{"qa_id":"a","prediction":"yes","image_size":["a","b"]}\n', ":1: image_size"),
    (b'{"qa_id":"a","prediction":"yes"}\n{"qa_id":"b","prediction":"y","image_size":[null,1]}\n', ":2: image_size"),
    (b'{"qa_id":"a","prediction":"yes"}\n{"qa_id":"b","prediction":"no \xff\xfe"}\n', ":2: not UTF-8"),
])
def test_eval_prediction_file_errors_name_the_line(built, tmp_path, content, where):
    p = tmp_path / "p.jsonl"
    p.write_bytes(content)
    r = cli("eval", str(built), "--predictions", str(p), "--out", str(tmp_path / "ev"))
    assert r.exit_code != 0 and f"p.jsonl{where}" in r.output, r.output


def test_damaged_parquet_shard_named_by_eval_and_predict(built, tmp_path):
    ds = tmp_path / "ds"
    shutil.copytree(built, ds)
    shard = sorted((ds / "qa").glob("part-*.parquet"))[0]
    data = shard.read_bytes()
    shard.write_bytes(data[:200] + bytes(b ^ 0x5A for b in data[200:-2000]) + data[-2000:])
    p = tmp_path / "p.jsonl"
    p.write_text('{"qa_id":"a","prediction":"yes"}\n')
    r = cli("eval", str(ds), "--predictions", str(p), "--out", str(tmp_path / "ev"))
    assert r.exit_code != 0 and "damaged Parquet shard" in r.output and shard.name in r.output, r.output
    shard.write_bytes(data[: len(data) // 3])  # cut short: no footer
    r = cli("predict", str(ds), "--model", "openai:m", "--base-url", "http://127.0.0.1:9/v1",
            "--out", str(tmp_path / "pr.jsonl"), "--no-cache")
    assert r.exit_code != 0 and shard.name in r.output, r.output
    with pytest.raises(Exception):
        pq.ParquetFile(shard)  # the shard really is damaged


# -- CSV rows and images ---------------------------------------------------------------------------
def test_unclosed_quote_does_not_swallow_the_next_row(tmp_path, onto):
    f = tmp_path / "r.csv"
    f.write_text("id,text,patient_id\n"
                 "r1,Small left pleural effusion.,p1\n"
                 'r2,"No effusion.,p2\n'
                 'r3,"Normal heart size",p3\n'
                 "r4,Small right pleural effusion.,p4\n")
    studies, rejects, c = read("csv", [f], onto)
    assert [(s.id, s.patient_id) for s in studies] == [("csv:r1", "csv:p1"), ("csv:r4", "csv:p4")]
    # r2 and r3: one reject line each, naming the line where the quote opened
    assert [r.ref.rsplit(":", 1)[1] for r in rejects] == ["3", "4"]
    assert all("quoted field opened on line 3" in r.reason for r in rejects) and c.read == 4


def test_huge_multiline_field_is_one_record(tmp_path, onto):
    field = "Small left pleural effusion. " * 7000 + "\nmore text, with commas\n" * 10  # ~200k chars
    f = tmp_path / "r.csv"
    f.write_text(f'id,text\nr1,Small effusion.\nr2,"{field}"\nr3,Small effusion.\nr4,Normal.\n')
    studies, rejects, c = read("csv", [f], onto)
    assert [s.id for s in studies] == ["csv:r1", "csv:r2", "csv:r3", "csv:r4"] and not rejects
    assert len(studies[1].report_text) > 200_000 and c.read == 4


def test_truncated_and_header_only_images_are_rejected(tmp_path, onto):
    from PIL import Image as PILImage

    from radvqa.sources.base import image_size

    good = tmp_path / "good.jpg"
    PILImage.effect_noise((64, 64), 40).convert("L").save(good, quality=90)
    png = tmp_path / "good.png"
    PILImage.effect_noise((64, 64), 40).convert("L").save(png)
    data, pdata = good.read_bytes(), png.read_bytes()
    (tmp_path / "half.jpg").write_bytes(data[: len(data) // 2])
    (tmp_path / "head.jpg").write_bytes(data[: data.index(b"\xff\xda")])  # headers, no scan data
    (tmp_path / "half.png").write_bytes(pdata[: len(pdata) // 2])
    assert image_size(good) == (64, 64) and image_size(png) == (64, 64)
    for name in ("half.jpg", "head.jpg", "half.png"):
        with pytest.raises(ValueError, match="unreadable image"):
            image_size(tmp_path / name)
    # through an adapter: the row naming the broken image is a reject with the reason
    (tmp_path / "r.csv").write_text("id,text,image\na,Small left pleural effusion.,good.jpg\n"
                                    "b,Small left pleural effusion.,half.jpg\n")
    studies, rejects, _ = read("csv", [tmp_path / "r.csv"], onto)
    assert [s.id for s in studies] == ["csv:a"] and "truncated JPEG" in rejects[0].reason


def test_dicom_only_folder_is_rejected_with_the_documented_reason(tmp_path):
    pytest.importorskip("pydicom")
    from test_sources_datasets import write_dicom

    write_dicom(tmp_path / "dcm" / "a.dcm", study_uid="1.2.3")
    write_dicom(tmp_path / "dcm" / "b.dcm", study_uid="1.2.4", patient_id="P2")
    out = tmp_path / "o"
    r = cli("build", "dicom", "--input", str(tmp_path / "dcm"), "--out", str(out))
    assert "Traceback" not in r.output
    rej = [json.loads(x) for x in (out / "rejected.jsonl").read_text().splitlines()] if (out / "rejected.jsonl").exists() else []
    reasons = {x["reason"] for x in rej}
    assert len(rej) == 2 and all(x.startswith("images only") and "docs/generation.md" in x for x in reasons), (r.output, rej)
    doc = (Path(__file__).resolve().parents[1] / "docs" / "generation.md").read_text()
    assert "## Image-only studies" in doc


# -- viewer and rendered files ---------------------------------------------------------------------
def test_viewer_refuses_roots_that_resolve_to_slash_or_hold_home(tmp_path, monkeypatch):
    from radvqa.viewer.paths import FileGate, declared_image_roots, unsafe_root

    home = tmp_path / "home" / "alice"
    home.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    (tmp_path / "imgs").mkdir()
    os.symlink("/", tmp_path / "slash")
    manifest = {"image_roots": ["/proc/self/root", str(tmp_path / "slash"), str(tmp_path / "home"),
                                str(home), str(tmp_path / "imgs")]}
    roots = declared_image_roots(manifest, tmp_path)
    assert roots == [tmp_path / "imgs"]
    assert "file-system root" in unsafe_root(Path("/proc/self/root"))
    assert "home folder" in unsafe_root(tmp_path / "home")
    gate = FileGate(tmp_path, [Path("/proc/self/root"), tmp_path / "imgs"])
    assert [r.path for k, r in gate.roots.items() if k != "d"] == [tmp_path / "imgs"]
    assert gate.resolve("r0", "etc/passwd") is None


def test_viewer_search_query_is_capped():
    from radvqa.viewer.query import QueryError
    from radvqa.viewer.server import parse_query

    assert parse_query("q=pleural+effusion")[0].text == ("pleural", "effusion")
    for q in ("q=" + "+".join(f"w{i}" for i in range(1000)), "q=" + "x" * 5000, "grade=" + ",".join(map(str, range(500)))):
        with pytest.raises(QueryError, match="at most"):
            parse_query(q)


def test_static_page_escapes_comment_and_script_openers(tmp_path):
    import pyarrow as pa
    from msgspec import to_builtins

    from radvqa.model import QA
    from radvqa.viewer.export import render_static
    from radvqa.viewer.query import ViewerDataset

    evil = "<!--<script>x</script>"
    qa = QA(qa_id="x1", source="s", split="test", patient_id="p", study_id="s1", strategy="qba",
            question_type="t", template_id="t", template_version=1, question=evil, answer=evil,
            image_paths=["missing.png"], image_ids=["i"])
    (tmp_path / "qa").mkdir()
    pq.write_table(pa.Table.from_pylist([to_builtins(qa)]), tmp_path / "qa" / "part-00000.parquet")
    page, _ = render_static(ViewerDataset(tmp_path), 5)
    opener = '<script id="radvqa-data" type="application/json">'
    start = page.index(opener) + len(opener)
    blob = page[start: page.index("</script>", start)]
    assert "<" not in blob  # no "<!--", "<script" or "</script" can reach the HTML parser
    assert json.loads(blob)["items"][0]["question"] == evil


def test_split_values_with_html_are_escaped_in_card_and_report(tmp_path):
    evil = "<img src=x onerror=alert(1)>"
    f = tmp_path / "r.jsonl"
    f.write_text("".join(json.dumps({"id": f"s{i}", "patient_id": f"p{i}", "split": evil,
                                     "text": "Small left pleural effusion."}) + "\n" for i in range(3)))
    out = tmp_path / "o"
    r = cli("build", "csv", "--input", str(f), "--out", str(out))
    assert r.exit_code == 0, r.output
    card = (out / "README.md").read_text()
    assert evil.lower() not in card.lower() and "&lt;img" in card
    qa = pq.read_table(out / "qa" / "part-00000.parquet", columns=["qa_id", "answer"]).to_pylist()
    p = tmp_path / "p.jsonl"
    p.write_text("".join(json.dumps({"qa_id": x["qa_id"], "prediction": x["answer"]}) + "\n" for x in qa))
    r = cli("eval", str(out), "--predictions", str(p), "--out", str(tmp_path / "ev"), "--split", evil.lower(), "--no-plots")
    assert r.exit_code == 0, r.output
    for name in ("report.md", "report.html"):
        text = (tmp_path / "ev" / name).read_text()
        assert evil.lower() not in text.lower(), name


def test_truncated_and_non_gzip_csv_gz(tmp_path, onto):
    rows = (SAMPLE / "nih-cxr14" / "Data_Entry_2017_v2020.csv").read_text().splitlines()
    header, body = rows[0], rows[1:]
    text = "\n".join([header] + body * 400) + "\n"  # ~18k rows (duplicates rejected, that is fine)
    data = gzip.compress(text.encode())
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "Data_Entry_2017.csv.gz").write_bytes(data[: len(data) // 2])
    studies, rejects, c = read("nih-cxr14", [tmp_path / "a" / "Data_Entry_2017.csv.gz"], onto)
    assert studies and "file damaged after line" in rejects[-1].reason and "EOFError" in rejects[-1].reason
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "Data_Entry_2017.csv.gz").write_text(header + "\n")  # plain text named .gz
    r = cli("build", "nih-cxr14", "--input", str(tmp_path / "b" / "Data_Entry_2017.csv.gz"), "--out", str(tmp_path / "o"))
    assert r.exit_code == 1 and "Data_Entry_2017.csv.gz: cannot read the table" in r.output, r.output
    assert "spill" not in r.output
