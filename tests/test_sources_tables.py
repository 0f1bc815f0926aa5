"""#17: a table the user names is read whatever it is called, plain or gzip, with a byte-order mark
and CRLF line ends, recognised by its columns; the layout taken is announced. One case per adapter:
the same table under its published name and as a renamed, gzipped, BOM + CRLF copy must give the
same studies."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import pytest

from radvqa.model import Reject, Study
from radvqa.sources import get_source, sample_inputs
from radvqa.sources.base import SourceError, read_csv_rows

DATA = Path(__file__).parent / "data" / "sources"
sys.path.insert(0, str(Path(__file__).parent))
from test_sources_datasets import CHEXPERT_HEADER, VINDR_ANN, _mimic  # noqa: E402


@pytest.fixture(scope="module")
def onto():
    from radvqa.ontology import load_ontology

    return load_ontology()


def mangle(src: Path, dst: Path) -> Path:
    """The copy a mirror ships: another name, gzip, a UTF-8 BOM, CRLF line ends."""
    raw = src.read_bytes() if not src.name.endswith(".gz") else gzip.decompress(src.read_bytes())
    raw = b"\xef\xbb\xbf" + raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(gzip.compress(raw))
    return dst


def summary(recs):
    """What must not depend on the file's name or encoding: study ids, labels, boxes, images."""
    out = []
    for r in recs:
        if isinstance(r, Study):
            out.append((r.id, r.split, sorted((lab.name, lab.value, lab.reader or "") for lab in r.labels),
                        sorted(b.as_list() for b in r.boxes), [(i.id, i.width, i.height) for i in r.images]))
        else:
            assert isinstance(r, Reject)
            out.append(("reject", r.reason.replace(str(r.ref), "")))
    return out


def same_as_published(name: str, published: list[Path], mangled: list[Path], onto, layout: str) -> None:
    src = get_source(name)
    want = summary(src.iter_records(published, ontology=onto))
    assert want and any(w[0] != "reject" for w in want)
    src.notes = []
    got = summary(src.iter_records(mangled, ontology=onto))
    assert got == want
    assert any("recognised as " + layout in n and "gzip" in n for n in src.notes), src.notes


def test_bom_and_crlf_in_a_plain_table(tmp_path):
    t = tmp_path / "x.csv"
    t.write_bytes(b"\xef\xbb\xbfa,b\r\n1,2\r\n")
    rows = list(read_csv_rows(t))
    assert rows[0][1] == ["a", "b"] and rows[1][1] == ["1", "2"]


def test_chexpert_renamed_gzip(onto, tmp_path):
    t = tmp_path / "CheXpert-v1.0-small" / "valid.csv"
    t.parent.mkdir()
    t.write_text(CHEXPERT_HEADER + "CheXpert-v1.0-small/valid/patient00001/study1/view1_frontal.jpg,Female,68,"
                 "Frontal,AP,1.0,,,,,,,,,0.0,,,,1.0\n")
    m = mangle(t, tmp_path / "CheXpert-v1.0-small" / "chexpert_valid.csv.gz")
    same_as_published("chexpert", [t], [m], onto, "CheXpert label table")


def test_nih_renamed_gzip(onto, tmp_path):
    nih = sample_inputs()[1]
    pub = [nih / "Data_Entry_2017_v2020.csv", nih / "BBox_List_2017.csv"]
    mangled = [mangle(pub[0], tmp_path / "nih_labels.csv.gz"), mangle(pub[1], tmp_path / "boxes.txt.gz")]
    same_as_published("nih-cxr14", pub, mangled, onto, "NIH Data_Entry table")
    # the BBox table is recognised by its columns too (its malformed "Bbox [x,y,w,h]" header)
    src = get_source("nih-cxr14")
    src.notes = []
    list(src.iter_records(mangled, ontology=onto))
    assert any("boxes.txt.gz: recognised as NIH BBox_List table" in n for n in src.notes)


def test_mimic_renamed_gzip(onto, tmp_path):
    root = _mimic(tmp_path / "pub")
    other = tmp_path / "mirror"
    for f in sorted(root.iterdir()):
        if f.is_file():
            mangle(f, other / ("mimic_" + f.name.split("-")[-1].split(".")[0] + ".tsv.gz"))
    same_as_published("mimic-cxr", sorted(f for f in root.iterdir() if f.is_file()),
                      sorted(other.iterdir()), onto, "MIMIC-CXR metadata table")


def test_padchest_renamed_gzip(onto, tmp_path):
    t = DATA / "padchest" / "PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv"
    same_as_published("padchest", [t], [mangle(t, tmp_path / "labels.csv.gz")], onto, "PadChest label table")


def test_vindr_kaggle_table_renamed_gzip(onto, tmp_path):
    """The issue's case: the Kaggle competition table shipped as vinbigdata-train.csv.gz."""
    t = tmp_path / "train.csv"
    t.write_text("image_id,class_name,class_id,rad_id,x_min,y_min,x_max,y_max\n"
                 "k1,Cardiomegaly,3,R11,691,1375,1653,1831\nk1,No finding,14,R7,,,,\nk2,No finding,14,R7,,,,\n")
    same_as_published("vindr-cxr", [t], [mangle(t, tmp_path / "m" / "vinbigdata-train.csv.gz")], onto,
                      "VinDr-CXR box table")
    a = tmp_path / "annotations_train.csv"
    a.write_text(VINDR_ANN)
    same_as_published("vindr-cxr", [a], [mangle(a, tmp_path / "m" / "ann.csv.gz")], onto, "VinDr-CXR box table")


def test_radimagenet_listing_renamed_gzip(onto, tmp_path):
    t = DATA / "radimagenet" / "RadiologyAI_val.csv"
    same_as_published("radimagenet", [t], [mangle(t, tmp_path / "listing.gz")], onto, "RadImageNet CSV listing")


def test_openi_split_table_renamed_gzip(onto, tmp_path):
    t = tmp_path / "r2gen_split.csv"
    t.write_text("report_id,split\nCXR10,test\nCXR1,validation\n")
    same_as_published("openi", [DATA / "openi", t], [DATA / "openi", mangle(t, tmp_path / "splits.gz")], onto,
                      "report split table")


def test_generic_csv_gzip_bom(onto, tmp_path):
    t = tmp_path / "reports.csv"
    t.write_text('id,patient_id,text\nr1,p1,"FINDINGS: Small effusion."\nr2,p2,"FINDINGS: Clear lungs."\n')
    m = mangle(t, tmp_path / "reports_export.dat")
    src = get_source("csv")
    assert summary(src.iter_records([m], ontology=onto)) == summary(src.iter_records([t], ontology=onto))


def test_named_file_with_foreign_columns_says_what_is_missing(onto, tmp_path):
    t = tmp_path / "chexpert_train.csv.gz"
    t.write_bytes(gzip.compress(b"Path,Sex,Age\nx,F,3\n"))
    with pytest.raises(SourceError, match=r"closest: CheXpert label table, missing column\(s\) No Finding or"):
        list(get_source("chexpert").iter_records([t], ontology=onto))
