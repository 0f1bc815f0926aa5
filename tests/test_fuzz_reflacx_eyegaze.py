"""Property-based fuzzing of the REFLACX and Eye Gaze adapters (issue #15), in test_fuzz.py's
pattern: each example writes the dataset's own layout (../shared/FORMATS.md sections 1-2) -- its
headers, random rows mixing valid cells with garbage, files present or missing, unreadable bytes --
and reads it back. Properties (test_fuzz.check): never a traceback (only the adapter's own
SourceError), every record a Study or a Reject with a reason, and records read = studies out +
study rejects (both adapters count what they read). Derandomized, bounded examples."""

from __future__ import annotations

import csv
import io
import json

from hypothesis import given
from hypothesis import strategies as st
from test_fuzz import FUZZ, JSONISH, NASTY, run
from test_fuzz import table as random_table


def table(header: list[str], valid: dict[str, list[str]], max_rows: int = 6, min_rows: int = 0) -> st.SearchStrategy[bytes]:
    """A CSV in the layout: rows of valid cells, rows with one cell broken, and test_fuzz's random
    rows and raw garbage lines (a fully random row of 24 cells almost never reaches a Study, so
    most rows here are valid or nearly so: the deeper paths get exercised too)."""
    valid_row = st.tuples(*[st.sampled_from(valid.get(h) or [""]) for h in header]).map(list)
    broken = st.tuples(valid_row, st.integers(0, len(header) - 1), st.sampled_from(NASTY)).map(
        lambda t: t[0][:t[1]] + [t[2]] + t[0][t[1] + 1:])

    def render(rows: list[list[str]], tail: bytes) -> bytes:
        s = io.StringIO()
        w = csv.writer(s, lineterminator="\r\n")  # the release's CRLF
        w.writerow(header)
        for r in rows:
            w.writerow(r)
        return s.getvalue().encode("utf-8", "surrogatepass") + tail

    garbage = random_table(header, valid, max_rows=2).map(lambda b: b.split(b"\n", 1)[1] if b"\n" in b else b"")
    return st.tuples(st.lists(st.one_of(valid_row, valid_row, valid_row, broken), min_size=min_rows, max_size=max_rows),
                     st.one_of(st.just(b""), st.just(b""), garbage)).map(lambda t: render(*t))

P1 = ["Airway wall thickening", "Atelectasis", "Consolidation", "Emphysema", "Enlarged cardiac silhouette", "Fibrosis",
      "Fracture", "Groundglass opacity", "Mass", "Nodule", "Other", "Pleural effusion", "Pleural thickening",
      "Pneumothorax", "Pulmonary edema", "Quality issue", "Support devices", "Wide mediastinum"]
P23 = ["Abnormal mediastinal contour", "Acute fracture", "Atelectasis", "Consolidation", "Enlarged cardiac silhouette",
       "Enlarged hilum", "Groundglass opacity", "Hiatal hernia", "High lung volume / emphysema",
       "Interstitial lung disease", "Lung nodule or mass", "Other", "Pleural abnormality", "Pneumothorax",
       "Pulmonary edema", "Support devices"]
META = ["id", "split", "eye_tracking_data_discarded", "image", "dicom_id", "subject_id", "image_size_x", "image_size_y"]
RIDS = ["P300R000001", "P300R000002", "P102R000003"]
IMAGES = ["physionet.org/files/mimic-cxr/2.0.0/files/p10/p10000001/s50000001/d1.dcm",
          "physionet.org/files/mimic-cxr/2.0.0/files/p10/p10000001/s50000001/d1.dcm",
          "physionet.org/files/mimic-cxr/2.0.0/files/p10/p10000001/s50000002/d2.dcm", "files/x/y.dcm"]
CERT = ["0", "1", "2", "3", "4", "5", "", "4"]
BOOL = ["True", "False"]


def _meta_valid(labels: list[str]) -> dict[str, list[str]]:
    v = {"id": RIDS, "split": ["train", "test"], "eye_tracking_data_discarded": BOOL, "image": IMAGES,
         "dicom_id": ["d1", "d2", ""], "subject_id": ["10000001", ""], "image_size_x": ["300", "2544"],
         "image_size_y": ["400", "3056"]}
    v.update({k: (BOOL if k in ("Support devices", "Quality issue") else CERT) for k in labels})
    v["Other"] = ["", "scoliosis|old rib deformity"]
    return v


def _ellipses(labels: list[str]) -> st.SearchStrategy[bytes]:
    v = {"xmin": ["10", "-20", "250"], "ymin": ["10", "380"], "xmax": ["60", "320", "9"], "ymax": ["70", "500"],
         "certainty": CERT}
    v.update({k: BOOL for k in labels})
    return table(["xmin", "ymin", "xmax", "ymax", "certainty", *labels], v, max_rows=4)


_CHEST_VALID = {"xmin": ["20"], "ymin": ["30"], "xmax": ["285"], "ymax": ["395"]}
_CHEST1 = table(["xmin", "ymin", "xmax", "ymax"], _CHEST_VALID, min_rows=1, max_rows=1)
CHEST = st.one_of(_CHEST1, _CHEST1, _CHEST1,
                  table(["xmin", "ymin", "xmax", "ymax"], _CHEST_VALID, max_rows=2))
_TEXTS = st.sampled_from([b"No pleural effusion. Left basilar atelectasis.", b"Left basilar atelectasis.",
                          b"\xef\xbb\xbfSmall right pleural effusion.\r\n"])
TEXT = st.one_of(_TEXTS, _TEXTS, _TEXTS,
                 st.text(max_size=40).map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary(max_size=20))


def _reading(labels: list[str]) -> st.SearchStrategy[dict[str, bytes]]:
    """A reading folder's files, each one present or missing."""
    full = st.fixed_dictionaries({"anomaly_location_ellipses.csv": _ellipses(labels), "chest_bounding_box.csv": CHEST,
                                  "transcription.txt": TEXT})
    some = st.fixed_dictionaries({}, optional={"anomaly_location_ellipses.csv": _ellipses(labels),
                                               "chest_bounding_box.csv": CHEST, "transcription.txt": TEXT})
    return st.one_of(full, full, some)


@FUZZ
@given(meta3=table(META + P23, _meta_valid(P23), max_rows=5),
       meta1=st.one_of(st.none(), table(META + P1, _meta_valid(P1), max_rows=3)),
       folders=st.lists(st.tuples(st.sampled_from(RIDS), st.sampled_from([False, False, True])), min_size=1, max_size=4,
                        unique_by=lambda t: t[0]),
       contents=st.data(),
       mimic=st.one_of(st.none(), table(["dicom_id", "subject_id", "study_id", "ViewPosition", "StudyDate", "StudyTime"],
                                        {"dicom_id": ["d1", "d2"], "subject_id": ["10000001"], "study_id": ["50000001"],
                                         "ViewPosition": ["PA"], "StudyDate": ["21800101"], "StudyTime": ["101010.000"]})))
def test_fuzz_reflacx(meta3, meta1, folders, contents, mimic):
    files: dict[str, bytes] = {"main_data/metadata_phase_3.csv": meta3}
    if meta1 is not None:
        files["main_data/metadata_phase_1.csv"] = meta1
    for rid, phase1 in folders:
        for name, data in contents.draw(_reading(P1 if phase1 else P23)).items():
            files[f"main_data/{rid}/{name}"] = data
    inputs = ["main_data"]
    if mimic is not None:
        files["mimic/mimic-cxr-2.0.0-metadata.csv"] = mimic
        inputs.append("mimic")
    run("reflacx", files, inputs=inputs)


def test_fuzz_reflacx_spills_to_disk_the_same(tmp_path):
    # the external sort's disk path (more readings than one run) gives the records of the
    # in-memory path, in the same order
    import shutil
    from pathlib import Path

    from radvqa.model import Reject, Study
    from radvqa.ontology import load_ontology
    from radvqa.sources.reflacx import ReflacxSource

    main = tmp_path / "main_data"
    shutil.copytree(Path(__file__).parent / "data" / "sources" / "reflacx" / "main_data", main)
    onto = load_ontology()
    mem = ReflacxSource()
    a = list(mem.iter_records([main], ontology=onto))
    disk = ReflacxSource()
    disk.run_readings = 2
    b = list(disk.iter_records([main], ontology=onto))
    assert disk.spilled > 0 and mem.spilled == 0
    assert [type(r) for r in a] == [type(r) for r in b] and a == b
    assert disk.counts.read == disk.counts.studies + disk.counts.rejects == len([r for r in a if isinstance(r, Study)]) + \
        len([r for r in a if isinstance(r, Reject) and r.stage == "source"])


DIDS = ["a1", "b2", "c3"]
MASTER = ["dicom_id", "path", "study_id", "patient_id", "Normal", "CHF", "pneumonia", "cxr_exam_indication"]


@FUZZ
@given(master=table(MASTER, {"dicom_id": DIDS, "path": ["files/p11/p11000001/s51000001/a1.dcm", ""],
                             "study_id": ["51000001", "s51000002", "x"], "patient_id": ["11000001", "p11000002"],
                             "Normal": ["0", "1", ""], "CHF": ["0", "1", "yes"], "pneumonia": ["0", "1"],
                             "cxr_exam_indication": ["___F with chest pain.\nEvaluate.", ""]}, max_rows=5),
       boxes=st.one_of(st.none(), table(["dicom_id", "bbox_name", "x1", "x2", "y1", "y2"],
                                        {"dicom_id": DIDS + ["zz"], "bbox_name": ["right lung", "left lung", "aortic knob", "unicorn"],
                                         "x1": ["250.0", "9"], "x2": ["1300.0", "5"], "y1": ["300"], "y2": ["2200"]})),
       fixations=st.one_of(st.none(), table(["SESSION_ID", "DICOM_ID", "X_ORIGINAL", "Y_ORIGINAL"],
                                            {"DICOM_ID": DIDS + ["calibration_image_01", ""]})),
       transcripts=st.one_of(st.none(), st.dictionaries(
           st.sampled_from(DIDS),
           st.one_of(JSONISH.map(lambda o: json.dumps(o).encode()), st.binary(max_size=20),
                     st.just(json.dumps({"full_text": "The lungs are clear.", "time_stamped_text": []}).encode())),
           max_size=3)))
def test_fuzz_eyegaze(master, boxes, fixations, transcripts):
    files = {"egd-cxr/master_sheet.csv": master}
    if boxes is not None:
        files["egd-cxr/bounding_boxes.csv"] = boxes
    if fixations is not None:
        files["egd-cxr/fixations.csv"] = fixations
    if transcripts is not None:
        files["egd-cxr/audio_segmentation_transcripts/.keep"] = b""
        for did, data in transcripts.items():
            files[f"egd-cxr/audio_segmentation_transcripts/{did}/transcript.json"] = data
    run("eye-gaze", files, inputs=["egd-cxr"])
