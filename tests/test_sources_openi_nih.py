"""OpenI and NIH ChestX-ray14 adapters, the registry and the bundled sample (real data)."""

from __future__ import annotations

import csv
import gzip
import tarfile
from pathlib import Path

import pytest
from PIL import Image as PILImage

from radvqa.model import Reject, Study
from radvqa.sources import SOURCES, get_source, sample_inputs
from radvqa.sources.base import SourceError

DATA = Path(__file__).parent / "data" / "sources"


@pytest.fixture(scope="module")
def onto():
    from radvqa.ontology import load_ontology

    return load_ontology()


def split(recs):
    return [r for r in recs if isinstance(r, Study)], [r for r in recs if isinstance(r, Reject)]


# ------------------------------------------------------------------------- registry / sample


def test_registry_lists_sources_and_rejects_unknown():
    for name in ("sample", "openi", "nih-cxr14", "synthetic"):
        assert name in SOURCES
    with pytest.raises(KeyError, match="unknown source"):
        get_source("nope")
    assert get_source("openi").name == "openi"


def test_sample_is_small_and_licensed():
    paths = sample_inputs()
    root = paths[0].parent
    assert (root / "LICENSE.txt").is_file() and (root / "PROVENANCE.md").is_file()
    size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
    assert size <= 5 * 1024 * 1024
    assert len(list((root / "openi").glob("*.xml"))) == 40
    assert len(list((root / "nih-cxr14" / "images").glob("*.jpg"))) == 30


def test_sample_source_counts(onto):
    studies, rejects = split(get_source("sample").iter_records(None, ontology=onto))
    assert rejects == []
    assert sum(s.source == "openi" for s in studies) == 40
    assert sum(s.source == "nih-cxr14" for s in studies) == 46  # 30 imaged + 16 label-only
    assert len({s.id for s in studies}) == len(studies)
    # limit counts records
    assert len(list(get_source("sample").iter_records(None, ontology=onto, limit=5))) == 5


# ------------------------------------------------------------------------- OpenI


def test_openi_report_text_sections_and_mesh(onto):
    studies, rejects = split(get_source("openi").iter_records([DATA / "openi"], ontology=onto))
    assert rejects == [] and [s.id for s in studies] == ["openi:CXR1", "openi:CXR10", "openi:CXR1013"]
    s10 = studies[1]
    lines = s10.report_text.split("\n")
    assert [ln.split(":")[0] for ln in lines] == ["COMPARISON", "INDICATION", "FINDINGS", "IMPRESSION"]
    assert lines[2].startswith("FINDINGS: The cardiomediastinal silhouette")
    assert s10.meta["mesh_major"] == "Calcified Granuloma/lung/upper lobe/right"
    assert [im.id for im in s10.images] == ["CXR10_IM-0002-1001", "CXR10_IM-0002-2001"]
    assert all(im.path is None and im.width is None for im in s10.images)
    assert s10.patient_id == "openi:CXR10"
    # an empty COMPARISON section is left out
    s1013 = studies[2]
    assert not s1013.report_text.startswith("COMPARISON")
    assert s1013.meta["mesh_major"] == "Cardiomegaly/mild; Implanted Medical Device/humerus/right"


def test_openi_mesh_major_codes_become_labels(onto):
    studies, _ = split(get_source("openi").iter_records([DATA / "openi"], ontology=onto))
    got = {s.id: [(lab.scheme, lab.name, lab.value, lab.findings) for lab in s.labels] for s in studies}
    assert got == {
        "openi:CXR1": [("openi_mesh", "normal", 1, [])],
        # the most specific "Heading/qualifier" the scheme knows, else the heading; raw code kept
        "openi:CXR10": [("openi_mesh", "Calcified Granuloma/lung/upper lobe/right", 1, ["calcified_granuloma"])],
        "openi:CXR1013": [("openi_mesh", "Cardiomegaly/mild", 1, ["cardiomegaly"]),
                          ("openi_mesh", "Implanted Medical Device/humerus/right", 1, ["orthopedic_hardware"])],
    }
    for s in studies:
        assert all(lab.findings == onto.map_code("openi_mesh", lab.name) for lab in s.labels)
        assert "mesh_unmapped" not in s.meta
    from radvqa.localize import build_scene_graph

    by = {s.id: s for s in studies}
    sg, _ = build_scene_graph(by["openi:CXR1013"], None, ontology=onto)
    assert sorted((o.finding, o.certainty, o.source) for o in sg.observations) == [
        ("cardiomegaly", "present", "label"), ("orthopedic_hardware", "present", "label")]
    sg, _ = build_scene_graph(by["openi:CXR1"], None, ontology=onto)
    assert sg.observations == [] and sg.meta["no_finding_label"] == "openi_mesh"


def test_openi_unmapped_mesh_codes_are_noted(onto, tmp_path):
    good = (DATA / "openi" / "1013.xml").read_bytes()
    codes = b"<major>No Indexing</major><major>Heart/left/obscured</major><major>Opacity/lung/base/left/mild</major>"
    start, end = good.index(b"<major>"), good.rindex(b"</major>") + len(b"</major>")
    (tmp_path / "x.xml").write_bytes(good[:start] + codes + good[end:])
    (s,) = list(get_source("openi").iter_records([tmp_path / "x.xml"], ontology=onto))
    assert [(lab.name, lab.findings) for lab in s.labels] == [("Opacity/lung/base/left/mild", ["lung_opacity"])]
    assert s.meta["mesh_unmapped"] == "No Indexing; Heart/left/obscured"


def test_openi_tgz_equals_folder(onto, tmp_path):
    tgz = tmp_path / "reports.tgz"
    with tarfile.open(tgz, "w:gz") as tf:
        for f in sorted((DATA / "openi").glob("*.xml")):
            tf.add(f, arcname=f"ecgen-radiology/{f.name}")
    a = list(get_source("openi").iter_records([tgz], ontology=onto))
    b = list(get_source("openi").iter_records([DATA / "openi"], ontology=onto))
    assert {s.id: s.report_text for s in a} == {s.id: s.report_text for s in b}


def test_openi_bad_input_rejects(onto, tmp_path):
    d = tmp_path / "xml"
    d.mkdir()
    good = (DATA / "openi" / "1.xml").read_bytes()
    (d / "1.xml").write_bytes(good)
    (d / "2.xml").write_bytes(good)  # duplicate uId CXR1
    (d / "3.xml").write_bytes(b"<eCitation><uId id='CXR3'/><Abstract>")  # truncated
    (d / "4.xml").write_bytes(good.replace(b'id="CXR1"', b'id="CXR4"').replace(b"Positive TB test", b"caf\xe9"))
    empty = good.replace(b'id="CXR1"', b'id="CXR5"')
    for lab in (b"FINDINGS", b"IMPRESSION"):
        start = empty.index(b'<AbstractText Label="' + lab + b'">')
        end = empty.index(b"</AbstractText>", start)
        empty = empty[:start] + b'<AbstractText Label="' + lab + b'"/>' + empty[end + len(b"</AbstractText>"):]
    (d / "5.xml").write_bytes(empty)
    recs = list(get_source("openi").iter_records([d], ontology=onto))
    studies, rejects = split(recs)
    assert len(recs) == 5  # studies in = out + rejected
    assert [s.id for s in studies] == ["openi:CXR1"]
    reasons = {Path(r.ref).name: r.reason for r in rejects}
    assert "duplicate report id CXR1" in reasons["2.xml"]
    assert reasons["3.xml"].startswith("malformed XML")
    assert reasons["4.xml"].startswith("malformed XML")  # not UTF-8 although declared so
    assert "empty report" in reasons["5.xml"]


def test_openi_images_found_missing_corrupt(onto, tmp_path):
    imgs = tmp_path / "png"
    imgs.mkdir()
    PILImage.new("L", (64, 48)).save(imgs / "CXR10_IM-0002-1001.png")
    PILImage.new("L", (48, 64)).save(imgs / "CXR10_IM-0002-2001.png")
    PILImage.new("L", (10, 10)).save(imgs / "CXR1_1_IM-0001-3001.png")
    (imgs / "CXR1_1_IM-0001-4001.png").write_bytes(b"\x89PNG not really")
    recs = list(get_source("openi").iter_records([DATA / "openi", imgs], ontology=onto))
    studies, rejects = split(recs)
    assert len(recs) == 3
    (s10,) = studies
    assert [(im.width, im.height) for im in s10.images] == [(64, 48), (48, 64)]
    assert s10.images[0].path == str(imgs / "CXR10_IM-0002-1001.png")
    by = {r.ref.rsplit("/", 1)[-1]: r.reason for r in rejects}
    assert "unreadable image" in by["1.xml"]
    assert "image file not found" in by["1013.xml"]


def test_openi_no_xml_is_an_error(onto, tmp_path):
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(SourceError):
        list(get_source("openi").iter_records([tmp_path / "x.txt"], ontology=onto))


# ------------------------------------------------------------------------- NIH

NIH = sample_inputs()[1]


def _bbox_rows():
    rows = list(csv.reader(open(NIH / "BBox_List_2017.csv")))
    return rows[0], rows[1:]


def test_nih_sample_labels_boxes_rescaled(onto):
    studies, rejects = split(get_source("nih-cxr14").iter_records([NIH], ontology=onto))
    assert rejects == []
    by = {s.id: s for s in studies}
    header, rows = _bbox_rows()
    assert header[2] == "Bbox [x"  # the malformed header is really there
    assert sum(len(s.boxes) for s in studies) == len(rows) == 34
    for r in rows:
        s = by["nih-cxr14:" + r[0][:-4]]
        x, y, w, h = map(float, r[2:6])
        fid = onto.map_label("nih14", "Infiltration" if r[1] == "Infiltrate" else r[1])[0]
        match = [b for b in s.boxes if b.label == fid and abs(b.x1 - x * 448 / 1024) < 1e-6]
        assert match, r
        b = match[0]
        assert abs(b.y2 - (y + h) * 448 / 1024) < 1e-6 and abs(b.x2 - (x + w) * 448 / 1024) < 1e-6
        assert 0 <= b.x1 < b.x2 <= 448 and 0 <= b.y1 < b.y2 <= 448
    s = by["nih-cxr14:00000732_005"]
    im = s.images[0]
    assert (im.width, im.height, im.original_width, im.original_height, im.view) == (448, 448, 1024, 1024, "AP")
    assert s.meta["acquisition_size"] == "2500x2048"
    pos = {lab.name for lab in s.labels if lab.value == 1}
    assert pos == {"Cardiomegaly", "Effusion", "Fibrosis", "Pleural_Thickening", "Pneumothorax"}
    assert len(s.labels) == 14 and {lab.value for lab in s.labels} == {0, 1}
    assert all(lab.scheme == "nih14" and lab.findings for lab in s.labels)


def test_nih_followup_order_and_label_only_rows(onto):
    studies, _ = split(get_source("nih-cxr14").iter_records([NIH], ontology=onto))
    p = sorted((s for s in studies if s.patient_id == "nih-cxr14:00022416"), key=lambda s: s.study_time)
    assert [s.study_time for s in p] == ["0016", "0017", "0018", "0019", "0020"]
    with_pixels = [s for s in p if s.images[0].path]
    assert len(with_pixels) == 1
    label_only = [s for s in p if not s.images[0].path]
    assert all(s.images[0].width is None and s.boxes == [] for s in label_only)
    nf = next(s for s in p if s.study_time == "0016")
    assert [lab.findings for lab in nf.labels if lab.value == 1] == [[]]  # No Finding
    # image index suffix is not the follow-up number: the column wins
    odd = next(s for s in studies if s.id == "nih-cxr14:00019750_029")
    assert odd.study_time == "0006"


def _nih_copy(tmp_path: Path) -> Path:
    d = tmp_path / "nih"
    (d / "images").mkdir(parents=True)
    for f in ("images.csv", "BBox_List_2017.csv", "Data_Entry_2017_v2020.csv"):
        (d / f).write_bytes((NIH / f).read_bytes())
    for f in (NIH / "images").iterdir():
        (d / "images" / f.name).write_bytes(f.read_bytes())
    return d


def test_nih_bad_rows_rejected_counts_add_up(onto, tmp_path):
    d = _nih_copy(tmp_path)
    entry = d / "Data_Entry_2017_v2020.csv"
    lines = entry.read_bytes().splitlines(keepends=True)
    bad = [
        b"00099999_000.png,Cardiomegaly,x,99999,50,M,PA,2500,2048,0.1,0.1\n",  # non-numeric follow-up
        b"00099999_001.png,Cardiomegaly|Dragons,1,99999,50,M,PA,2500,2048,0.1,0.1\n",  # unknown label
        lines[1],  # duplicate image index
        b"00099999_002.png,Mass\n",  # too few columns
        b"00099999_003.png,Mass,3,99999,50,M,PA,2500,2048,0.1,0.1 caf\xe9\n",  # not UTF-8
        b"00099999_004.png,,4,99999,50,M,PA,2500,2048,0.1,0.1\n",  # empty labels
    ]
    entry.write_bytes(b"".join(lines + bad))
    n_rows = len(lines) - 1 + len(bad)
    # a box row with text coordinates, one with negative width, one unknown box label
    with open(d / "BBox_List_2017.csv", "a") as f:
        f.write("00000732_005.png,Mass,abc,1,2,3\n00000732_005.png,Mass,10,10,-5,3\n00000732_005.png,Unicorn,1,1,5,5\n")
    # a listed image missing on disk, and a corrupt one
    (d / "images" / "00003391_001.jpg").unlink()
    (d / "images" / "00006751_000.jpg").write_bytes(b"\xff\xd8\xff garbage")
    recs = list(get_source("nih-cxr14").iter_records([d], ontology=onto))
    studies, rejects = split(recs)
    entry_rejects = [r for r in rejects if "Data_Entry" in r.ref]
    box_rejects = [r for r in rejects if "BBox" in r.ref]
    assert len(studies) + len(entry_rejects) == n_rows  # studies in = out + rejected
    reasons = " | ".join(r.reason for r in entry_rejects)
    for needle in (
        "non-numeric Follow-up",
        "unknown nih14 label 'Dragons'",
        "duplicate Image Index",
        "too few columns",
        "not UTF-8",
        "empty Finding Labels",
        "listed in images.csv not found",
        "unreadable image",
    ):
        assert needle in reasons, needle
    box_reasons = " | ".join(r.reason for r in box_rejects)
    assert "non-numeric box" in box_reasons and "degenerate box" in box_reasons and "Unicorn" in box_reasons
    assert all(r.ref.split(":")[-1].isdigit() for r in rejects)  # every reject names its line


def test_nih_gz_and_tables_only_without_images(onto, tmp_path):
    gz = tmp_path / "Data_Entry_2017_v2020.csv.gz"
    with gzip.open(gz, "wb") as f:
        f.write((NIH / "Data_Entry_2017_v2020.csv").read_bytes())
    recs = list(get_source("nih-cxr14").iter_records([gz, NIH / "BBox_List_2017.csv"], ontology=onto))
    studies, rejects = split(recs)
    assert len(studies) == 46 and not rejects
    s = next(s for s in studies if s.id == "nih-cxr14:00000732_005")
    # no image on disk, no size: boxes stay in the 1024 reference pixels, and that is recorded
    assert s.images[0].width is None and s.images[0].path is None
    assert max(b.x2 for b in s.boxes) > 448
    assert "1024x1024" in s.meta["box_space"]


def test_nih_requires_one_data_entry(onto, tmp_path):
    with pytest.raises(SourceError, match="Data_Entry"):
        list(get_source("nih-cxr14").iter_records([NIH / "BBox_List_2017.csv"], ontology=onto))


def test_csv_line_numbers_are_physical_lines(tmp_path):
    from radvqa.sources.base import read_csv_rows

    p = tmp_path / "t.csv"
    p.write_bytes(b'a,b\n1,2\nbad \xff,3\n4,"multi\nline"\n5,6\n')
    got = [(n, row, err is not None) for n, row, err in read_csv_rows(p)]
    assert got == [
        (1, ["a", "b"], False),
        (2, ["1", "2"], False),
        (3, None, True),
        (5, ["4", "multi\nline"], False),
        (6, ["5", "6"], False),
    ]


def test_sample_records_are_deterministic(onto):
    from radvqa.model import to_json

    a = [to_json(r) for r in get_source("sample").iter_records(None, ontology=onto)]
    b = [to_json(r) for r in get_source("sample").iter_records(sample_inputs(), ontology=onto)]
    assert a == b


def test_sources_command_lists_every_adapter():
    import typer
    from typer.testing import CliRunner

    from radvqa.sources.cli import register

    app = typer.Typer()
    register(app)

    @app.command("noop")
    def _noop() -> None:  # a second command keeps typer in multi-command mode
        pass

    res = CliRunner().invoke(app, ["sources"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    for name in SOURCES:
        assert name in res.output
    assert "BBox_List_2017.csv" in res.output
