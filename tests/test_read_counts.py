"""Records read, counted by each adapter where it reads them (issue #20): VinDr-CXR, CheXpert,
MIMIC-CXR, PadChest, Chest ImaGenome, RadImageNet and DICOM folders.

Per adapter, on a fixture in its real layout holding malformed rows: the adapter's own count equals
studies + rejects, each malformed row is a reject line; and a record lost inside the adapter (a
study read, then neither yielded nor rejected) stops the build's read with a clear error instead of
vanishing -- the check the spill-based ``studies_in`` cannot make."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from PIL import Image as PILImage
from typer.testing import CliRunner

from radvqa.cli import app
from radvqa.model import Reject, Study
from radvqa.run.errors import BuildError
from radvqa.run.reader import spill_part
from radvqa.sources import get_source

sys.path.insert(0, str(Path(__file__).parent))
from test_sources_datasets import (  # noqa: E402
    CHEXPERT_HEADER,
    PADCHEST_COLS,
    RIN,
    VINDR_ANN,
    _graph,
    _mimic,
    _pad_row,
    write,
    write_dicom,
)


@pytest.fixture(scope="module")
def onto():
    from radvqa.ontology import load_ontology

    return load_ontology()


# Each maker writes a fixture and returns (source, inputs, records the fixture holds, reasons that
# must be among the reject lines: the malformed rows, reported).
Case = tuple[str, list[Path], int, list[str]]


def vindr(tmp: Path) -> Case:
    # 5 images (img3-5 malformed: non-numeric, inverted box, unknown class) + a cut-off row
    t = write(tmp / "annotations" / "annotations_train.csv", VINDR_ANN + "img6,R8\n")
    return "vindr-cxr", [t], 6, ["non-numeric box", "inverted or empty box", "Unicorn", "too few columns"]


def chexpert(tmp: Path) -> Case:
    rows = [
        "CheXpert-v1.0-small/train/patient00001/study1/view1_frontal.jpg,Female,68,Frontal,AP,1.0,,,,,,,,,0.0,,,,1.0",
        "CheXpert-v1.0-small/train/patient00002/study2/view1_frontal.jpg,Female,87,Frontal,AP,,,-1.0,1.0,,,,,,,,,1.0,",
        "CheXpert-v1.0-small/train/patient00002/study2/view2_lateral.jpg,Female,87,Lateral,,,,-1.0,1.0,,,,,,,,,1.0,",
        "CheXpert-v1.0-small/train/patient00003/study1/view1_frontal.jpg,Male,41,Frontal,AP,,,,,,7,,,,,,,,",
        "not/a/path.jpg,Male,41,Frontal,AP,,,,,,,,,,,,,,",
        "CheXpert-v1.0-small/train/patient00004/study1/view1_frontal.jpg,Male,41",
        "CheXpert-v1.0-small/train/patient00001/study1/view2_frontal.jpg,Female,68,Frontal,AP,1.0,,,,,,,,,0.0,,,,1.0",
    ]
    t = write(tmp / "CheXpert-v1.0-small" / "train.csv", CHEXPERT_HEADER + "\n".join(rows) + "\n")
    # studies: p1/s1, p2/s2 (2 rows), p3/s1, p1/s1 again (not contiguous); rejects: bad Path, short row
    return "chexpert", [t], 6, ["not 1, 0, -1 or blank", "is not .../patientN/studyM/file", "3 cells, header has 19",
                                "duplicate study"]


def mimic(tmp: Path) -> Case:
    root = _mimic(tmp)  # 5 studies: 2 good, an empty report, a non-UTF-8 report, a 2.0 label, bad Rows
    t = root / "mimic-cxr-2.0.0-split.csv"
    t.write_text(t.read_text() + "d9,abc,10000032,train\n")  # a non-numeric study_id: a line reject
    return "mimic-cxr", [root], 6, ["not UTF-8", "non-numeric Rows/Columns", "non-numeric study_id/subject_id"]


def imagenome_joined(tmp: Path) -> Case:
    root = _mimic(tmp)
    sg = tmp / "silver_dataset" / "scene_graph"
    write(sg / "d1_SceneGraph.json", json.dumps(_graph("d1", "50414267", "10000032")))
    write(sg / "zz_SceneGraph.json", json.dumps(_graph("zz", "59999999", "10000032")))  # matches no image
    write(sg / "d3_SceneGraph.json", "{not json")  # rejects its study
    return "chest-imagenome", [sg, root], 5 + 1, ["matches no MIMIC-CXR image", "malformed JSON"]


def imagenome_standalone(tmp: Path) -> Case:
    sg = tmp / "sg"
    write(sg / "d1_SceneGraph.json", json.dumps(_graph("d1", "50414267", "10000032")))
    write(sg / "d2_SceneGraph.json", json.dumps(_graph("d2", "50414267", "10000032")))  # same study
    write(sg / "d3_SceneGraph.json", json.dumps({k: v for k, v in _graph("d3", "5", "1").items() if k != "study_id"}))
    write(sg / "d4_SceneGraph.json", b"\xff\xfe")
    return "chest-imagenome", [sg], 3, ["lacks study_id", "not UTF-8"]


def padchest(tmp: Path) -> Case:
    rows = [
        _pad_row("a1.png", "S1", "P1", "['pleural effusion']"),
        _pad_row("a2.png", "S1", "P1", "['pleural effusion']", proj="L"),
        _pad_row("b1.png", "S2", "P2", "['normal']"),
        _pad_row("c1.png", "S3", "P3", "['cardiomegaly'"),  # malformed list
        _pad_row("d1.png", "", "P4", "['normal']"),  # no StudyID
        "e1.png,0,20090102,S5",  # cut off
        _pad_row("f1.png", "S2", "P9", "['normal']"),  # its study's other row names another patient
    ]
    t = write(tmp / "PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv", PADCHEST_COLS + "\n" + "\n".join(rows) + "\n")
    return "padchest", [t], 5, ["malformed list cell", "empty StudyID", "4 cells, header has", "disagree on PatientID"]


def radimagenet(tmp: Path) -> Case:
    t = write(tmp / "RadiologyAI_val.csv", "filename,label,split\n"
              "MR/knee/acl_pathology/knee000201.png,MR-knee-acl_pathology,val\n"
              "x.png,bad,val\n"
              "US/kidney/k1.png,US-kidney,val\n"
              "CT/martian/x/l1.png,CT-martian,val\n"
              "MR/knee\n")
    return "radimagenet", [t], 5, ["is not <CT|MR|US>", "ultrasound classes", "not an ontology anatomy", "1 cells, header has 3"]


def radimagenet_tree(tmp: Path) -> Case:
    import shutil

    root = shutil.copytree(RIN / "radiology_ai", tmp / "radiology_ai")
    PILImage.new("L", (8, 8)).save(write(root / "stray" / "x.png", b""))  # outside the layout
    write(root / "MR" / "knee" / "acl_pathology" / "broken.png", b"not a png")
    return "radimagenet", [root], 9 + 2, ["image not under", "broken.png"]


def dicom(tmp: Path) -> Case:
    d = tmp / "dcm"
    write_dicom(d / "a" / "1.dcm", study_uid="1.2.3", sop_uid="1.2.3.1")
    write_dicom(d / "a" / "2", study_uid="1.2.3", sop_uid="1.2.3.2")
    write_dicom(d / "b.dicom", study_uid="1.2.4", sop_uid="1.2.4.1")
    write_dicom(d / "c.dcm", study_uid="1.2.4", sop_uid="1.2.4.1")  # duplicate SOP
    write(d / "broken.dcm", b"\0" * 200)
    write(d / "notes.txt", "not a DICOM name: not a record")
    return "dicom", [d], 2 + 2, ["duplicate SOPInstanceUID", "unreadable DICOM"]


MAKERS: list[Callable[[Path], Case]] = [vindr, chexpert, mimic, imagenome_joined, imagenome_standalone, padchest,
                                        radimagenet, radimagenet_tree, dicom]


@pytest.mark.parametrize("make", MAKERS, ids=lambda m: m.__name__)
def test_records_read_equal_studies_plus_rejects(make, tmp_path, onto):
    source, inputs, n_records, reasons = make(tmp_path)
    stream = get_source(source).iter_records(inputs, ontology=onto)
    recs = list(stream)
    studies = [r for r in recs if isinstance(r, Study)]
    rejects = [r for r in recs if isinstance(r, Reject) and r.stage != "source-row"]
    c = stream.counts
    assert c.read == n_records == len(studies) + len(rejects), (c.as_dict(), [r.reason for r in rejects])
    assert studies, "the fixture has usable studies"
    said = " | ".join(f"{r.ref} {r.reason}" for r in rejects)
    for needle in reasons:  # each malformed row is reported, with a reason
        assert needle in said, (needle, said)


@pytest.mark.parametrize("make", MAKERS, ids=lambda m: m.__name__)
def test_a_record_dropped_inside_the_adapter_stops_the_read(make, tmp_path, onto, monkeypatch):
    source, inputs, _n, _reasons = make(tmp_path)
    cls = type(get_source(source))
    records = cls._records

    def losing(self, *args, **kw):  # a bug: the adapter reads a study, then loses it
        dropped = False
        for r in records(self, *args, **kw):
            if isinstance(r, Study) and not dropped:
                dropped = True
                continue
            yield r

    # first without the bug: the part's read count is the adapter's and it balances
    ok = spill_part(get_source(source).iter_records(inputs, ontology=onto), tmp_path / "spill", 0, source, False,
                    lambda s: s)
    assert ok.records_read == ok.studies + ok.source_rejects > 0
    monkeypatch.setattr(cls, "_records", losing)
    with pytest.raises(BuildError, match=r"1 dropped without a reject line"):
        spill_part(get_source(source).iter_records(inputs, ontology=onto), tmp_path / "spill2", 0, source, False,
                   lambda s: s)


def test_build_manifest_counts_and_a_lost_study_is_an_error(tmp_path, monkeypatch):
    source, inputs, n_records, _ = padchest(tmp_path)
    args = ["build", source, *[a for p in inputs for a in ("--input", str(p))], "--workers", "1"]
    r = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "o")], env={"COLUMNS": "1000"})
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "o" / "manifest.json").read_text())["counts"]
    assert m["records_read"] == m["studies_in"] == m["studies_out"] + m["studies_rejected"] == n_records

    cls = type(get_source(source))
    records = cls._records
    monkeypatch.setattr(cls, "_records", lambda self, *a, **k: (x for x in records(self, *a, **k)
                                                                 if not (isinstance(x, Study) and x.id == "padchest:S1")))
    r = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "o2")], env={"COLUMNS": "1000"})
    assert r.exit_code == 1 and "read 5 records but 0 studies + 4 rejects came out: 1 dropped" in r.output, r.output
