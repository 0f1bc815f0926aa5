"""Adapters of credentialed / large datasets on hand-made fixtures in their real layouts:
VinDr-CXR, MIMIC-CXR, Chest ImaGenome, CheXpert, PadChest, RadImageNet, generic CSV, DICOM folders."""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

import pytest
from PIL import Image as PILImage

from radvqa.localize import build_scene_graph
from radvqa.model import Reject, Study
from radvqa.sources import get_source
from radvqa.sources.base import SourceError

DATA = Path(__file__).parent / "data" / "sources"
sys.path.insert(0, str(DATA))
from dicom_util import write_dicom  # noqa: E402
from stub_ontology import StubOntology  # noqa: E402


@pytest.fixture(scope="module")
def onto():
    # the real ontology, always: a stand-in hid label-name mismatches between adapters and schemes
    from radvqa.ontology import load_ontology

    return load_ontology()


def split(recs):
    counts = getattr(recs, "counts", None)
    recs = list(recs)
    if counts is not None and counts.read is not None:  # the adapter's own count: none vanished unrejected
        assert counts.read == counts.studies + counts.rejects, counts.as_dict()
    return [r for r in recs if isinstance(r, Study)], [r for r in recs if isinstance(r, Reject)]


def write(p: Path, text: str | bytes) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return p


# ------------------------------------------------------------------------- VinDr-CXR

VINDR_ANN = """image_id,rad_id,class_name,x_min,y_min,x_max,y_max
img1,R8,Nodule/Mass,10,10,20,20
img1,R9,Nodule/Mass,11,10,21,20
img1,R10,No finding,,,,
img1,R8,Aortic enlargement,5,5,15,15
img2,R8,No finding,,,,
img2,R9,No finding,,,,
img2,R10,No finding,,,,
img3,R8,Pleural effusion,abc,1,2,3
img4,R8,Lung Opacity,30,30,25,40
img5,R8,Unicorn,1,1,5,5
"""


def test_vindr_physionet_boxes_readers_majority(onto, tmp_path):
    root = tmp_path / "vindr"
    write(root / "annotations" / "annotations_train.csv", VINDR_ANN)
    write_dicom(root / "train" / "img1.dicom", rows=40, cols=30)
    write_dicom(root / "train" / "img2.dicom")
    write(root / "train" / "img3.dicom", b"not a dicom")
    studies, rejects = split(get_source("vindr-cxr").iter_records([root / "annotations", root / "train"], ontology=onto))
    assert len(studies) + len(rejects) == 5  # 5 images in
    s1 = next(s for s in studies if s.id == "vindr-cxr:img1")
    assert (s1.images[0].width, s1.images[0].height) == (30, 40) and s1.split == "train"
    assert sorted((b.reader, b.x1) for b in s1.boxes) == [("R8", 5.0), ("R8", 10.0), ("R9", 11.0)]
    assert s1.meta["readers"] == "R10,R8,R9"
    # labels: per reader; drawn = 1, the other 20 local (boxable) labels 0; global labels
    # (Pneumonia, COPD, ...) are never drawn, so a box table says nothing about them
    r8 = {lab.name: lab.value for lab in s1.labels if lab.reader == "R8"}
    assert r8["Nodule/Mass"] == 1 and r8["Aortic enlargement"] == 1 and r8["Pneumothorax"] == 0
    assert len(r8) == 22 and set(r8) == set(onto.schemes["vindr"].groups["local"])
    assert "Pneumonia" not in r8 and "COPD" not in r8
    # R10 said "No finding": every one of the 27 labels is 0 for that reader
    r10 = {lab.name: lab.value for lab in s1.labels if lab.reader == "R10"}
    assert len(r10) == 27 and set(r10.values()) == {0} and r10["Pneumonia"] == 0
    assert {lab.name: lab.findings for lab in s1.labels if lab.reader == "R8" and lab.value}["Nodule/Mass"] == ["nodule_or_mass"]
    sg, lrej = build_scene_graph(s1, None, ontology=onto)
    assert lrej == []
    nod = onto.map_label("vindr", "Nodule/Mass")[0]
    aorta = onto.map_label("vindr", "Aortic enlargement")[0]
    obs = {o.finding: o for o in sg.observations}
    assert obs[nod].certainty == "present"  # 2 of 3 readers
    assert obs[aorta].certainty == "absent"  # 1 of 3
    fused = [b for b in obs[nod].boxes if b.source == "expert_fused"]
    assert len(fused) == 1 and fused[0].reader == "R8+R9" and fused[0].x1 == 10.5
    # absent by majority: R8's box stays with the absent observation, and the dispute is noted
    assert [b.reader for b in obs[aorta].boxes] == ["R8"] and aorta in sg.meta["boxes_on_absent_findings"]
    by_ref = {r.reason.split(":")[0]: r.reason for r in rejects}
    assert "non-numeric box" in by_ref["img3"]
    assert "inverted or empty box" in by_ref["img4"]
    assert "Unicorn" in by_ref["img5"]


def test_vindr_image_labels_and_kaggle(onto, tmp_path):
    from radvqa.sources.base import closed_label_list

    names = closed_label_list("vindr") + ["No finding"]
    rows = []
    for r, nod in (("R1", 1), ("R2", 1), ("R3", 0)):
        vals = ["1" if n == "Nodule/Mass" and nod else "0" for n in names]
        rows.append(",".join(["imgA", r] + vals))
    rows.append(",".join(["imgB", "R1"] + ["2"] * len(names)))  # bad value
    write(tmp_path / "image_labels_test.csv", "image_id,rad_ID," + ",".join(names) + "\n" + "\n".join(rows) + "\n")
    studies, rejects = split(get_source("vindr-cxr").iter_records([tmp_path / "image_labels_test.csv"], ontology=onto))
    (s,) = studies
    assert s.split == "test" and len(s.labels) == 3 * len(names)
    assert "value '2' is not 0 or 1" in rejects[0].reason
    sg, _ = build_scene_graph(s, None, ontology=onto)
    assert {o.finding: o.certainty for o in sg.observations}[onto.map_label("vindr", "Nodule/Mass")[0]] == "present"
    # Kaggle train.csv (class_id column, No finding = 14)
    k = write(
        tmp_path / "kaggle" / "train.csv",
        "image_id,class_name,class_id,rad_id,x_min,y_min,x_max,y_max\n"
        "k1,Cardiomegaly,3,R11,691,1375,1653,1831\nk1,No finding,14,R7,,,,\nk2,No finding,14,R7,,,,\n",
    )
    studies, rejects = split(get_source("vindr-cxr").iter_records([k], ontology=onto))
    assert not rejects and [s.id for s in studies] == ["vindr-cxr:k1", "vindr-cxr:k2"]
    assert studies[0].boxes[0].as_list() == [691, 1375, 1653, 1831] and studies[0].images[0].width is None
    assert {lab.value for lab in studies[1].labels} == {0}
    # Kaggle's 14 classes only, for drawing and "No finding" readers alike
    kaggle14 = set(onto.schemes["vindr"].groups["kaggle14"])
    assert len(kaggle14) == 14 and {lab.name for lab in studies[1].labels} == kaggle14
    r11 = {lab.name: lab.value for lab in studies[0].labels if lab.reader == "R11"}
    assert set(r11) == kaggle14 and r11["Cardiomegaly"] == 1 and sum(r11.values()) == 1


# image_labels_test.csv as PhysioNet ships it: no rad_ID (the 5-reader consensus) and the global
# label spelled "Other disease" (train writes "Other diseases")
VINDR_TEST_LABELS = (
    "image_id,Aortic enlargement,Atelectasis,Calcification,Cardiomegaly,Clavicle fracture,Consolidation,Edema,"
    "Emphysema,Enlarged PA,ILD,Infiltration,Lung Opacity,Lung cavity,Lung cyst,Mediastinal shift,Nodule/Mass,"
    "Pleural effusion,Pleural thickening,Pneumothorax,Pulmonary fibrosis,Rib fracture,Other lesion,COPD,Lung tumor,"
    "Pneumonia,Tuberculosis,Other disease,No finding\n"
)


def test_vindr_test_labels_other_disease_spelling(onto, tmp_path):
    n = VINDR_TEST_LABELS.count(",")
    other = VINDR_TEST_LABELS.strip().split(",").index("Other disease")
    row_t1 = ["t1"] + ["1" if i in (4, other) else "0" for i in range(1, n + 1)]  # Cardiomegaly, Other disease
    row_t2 = ["t2"] + ["0"] * (n - 1) + ["1"]  # No finding
    write(tmp_path / "annotations" / "image_labels_test.csv", VINDR_TEST_LABELS + ",".join(row_t1) + "\n" + ",".join(row_t2) + "\n")
    studies, rejects = split(get_source("vindr-cxr").iter_records([tmp_path / "annotations"], ontology=onto))
    assert rejects == [] and [s.id for s in studies] == ["vindr-cxr:t1", "vindr-cxr:t2"]
    t1, t2 = studies
    assert t1.split == "test" and t1.meta["readers"] == "consensus"
    pos = {lab.name: lab.findings for lab in t1.labels if lab.value == 1}
    assert pos == {"Cardiomegaly": ["cardiomegaly"], "Other disease": ["other_disease"]}
    assert all(lab.reader is None for lab in t1.labels) and len(t1.labels) == 28
    sg, _ = build_scene_graph(t1, None, ontology=onto)
    obs = {o.finding: o.certainty for o in sg.observations}
    assert obs["other_disease"] == "present" and obs["cardiomegaly"] == "present" and obs["pneumothorax"] == "absent"
    sg2, _ = build_scene_graph(t2, None, ontology=onto)
    assert sg2.meta["no_finding_label"] == "vindr" and all(o.certainty == "absent" for o in sg2.observations)


def test_vindr_missing_image_rejected(onto, tmp_path):
    write(tmp_path / "annotations_train.csv", "image_id,rad_id,class_name,x_min,y_min,x_max,y_max\nzz,R1,No finding,,,,\n")
    (tmp_path / "train").mkdir()
    _, rejects = split(get_source("vindr-cxr").iter_records([tmp_path / "annotations_train.csv", tmp_path / "train"], ontology=onto))
    assert "image file not found" in rejects[0].reason


# ------------------------------------------------------------------------- MIMIC-CXR (+ ImaGenome)

REPORT = """                                 FINAL REPORT
 EXAMINATION:  CHEST (PA AND LAT)

 INDICATION:  ___F with cough

 FINDINGS:  There is a small left pleural effusion.

 IMPRESSION:  Small left pleural effusion.
"""


def _mimic(tmp_path: Path) -> Path:
    root = tmp_path / "mimic"
    write(root / "files" / "p10" / "p10000032" / "s50414267.txt", REPORT)
    write(root / "files" / "p10" / "p10000032" / "s53189527.txt", REPORT.replace("small", "moderate"))
    write(root / "files" / "p10" / "p10000764" / "s57375967.txt", "   \n")  # empty report
    write(root / "files" / "p11" / "p11000011" / "s50000001.txt", b"FINDINGS: caf\xe9\n")  # not UTF-8
    # p12 study has no report file at all
    with gzip.open(root / "mimic-cxr-2.0.0-metadata.csv.gz", "wt") as f:
        f.write(
            "dicom_id,subject_id,study_id,PerformedProcedureStepDescription,ViewPosition,Rows,Columns,StudyDate,StudyTime,"
            "ProcedureCodeSequence_CodeMeaning,ViewCodeSequence_CodeMeaning,PatientOrientationCodeSequence_CodeMeaning\n"
            "d2,10000032,50414267,CHEST (PA AND LAT),LATERAL,3056,2544,21800506,213014.531,CHEST (PA AND LAT),lateral,Erect\n"
            "d1,10000032,50414267,CHEST (PA AND LAT),PA,3056,2544,21800506,213014.531,CHEST (PA AND LAT),postero-anterior,Erect\n"
            "d3,10000032,53189527,CHEST (PORTABLE AP),AP,2705,2539,21800626,165500,CHEST (PORTABLE AP),antero-posterior,Erect\n"
            "d4,10000764,57375967,CHEST (PA AND LAT),PA,3056,2544,21321014,161152.875,,,\n"
            "d5,11000011,50000001,CHEST,PA,100,100,21500101,010101,,,\n"
            "d6,12000012,50000002,CHEST,PA,x,100,21500101,010101,,,\n"
        )
    write(root / "mimic-cxr-2.0.0-split.csv", "dicom_id,study_id,subject_id,split\nd1,50414267,10000032,train\nd2,50414267,10000032,train\nd3,53189527,10000032,validate\n")
    write(
        root / "mimic-cxr-2.0.0-chexpert.csv",
        "subject_id,study_id,Atelectasis,Cardiomegaly,Consolidation,Edema,Enlarged Cardiomediastinum,Fracture,Lung Lesion,"
        "Lung Opacity,No Finding,Pleural Effusion,Pleural Other,Pneumonia,Pneumothorax,Support Devices\n"
        "10000032,50414267,,,,,,,,,,1.0,,-1.0,0.0,\n"
        "10000032,53189527,,,,,,,,,,1.0,,,,\n"
        "10000764,57375967,,,,,,,,,,2.0,,,,\n",
    )
    return root


def test_mimic_join_order_labels_rejects(onto, tmp_path):
    root = _mimic(tmp_path)
    recs = list(get_source("mimic-cxr").iter_records([root], ontology=onto))
    studies, rejects = split(recs)
    assert len(recs) == 5  # 5 studies in the tables
    assert [s.id for s in studies] == ["mimic-cxr:50414267", "mimic-cxr:53189527"]
    s = studies[0]
    assert s.patient_id == "mimic-cxr:10000032" and s.split == "train"
    assert s.study_time == "2180-05-06T21:30:14" and studies[1].study_time == "2180-06-26T16:55:00"
    assert [(im.id, im.view, im.width, im.height, im.path) for im in s.images] == [
        ("d1", "PA", 2544, 3056, None),
        ("d2", "LATERAL", 2544, 3056, None),
    ]
    assert "FINDINGS:  There is a small left pleural effusion." in s.report_text
    vals = {lab.name: lab.value for lab in s.labels}
    assert vals == {"Pleural Effusion": 1, "Pneumonia": -1, "Pneumothorax": 0}  # blank = unmentioned
    assert all(lab.reader == "chexpert" and lab.findings for lab in s.labels)
    sg, _ = build_scene_graph(s, None, ontology=onto)
    pneu = onto.map_label("chexpert14", "Pneumonia")[0]
    assert {o.finding: o.certainty for o in sg.observations}[pneu] == "uncertain"
    reasons = " | ".join(f"{r.ref} {r.reason}" for r in rejects)
    assert "not 1, 0, -1 or blank" in reasons  # 2.0 label (study 57375967)
    assert "not UTF-8" in reasons
    assert "non-numeric Rows/Columns" in reasons


def test_mimic_images_and_empty_report(onto, tmp_path):
    root = _mimic(tmp_path)
    # drop the bad label row so the empty report is what rejects 57375967
    t = root / "mimic-cxr-2.0.0-chexpert.csv"
    t.write_text("\n".join(t.read_text().splitlines()[:-1]) + "\n")
    img = tmp_path / "jpg"
    PILImage.new("L", (64, 80)).save(write(img / "files/p10/p10000032/s50414267/d1.jpg", b"").with_name("d1.jpg"))
    write_dicom(img / "files/p10/p10000032/s50414267/d2.dcm", rows=50, cols=40)
    (img / "files/p10/p10000032/s53189527").mkdir(parents=True)  # downloaded folder, image d3 missing
    studies, rejects = split(get_source("mimic-cxr").iter_records([root, img], ontology=onto))
    s = studies[0]
    assert (s.images[0].width, s.images[0].height) == (64, 80) and s.images[0].path.endswith("d1.jpg")
    assert (s.images[1].width, s.images[1].height) == (40, 50) and s.images[1].path.endswith("d2.dcm")
    reasons = " | ".join(r.reason for r in rejects)
    assert "image d3 (.jpg/.dcm) missing" in reasons and "empty report" in reasons


def test_mimic_reports_tree_only(onto, tmp_path):
    root = _mimic(tmp_path)
    studies, rejects = split(get_source("mimic-cxr").iter_records([root / "files"], ontology=onto))
    assert {s.id for s in studies} == {"mimic-cxr:50414267", "mimic-cxr:53189527"}
    assert len(studies) + len(rejects) == 4 and all(s.images == [] for s in studies)


def _graph(did: str, study: str, subject: str) -> dict:
    return {
        "image_id": did,
        "viewpoint": "PA",
        "patient_id": int(subject),
        "study_id": int(study),
        "StudyDateTime": "2180-05-06 21:30:14",
        "objects": [
            {"object_id": f"{did}_left lung", "bbox_name": "left lung", "x1": 120, "y1": 40, "x2": 200, "y2": 170,
             "original_x1": 1300, "original_y1": 400, "original_x2": 2300, "original_y2": 2200},
            {"object_id": f"{did}_left costophrenic angle", "bbox_name": "left costophrenic angle",
             "original_x1": 1900, "original_y1": 2000, "original_x2": 2300, "original_y2": 2300},
            {"bbox_name": "right lung", "x1": 1, "y1": 1, "x2": 5, "y2": 5},  # no original_* coordinates
            {"bbox_name": "martian lobe", "original_x1": 1, "original_y1": 1, "original_x2": 5, "original_y2": 5},
        ],
        "attributes": [
            {"bbox_name": "left costophrenic angle", "attributes": [["anatomicalfinding|yes|pleural effusion", "nlp|yes|abnormal"],
                                                               ["anatomicalfinding|yes|pleural effusion"]],
             "phrases": ["small left pleural effusion", "Small left pleural effusion."]},
            {"bbox_name": "left lung", "attributes": [["anatomicalfinding|no|pneumothorax", "disease|yes|zorblax"]]},
            {"bbox_name": "right lung", "right lung": False, "attributes": [["anatomicalfinding|yes|pneumothorax"]]},
        ],
        "relationships": [{"relationship_id": "x"}],
    }


def test_imagenome_joined_to_mimic(onto, tmp_path):
    root = _mimic(tmp_path)
    sgdir = tmp_path / "silver_dataset" / "scene_graph"
    write(sgdir / "d1_SceneGraph.json", json.dumps(_graph("d1", "50414267", "10000032")))
    write(sgdir / "zz_SceneGraph.json", json.dumps(_graph("zz", "59999999", "10000032")))
    write(sgdir / "d3_SceneGraph.json", "{not json")
    recs = list(get_source("chest-imagenome").iter_records([sgdir, root], ontology=onto))
    studies, rejects = split(recs)
    s = next(s for s in studies if s.id == "chest-imagenome:50414267")
    assert s.source == "chest-imagenome" and s.patient_id == "chest-imagenome:10000032"
    left_lung, cpa = onto_region(onto, "left lung"), onto_region(onto, "left costophrenic angle")
    assert [(b.label, b.as_list()) for b in s.region_boxes] == [
        (left_lung, [1300, 400, 2300, 2200]),
        (cpa, [1900, 2000, 2300, 2300]),
    ]
    eff = [lab for lab in s.labels if lab.scheme == "imagenome"]
    assert [(lab.name, lab.value, lab.regions) for lab in eff] == [
        ("pleural effusion", 1, [cpa]),
        ("pneumothorax", 0, [left_lung]),
        ("pneumothorax", 1, []),  # entry not bound to its region: study level
    ]
    ign = s.meta["imagenome_ignored"]
    for needle in ("nlp normal/abnormal summary x1", "unknown finding 'zorblax' x1", "object without original_x1..y2 x1",
                   "unknown region 'martian lobe' x1", "relationships (not used) x1",
                   "attributes not bound to a known region ('right lung') x1"):
        assert needle in ign, needle
    reasons = " | ".join(r.reason for r in rejects)
    assert "malformed JSON" in reasons and "matches no MIMIC-CXR image" in reasons
    # localize: the region-level label observation gets its region box
    sg, lrej = build_scene_graph(s, None, ontology=onto)
    assert lrej == []
    o = next(o for o in sg.observations if o.source == "label" and o.regions == [cpa])
    assert o.certainty == "present" and [b.label for b in o.boxes] == [cpa]
    assert o.laterality == "left"


def onto_region(onto, name: str) -> str:
    from radvqa.sources.base import region_for_term

    rid = region_for_term(onto, name)
    assert rid is not None
    return rid


def test_imagenome_attributes_map_through_the_imagenome_scheme(onto, tmp_path):
    g = _graph("d1", "50414267", "10000032")
    g["attributes"] = [
        {"bbox_name": "cardiac silhouette", "cardiac silhouette": True,
         "attributes": [["anatomicalfinding|yes|enlarged cardiac silhouette", "device|yes|cardiac pacer and wires"]]},
        {"bbox_name": "left lung", "left lung": True,
         "attributes": [["anatomicalfinding|yes|linear/patchy atelectasis", "anatomicalfinding|no|mass/nodule (not otherwise specified)",
                         "disease|yes|copd/emphysema", "anatomicalfinding|yes|abnormal"]]},
        {"bbox_name": "svc", "svc": True, "attributes": [["tubesandlines|yes|ij line"]]},
    ]
    write(tmp_path / "sg" / "d1_SceneGraph.json", json.dumps(g))
    (s,) = split(get_source("chest-imagenome").iter_records([tmp_path / "sg"], ontology=onto))[0]
    got = {(lab.name, lab.value): (lab.findings, lab.regions) for lab in s.labels}
    assert got == {
        ("enlarged cardiac silhouette", 1): (["cardiomegaly"], ["cardiac_silhouette"]),
        ("cardiac pacer and wires", 1): (["pacemaker"], ["cardiac_silhouette"]),
        ("linear/patchy atelectasis", 1): (["linear_atelectasis"], ["left_lung"]),
        ("mass/nodule (not otherwise specified)", 0): (["nodule_or_mass"], ["left_lung"]),
        ("copd/emphysema", 1): (["copd"], ["left_lung"]),
        ("ij line", 1): (["jugular_line"], ["svc"]),
    }
    # every name is the imagenome scheme's own mapping
    assert all(lab.findings == onto.map_label("imagenome", lab.name) for lab in s.labels)
    assert "attribute 'abnormal' names no finding x1" in s.meta["imagenome_ignored"]


def test_imagenome_standalone(onto, tmp_path):
    write(tmp_path / "sg" / "d1_SceneGraph.json", json.dumps(_graph("d1", "50414267", "10000032")))
    write(tmp_path / "sg" / "d9_SceneGraph.json", json.dumps({"image_id": "d9"}))
    studies, rejects = split(get_source("chest-imagenome").iter_records([tmp_path / "sg"], ontology=onto))
    assert [s.id for s in studies] == ["chest-imagenome:50414267"] and studies[0].study_time == "2180-05-06T21:30:14"
    assert "lacks study_id" in rejects[0].reason


# ------------------------------------------------------------------------- CheXpert

CHEXPERT_HEADER = (
    "Path,Sex,Age,Frontal/Lateral,AP/PA,No Finding,Enlarged Cardiomediastinum,Cardiomegaly,Lung Opacity,Lung Lesion,"
    "Edema,Consolidation,Pneumonia,Atelectasis,Pneumothorax,Pleural Effusion,Pleural Other,Fracture,Support Devices\n"
)


def test_chexpert_studies_uncertain_and_rejects(onto, tmp_path):
    root = tmp_path / "CheXpert-v1.0-small"
    rows = [
        "CheXpert-v1.0-small/train/patient00001/study1/view1_frontal.jpg,Female,68,Frontal,AP,1.0,,,,,,,,,0.0,,,,1.0",
        "CheXpert-v1.0-small/train/patient00002/study2/view1_frontal.jpg,Female,87,Frontal,AP,,,-1.0,1.0,,-1.0,-1.0,,-1.0,,-1.0,,1.0,",
        "CheXpert-v1.0-small/train/patient00002/study2/view2_lateral.jpg,Female,87,Lateral,,,,-1.0,1.0,,-1.0,-1.0,,-1.0,,-1.0,,1.0,",
        "CheXpert-v1.0-small/train/patient00002/study1/view1_frontal.jpg,Female,83,Frontal,AP,,,,1.0,,,,,,,,,1.0,",
        "CheXpert-v1.0-small/train/patient00003/study1/view1_frontal.jpg,Male,41,Frontal,AP,,,,,,7,,,,,,,,",
        "not/a/path.jpg,Male,41,Frontal,AP,,,,,,,,,,,,,,",
        "CheXpert-v1.0-small/train/patient00001/study1/view2_frontal.jpg,Female,68,Frontal,AP,1.0,,,,,,,,,0.0,,,,1.0",
    ]
    t = write(root / "train.csv", CHEXPERT_HEADER + "\n".join(rows) + "\n")
    PILImage.new("L", (320, 390)).save(write(root / "train/patient00002/study2/view1_frontal.jpg", b""))
    PILImage.new("L", (390, 320)).save(write(root / "train/patient00002/study2/view2_lateral.jpg", b""))
    (root / "train/patient00002/study1").mkdir()  # downloaded study folder without its image
    for inputs in ([t], [root]):  # the table alone, or the dataset folder as distributed
        recs = list(get_source("chexpert").iter_records(inputs, ontology=onto))
        studies, rejects = split(recs)
        assert len(recs) == 6  # 6 studies in (patient00001/study1 twice)
        assert [s.id for s in studies] == ["chexpert:patient00001/study1", "chexpert:patient00002/study2"]
        s = studies[1]
        assert s.study_time == "0002" and s.split == "train" and s.patient_id == "chexpert:patient00002"
        assert [im.view for im in s.images] == ["AP", "LATERAL"]
        assert [(im.width, im.height) for im in s.images] == [(320, 390), (390, 320)]
        assert studies[0].images[0].path is None and studies[0].images[0].width is None  # not downloaded
        vals = {lab.name: lab.value for lab in s.labels}
        assert vals["Cardiomegaly"] == -1 and vals["Lung Opacity"] == 1 and "Pneumonia" not in vals
        assert all(lab.image_id is None for lab in s.labels)  # same labels on both rows: study level
        reasons = " | ".join(r.reason for r in rejects)
        for needle in ("not 1, 0, -1 or blank", "is not .../patientN/studyM/file", "duplicate study",
                       "patient00002/study1: image CheXpert-v1.0-small/train/patient00002/study1/view1_frontal.jpg not found"):
            assert needle in reasons, needle
    sg, _ = build_scene_graph(s, None, ontology=onto)
    assert {o.finding: o.certainty for o in sg.observations}[onto.map_label("chexpert14", "Cardiomegaly")[0]] == "uncertain"


def test_chexpert_test_labels_without_demographics(onto, tmp_path):
    cols = CHEXPERT_HEADER.split(",", 5)[5]
    t = write(tmp_path / "test_labels.csv", "Path," + cols + "test/patient64741/study1/view1_frontal.jpg" + ",0" * 14 + "\n")
    (s,) = list(get_source("chexpert").iter_records([t], ontology=onto))
    assert s.split == "test" and len(s.labels) == 14 and s.images[0].view is None and s.meta == {}


# ------------------------------------------------------------------------- PadChest

PADCHEST_COLS = (
    "ImageID,ImageDir,StudyDate_DICOM,StudyID,PatientID,PatientBirth,PatientSex_DICOM,ViewPosition_DICOM,Projection,"
    "MethodProjection,Pediatric,Modality_DICOM,Manufacturer_DICOM,PhotometricInterpretation_DICOM,PixelRepresentation_DICOM,"
    "PixelAspectRatio_DICOM,SpatialResolution_DICOM,BitsStored_DICOM,WindowCenter_DICOM,WindowWidth_DICOM,Rows_DICOM,"
    "Columns_DICOM,XRayTubeCurrent_DICOM,Exposure_DICOM,ExposureTime,RelativeXRayExposure_DICOM,ReportID,Report,MethodLabel,"
    "Labels,Localizations,LabelsLocalizationsBySentence,labelCUIS,LocalizationsCUIS"
)


def _pad_row(image, study, patient, labels, locs="[]", rows="2800", cols="2500", photometric="MONOCHROME2", proj="PA",
             sent="[['pleural effusion', 'loc left']]"):
    return (
        f'{image},0,20090102,{study},{patient},1950,M,POSTEROANTERIOR,{proj},Manual review,No,CR,Philips,{photometric},0,,0.139,12,,,'
        f'{rows},{cols},,,,,4711,derrame pleural izquierd .,Physician,"{labels}","{locs}","{sent}",[],[]'
    )


def test_padchest_studies_labels_spanish_kept(onto, tmp_path):
    rows = [
        _pad_row("a1.png", "S1", "P1", "['pleural effusion', 'chronic changes']", "['loc left']"),
        _pad_row("a2.png", "S1", "P1", "['pleural effusion', 'chronic changes']", "['loc left']", proj="L"),
        _pad_row("b1.png", "S2", "P2", "['normal']", photometric="MONOCHROME1"),
        _pad_row("c1.png", "S3", "P3", "['cardiomegaly'"),  # malformed list
        _pad_row("d1.png", "S4", "P4", "['normal']", rows="abc"),
    ]
    t = write(tmp_path / "PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv", PADCHEST_COLS + "\n" + "\n".join(rows) + "\n")
    recs = list(get_source("padchest").iter_records([t], ontology=onto))
    studies, rejects = split(recs)
    assert len(recs) == 4
    s1 = studies[0]
    assert s1.id == "padchest:S1" and [im.id for im in s1.images] == ["a1.png", "a2.png"]
    assert [im.view for im in s1.images] == ["PA", "LATERAL"] and s1.images[0].width == 2500
    assert s1.report_text is None and s1.meta["report_es"] == "derrame pleural izquierd ."
    assert [(lab.name, lab.findings) for lab in s1.labels] == [
        ("pleural effusion", ["pleural_effusion"]), ("chronic changes", ["degenerative_changes"])]
    assert "unmapped_labels" not in s1.meta and s1.meta["localizations"] == "loc left"
    assert s1.study_time == "2009-01-02" and s1.patient_id == "padchest:P1"
    assert "MONOCHROME1" in studies[1].meta["photometric_note"]
    reasons = " | ".join(r.reason for r in rejects)
    assert "malformed list cell" in reasons and "non-numeric Rows_DICOM" in reasons


def test_padchest_fixture_labels_map_to_ontology(onto):
    # tests/data/sources/padchest: the distributed CSV layout (unnamed index column first), the
    # dataset folder given as is, with no PNG downloaded: label-only studies, nothing rejected
    studies, rejects = split(get_source("padchest").iter_records([DATA / "padchest"], ontology=onto))
    assert rejects == [] and [s.id for s in studies] == [f"padchest:S{i}" for i in range(1, 6)]
    by = {s.id: s for s in studies}
    got = {sid: [(lab.name, lab.value, lab.findings) for lab in s.labels] for sid, s in by.items()}
    assert got["padchest:S1"] == [("pleural effusion", 1, ["pleural_effusion"]), ("cardiomegaly", 1, ["cardiomegaly"])]
    # [['pleural effusion', 'loc left', 'loc pleural'], ['cardiomegaly']]: a region-level label
    assert [lab.regions for lab in by["padchest:S1"].labels] == [["left_pleura"], []]
    # "normal": a Label with no finding (is_normal_label), which localize records as no finding
    assert got["padchest:S2"] == [("normal", 1, [])] and onto.is_normal_label("padchest", "normal")
    # dataset spellings: upper-case "COPD signs"/"NSG tube", a leading blank, "Kerley lines" vs "kerley lines"
    assert got["padchest:S3"] == [("COPD signs", 1, ["copd"]), ("NSG tube", 1, ["enteric_tube"]),
                                  ("Kerley lines", 1, ["interstitial_edema"])]
    # the scheme's ignored tags name no finding and are not "normal": meta only, never a Label
    assert got["padchest:S4"] == [("aortic elongation", 1, ["aortic_enlargement"])]
    assert by["padchest:S4"].meta["ignored_labels"] == "unchanged; exclude"
    # a label the scheme lacks: kept in meta, the study's mapped labels are still used
    assert got["padchest:S5"] == [("scoliosis", 1, ["scoliosis"])]
    assert by["padchest:S5"].meta["unmapped_labels"] == "uncatalogued sign"
    assert all(im.path is None and im.width == 2500 for s in studies for im in s.images)
    sg, _ = build_scene_graph(by["padchest:S2"], None, ontology=onto)
    assert sg.observations == [] and sg.meta["no_finding_label"] == "padchest"
    sg, _ = build_scene_graph(by["padchest:S4"], None, ontology=onto)
    assert [(o.finding, o.certainty) for o in sg.observations] == [("aortic_enlargement", "present")]
    assert "no_finding_label" not in sg.meta  # "unchanged" must not read as a normal study


def test_padchest_localizations_give_region_level_labels(onto, tmp_path):
    # LabelsLocalizationsBySentence as PadChest ships it: per sentence, labels then "loc ..." terms
    rows = [
        # region + side in one sentence; cardiomegaly's sentence has no localization
        _pad_row("a.png", "S1", "P1", "['pleural effusion', 'cardiomegaly']", "['loc left', 'loc costophrenic angle']",
                 sent="[['pleural effusion', 'loc left', 'loc costophrenic angle'], ['cardiomegaly']]"),
        # side only: the finding's default regions (pleura, costophrenic angles) on that side
        _pad_row("b.png", "S2", "P2", "['pleural effusion']", "['loc right']", sent="[['pleural effusion', 'loc right']]"),
        # "basal bilateral": both lower zones; a label in two sentences takes the union; an unknown
        # term goes to meta; a descriptive term is known and maps to nothing; a label of the
        # sentences missing from Labels makes no Label (the label set is the Labels column's)
        _pad_row("c.png", "S3", "P3", "['atelectasis', 'nodule']", "['loc basal bilateral']",
                 sent="[['atelectasis', 'loc basal bilateral'], ['nodule', 'loc left', 'loc upper lobe', 'loc subsegmental'], "
                      "['nodule', 'loc martian'], ['hilar enlargement', 'loc hilar']]"),
        # a side the finding's regions cannot take: no regions, noted
        _pad_row("d.png", "S4", "P4", "['cardiomegaly']", "['loc left']", sent="[['cardiomegaly', 'loc left']]"),
        # sided terms of the vocabulary; a sided region keeps its side next to a side term; case/blanks
        _pad_row("e.png", "S5", "P5", "['pleural effusion', 'pneumonia']", "[]",
                 sent="[['pleural effusion', 'loc bilateral costophrenic angle'], ['Pneumonia', 'loc right', 'loc  Left lower lobe']]"),
    ]
    t = write(tmp_path / "PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv", PADCHEST_COLS + "\n" + "\n".join(rows) + "\n")
    studies, rejects = split(get_source("padchest").iter_records([t], ontology=onto))
    assert rejects == [] and len(studies) == 5
    by = {s.id.split(":")[1]: s for s in studies}
    assert [(lab.name, lab.regions) for lab in by["S1"].labels] == [
        ("pleural effusion", ["left_costophrenic_angle"]), ("cardiomegaly", [])]
    assert [(lab.name, lab.regions) for lab in by["S2"].labels] == [("pleural effusion", ["right_costophrenic_angle", "right_pleura"])]
    assert [(lab.name, lab.regions) for lab in by["S3"].labels] == [
        ("atelectasis", ["left_lower_lung_zone", "right_lower_lung_zone"]), ("nodule", ["left_upper_lung_zone"])]
    assert by["S3"].meta["unmapped_localizations"] == "loc martian"
    assert by["S4"].labels[0].regions == [] and by["S4"].meta["unapplied_localizations"] == "cardiomegaly: loc left"
    assert all("unmapped_localizations" not in by[k].meta for k in ("S1", "S2", "S4"))

    def obs(sid):
        sg, _ = build_scene_graph(by[sid], None, ontology=onto)
        return [(o.finding, o.regions, o.laterality) for o in sg.observations]

    assert obs("S1") == [("cardiomegaly", [], None), ("pleural_effusion", ["left_costophrenic_angle"], "left")]
    assert obs("S2") == [("pleural_effusion", ["right_costophrenic_angle", "right_pleura"], "right")]
    assert obs("S3") == [("atelectasis", ["left_lower_lung_zone", "right_lower_lung_zone"], "bilateral"),
                         ("nodule", ["left_upper_lung_zone"], "left")]
    assert obs("S4") == [("cardiomegaly", [], None)]
    assert obs("S5") == [("pleural_effusion", ["left_costophrenic_angle", "right_costophrenic_angle"], "bilateral"),
                         ("pneumonia", ["left_lower_lobe"], "left")]


def test_padchest_malformed_sentence_cell_is_a_note(onto, tmp_path):
    rows = [
        # cut off inside the first sentence: nothing recoverable -> note, labels study-level
        _pad_row("a.png", "S1", "P1", "['pleural effusion']", sent="[['pleural effusion', 'loc left'"),
        # cut off in the second sentence: the complete first sentence is still read
        _pad_row("b.png", "S2", "P2", "['pleural effusion', 'cardiomegaly']",
                 sent="[['pleural effusion', 'loc left'], ['cardiomegaly', 'loc"),
        # not a list of lists at all
        _pad_row("c.png", "S3", "P3", "['pleural effusion']", sent="derrame"),
    ]
    t = write(tmp_path / "PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv", PADCHEST_COLS + "\n" + "\n".join(rows) + "\n")
    studies, rejects = split(get_source("padchest").iter_records([t], ontology=onto))
    assert rejects == [] and [s.id for s in studies] == ["padchest:S1", "padchest:S2", "padchest:S3"]
    s1, s2, s3 = studies
    assert "malformed LabelsLocalizationsBySentence" in s1.meta["labels_by_sentence_note"]
    assert [(lab.name, lab.regions) for lab in s1.labels] == [("pleural effusion", [])]
    assert "labels_by_sentence_note" not in s2.meta
    assert [(lab.name, lab.regions) for lab in s2.labels] == [
        ("pleural effusion", ["left_costophrenic_angle", "left_pleura"]), ("cardiomegaly", [])]
    assert "malformed" in s3.meta["labels_by_sentence_note"] and s3.labels[0].regions == []


def test_padchest_localization_table_names_real_regions(onto):
    from radvqa.sources.padchest import _loc_table

    terms, descriptive = _loc_table()
    assert len(terms) > 50 and not (set(terms) & descriptive)
    assert all(r in onto.regions for regs, _side in terms.values() for r in regs)


def test_padchest_missing_and_corrupt_images(onto, tmp_path):
    t = write(tmp_path / "padchest.csv", PADCHEST_COLS + "\n" + "\n".join(
        [_pad_row("x1.png", "S1", "P1", "['normal']"), _pad_row("x2.png", "S2", "P2", "['normal']"),
         _pad_row("x3.png", "S3", "P3", "['normal']")]) + "\n")
    img = tmp_path / "images" / "0"
    PILImage.new("I;16", (50, 60)).save(write(img / "x1.png", b""))
    write(img / "x2.png", b"garbage")
    studies, rejects = split(get_source("padchest").iter_records([t, tmp_path / "images"], ontology=onto))
    assert [s.images[0].width for s in studies] == [50]
    assert sorted(r.reason.split(": ")[1][:10] for r in rejects) == ["image 0/x3", "unreadable"]
    # an image folder given next to the table that holds no PNG still makes images required
    (tmp_path / "empty").mkdir()
    studies, rejects = split(get_source("padchest").iter_records([t, tmp_path / "empty"], ontology=onto))
    assert studies == [] and len(rejects) == 3 and all("not found" in r.reason for r in rejects)


# ------------------------------------------------------------------------- RadImageNet

RIN = DATA / "radimagenet"


def test_radimagenet_fixture_anatomy_and_pathology(onto):
    # tests/data/sources/radimagenet/radiology_ai: the release's folder spellings ("af", "abd",
    # "achilles_pathology_", "Plantar_plate_tear", "foraminal_pathlogy")
    studies, rejects = split(get_source("radimagenet").iter_records([RIN / "radiology_ai"], ontology=onto))
    assert rejects == [] and len(studies) == 9
    got = {s.id.split(":", 1)[1].rsplit("/", 1)[0]: (s.images[0].modality, s.anatomy, s.labels[0].findings) for s in studies}
    assert got == {
        "MR/af/achilles_pathology_": ("MR", "ankle_foot", ["achilles_pathology"]),
        "MR/af/Plantar_plate_tear": ("MR", "ankle_foot", ["plantar_plate_tear"]),
        "MR/knee/acl_pathology": ("MR", "knee", ["acl_pathology"]),
        "MR/knee/normal": ("MR", "knee", []),
        "MR/brain/acute_infarct": ("MR", "brain", ["acute_infarct"]),
        "MR/spine/foraminal_pathlogy": ("MR", "spine", ["foraminal_pathology"]),
        "CT/abd/bowel_abnormality": ("CT", "abdomen_pelvis", ["bowel_abnormality"]),
        "CT/lung/nodule": ("CT", "lung", ["nodule"]),
        "CT/lung/normal": ("CT", "lung", []),
    }
    by = {s.id: s for s in studies}
    af = by["radimagenet:MR/af/achilles_pathology_/af000101"]
    lab = af.labels[0]
    assert (lab.scheme, lab.name, lab.value, lab.image_id) == ("radimagenet", "af/achilles_pathology_", 1, af.images[0].id)
    assert af.meta["label"] == "ankle_foot/achilles_pathology" and af.images[0].width == 32
    for s in studies:  # every anatomy is an ontology anatomy, every pathology one of that anatomy
        assert s.anatomy in onto.anatomies and s.images[0].modality in onto.anatomies[s.anatomy].modalities
        for fid in s.labels[0].findings:
            assert fid in {f.id for f in onto.pathologies_of_anatomy(s.anatomy)}
    knee_normal = by["radimagenet:MR/knee/normal/knee000202"]
    assert onto.is_normal_label("radimagenet", knee_normal.meta["label"]) and "label_note" not in knee_normal.meta
    sg, _ = build_scene_graph(af, None, ontology=onto)
    assert sg.anatomy == "ankle_foot" and sg.modality == "MR"
    assert [(o.finding, o.certainty, o.source) for o in sg.observations] == [("achilles_pathology", "present", "label")]
    sg, _ = build_scene_graph(knee_normal, None, ontology=onto)
    assert sg.observations == [] and sg.meta["no_finding_label"] == "radimagenet"


def test_radimagenet_listing(onto):
    studies, rejects = split(get_source("radimagenet").iter_records([RIN / "RadiologyAI_val.csv", RIN / "radiology_ai"], ontology=onto))
    assert rejects == [] and [s.split for s in studies] == ["val"] * 3
    assert [(s.anatomy, s.labels[0].findings) for s in studies] == [("knee", ["acl_pathology"]), ("ankle_foot", ["achilles_pathology"]), ("lung", [])]
    assert studies[0].images[0].path.endswith("radiology_ai/MR/knee/acl_pathology/knee000201.png")
    studies, _ = split(get_source("radimagenet").iter_records([RIN / "RadiologyAI_val.csv"], ontology=onto))
    assert [s.images[0].path for s in studies] == [None] * 3 and studies[1].anatomy == "ankle_foot"


def test_radimagenet_rejects_and_notes(onto, tmp_path):
    root = tmp_path / "radiology_ai"
    PILImage.new("L", (64, 64)).save(write(root / "CT/lung/dragon_pathology/lung001.png", b""))  # not a lung label
    PILImage.new("L", (64, 64)).save(write(root / "CT/knee/acl_pathology/k1.png", b""))  # CT knee: kept, noted
    PILImage.new("L", (64, 64)).save(write(root / "MR/elbow/normal/e1.png", b""))  # no such anatomy
    PILImage.new("L", (64, 64)).save(write(root / "MR/knee/nodule/k2.png", b""))  # a lung label under knee
    PILImage.new("L", (64, 64)).save(write(root / "MR/knee/k3.png", b""))  # outside the layout
    PILImage.new("L", (64, 64)).save(write(root / "US/ovary/us1.png", b""))  # the release's US layout: organ only
    PILImage.new("L", (64, 64)).save(write(root / "US/thyroid/normal/t1.png", b""))  # a US tree with pathologies
    write(root / "CT/lung/normal/broken.png", b"xx")
    recs = list(get_source("radimagenet").iter_records([root], ontology=onto))
    studies, rejects = split(recs)
    assert len(recs) == 8
    ct_knee, us_thyroid = studies
    assert ct_knee.anatomy == "knee" and ct_knee.labels[0].findings == ["acl_pathology"]
    assert "CT not among the ontology's modalities of knee" in ct_knee.meta["modality_note"]
    # the scheme has no US labels: a US "normal" folder is still read as normal, with a note
    assert us_thyroid.anatomy == "thyroid" and us_thyroid.labels[0].findings == [] and us_thyroid.images[0].modality == "US"
    assert "not in the radimagenet scheme" in us_thyroid.meta["label_note"]
    reasons = " | ".join(r.reason for r in rejects)
    for needle in ("US/ovary/: RadImageNet's ultrasound classes name an organ, not a pathology","CT/lung/dragon_pathology: pathology 'dragon_pathology' is not a radimagenet label of anatomy lung",
                   "anatomy folder 'elbow' is not an ontology anatomy",
                   "MR/knee/nodule: pathology 'nodule' is not a radimagenet label of anatomy knee",
                   "image not under <CT|MR|US>/<anatomy>/<pathology>/", "unreadable image"):
        assert needle in reasons, needle
    t = write(tmp_path / "RadiologyAI_val.csv", "filename,label,split\nCT/xx.png,x,val\nradiology_ai/US/gb/gb1.png,US-gb,val\n")
    studies, rejects = split(get_source("radimagenet").iter_records([t], ontology=onto))
    assert studies == [] and "is not <CT|MR|US>" in rejects[0].reason and "US/gb/: RadImageNet's ultrasound" in rejects[1].reason


def test_radimagenet_adapter_mechanics_with_a_minimal_ontology(tmp_path):
    # an ontology copy with only map_label (the interface stub): folder names stand in for anatomy
    # ids and "normal" still reads as no finding
    stub = StubOntology({"radimagenet": {"knee/normal": [], "knee/acl_pathology": ["acl_tear"]}})
    root = tmp_path / "radiology_ai"
    PILImage.new("L", (8, 8)).save(write(root / "MR/knee/acl_pathology/a.png", b""))
    PILImage.new("L", (8, 8)).save(write(root / "MR/knee/normal/b.png", b""))
    studies, rejects = split(get_source("radimagenet").iter_records([root], ontology=stub))
    assert rejects == [] and [(s.anatomy, s.labels[0].findings) for s in studies] == [("knee", ["acl_tear"]), ("knee", [])]


# ------------------------------------------------------------------------- generic CSV / JSONL


def test_generic_csv_reports_labels_boxes(onto, tmp_path):
    PILImage.new("L", (100, 80)).save(write(tmp_path / "img" / "a.png", b""))
    write(tmp_path / "img" / "bad.png", b"nope")
    eff = next(iter(onto.findings))  # any ontology id is a valid term
    reports = write(
        tmp_path / "reports.csv",
        "id,patient_id,text,images,date,labels\n"
        f'r1,p1,"FINDINGS: Small effusion.",img/a.png,2020-01-02,{eff}=1\n'
        "r2,p1,,,2020-02-02,\n"  # empty report, nothing else
        "r3,p2,text,img/missing.png,,\n"
        "r4,p2,text,img/bad.png,,\n"
        "r1,p9,dup,,,\n"
        "r5,p3,text,,,dragonpox\n"
        "r6,p3,text,,,\n",
    )
    labels = write(tmp_path / "labels.csv", f"id,label,value,reader\nr6,{eff},-1,R1\nr6,{eff},9,R2\nzz,{eff},1,R1\n")
    boxes = write(tmp_path / "boxes.csv", f"id,image,label,x1,y1,x2,y2\nr1,a.png,{eff},10,10,20,30\n")
    recs = list(get_source("csv").iter_records([reports, labels, boxes], ontology=onto))
    studies, rejects = split(recs)
    assert [s.id for s in studies] == ["csv:r1"]
    s = studies[0]
    assert s.patient_id == "csv:p1" and s.study_time == "2020-01-02" and s.images[0].width == 100
    assert s.labels[0].findings == [eff] and s.boxes[0].as_list() == [10, 10, 20, 30]
    reasons = " | ".join(r.reason for r in rejects)
    for needle in ("empty report and no labels", "image file not found", "unreadable image", "duplicate id",
                   "unknown label 'dragonpox'", "not 1, 0, -1 or blank", "no report row has"):
        assert needle in reasons, needle
    jl = write(tmp_path / "r.jsonl", '{"id": 7, "text": "FINDINGS: ok", "images": ["img/a.png"]}\n{bad json\n')
    studies, rejects = split(get_source("csv").iter_records([jl], ontology=onto))
    assert studies[0].id == "csv:7" and "malformed JSON" in rejects[0].reason


# ------------------------------------------------------------------------- DICOM folder


def test_dicom_folder_groups_by_study(onto, tmp_path):
    d = tmp_path / "dcm"
    write_dicom(d / "a" / "1.dcm", rows=40, cols=30, study_uid="1.2.3", sop_uid="1.2.3.1", view="PA")
    write_dicom(d / "a" / "2", rows=30, cols=40, study_uid="1.2.3", sop_uid="1.2.3.2", view="LL", photometric="MONOCHROME1")
    write_dicom(d / "b.dicom", study_uid="1.2.4", sop_uid="1.2.4.1", study_date="20190101")
    write_dicom(d / "c.dcm", study_uid="1.2.4", sop_uid="1.2.4.1")  # duplicate SOP
    write(d / "broken.dcm", b"\0" * 200)
    write(d / "notes.txt", "ignored: not a DICOM name")
    studies, rejects = split(get_source("dicom").iter_records([d], ontology=onto))
    assert [s.id for s in studies] == ["dicom:1.2.4", "dicom:1.2.3"]  # same patient: ordered by date
    s = studies[1]
    assert [(im.id, im.width, im.height, im.view) for im in s.images] == [("1.2.3.1", 30, 40, "PA"), ("1.2.3.2", 40, 30, "LL")]
    assert s.study_time == "2020-01-02T10:15:00" and s.patient_id == "dicom:P1"
    assert "MONOCHROME1" in s.meta["photometric_note"] and s.meta["pixel_spacing_mm"] == "0.2,0.2"
    reasons = " | ".join(r.reason for r in rejects)
    assert "duplicate SOPInstanceUID" in reasons and "unreadable DICOM" in reasons


def test_input_errors(onto, tmp_path):
    with pytest.raises(SourceError):
        list(get_source("dicom").iter_records([tmp_path], ontology=onto))
    with pytest.raises(SourceError, match="not found"):
        list(get_source("csv").iter_records([tmp_path / "nope.csv"], ontology=onto))
    with pytest.raises(SourceError, match="missing column"):
        bad = write(tmp_path / "mimic-cxr-2.0.0-metadata.csv", "dicom_id,foo\n1,2\n")
        list(get_source("mimic-cxr").iter_records([bad], ontology=onto))


def test_mimic_sorted_stream_equals_in_memory_join(onto, tmp_path):
    from radvqa.model import to_json
    from radvqa.sources.mimic import _sorted_by_subject

    root = _mimic(tmp_path)
    a = [to_json(r) for r in get_source("mimic-cxr").iter_records([root], ontology=onto)]
    meta = root / "mimic-cxr-2.0.0-metadata.csv.gz"
    assert _sorted_by_subject(meta)
    with gzip.open(meta, "rt") as f:
        lines = f.read().splitlines()
    with gzip.open(meta, "wt") as f:  # same rows, subjects out of order: the in-memory join runs
        f.write("\n".join([lines[0]] + lines[1:][::-1]) + "\n")
    assert not _sorted_by_subject(meta)
    b = [to_json(r) for r in get_source("mimic-cxr").iter_records([root], ontology=onto)]
    assert len(a) == 5 and a[:2] == b[:2]  # the studies, identical and in the same order
    unline = lambda recs: sorted(re.sub(rb"csv\.gz:\d+", b"csv.gz:N", r) for r in recs)  # noqa: E731
    assert unline(a) == unline(b)  # rejects too, but for the line numbers of the reversed file
