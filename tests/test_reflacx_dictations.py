"""Every REFLACX reader's dictation is extracted (issue 15): the report is one reader's dictation,
the others' findings become those readers' labels (extract/dictations.py) and feed localize's
reader fusion. On the hand-made fixture (invented values, the real layout): study 50000001 is read
by P102R111111 (its dictation is the report), P102R222222 ("Subsegmental atelectasis at the left
base, possibly a small effusion.") and P102R333333 (eye tracking discarded: no dictation)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from radvqa.cli import app
from radvqa.extract import get_extractor
from radvqa.extract.dictations import SCHEME, with_reader_dictations
from radvqa.model import Study
from radvqa.ontology import load_ontology
from radvqa.sources.reflacx import ReflacxSource

RX = Path(__file__).parent / "data" / "sources" / "reflacx"
DICOM = "aaaa0001-11111111-22222222-33333333-44444444"


@pytest.fixture(scope="module")
def onto():
    return load_ontology()


def _study(onto, main: Path = RX / "main_data") -> Study:
    return next(r for r in ReflacxSource().iter_records([main], ontology=onto)
                if isinstance(r, Study) and r.id == "reflacx:50000001")


def test_other_readers_dictations_become_their_labels(onto):
    st = _study(onto)
    assert st.meta["report_reader"] == "P102R111111" and "transcription:P102R222222" in st.meta
    ex = get_extractor("rules", ontology=onto)
    out = with_reader_dictations(st, ex)
    dict_labels = [(lab.reader, lab.name, lab.value, lab.image_id) for lab in out.labels if lab.scheme == SCHEME]
    # "Subsegmental atelectasis at the left base" -> present; "possibly a small effusion" -> uncertain
    assert dict_labels == [("P102R222222", "linear_atelectasis", 1, DICOM), ("P102R222222", "pleural_effusion", -1, DICOM)]
    assert out.meta["reader_dictations"] == "P102R222222" and "reader_dictations_failed" not in out.meta
    assert out.labels[:len(st.labels)] == st.labels and not any(lab.scheme == SCHEME for lab in st.labels)
    assert out.report_text == st.report_text  # the report stays the one chosen dictation


def test_unusable_dictation_is_noted_not_dropped(onto):
    st = _study(onto)
    meta = dict(st.meta)
    meta["transcription:P102R999999"] = "   "  # the rules extractor calls a blank report unusable
    out = with_reader_dictations(Study(id=st.id, patient_id=st.patient_id, source=st.source, labels=st.labels,
                                       report_text=st.report_text, meta=meta), get_extractor("rules", ontology=onto))
    assert out.meta["reader_dictations"] == "P102R222222"
    assert out.meta["reader_dictations_failed"].startswith("P102R999999: ")
    assert not any(lab.reader == "P102R999999" for lab in out.labels)


def test_dictation_votes_in_reader_fusion_end_to_end(tmp_path):
    # R1's dictation (the report) states a left pneumothorax that no reader's certainty column
    # marks; R2 dictates it too. Without R2's dictation all three readers' labels say absent; with
    # it R2 votes present, so only R1 (its own column) and R3 disagree with the dictation.
    main = tmp_path / "main_data"
    shutil.copytree(RX / "main_data", main)
    (main / "P102R111111" / "transcription.txt").write_text("Left basilar atelectasis. Small left apical pneumothorax.")
    (main / "P102R222222" / "transcription.txt").write_text("Small left pneumothorax. Left basilar atelectasis.")
    outs = []
    for workers in ("1", "2"):
        out = tmp_path / f"o{workers}"
        r = CliRunner().invoke(app, ["build", "reflacx", "-i", str(main), "--out", str(out), "--strategies", "vindr,qba",
                                     "--workers", workers, "--shard-studies", "1"])
        assert r.exit_code == 0, r.output
        outs.append(out)
    sg = next(r for r in pq.read_table(outs[0] / "scene_graphs").to_pylist() if r["study_id"] == "reflacx:50000001")
    m = {kv["key"]: kv["value"] for kv in sg["meta"]}
    assert m["reader_dictations"] == "P102R222222"
    ptx = [o for o in sg["observations"] if o["finding"] == "pneumothorax"]
    assert [(o["source"], o["certainty"]) for o in ptx] == [("report", "uncertain")]
    assert f"{ptx[0]['id']}=pneumothorax: absent by P102R111111+P102R333333, present in the dictation of P102R111111" \
        in m["reader_conflicts"].split("; ")
    # the same rows whatever the number of workers
    ta, tb = (pq.read_table(o / "qa").sort_by([("qa_id", "ascending")]) for o in outs)
    assert ta.equals(tb)
