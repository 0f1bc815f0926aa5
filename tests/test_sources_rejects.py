"""The remaining reject reasons of the adapters, one small case each (the main cases are in
test_sources_openi_nih.py and test_sources_datasets.py). Every case checks the count invariant."""

from __future__ import annotations

import sys
from pathlib import Path

import pydicom
import pytest
from PIL import Image as PILImage

from radvqa.model import Reject, Study
from radvqa.sources import get_source, sample_inputs

DATA = Path(__file__).parent / "data" / "sources"
sys.path.insert(0, str(DATA))
from dicom_util import write_dicom  # noqa: E402
from stub_ontology import StubOntology  # noqa: E402


@pytest.fixture(scope="module")
def onto():
    from radvqa.ontology import load_ontology

    return load_ontology()


def reasons(source, inputs, onto, n_in=None):
    recs = list(get_source(source).iter_records(inputs, ontology=onto))
    if n_in is not None:
        assert len(recs) == n_in
    return [r for r in recs if isinstance(r, Study)], " | ".join(r.reason for r in recs if isinstance(r, Reject))


def w(p: Path, data: str | bytes) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return p


def test_openi_missing_uid(onto, tmp_path):
    good = (DATA / "openi" / "1.xml").read_text()
    w(tmp_path / "x" / "9.xml", good.replace('<uId id="CXR1"/>', ""))
    _, why = reasons("openi", [tmp_path / "x"], onto, 1)
    assert "missing uId" in why


def test_nih_short_and_empty_rows(onto, tmp_path):
    nih = sample_inputs()[1]
    entry = (nih / "Data_Entry_2017_v2020.csv").read_text().splitlines()
    w(tmp_path / "Data_Entry_2017.csv", "\n".join(entry[:3] + [",Mass,0,1,50,M,PA,1,1,1,1"]) + "\n")
    w(tmp_path / "BBox_List_2017.csv", "Image Index,Finding Label,Bbox [x,y,w,h],,,\n00000732_005.png,Mass,1\n")
    studies, why = reasons("nih-cxr14", [tmp_path / "Data_Entry_2017.csv", tmp_path / "BBox_List_2017.csv"], onto)
    assert len(studies) == 2 and "empty Image Index" in why and "box row has 3 cells" in why


def test_vindr_corrupt_dicom_duplicate_labels_short_rows(onto, tmp_path):
    w(tmp_path / "ann" / "annotations_train.csv",
      "image_id,rad_id,class_name,x_min,y_min,x_max,y_max\nc1,R1,No finding,,,,\nc2,R1\n")
    w(tmp_path / "img" / "c1.dicom", b"DICM? no")
    _, why = reasons("vindr-cxr", [tmp_path / "ann", tmp_path / "img"], onto)
    assert "unreadable DICOM" in why and "too few columns" in why
    w(tmp_path / "lab" / "image_labels_train.csv", "image_id,rad_ID,Pneumothorax\nd1,R1,1\nd1,R1,0\nd2,R1\n")
    _, why = reasons("vindr-cxr", [tmp_path / "lab"], onto)
    assert "duplicate label row for reader R1" in why and "2 cells, header has 3" in why


def test_mimic_missing_report_subject_clash_bad_ids(onto, tmp_path):
    root = tmp_path / "m"
    w(root / "files/p10/p10000001/s50000001.txt", "FINDINGS: ok.")
    w(root / "mimic-cxr-2.0.0-split.csv",
      "dicom_id,study_id,subject_id,split\n"
      "a,50000001,10000001,train\n"  # report present
      "b,50000002,10000001,train\n"  # report file missing from the given tree
      "c,50000003,10000002,train\n"
      "d,50000003,10000009,train\n"  # the same study under another subject
      "e,5000x,10000001,train\n")  # non-numeric study_id
    studies, why = reasons("mimic-cxr", [root], onto, 4)
    assert [s.id for s in studies] == ["mimic-cxr:50000001"]
    assert "report file s50000002.txt not found" in why
    assert "disagrees" in why and "non-numeric study_id" in why


def test_chexpert_short_row(onto, tmp_path):
    t = w(tmp_path / "valid.csv", "Path,Sex,Age,Frontal/Lateral,AP/PA,Edema\nx/patient1/study1/view1_frontal.jpg,F\n")
    _, why = reasons("chexpert", [t], onto, 1)
    assert "2 cells, header has 6" in why


def test_padchest_study_level_conflicts(tmp_path):
    stub = StubOntology({"padchest": {"normal": []}})
    cols = "ImageID,ImageDir,StudyDate_DICOM,StudyID,PatientID,PatientBirth,PatientSex_DICOM,Projection,Modality_DICOM,PhotometricInterpretation_DICOM,Rows_DICOM,Columns_DICOM,Report,Labels,Localizations,LabelsLocalizationsBySentence"
    row = "{img},0,20100101,{study},{pat},1950,F,PA,CR,MONOCHROME2,10,10,texto,['normal'],[],[]"
    rows = [row.format(img="a.png", study="S1", pat="P1"), row.format(img="b.png", study="S1", pat="P2"),
            row.format(img="c.png", study="S2", pat="P3"), row.format(img="c.png", study="S2", pat="P3"),
            row.format(img="d.png", study="", pat="P4")]
    t = w(tmp_path / "padchest.csv", cols + "\n" + "\n".join(rows) + "\n")
    studies, why = reasons("padchest", [t], stub, 3)
    assert studies == [] and "disagree on PatientID" in why and "duplicate ImageID c.png" in why and "empty StudyID" in why


def test_radimagenet_listing_missing_file(onto, tmp_path):
    (tmp_path / "imgs").mkdir()
    t = w(tmp_path / "list.csv", "filename,label\nCT/lung/normal/l1.png,x\n")
    _, why = reasons("radimagenet", [t, tmp_path / "imgs"], onto, 1)
    assert "image CT/lung/normal/l1.png not found" in why


def test_generic_box_errors(onto, tmp_path):
    PILImage.new("L", (50, 50)).save(w(tmp_path / "a.png", b""))
    fid = next(iter(onto.findings))
    rep = w(tmp_path / "r.csv", "id,text,image\nr1,t,a.png\nr2,t,a.png\nr3,t,a.png\n")
    box = w(tmp_path / "b.csv", f"id,image,label,x1,y1,x2,y2\nr1,a.png,{fid},x,1,2,3\nr2,a.png,{fid},9,9,2,3\nr3,z.png,{fid},1,1,2,3\n")
    studies, why = reasons("csv", [rep, box], onto, 3)
    assert studies == []
    assert "non-numeric box" in why and "inverted or empty box" in why and "does not list" in why


def test_dicom_missing_header_fields(onto, tmp_path):
    p = write_dicom(tmp_path / "x.dcm")
    ds = pydicom.dcmread(p)
    del ds.StudyInstanceUID
    ds.save_as(p)
    _, why = reasons("dicom", [tmp_path], onto, 1)
    assert "lacks StudyInstanceUID" in why
