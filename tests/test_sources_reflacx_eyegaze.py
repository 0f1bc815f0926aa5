"""REFLACX and Eye Gaze adapters (issue 15, deliverables 1 and 2) on hand-made fixtures in the
documented layouts (tests/data/sources/{reflacx,eyegaze}, invented values, see their README), traps
included: CRLF line ends, empty integer cells, phase-specific label columns, an ellipse outside the
image, unknown labels, missing files, calibration fixation rows. Every case checks that nothing is
lost: records in = used + rejected."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from radvqa.cli import app
from radvqa.io.validate import validate
from radvqa.localize import build_scene_graph
from radvqa.model import Reject, Study
from radvqa.sources import SOURCES, get_source
from radvqa.sources.base import SourceError
from radvqa.sources.reflacx import ReflacxSource

DATA = Path(__file__).parent / "data" / "sources"
RX = DATA / "reflacx"
EG = DATA / "eyegaze"
A_DICOM = "aaaa0001-11111111-22222222-33333333-44444444"
B_DICOM = "bbbb0002-11111111-22222222-33333333-44444444"


@pytest.fixture(scope="module")
def onto():
    from radvqa.ontology import load_ontology

    return load_ontology()


def split(recs):
    recs = list(recs)
    return [r for r in recs if isinstance(r, Study)], [r for r in recs if isinstance(r, Reject)]


def _readings_in_metadata(main: Path) -> list[str]:
    ids = []
    for m in sorted(main.glob("metadata_phase_*.csv")):
        with open(m, newline="") as f:
            ids += [row["id"] for row in csv.DictReader(f)]
    return ids


# ------------------------------------------------------------------------------------------ REFLACX


def test_reflacx_fixture_keeps_its_traps():
    # the fixture must hold the traps it claims, or the tests below would pass for the wrong reason
    meta1 = (RX / "main_data" / "metadata_phase_1.csv").read_bytes()
    assert b"\r\n" in meta1 and b"\n" not in meta1.replace(b"\r\n", b"")
    assert b",," in meta1  # an empty integer cell (NaN written as "")
    h1 = meta1.split(b"\r\n")[0].decode()
    h3 = (RX / "main_data" / "metadata_phase_3.csv").read_bytes().split(b"\r\n")[0].decode()
    assert "Quality issue" in h1 and "Quality issue" not in h3 and "Enlarged hilum" in h3 and "Enlarged hilum" not in h1
    assert not (RX / "main_data" / "P300R000004").exists()


def test_reflacx_studies_readers_labels_boxes(onto):
    src = get_source("reflacx")
    studies, rejects = split(src.iter_records([RX / "main_data", RX / "mimic"], ontology=onto))
    assert [s.id for s in studies] == ["reflacx:50000001", "reflacx:50000002", "reflacx:50000003"]
    a, b, c = studies
    # one study per MIMIC study (id from the image path), one reader per reading id
    assert a.patient_id == "reflacx:10000001" and b.patient_id == c.patient_id == "reflacx:10000002"
    assert a.meta["readings"] == "P102R111111,P102R222222,P102R333333"
    assert {lab.reader for lab in a.labels} == {"P102R111111", "P102R222222", "P102R333333"}
    vals = {(lab.reader, lab.name): lab.value for lab in a.labels}
    assert vals[("P102R111111", "Atelectasis")] == 1  # certainty 4
    assert vals[("P102R222222", "Atelectasis")] == 1  # certainty 3: present by the authors' rule
    assert vals[("P102R222222", "Pleural effusion")] == 0  # certainty 2: below the threshold
    assert vals[("P102R333333", "Pleural effusion")] == 0  # not selected
    assert ("P102R222222", "Nodule") not in vals  # empty integer cell: not given, no Label
    assert vals[("P102R111111", "Support devices")] == 1 and vals[("P102R333333", "Quality issue")] == 1
    assert next(lab for lab in a.labels if lab.name == "Quality issue").findings == ["technical_limitation"]
    assert a.meta["reflacx_other"] == "P102R222222: scoliosis|old rib deformity"
    # phase-specific vocabularies both map
    assert {lab.name: lab.findings for lab in b.labels}["Lung nodule or mass"] == ["nodule_or_mass"]
    # report = first reading's dictation; the others kept; the discarded reading has none
    assert a.report_text.startswith("Left basilar atelectasis.")
    assert a.meta["transcription:P102R222222"].startswith("Subsegmental")
    assert "transcription:P102R333333" not in a.meta
    # ellipses: bounding box + parameters + certainty; the certainty-2 one is not a lesion box
    ate = [bx for bx in a.boxes if bx.label == "atelectasis"]
    assert len(ate) == 3 and {bx.reader_certainty for bx in ate} == {3, 4, 5}
    b1 = next(bx for bx in ate if bx.reader == "P102R111111")
    assert (b1.x1, b1.y1, b1.x2, b1.y2, b1.ellipse) == (40, 250, 120, 330, [80.0, 290.0, 40.0, 40.0])
    assert "P102R222222 Pleural effusion certainty 2" in a.meta["ellipses_below_threshold"]
    assert not any(bx.reader == "P102R222222" and bx.label == "pleural_effusion" for bx in a.boxes)
    # chest box per reading
    assert [(bx.label, bx.reader) for bx in a.region_boxes] == [("chest", r) for r in a.meta["readings"].split(",")]
    # MIMIC join: path, view, study time
    im = a.images[0]
    assert im.path.endswith(f"{A_DICOM}.jpg") and (im.width, im.height, im.view) == (300, 400, "PA")
    assert a.study_time == "2180-01-01T10:10:10" and a.split == c.split == "train"
    # image B is stored at half size: boxes rescaled, the original size recorded
    imb = b.images[0]
    assert (imb.width, imb.height, imb.original_width, imb.original_height) == (150, 200, 300, 400)
    nod = sorted((bx for bx in b.boxes if bx.label == "nodule_or_mass"), key=lambda x: x.x1)
    assert (nod[0].x1, nod[0].y1, nod[0].x2, nod[0].y2) == (50, 50, 70, 70) and nod[0].ellipse == [60, 60, 10, 10]
    # the ellipse crossing the right border: box clipped (then scaled), ellipse kept as drawn
    assert (nod[1].x1, nod[1].x2) == (130, 150) and nod[1].ellipse == [150.0, 42.5, 20.0, 17.5]
    assert "box clipped" in b.meta["ellipse_notes"]
    # rejects, each with its reason
    why = {r.reason for r in rejects}
    expect = [
        "reading P102R222222: ellipse labelled only Other (free text, no finding)",
        "reading P300R000002: ellipse [320, 410, 380, 470] lies outside the 300x400 image",
        "reading P300R000002: ellipse certainty '' is not 1-5",
        "reading P300R000004: reading folder missing",
        "reading P300R000005: anomaly_location_ellipses.csv: unknown reflacx label 'Lung opacity'",
        "reading P300R000006: transcription.txt missing (eye-tracking data not discarded)",
        "reading P300R000007: anomaly_location_ellipses.csv: label column 'Airway wall thickening' is not a phase 3 label",
    ]
    assert sorted(why) == sorted(expect)
    # readings in = readings used + readings rejected (the other rejects are ellipse lines)
    used = [rid for s in studies for rid in s.meta["readings"].split(",")]
    # (ellipse line rejects name their line: "...anomaly_location_ellipses.csv:4")
    rejected = [r.reason.split()[1].rstrip(":") for r in rejects if "anomaly_location_ellipses.csv:" not in r.ref]
    assert sorted(used + rejected) == sorted(_readings_in_metadata(RX / "main_data"))
    # ellipse rows of used readings = boxes (one per ellipse and label) + below threshold + reject lines
    rows = 0
    for rid in used:
        with open(RX / "main_data" / rid / "anomaly_location_ellipses.csv", newline="") as f:
            rows += sum(1 for _ in csv.DictReader(f))
    boxes = sum(len({tuple(bx.ellipse) + (bx.reader,) for bx in s.boxes}) for s in studies)
    low = sum(len(s.meta.get("ellipses_below_threshold", "").split("; ")) for s in studies if "ellipses_below_threshold" in s.meta)
    line_rejects = sum(1 for r in rejects if "anomaly_location_ellipses.csv:" in r.ref)
    assert rows == boxes + low + line_rejects == 12


def test_reflacx_threshold_is_configurable(onto, monkeypatch):
    def effusion(src):
        studies, _ = split(src.iter_records([RX / "main_data"], ontology=onto))
        a = studies[0]
        return ({lab.reader: lab.value for lab in a.labels if lab.name == "Pleural effusion"},
                [bx.reader for bx in a.boxes if bx.label == "pleural_effusion"])

    assert effusion(ReflacxSource()) == ({"P102R111111": 1, "P102R222222": 0, "P102R333333": 0}, ["P102R111111"])
    labs, readers = effusion(ReflacxSource(present_from=2))
    assert labs["P102R222222"] == 1 and readers == ["P102R111111", "P102R222222"]
    labs, readers = effusion(ReflacxSource(below_threshold="uncertain"))
    assert labs["P102R222222"] == -1 and readers == ["P102R111111", "P102R222222"]
    # the environment no longer changes a build (the option is a typed build flag, in the fingerprint)
    monkeypatch.setenv("RADVQA_REFLACX_PRESENT_FROM", "5")
    assert effusion(ReflacxSource())[0] == {"P102R111111": 1, "P102R222222": 0, "P102R333333": 0}
    studies, _ = split(ReflacxSource(present_from=5).iter_records([RX / "main_data"], ontology=onto))
    assert {lab.value for lab in studies[0].labels if lab.name == "Atelectasis"} == {0, 1}  # only the certainty-5 reading
    for bad in ({"present_from": 7}, {"present_from": 0}, {"below_threshold": "maybe"}):
        with pytest.raises(SourceError, match="bad option"):
            ReflacxSource(**bad)


def test_reflacx_readers_fused_in_localize(onto):
    studies, _ = split(get_source("reflacx").iter_records([RX / "main_data"], ontology=onto))
    sg, rej = build_scene_graph(studies[0], None, ontology=onto)
    assert rej == []
    obs = {o.finding: o for o in sg.observations if o.source == "label"}
    assert obs["atelectasis"].certainty == "present"  # 3 of 3 readers
    assert obs["pleural_effusion"].certainty == "absent"  # 1 of 3 at >= 3
    fused = [bx for bx in obs["atelectasis"].boxes if bx.source == "expert_fused"]
    assert len(fused) == 1 and fused[0].reader == "P102R111111+P102R222222+P102R333333"


def test_reflacx_header_errors(onto, tmp_path):
    main = tmp_path / "main_data"
    shutil.copytree(RX / "main_data", main)
    m = main / "metadata_phase_1.csv"
    m.write_bytes(m.read_bytes().replace(b"Wide mediastinum", b"Enlarged hilum"))  # a phase 2-3 column
    with pytest.raises(SourceError, match="not a phase 1 label"):
        list(get_source("reflacx").iter_records([main], ontology=onto))
    m.write_bytes(m.read_bytes().replace(b"Enlarged hilum", b"Lung opacity"))
    with pytest.raises(SourceError, match="unknown reflacx label 'Lung opacity'"):
        list(get_source("reflacx").iter_records([main], ontology=onto))
    with pytest.raises(SourceError, match="no metadata_phase"):
        list(get_source("reflacx").iter_records([tmp_path / "main_data" / "P102R111111"], ontology=onto))


def test_reflacx_bad_cells_are_rejects(onto, tmp_path):
    main = tmp_path / "main_data"
    shutil.copytree(RX / "main_data", main)
    m = main / "metadata_phase_1.csv"
    lines = m.read_bytes().split(b"\r\n")
    lines[1] = lines[1].replace(b"/s50000001/", b"/x50000001/")  # not a MIMIC path
    lines[2] = lines[2].replace(b",train,False,", b",train,maybe,")
    m.write_bytes(b"\r\n".join(lines))
    (main / "P102R333333" / "chest_bounding_box.csv").unlink()
    studies, rejects = split(get_source("reflacx").iter_records([main], ontology=onto))
    why = " | ".join(r.reason for r in rejects)
    assert "is not .../p<subject>/s<study>/<dicom>.dcm" in why
    assert "eye_tracking_data_discarded 'maybe' is not True/False" in why
    assert "reading P102R333333: chest_bounding_box.csv missing" in why
    assert "reflacx:50000001" not in [s.id for s in studies]  # all three of its readings rejected


# ------------------------------------------------------------------------------------------ Eye Gaze


def test_eyegaze_studies_boxes_transcripts_calibration(onto):
    raw = (EG / "egd-cxr" / "bounding_boxes.csv").read_bytes()
    assert raw.startswith(b"dicom_id,bbox_name,x1,x2,y1,y2\r\n")  # the x1, x2, y1, y2 order, CRLF
    studies, rejects = split(get_source("eye-gaze").iter_records([EG / "egd-cxr", EG / "mimic"], ontology=onto))
    assert [s.id for s in studies] == ["eye-gaze:51000001", "eye-gaze:51000002"]
    s1, s2 = studies
    assert s1.patient_id == "eye-gaze:11000001" and s2.patient_id == "eye-gaze:11000002"
    assert {(lab.name, lab.value) for lab in s1.labels} == {("Normal", 1), ("CHF", 0), ("pneumonia", 0)}
    assert {lab.name: lab.findings for lab in s2.labels if lab.value == 1} == {"CHF": ["heart_failure"]}
    rl = next(bx for bx in s1.region_boxes if bx.label == "right_lung")
    assert (rl.x1, rl.y1, rl.x2, rl.y2) == (250, 300, 1300, 2200)  # x2 read from the 4th column, y1 from the 5th
    assert {bx.label for bx in s1.region_boxes} == {"right_lung", "left_lung", "cardiac_silhouette",
                                                     "left_costophrenic_angle", "aortic_arch"}
    assert s1.images[0].width == 2544 and s1.images[0].path.endswith(".png") and s2.images[0].path is None
    # the multi-line indication survives the CSV parser; the transcript is the report
    assert s1.report_text.startswith("INDICATION: ___F with chest pain.\nEvaluate for acute process.\n\nFINDINGS: The lungs")
    assert s2.report_text.endswith("FINDINGS: the heart is enlarged. there is mild pulmonary edema.")  # from phrases
    assert s1.meta["transcript_phrases"] == "3" and s1.meta[f"fixations:{s1.images[0].id}"] == "3"
    why = sorted(r.reason for r in rejects)
    assert any("CHF value 'yes' is not 0 or 1" in w for w in why)
    assert any("unknown anatomical structure 'lingular fissure line'" in w for w in why)
    assert any("inverted or empty box for 'right clavicle'" in w for w in why)
    assert any("which is not in the master sheet" in w for w in why)
    assert any("transcript.json missing" in w and "study 51000003" in w for w in why)
    calib = [w for w in why if "calibration image" in w]
    assert calib == ["1 fixation rows of calibration image calibration_image_02 (DICOM_ID not in the master sheet) skipped",
                     "2 fixation rows of calibration image calibration_image_01 (DICOM_ID not in the master sheet) skipped"]
    # images in the sheet = images in studies + image rows rejected
    with open(EG / "egd-cxr" / "master_sheet.csv", newline="") as f:
        sheet = [r["dicom_id"] for r in csv.DictReader(f)]
    used = [im.id for s in studies for im in s.images]
    image_rejects = [r for r in rejects if "master_sheet.csv" in r.ref]
    assert len(sheet) == len(used) + len(image_rejects) == 4
    # fixation rows = counted + calibration rows skipped
    with open(EG / "egd-cxr" / "fixations.csv", newline="") as f:
        n_fix = sum(1 for _ in csv.DictReader(f))
    counted = sum(int(v) for s in studies for k, v in s.meta.items() if k.startswith("fixations:"))
    assert n_fix == counted + 1 + 3  # + image c3 (its study rejected) + 3 calibration rows


def test_sources_listed():
    assert "reflacx" in SOURCES and "eye-gaze" in SOURCES
    r = CliRunner().invoke(app, ["sources"])
    assert r.exit_code == 0 and "reflacx" in r.output and "eye-gaze" in r.output


# ------------------------------------------------------------------------------------------ end to end


def _build(out: Path, *args: str) -> dict:
    r = CliRunner().invoke(app, ["build", "--out", str(out), "--quiet", *args])
    assert r.exit_code == 0, r.output + repr(r.exception)
    return json.loads((out / "manifest.json").read_text())


def test_reflacx_build_end_to_end_and_workers(tmp_path):
    args = ["reflacx", "-i", str(RX / "main_data"), "-i", str(RX / "mimic"), "--shard-studies", "2"]
    m1 = _build(tmp_path / "w1", *args)
    m2 = _build(tmp_path / "w2", *args, "--workers", "2")
    c = m1["counts"]
    assert c["studies_out"] == 3 and c["studies_in"] == c["studies_out"] + c["studies_rejected"]
    assert c["rejected_lines"] == 7 and c["qa_by_strategy"].get("vindr", 0) > 0 and c["qa_by_strategy"].get("qba", 0) > 0
    assert m2["shards"]["count"] > 1
    ta = pq.read_table(tmp_path / "w1" / "qa").sort_by([("qa_id", "ascending")])
    tb = pq.read_table(tmp_path / "w2" / "qa").sort_by([("qa_id", "ascending")])
    assert ta.equals(tb)
    assert (tmp_path / "w1" / "rejected.jsonl").read_bytes() == (tmp_path / "w2" / "rejected.jsonl").read_bytes()
    assert validate(tmp_path / "w1").ok
    rows = ta.to_pylist()
    vindr = [r for r in rows if r["strategy"] == "vindr" and r["polarity"] == "positive" and r["question_type"] != "what"]
    assert vindr and all("certainty" in r["answer"] for r in vindr)
    ell = [bx for r in rows for bx in r["boxes"] if bx["ellipse"] is not None]
    assert ell and all(1 <= bx["reader_certainty"] <= 5 for bx in ell)


def test_eyegaze_build_end_to_end(tmp_path):
    m = _build(tmp_path / "o", "eye-gaze", "-i", str(EG / "egd-cxr"), "-i", str(EG / "mimic"))
    c = m["counts"]
    assert c["studies_out"] == 2 and c["studies_in"] == c["studies_out"] + c["studies_rejected"] and c["qa_rows"] > 0
    assert validate(tmp_path / "o").ok
    rows = pq.read_table(tmp_path / "o" / "qa").to_pylist()
    assert any(bx["source"] == "region" for r in rows for bx in r["boxes"])


def test_reflacx_inputs_root_or_single_file(onto):
    # the dataset root (main_data/ inside) or one metadata file (its reading folders beside it)
    root, _ = split(get_source("reflacx").iter_records([RX], ontology=onto))
    one, rej = split(get_source("reflacx").iter_records([RX / "main_data" / "metadata_phase_3.csv"], ontology=onto))
    assert [s.id for s in root] == ["reflacx:50000001", "reflacx:50000002", "reflacx:50000003"]
    assert [s.id for s in one] == ["reflacx:50000002", "reflacx:50000003"] and len(rej) == 6


def test_reflacx_threshold_build_flag_and_resume(tmp_path):
    # the threshold is a typed build option: in the manifest, in the resume fingerprint, applied
    # by the read tasks (workers included), refused for other sources and out of range
    args = ["reflacx", "-i", str(RX / "main_data"), "--strategies", "vindr"]
    out = tmp_path / "p5"
    m = _build(out, *args, "--reflacx-present-from", "5", "--reflacx-below-threshold", "uncertain", "--workers", "2")
    assert m["options"]["source_options"] == {"present_from": 5, "below_threshold": "uncertain"}
    sg = pq.read_table(out / "scene_graphs").to_pylist()
    a = next(r for r in sg if r["study_id"] == "reflacx:50000001")
    meta = {kv["key"]: kv["value"] for kv in a["meta"]}
    assert meta["reflacx_present_from"] == "5" and meta["reflacx_below_threshold"] == "uncertain"
    default = _build(tmp_path / "p3", *args)
    assert "source_options" not in default["options"]
    # --resume with another threshold is refused (fingerprint), with the same one it continues
    r = CliRunner().invoke(app, ["build", "--out", str(out), "--quiet", "--resume", *args, "--reflacx-present-from", "4",
                                 "--reflacx-below-threshold", "uncertain"])
    assert r.exit_code == 1 and "source_options" in r.output
    r = CliRunner().invoke(app, ["build", "--out", str(out), "--quiet", "--resume", *args, "--reflacx-present-from", "5",
                                 "--reflacx-below-threshold", "uncertain"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["build", "--out", str(tmp_path / "x"), "--quiet", "sample", "--reflacx-present-from", "4"])
    assert r.exit_code != 0 and "reflacx source only" in r.output
    r = CliRunner().invoke(app, ["build", "--out", str(tmp_path / "y"), "--quiet", *args, "--reflacx-present-from", "6"])
    assert r.exit_code != 0 and not (tmp_path / "y" / "manifest.json").exists()


def _set_cell(path: Path, rid: str, column: str, value: str) -> None:
    lines = path.read_bytes().decode().split("\r\n")
    head = lines[0].split(",")
    for i, ln in enumerate(lines):
        if ln.startswith(rid + ","):
            cells = ln.split(",")
            cells[head.index(column)] = value
            lines[i] = ",".join(cells)
    path.write_bytes("\r\n".join(lines).encode())


def test_reflacx_reader_marks_what_another_dictation_negates(tmp_path):
    # Study 50000001, edited: readers 2 and 3 mark a pleural effusion (certainty 4, an ellipse
    # each); reader 1, whose dictation is the report, marks none and dictates "No pleural
    # effusion". Rule (localize/graph.py): neither side wins -- the finding is uncertain, both
    # sides are named in the provenance, rows about it are graded down (C), the marks are kept.
    main = tmp_path / "main_data"
    shutil.copytree(RX / "main_data", main)
    meta = main / "metadata_phase_1.csv"
    _set_cell(meta, "P102R111111", "Pleural effusion", "0")
    _set_cell(meta, "P102R222222", "Pleural effusion", "4")
    _set_cell(meta, "P102R333333", "Pleural effusion", "4")
    e1 = main / "P102R111111" / "anomaly_location_ellipses.csv"
    e1.write_bytes(b"\r\n".join(e1.read_bytes().split(b"\r\n")[:2]) + b"\r\n")  # its effusion ellipse gone
    e2 = main / "P102R222222" / "anomaly_location_ellipses.csv"
    e2.write_bytes(e2.read_bytes().replace(b"180,300,260,380,2,", b"180,300,260,380,4,"))
    e3 = main / "P102R333333" / "anomaly_location_ellipses.csv"
    row = e3.read_bytes().split(b"\r\n")[1].split(b",")
    head = e3.read_bytes().split(b"\r\n")[0].split(b",")
    eff = [b"False"] * (len(head) - 5)
    eff[head.index(b"Pleural effusion") - 5] = b"True"
    e3.write_bytes(e3.read_bytes() + b",".join([b"185,305,262,385,4", *eff]) + b"\r\n")
    assert row[4] == b"5"
    (main / "P102R111111" / "transcription.txt").write_text("Left basilar atelectasis. No pleural effusion.")
    out = tmp_path / "o"
    _build(out, "reflacx", "-i", str(main), "--strategies", "vindr,qba")
    sg = next(r for r in pq.read_table(out / "scene_graphs").to_pylist() if r["study_id"] == "reflacx:50000001")
    m = {kv["key"]: kv["value"] for kv in sg["meta"]}
    assert m["report_reader"] == "P102R111111"
    eff_obs = [o for o in sg["observations"] if o["finding"] == "pleural_effusion"]
    assert [(o["source"], o["certainty"]) for o in eff_obs] == [("report", "uncertain")]
    oid = eff_obs[0]["id"]
    note = f"{oid}=pleural_effusion:present:readers=P102R222222+P102R333333:dictation=P102R111111"
    assert note in m["label_conflicts"].split("; ")
    assert m["reader_conflicts"] == f"{oid}=pleural_effusion: present by P102R222222+P102R333333, absent in the dictation of P102R111111"
    assert {b["reader"] for b in eff_obs[0]["boxes"] if b["source"] == "expert"} == {"P102R222222", "P102R333333"}
    # atelectasis: all three mark it and the dictation states it -> present, no conflict
    ate = [o for o in sg["observations"] if o["finding"] == "atelectasis"]
    assert [o["certainty"] for o in ate] == ["present"] and "atelectasis" not in m.get("reader_conflicts", "")
    rows = [r for r in pq.read_table(out / "qa").to_pylist() if r["study_id"] == "reflacx:50000001"]
    about = [r for r in rows if any(p.startswith("label_conflict:pleural_effusion:present:readers=") for p in r["provenance"])]
    assert about and all(r["grade"] in ("C", "D") for r in about)
    # the answers hedge: neither "no pleural effusion" (the dictation) nor a plain "pleural effusion is seen"
    assert all("pleural effusion may be present" in r["answer"].lower() and "no pleural effusion" not in r["answer"].lower()
               for r in about)


def test_records_read_equal_studies_plus_rejects(onto):
    # REFLACX: a study group or a metadata row that names no study is one record; a reading
    # rejected inside an emitted study is a row of it. Eye Gaze: a study group or a master row
    # that joins none. Both: read = studies + study rejects, and nothing vanishes.
    for name, inputs in (("reflacx", [RX / "main_data", RX / "mimic"]), ("eye-gaze", [EG / "egd-cxr", EG / "mimic"])):
        stream = get_source(name).iter_records(inputs, ontology=onto)
        recs = list(stream)
        c = stream.counts
        studies = [r for r in recs if isinstance(r, Study)]
        study_rejects = [r for r in recs if isinstance(r, Reject) and r.stage == "source"]
        assert c.read == c.studies + c.rejects == len(studies) + len(study_rejects), (name, c.as_dict())
        assert c.row_rejects == len(recs) - len(studies) - len(study_rejects) > 0


def test_reflacx_unreadable_transcription_names_its_file(onto, tmp_path):
    main = tmp_path / "main_data"
    shutil.copytree(RX / "main_data", main)
    (main / "P300R000003" / "transcription.txt").write_bytes(b"\xff\xfeclear lungs")
    studies, rejects = split(get_source("reflacx").iter_records([main], ontology=onto))
    assert "reflacx:50000003" not in [s.id for s in studies]
    r = next(r for r in rejects if "P300R000003" in r.reason)
    assert r.stage == "source" and r.reason.startswith("reading P300R000003: not UTF-8 text")
    assert r.ref == str(main / "P300R000003" / "transcription.txt")


def test_eyegaze_tables_held_in_memory_are_bounded_by_the_release(onto, tmp_path):
    # The master sheet and the box table are held (fixations.csv needs every sheet dicom_id to
    # tell calibration rows apart; an image's ~17 box rows are not contiguous), not streamed:
    # the release is 1,083 images and 18,405 box rows (FORMATS.md section 2). At that size, in
    # the layout (CRLF, a quoted indication over two lines), the read's traced peak stays a few MB.
    import tracemalloc

    names = ["right lung", "left lung", "cardiac silhouette", "trachea", "upper mediastinum", "right clavicle",
             "left clavicle", "right costophrenic angle", "left costophrenic angle", "right upper lung zone",
             "right mid lung zone", "right lower lung zone", "left upper lung zone", "left mid lung zone",
             "left lower lung zone", "right hilar structures", "left hilar structures"]
    n = 1083
    dids = [f"{i:08x}-11111111-22222222-33333333-44444444" for i in range(n)]
    master = ["dicom_id,path,study_id,patient_id,Normal,CHF,pneumonia,cxr_exam_indication"]
    master += [f'{d},files/p11/p{11000000 + i}/s{51000000 + i}/{d}.dcm,{51000000 + i},{11000000 + i},{int(i % 3 == 0)},'
               f'{int(i % 3 == 1)},{int(i % 3 == 2)},"___F with chest pain.\r\nEvaluate for acute process."' for i, d in enumerate(dids)]
    boxes = ["dicom_id,bbox_name,x1,x2,y1,y2"] + [f"{d},{b},{250 + k}.0,1300.0,300.0,2200.0"
                                                  for k, b in enumerate(names) for d in dids]  # grouped by name, not image
    egd = tmp_path / "egd-cxr"
    egd.mkdir()
    (egd / "master_sheet.csv").write_bytes(("\r\n".join(master) + "\r\n").encode())
    (egd / "bounding_boxes.csv").write_bytes(("\r\n".join(boxes) + "\r\n").encode())
    tracemalloc.start()
    try:
        studies = rejects = 0
        for rec in get_source("eye-gaze").iter_records([egd], ontology=onto):
            studies += isinstance(rec, Study)
            rejects += isinstance(rec, Reject)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (studies, rejects) == (n, 0)
    assert peak < 8 * 2**20, f"eye-gaze read peaked at {peak / 2**20:.1f} MiB for the release's size"
