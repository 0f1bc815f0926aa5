"""Property-based fuzzing (hypothesis) of every source adapter and of `radvqa eval` prediction
files (issue #20). Each example writes real files in the adapter's own layout -- its header, random
rows and cells mixing valid values with garbage (inf, nan, quotes, brackets, huge numbers, empty,
non-UTF-8 bytes) -- and reads them back.

Properties: nothing but a ``SourceError`` (raised by the adapter itself, not the base class's last
net around an unexpected exception) / ``PredictionError`` ever escapes (never a traceback); every record is a Study or a Reject with a reason; and the adapter's own
count of the records it reads equals studies + rejects (no silent drop).

Deterministic in CI: ``derandomize=True`` (a fixed seed derived from each test) and a bounded number
of examples, so the whole file runs in well under 40 s on 2 cores.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image as PILImage

from radvqa.model import Reject, Study
from radvqa.sources import get_source
from radvqa.sources.base import SourceError

sys.path.insert(0, str(Path(__file__).parent / "data" / "sources"))
from dicom_util import write_dicom  # noqa: E402

# RADVQA_FUZZ_EXAMPLES=500 for a deeper local hunt; CI keeps the default
N = int(os.environ.get("RADVQA_FUZZ_EXAMPLES", "12"))
FUZZ = settings(max_examples=N, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

NASTY = ["", " ", "inf", "-inf", "nan", "1e400", "-1", "0", "1.5", "99999999999999999999", '"', "'", "[", "[[",
         "]]", "[]", "['a'", "{}", "a,b", "a\nb", "|", "||", "=", "\\", "<script>", "\u202e", "nul\x00l", "x" * 300]
LABELS = ["Effusion", "Pneumothorax", "No Finding", "Cardiomegaly", "Pleural effusion", "Nodule/Mass",
          "pleural effusion", "normal", "Unicorn", "1", "0", "-1", "1.0", ""]


def cell(valid: list[str] | None = None) -> st.SearchStrategy[str]:
    parts = [st.sampled_from(NASTY), st.text(max_size=12)]
    if valid:
        parts.insert(0, st.sampled_from(valid))
    return st.one_of(*parts)


def table(header: list[str], valid: dict[str, list[str]] | None = None, max_rows: int = 6) -> st.SearchStrategy[bytes]:
    """A CSV file: the layout's header, then rows of random cells (sometimes short or long rows,
    sometimes a raw garbage line or invalid UTF-8)."""
    valid = valid or {}
    row = st.tuples(*[cell(valid.get(h)) for h in header]).map(list)
    odd = st.one_of(row.map(lambda r: r[: len(r) // 2]), row.map(lambda r: r + ["extra"]))
    raw = st.sampled_from([b'a,"unclosed\n', b"\xff\xfe,\x80\n", b"\n", b",,,,\n", b'"",""\n'])

    def render(rows: list) -> bytes:
        out = io.BytesIO()
        out.write((",".join(header) + "\n").encode())
        for r in rows:
            if isinstance(r, bytes):
                out.write(r)
            else:
                s = io.StringIO()
                csv.writer(s, lineterminator="\n").writerow(r)
                out.write(s.getvalue().encode("utf-8", "surrogatepass"))
        return out.getvalue()

    return st.lists(st.one_of(row, row, row, odd, raw), max_size=max_rows).map(render)


def check(source: str, inputs: list[Path]) -> None:
    from radvqa.ontology import load_ontology

    src = get_source(source)
    try:
        stream = src.iter_records(inputs, ontology=load_ontology())
        recs = list(stream)
    except SourceError as e:
        assert str(e).strip(), "an error says why"
        # the base class's last net turns any exception into a SourceError; one that is not an
        # I/O error is an adapter bug that stopped the whole read instead of rejecting one row
        assert e.__cause__ is None or isinstance(e.__cause__, OSError), repr(e.__cause__)
        return
    for r in recs:
        assert isinstance(r, (Study, Reject)), r
        if isinstance(r, Reject):
            assert r.reason and r.ref
    c = stream.counts
    # an adapter that declares it counts the records it reads (all of them) must
    # have counted, and none may vanish between the read and the yield
    assert c.read is not None or not src.counts_reads, (source, c.as_dict())
    assert c.read is None or c.read == c.studies + c.rejects, c.as_dict()


def run(source: str, files: dict[str, bytes], inputs: list[str] | None = None) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        for name, data in files.items():
            p = root / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        check(source, [root / i for i in inputs] if inputs else [root])


# -- one test per adapter ---------------------------------------------------------------------------
NIH_HEADER = ["Image Index", "Finding Labels", "Follow-up #", "Patient ID", "Patient Age", "Patient Gender",
              "View Position", "OriginalImage[Width", "Height]", "OriginalImagePixelSpacing[x", "y]"]


@FUZZ
@given(entry=table(NIH_HEADER, {"Image Index": ["00000001_000.png", "00000002_000.png"],
                                "Finding Labels": ["Effusion|Pneumothorax", "No Finding", "Effusion"],
                                "Follow-up #": ["0", "1"], "Patient ID": ["1", "2"], "View Position": ["PA", "AP"]}),
       boxes=table(["Image Index", "Finding Label", "Bbox [x", "y", "w", "h]"],
                   {"Image Index": ["00000001_000.png", "00000009_000.png"], "Finding Label": ["Effusion", "Infiltrate"],
                    "Bbox [x": ["10", "20.5"], "y": ["10"], "w": ["30"], "h]": ["40"]}),
       sizes=table(["image_index", "file", "source_width", "source_height", "width", "height"],
                   {"image_index": ["00000001_000.png"], "source_width": ["1024"], "width": ["448"]}))
def test_fuzz_nih(entry, boxes, sizes):
    run("nih-cxr14", {"Data_Entry_2017.csv": entry, "BBox_List_2017.csv": boxes, "images.csv": sizes})


@FUZZ
@given(ann=table(["image_id", "rad_id", "class_name", "x_min", "y_min", "x_max", "y_max"],
                 {"image_id": ["img1", "img2"], "rad_id": ["R8", "R9"], "class_name": ["Nodule/Mass", "No finding", "Aortic enlargement"],
                  "x_min": ["10", "5"], "y_min": ["10"], "x_max": ["20", "30"], "y_max": ["20"]}))
def test_fuzz_vindr(ann):
    run("vindr-cxr", {"annotations/annotations_train.csv": ann})


VINDR_LABEL_HEADER = ["image_id", "rad_ID", "Aortic enlargement", "Cardiomegaly", "Nodule/Mass", "Pleural effusion",
                      "Other diseases", "No finding"]


@FUZZ
@given(labels=table(VINDR_LABEL_HEADER, {"image_id": ["img1", "img2", ""], "rad_ID": ["R1", "R2"],
                                         **{h: ["0", "1", "1.0", "", "2"] for h in VINDR_LABEL_HEADER[2:]}}),
       kaggle=table(["image_id", "class_name", "class_id", "rad_id", "x_min", "y_min", "x_max", "y_max"],
                    {"image_id": ["k1", "k2"], "class_name": ["Cardiomegaly", "No finding", "Nodule/Mass", "Unicorn"],
                     "class_id": ["3", "14"], "rad_id": ["R7", "R11"], "x_min": ["691", ""], "y_min": ["1375"],
                     "x_max": ["1653", "1"], "y_max": ["1831"]}))
def test_fuzz_vindr_label_table_and_kaggle(labels, kaggle):
    # the image-label layout (PhysioNet image_labels_*.csv) and Kaggle's train.csv, read together
    run("vindr-cxr", {"annotations/image_labels_train.csv": labels, "kaggle/train.csv": kaggle},
        inputs=["annotations/image_labels_train.csv", "kaggle/train.csv"])


CHEX = ["Path", "Sex", "Age", "Frontal/Lateral", "AP/PA", "No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly",
        "Lung Opacity", "Lung Lesion", "Edema", "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax",
        "Pleural Effusion", "Pleural Other", "Fracture", "Support Devices"]


@FUZZ
@given(t=table(CHEX, {"Path": ["CheXpert-v1.0-small/train/patient00001/study1/view1_frontal.jpg", "train/p/s/v.jpg"],
                      **{h: ["1.0", "0.0", "-1.0", ""] for h in CHEX[5:]}}))
def test_fuzz_chexpert(t):
    run("chexpert", {"train.csv": t})


PAD = ("ImageID,ImageDir,StudyDate_DICOM,StudyID,PatientID,PatientBirth,PatientSex_DICOM,ViewPosition_DICOM,Projection,"
       "MethodProjection,Pediatric,Modality_DICOM,Manufacturer_DICOM,PhotometricInterpretation_DICOM,PixelRepresentation_DICOM,"
       "PixelAspectRatio_DICOM,SpatialResolution_DICOM,BitsStored_DICOM,WindowCenter_DICOM,WindowWidth_DICOM,Rows_DICOM,"
       "Columns_DICOM,XRayTubeCurrent_DICOM,Exposure_DICOM,ExposureTime,RelativeXRayExposure_DICOM,ReportID,Report,MethodLabel,"
       "Labels,Localizations,LabelsLocalizationsBySentence,labelCUIS,LocalizationsCUIS").split(",")


@FUZZ
@given(t=table(PAD, {"ImageID": ["a.png", "b.png"], "StudyID": ["s1", "s2"], "PatientID": ["p1"], "Projection": ["PA", "L"],
                     "StudyDate_DICOM": ["20090102"], "Rows_DICOM": ["2800"], "Columns_DICOM": ["2500"],
                     "Labels": ["['pleural effusion']", "['normal']", "['unknown thing', 'cardiomegaly']"],
                     "Localizations": ["['loc left']", "[]"],
                     "LabelsLocalizationsBySentence": ["[['pleural effusion', 'loc left']]", "[['normal']]"]}))
def test_fuzz_padchest(t):
    run("padchest", {"PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv": t})


MIMIC_META = ["dicom_id", "subject_id", "study_id", "PerformedProcedureStepDescription", "ViewPosition", "Rows", "Columns",
              "StudyDate", "StudyTime", "ProcedureCodeSequence_CodeMeaning", "ViewCodeSequence_CodeMeaning",
              "PatientOrientationCodeSequence_CodeMeaning"]
MIMIC_CHEX = ["subject_id", "study_id"] + CHEX[5:]


@FUZZ
@given(meta=table(MIMIC_META, {"dicom_id": ["d1", "d2"], "subject_id": ["10000032"], "study_id": ["50414267", "53189527"],
                               "ViewPosition": ["PA"], "Rows": ["3056"], "Columns": ["2544"], "StudyDate": ["21800506"],
                               "StudyTime": ["213014.531"]}),
       chex=table(MIMIC_CHEX, {"subject_id": ["10000032"], "study_id": ["50414267"], **{h: ["1.0", "-1.0", ""] for h in CHEX[5:]}}),
       split=table(["dicom_id", "study_id", "subject_id", "split"], {"dicom_id": ["d1"], "study_id": ["50414267"],
                                                                      "subject_id": ["10000032"], "split": ["train", "validate"]}),
       report=st.one_of(st.sampled_from([b"FINDINGS: Small left pleural effusion.\n", b"   \n", b"\xff\xfe"]), st.binary(max_size=50)))
def test_fuzz_mimic(meta, chex, split, report):
    run("mimic-cxr", {"mimic-cxr-2.0.0-metadata.csv": meta, "mimic-cxr-2.0.0-chexpert.csv": chex,
                      "mimic-cxr-2.0.0-split.csv": split, "files/p10/p10000032/s50414267.txt": report})


JSONISH = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10),
                                 st.sampled_from(LABELS + ["left lung", "PA", "anatomicalfinding|yes|pleural effusion"])),
                       lambda k: st.one_of(st.lists(k, max_size=3), st.dictionaries(st.text(max_size=6), k, max_size=3)),
                       max_leaves=12)


@FUZZ
@given(graphs=st.lists(st.one_of(
    st.fixed_dictionaries({"image_id": st.sampled_from(["d1", "d2"]), "viewpoint": JSONISH, "patient_id": JSONISH,
                           "study_id": JSONISH, "StudyDateTime": JSONISH,
                           "objects": st.lists(st.fixed_dictionaries({"bbox_name": JSONISH, "original_x1": JSONISH,
                                                                      "original_y1": JSONISH, "original_x2": JSONISH,
                                                                      "original_y2": JSONISH}), max_size=3),
                           "attributes": st.lists(st.fixed_dictionaries({"bbox_name": JSONISH, "attributes": JSONISH,
                                                                         "phrases": JSONISH}), max_size=3)}).map(
        lambda g: json.dumps(g).encode()),
    JSONISH.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=40)), min_size=1, max_size=3))
def test_fuzz_imagenome(graphs):
    run("chest-imagenome", {f"sg/d{i}_SceneGraph.json": g for i, g in enumerate(graphs)})


@FUZZ
@given(graphs=st.lists(st.tuples(st.sampled_from(["d1", "d2", "d3", "zz"]), st.one_of(
    st.fixed_dictionaries({"image_id": st.sampled_from(["d1", "d2"]), "viewpoint": JSONISH,
                           "objects": st.lists(st.fixed_dictionaries({"bbox_name": st.sampled_from(["left lung", "x", ""]),
                                                                      "original_x1": JSONISH, "original_y1": JSONISH,
                                                                      "original_x2": JSONISH, "original_y2": JSONISH}), max_size=2),
                           "attributes": st.lists(st.fixed_dictionaries({"bbox_name": JSONISH, "attributes": JSONISH}),
                                                  max_size=2)}).map(lambda g: json.dumps(g).encode()),
    st.binary(max_size=30))), max_size=3),
       meta=table(MIMIC_META, {"dicom_id": ["d1", "d2", "d3"], "subject_id": ["10000032", "10000033"],
                               "study_id": ["50414267", "53189527"], "ViewPosition": ["PA", "LATERAL"], "Rows": ["3056"],
                               "Columns": ["2544"], "StudyDate": ["21800506"], "StudyTime": ["213014.531"]}),
       report=st.one_of(st.sampled_from([b"FINDINGS: Small left pleural effusion.\n", b"", b"\xff\xfe"]), st.binary(max_size=30)))
def test_fuzz_imagenome_joined_to_mimic(graphs, meta, report):
    # scene graphs joined to MIMIC-CXR tables: graphs of listed, unlisted and malformed images
    files = {f"sg/{did}_SceneGraph.json": g for did, g in graphs}
    files |= {"mimic/mimic-cxr-2.0.0-metadata.csv": meta, "mimic/files/p10/p10000032/s50414267.txt": report}
    if not graphs:
        files["sg/d9_SceneGraph.json"] = b"{}"
    run("chest-imagenome", files, inputs=["sg", "mimic"])


RIN_PARTS = st.sampled_from(["CT", "MR", "US", "ct", "XR", "lung", "knee", "af", "abd", "martian", "nodule", "normal",
                             "acl_pathology", "achilles_pathology_", "x", "..."])


@FUZZ
@given(files=st.lists(st.tuples(st.lists(RIN_PARTS, min_size=1, max_size=4),
                                st.sampled_from(["a.png", "b.jpg", "c.jpeg", "notes.txt", "d.PNG"]),
                                st.sampled_from(["png", "broken", "empty"])), min_size=1, max_size=5))
def test_fuzz_radimagenet_tree(files):
    # the folder layout: images at random depths and under random folder names, some broken
    out: dict[str, bytes] = {}
    for parts, name, kind in files:
        if kind == "png":
            buf = io.BytesIO()
            PILImage.new("L", (4, 4)).save(buf, format="PNG")
            data = buf.getvalue()
        else:
            data = b"" if kind == "empty" else b"\x89PNG broken"
        out["/".join(parts + [name])] = data
    run("radimagenet", out)


DICOM_TEXT = st.one_of(st.sampled_from(["", "PA", "AP", "LL", "CR", "DX", "CT", "MONOCHROME1", "1.2.3", "20200102",
                                        "101500", "abcd\\efgh", "0.2\\0.2", "x" * 64, "\u00e9t\u00e9"]),
                       st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=16))


@FUZZ
@given(headers=st.lists(st.fixed_dictionaries({
    "StudyInstanceUID": st.sampled_from(["1.2.3", "1.2.4", ""]), "SOPInstanceUID": st.sampled_from(["1.2.3.1", "1.2.3.2", ""]),
    "PatientID": DICOM_TEXT, "StudyDate": DICOM_TEXT, "StudyTime": DICOM_TEXT, "ViewPosition": DICOM_TEXT,
    "Modality": DICOM_TEXT, "PhotometricInterpretation": DICOM_TEXT, "StudyDescription": DICOM_TEXT,
    "PixelSpacing": DICOM_TEXT, "Rows": st.sampled_from([0, 1, 32, 65535]), "Columns": st.sampled_from([0, 24, 65535])}),
    min_size=1, max_size=4))
def test_fuzz_dicom_header_values(headers):
    # well-formed DICOM files whose header VALUES are random: blank or clashing UIDs, zero sizes,
    # text where numbers belong (the byte-flip test above breaks the structure instead)
    import pydicom
    from pydicom.dataelem import RawDataElement
    from pydicom.tag import Tag

    with tempfile.TemporaryDirectory() as d:
        for i, h in enumerate(headers):
            f = write_dicom(Path(d) / f"{i}.dcm", rows=4, cols=4)
            ds = pydicom.dcmread(f)
            for k, v in h.items():
                if isinstance(v, str):  # the value's bytes as given, valid for its VR or not
                    tag = Tag(pydicom.datadict.tag_for_keyword(k))
                    raw = v.encode("utf-8")
                    raw += b" " * (len(raw) % 2)
                    ds[tag] = RawDataElement(tag, pydicom.datadict.dictionary_VR(tag), len(raw), raw, 0, False, True)
                else:
                    setattr(ds, k, v)
            ds.save_as(f)
        check("dicom", [Path(d)])


@FUZZ
@given(t=table(["filename", "label", "split"], {"filename": ["MR/knee/acl_pathology/knee000201.png", "CT/lung/nodule/l1.png", "x.png"],
                                                 "label": ["MR-knee-acl_pathology", "CT-lung-nodule", "MR-elbow-normal", "bad"],
                                                 "split": ["train", "val", "test"]}))
def test_fuzz_radimagenet(t):
    run("radimagenet", {"RadiologyAI_val.csv": t}, inputs=["RadiologyAI_val.csv"])


@FUZZ
@given(reports=table(["id", "text", "labels", "split", "date", "patient_id"],
                     {"id": ["a", "b", "c"], "text": ["Small left pleural effusion.", "No pneumothorax.", ""],
                      "labels": ["pleural effusion", "pneumothorax=0|cardiomegaly", "unicorn", "effusion=7"],
                      "split": ["train", "test"], "patient_id": ["p1", "p2"]}),
       labels=table(["id", "label", "value"], {"id": ["a", "z"], "label": LABELS, "value": ["1", "0", "-1", "2"]}),
       boxes=table(["id", "label", "x1", "y1", "x2", "y2"], {"id": ["a", "b"], "label": ["pleural effusion"],
                                                             "x1": ["1", "10"], "y1": ["1"], "x2": ["5", "2"], "y2": ["5"]}))
def test_fuzz_generic_csv(reports, labels, boxes):
    run("csv", {"reports.csv": reports, "labels.csv": labels, "boxes.csv": boxes})


@FUZZ
@given(lines=st.lists(st.one_of(
    st.fixed_dictionaries({"id": JSONISH, "text": JSONISH}, optional={"split": JSONISH, "date": JSONISH, "images": JSONISH,
                                                                      "labels": JSONISH, "patient_id": JSONISH}).map(
        lambda o: json.dumps(o).encode()),
    JSONISH.map(lambda v: json.dumps(v).encode()), st.binary(max_size=30)), max_size=6))
def test_fuzz_generic_jsonl(lines):
    run("csv", {"reports.jsonl": b"\n".join(x.replace(b"\n", b" ") for x in lines) + b"\n"})


XML = """<?xml version="1.0" encoding="utf-8"?>
<eCitation><uId id="{uid}"/><MedlineCitation><Article><Abstract>
<AbstractText Label="{label}">{text}</AbstractText><AbstractText Label="IMPRESSION">{imp}</AbstractText>
</Abstract></Article></MedlineCitation><MeSH><major>{mesh}</major></MeSH><parentImage id="{img}"/></eCitation>"""


def _xml_text(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;")


@FUZZ
@given(docs=st.lists(st.one_of(
    st.fixed_dictionaries({"uid": st.sampled_from(["CXR1", "CXR2", "", "CXR1\""]),
                           "label": st.sampled_from(["FINDINGS", "", "INDICATION", "findings"]),
                           "text": cell(["Small left pleural effusion.", "No pneumothorax."]),
                           "imp": cell(["Normal chest."]), "mesh": cell(["Pleural Effusion/left", "normal", "No Indexing"]),
                           "img": cell(["CXR1_1_IM-0001-3001"])}).map(
        lambda d: XML.format(**{k: _xml_text(v) for k, v in d.items()}).encode("utf-8", "surrogatepass")),
    st.binary(max_size=60),
    st.just(b'<?xml version="1.0" encoding="x-bogus-enc"?><a/>')), min_size=1, max_size=4))
def test_fuzz_openi(docs):
    run("openi", {f"ecgen-radiology/{i}.xml": d for i, d in enumerate(docs)})


@settings(max_examples=N, derandomize=True, deadline=None, database=None)
@given(flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1, max_size=8),
       cut=st.one_of(st.none(), st.integers(0, 2000)))
def test_fuzz_dicom_bytes(flips, cut):
    with tempfile.TemporaryDirectory() as d:
        f = write_dicom(Path(d) / "x" / "a.dcm")
        data = bytearray(f.read_bytes())
        for pos, x in flips:  # bytes flipped anywhere: header, tags, values, pixels
            data[pos % len(data)] ^= x
        f.write_bytes(bytes(data[:cut]) if cut is not None else bytes(data))
        check("dicom", [Path(d) / "x"])


# -- eval prediction files ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sample_dataset(tmp_path_factory):
    from typer.testing import CliRunner

    from radvqa.cli import app

    out = tmp_path_factory.mktemp("fuzz") / "ds"
    r = CliRunner().invoke(app, ["build", "--out", str(out)])
    assert r.exit_code == 0, r.output
    import pyarrow.parquet as pq

    ids = pq.read_table(sorted((out / "qa").glob("*.parquet"))[0], columns=["qa_id"]).column("qa_id").to_pylist()
    return out, ids


PRED_VALUE = st.one_of(st.none(), st.text(max_size=20), st.sampled_from(["yes", "no", "B", "[1, 2, 3, 4]", "left"]), JSONISH)


@settings(max_examples=N + 3, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_eval_prediction_files(sample_dataset, data):
    from radvqa.eval.dataset import DatasetError
    from radvqa.eval.evaluate import EvalError, evaluate
    from radvqa.eval.predictions import PredictionError

    ds, ids = sample_dataset
    rows = data.draw(st.lists(st.one_of(
        st.fixed_dictionaries({"qa_id": st.one_of(st.sampled_from(ids), JSONISH), "prediction": PRED_VALUE},
                              optional={"boxes": JSONISH, "image_size": JSONISH, "box_format": JSONISH,
                                        "error": JSONISH}).map(lambda o: json.dumps(o).encode()),
        st.binary(max_size=20), st.just(b"")), max_size=10))
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "p.jsonl"
        p.write_bytes(b"\n".join(r.replace(b"\n", b" ") for r in rows) + b"\n")
        try:
            rep = evaluate(ds, p, bootstrap=20, seed=0)
        except (PredictionError, EvalError, DatasetError) as e:
            assert str(e).strip()
            return
        assert isinstance(rep, dict)


# -- gold graphs (issue 16): RadGraph JSON records and Lunguage rows ---------------------------------
RG_LABELS = ["OBS-DP", "OBS-U", "OBS-DA", "ANAT-DP", "CHAN-WOR", "CHAN-CON-IMP", "CHAN-NC", "Observation::uncertain"]
RG_ENTITY = st.fixed_dictionaries({
    "tokens": st.one_of(st.sampled_from(["effusion", "left", "heart"]), JSONISH),
    "label": st.one_of(st.sampled_from(RG_LABELS), JSONISH),
    "start_ix": st.one_of(st.integers(-2, 8), JSONISH), "end_ix": st.one_of(st.integers(-2, 8), JSONISH),
    "relations": st.one_of(st.lists(st.tuples(st.sampled_from(["modify", "located_at", "suggestive_of", "x"]),
                                              st.sampled_from(["1", "2", "3", "9"])).map(list), max_size=3), JSONISH)})
RG_RECORD = st.one_of(
    st.fixed_dictionaries({"text": st.one_of(st.just("small left pleural effusion . heart enlarged ."), JSONISH),
                           "entities": st.one_of(st.dictionaries(st.sampled_from(["1", "2", "3"]), st.one_of(RG_ENTITY, JSONISH),
                                                                 max_size=3), JSONISH),
                           "data_split": JSONISH}),
    JSONISH)


@FUZZ
@given(records=st.dictionaries(st.sampled_from(["p10/p10000001/s50000001.txt", "p10/p1/s2.txt", "k", ""]), RG_RECORD,
                               min_size=1, max_size=4),
       anchor=st.booleans(), raw=st.one_of(st.none(), st.binary(max_size=30)))
def test_fuzz_radgraph(records, anchor, raw):
    if anchor:  # one well-formed record, so the file is taken for a graph file and every record is read
        records["p10/p10000009/s50000009.txt"] = {"text": "no effusion .", "entities": {
            "1": {"tokens": "effusion", "label": "OBS-DA", "start_ix": 1, "end_ix": 1, "relations": []}}}
    data = json.dumps(records).encode() if raw is None else raw
    run("radgraph", {"graphs/train.json": data})


LU_HEADER = ["subject_id", "study_id", "sequence", "section", "sent", "ent", "cat", "dx_status", "dx_certainty",
             "location", "severity", "improved", "worsened", "no change", "onset", "report"]


@FUZZ
@given(t=table(LU_HEADER, {"subject_id": ["p10000001", "p2"], "study_id": ["s50000001", "s50000002", ""],
                           "sequence": ["1", "2", "x", "1.5"], "section": ["find", "impr", "hist", "other"],
                           "sent": ["Small left effusion.", "No pneumothorax."], "ent": ["pleural effusion", "pneumothorax", ""],
                           "cat": ["pf", "patient info.", "oth"], "dx_status": ["positive", "negative"],
                           "dx_certainty": ["definitive", "tentative"], "location": ["left", "right lower lobe"],
                           "report": ["FINDINGS: Small left effusion. No pneumothorax."]}, max_rows=8))
def test_fuzz_lunguage(t):
    run("lunguage", {"Lunguage.csv": t})
