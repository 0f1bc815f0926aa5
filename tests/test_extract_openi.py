"""Accuracy floor on a fixed OpenI subset (200 unmodified train-split XMLs + their gold rows in
tests/data/extract) and the `radvqa label` / `radvqa extract` commands on real inputs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from radvqa.cli import app
from radvqa.extract import get_extractor
from radvqa.extract.inputs import read_reports
from radvqa.extract.labels import Labeler
from radvqa.model import Reject, SceneGraph, from_json
from radvqa.ontology import load_ontology

DATA = Path(__file__).parent / "data" / "extract"
CXR8 = ["Atelectasis", "Cardiomegaly", "Effusion", "Infiltration", "Mass", "Nodule", "Pneumonia", "Pneumothorax"]
NIH13 = CXR8 + ["Consolidation", "Edema", "Emphysema", "Fibrosis", "Pleural_Thickening"]


@pytest.fixture(scope="module")
def gold():
    with (DATA / "openi_gold_nih14_subset.csv").open(newline="") as fh:
        return {r["filename"]: r for r in csv.DictReader(fh)}


@pytest.fixture(scope="module")
def predicted():
    onto = load_ontology()
    ex = get_extractor("rules", ontology=onto)
    lab = Labeler(onto, "nih14")
    out = {}
    for rec in read_reports(DATA / "openi"):
        assert not isinstance(rec, Reject), rec
        rid, text = rec
        out[rid] = lab.label(ex.extract(text, rid))
    return out


def _micro_f1(gold, pred, labels):
    tp = fp = fn = 0
    for rid, g in gold.items():
        p = pred[rid]
        for lab in labels:
            gv = g[lab] == "1"
            pv = p["No Finding" if lab == "normal" else lab] == 1
            tp += gv and pv
            fp += pv and not gv
            fn += gv and not pv
    return 2 * tp / (2 * tp + fp + fn)


def test_subset_is_complete(gold, predicted):
    assert len(gold) == 200 and set(gold) == set(predicted)


def test_accuracy_floor_chestxray8_protocol(gold, predicted):
    # 0.903 on this subset when written (the full train+val figure is 0.95: this subset holds
    # a few gold-noise reports); a regression below 0.89 fails CI
    assert _micro_f1(gold, predicted, CXR8 + ["normal"]) >= 0.89


def test_accuracy_floor_13_labels_plus_normal(gold, predicted):
    # 0.907 when written
    assert _micro_f1(gold, predicted, NIH13 + ["normal"]) >= 0.89


def test_label_cli_writes_scheme_columns(tmp_path):
    out = tmp_path / "labels.csv"
    res = CliRunner().invoke(app, ["label", str(DATA / "openi"), "--scheme", "nih14", "--out", str(out), "--limit", "30"])
    assert res.exit_code == 0, res.output
    rows = list(csv.reader(out.open()))
    assert rows[0][0] == "id" and "Atelectasis" in rows[0] and "No Finding" in rows[0] and "Infiltrate" not in rows[0]
    assert len(rows) == 31
    values = {v for r in rows[1:] for v in r[1:]}
    assert values <= {"1", "0", "-1", ""} and "1" in values and "0" in values
    byid = {r[0]: dict(zip(rows[0], r)) for r in rows[1:]}
    # CXR1: normal report ("The cardiac silhouette and mediastinum size are within normal limits...")
    assert byid["CXR1"]["No Finding"] == "1"
    res = CliRunner().invoke(app, ["label", str(DATA / "openi"), "--scheme", "chexpert14", "--out", str(tmp_path / "c.csv"), "--limit", "5"])
    assert res.exit_code == 0, res.output
    assert "Pleural Effusion" in next(csv.reader((tmp_path / "c.csv").open()))


def test_label_cli_hedges_uncertain_or_commit(tmp_path):
    # "X or Y" and "likely X" are -1 by default and 1 with --hedges commit (the MeSH convention)
    src = tmp_path / "reports.csv"
    with src.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "text"])
        w.writerow(["a", "FINDINGS: Scarring or atelectasis in the right base. No pneumothorax."])
        w.writerow(["b", "IMPRESSION: Likely small left pleural effusion."])
    got = {}
    for mode in ("uncertain", "commit"):
        out = tmp_path / f"{mode}.csv"
        res = CliRunner().invoke(app, ["label", str(src), "--scheme", "nih14", "--out", str(out), "--hedges", mode])
        assert res.exit_code == 0, res.output
        got[mode] = {r["id"]: r for r in csv.DictReader(out.open())}
    assert got["uncertain"]["a"]["Atelectasis"] == "-1" and got["commit"]["a"]["Atelectasis"] == "1"
    assert got["uncertain"]["b"]["Effusion"] == "-1" and got["commit"]["b"]["Effusion"] == "1"
    assert got["uncertain"]["a"]["Pneumothorax"] == got["commit"]["a"]["Pneumothorax"] == "0"
    res = CliRunner().invoke(app, ["label", str(src), "--scheme", "nih14", "--out", str(tmp_path / "x.csv"), "--hedges", "maybe"])
    assert res.exit_code != 0 and "hedges" in res.output


def test_extract_cli_csv_input_with_rejects(tmp_path):
    src = tmp_path / "reports.csv"
    with src.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "text"])
        w.writerow(["a", "FINDINGS: Small left pleural effusion. No pneumothorax."])
        w.writerow(["b", "   "])
        w.writerow(["", "no id"])
        w.writerow(["c", "IMPRESSION: Cardiomegaly."])
    out = tmp_path / "sg.jsonl"
    res = CliRunner().invoke(app, ["extract", str(src), "--out", str(out)])
    assert res.exit_code == 0, res.output
    graphs = [from_json(line, SceneGraph) for line in out.read_bytes().splitlines()]
    assert [g.study_id for g in graphs] == ["a", "c"]
    obs = {(o.finding, o.certainty, o.laterality) for o in graphs[0].observations}
    assert ("pleural_effusion", "present", "left") in obs and ("pneumothorax", "absent", None) in obs
    assert graphs[0].report.sentences[0].section == "FINDINGS"
    rejects = [json.loads(line) for line in (tmp_path / "sg.jsonl.rejected.jsonl").read_text().splitlines()]
    assert len(rejects) == 2 and {r["ref"].split(":")[-1] for r in rejects} >= {"b"}
    assert any("empty" in r["reason"] for r in rejects)


def test_extract_cli_txt_folder_and_bad_input(tmp_path):
    d = tmp_path / "txt"
    d.mkdir()
    (d / "r1.txt").write_text("Heart size is normal. Lungs are clear.")
    (d / "r2.txt").write_bytes(b"\xff\xfe\x00garbage")
    out = tmp_path / "o.jsonl"
    res = CliRunner().invoke(app, ["extract", str(d), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert len(out.read_text().splitlines()) == 1
    rej = (tmp_path / "o.jsonl.rejected.jsonl").read_text()
    assert "r2" in rej
    res = CliRunner().invoke(app, ["extract", str(tmp_path / "missing.csv"), "--out", str(out)])
    assert res.exit_code != 0 and "not found" in res.output


def test_csv_input_with_bom_and_non_utf8_rows(tmp_path):
    good = tmp_path / "bom.csv"
    good.write_bytes(b'\xef\xbb\xbfid,text\nx,"No pneumothorax.\nSmall left effusion."\n')
    assert list(read_reports(good)) == [("x", "No pneumothorax.\nSmall left effusion.")]
    bad = tmp_path / "latin1.csv"
    bad.write_bytes(b"id,text\na,No effusion.\nb,caf\xe9 \xe9panchement\n")
    recs = list(read_reports(bad))
    assert recs[0] == ("a", "No effusion.")
    assert isinstance(recs[-1], Reject) and "UTF-8" in recs[-1].reason
    with pytest.raises(ValueError, match="id' and 'text"):
        other = tmp_path / "cols.csv"
        other.write_text("study,report\n1,x\n")
        list(read_reports(other))


def test_openi_xml_without_text_is_a_reject(tmp_path):
    d = tmp_path / "x"
    d.mkdir()
    (d / "1.xml").write_text('<eCitation><uId id="CXR9"/><Abstract><AbstractText Label="FINDINGS"/></Abstract></eCitation>')
    (d / "2.xml").write_text("<not closed")
    recs = list(read_reports(d))
    assert all(isinstance(r, Reject) for r in recs)
    assert "no report text" in recs[0].reason and "well-formed" in recs[1].reason
