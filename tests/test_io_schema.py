"""IR <-> Arrow round trips (nested structs and lists), the Parquet shard writer and readers."""

from __future__ import annotations

import errno

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from radvqa.io.parquet import ShardWriter, WriteError, iter_objects, read_qa, read_scene_graphs, shard_files, tmp_name
from radvqa.io.schema import codec, qa_schema, scene_graph_schema
from radvqa.model import (
    QA, AnswerPart, Box, Image, Indication, Observation, Report, SceneGraph, Section, Sentence, Span,
)

DESIGN_QA_COLUMNS = (
    "qa_id", "source", "split", "patient_id", "study_id", "image_ids", "image_paths", "strategy",
    "question_type", "template_id", "template_version", "question", "answer", "answer_short", "choices",
    "polarity", "findings", "regions", "answer_parts", "boxes", "grade", "provenance",
)


def make_sg(i: int = 1) -> SceneGraph:
    text = "FINDINGS: Small left pleural effusion. No pneumothorax."
    box = Box(image_id=f"i{i}", x1=10.5, y1=20.0, x2=110.0, y2=220.0, source="expert", reader="R1", label="pleural_effusion")
    return SceneGraph(
        study_id=f"openi:CXR{i}", patient_id=f"P{i}", source="openi",
        images=[Image(id=f"i{i}", path="a.png", width=448, height=448, view="PA", original_width=1024, original_height=1024)],
        report=Report(text=text, sections=[Section(name="FINDINGS", start=10, end=len(text))],
                      sentences=[Sentence(id="S01", section="FINDINGS", start=10, end=38, text=text[10:38])]),
        indication=Indication(text="dyspnea", evaluate=["pneumonia"], evidence=[Span(start=0, end=3, text="dys")]),
        observations=[
            Observation(id="O01", finding="pleural_effusion", laterality="left", regions=["left_costophrenic_angle"],
                        severity="small", size_mm=12.5, children=["O02"],
                        evidence=[Span(start=10, end=38, text=text[10:38], sentence_id="S01")], boxes=[box]),
            Observation(id="O02", finding="pneumothorax", certainty="absent", from_report=False),
        ],
        region_boxes=[Box(image_id=f"i{i}", x1=0, y1=0, x2=200, y2=300, source="region", label="left_lung")],
        split="train", study_time="2020-01-01", prior_study_id=None, meta={"k": "v", "z": "1"},
    )


def make_qa(i: int = 1, study: int = 1) -> QA:
    box = Box(image_id=f"i{study}", x1=1.0, y1=2.0, x2=30.0, y2=40.0, source="expert", reader="R2", label="nodule")
    return QA(
        qa_id=f"q{i}", source="openi", split="train", patient_id=f"P{study}", study_id=f"openi:CXR{study}",
        strategy="qba", question_type="D02_has_finding", template_id="D02.v", template_version=2,
        question="Is there a nodule?", answer="Yes, a nodule in the left lung.", image_ids=[f"i{study}"],
        image_paths=["a.png"], answer_short="yes", choices=["yes", "no"] if i % 2 else None, polarity="positive",
        findings=["nodule"], regions=["left_lung"],
        answer_parts=[
            AnswerPart(part_type="main", text="Yes.", tag="nodule, left", findings=["nodule"], certainty="present", boxes=[box]),
            AnswerPart(part_type="details", text="Small.", level=1, severity="small"),
        ],
        boxes=[box], grade="A+", grade_reasons=["localization"], provenance=["S01: text"], modality="CR",
    )


def test_qa_round_trip_nested() -> None:
    rows = [make_qa(i) for i in range(5)] + [QA(qa_id="bare", source="s", split="test", patient_id="p", study_id="s1",
                                               strategy="rin", question_type="t", template_id="x", template_version=1,
                                               question="q", answer="a")]
    t = codec("qa").to_table(rows)
    assert t.schema.equals(qa_schema(), check_metadata=True)
    assert t.column("choices").null_count == 4  # None stays null, not []
    assert codec("qa").from_table(t) == rows
    # the fast columnar path gives exactly the table of the reference (builtins) path
    assert codec("qa").to_table_pylist(rows).equals(t)


def test_scene_graph_round_trip_nested() -> None:
    rows = [make_sg(1), make_sg(2), SceneGraph(study_id="x", patient_id="p", source="s")]
    t = codec("scene_graphs").to_table(rows)
    assert t.schema.equals(scene_graph_schema(), check_metadata=True)
    back = codec("scene_graphs").from_table(t)
    assert back == rows
    assert back[0].meta == {"k": "v", "z": "1"}  # dict kept, in order
    assert back[2].report is None and back[2].indication is None
    assert back[0].observations[0].boxes[0].reader == "R1"


def test_schema_has_design_columns_and_nested_box_struct() -> None:
    s = qa_schema()
    for c in DESIGN_QA_COLUMNS:
        assert c in s.names, c
    box = s.field("boxes").type.value_type
    assert [f.name for f in box][:6] == ["image_id", "x1", "y1", "x2", "y2", "source"]
    part = s.field("answer_parts").type.value_type
    assert {"part_type", "level", "text", "findings", "regions", "laterality", "certainty", "severity", "boxes"} <= set(part.names)
    assert s.metadata[b"radvqa.kind"] == b"qa"


def test_check_schema_reports_differences() -> None:
    c = codec("qa")
    assert c.check_schema(c.schema) == []
    bad = c.schema.remove(c.schema.get_field_index("grade")).append(pa.field("extra", pa.int8()))
    probs = c.check_schema(bad)
    assert any("missing column 'grade'" in p for p in probs)
    assert any("unexpected column 'extra'" in p for p in probs)


def test_writer_row_groups_zstd_and_rename(tmp_path) -> None:
    p = tmp_path / "qa" / "part-00000.parquet"
    w = ShardWriter(p, "qa", row_group_rows=4)
    w.extend([make_qa(i) for i in range(10)])
    assert not p.exists() and tmp_name(p).exists()  # written under the temp name until closed
    w.close()
    assert p.exists() and not tmp_name(p).exists()
    md = pq.ParquetFile(p).metadata
    assert md.num_rows == 10 and md.num_row_groups == 3
    assert md.row_group(0).column(0).compression == "ZSTD"
    assert shard_files(tmp_path, "qa") == [p]
    assert read_qa(tmp_path) == [make_qa(i) for i in range(10)]


def test_writer_is_deterministic(tmp_path) -> None:
    for d in ("a", "b"):
        with ShardWriter(tmp_path / d / "scene_graphs" / "part-00000.parquet", "scene_graphs") as w:
            for i in range(3):
                w.add(make_sg(i))
    a = (tmp_path / "a" / "scene_graphs" / "part-00000.parquet").read_bytes()
    b = (tmp_path / "b" / "scene_graphs" / "part-00000.parquet").read_bytes()
    assert a == b
    assert read_scene_graphs(tmp_path / "a") == [make_sg(i) for i in range(3)]
    assert [s.study_id for s in iter_objects(tmp_path / "a", "scene_graphs", batch_size=1)] == ["openi:CXR0", "openi:CXR1", "openi:CXR2"]


def test_writer_exception_leaves_no_file(tmp_path) -> None:
    p = tmp_path / "qa" / "part-00001.parquet"
    with pytest.raises(RuntimeError):
        with ShardWriter(p, "qa", row_group_rows=2) as w:
            w.extend([make_qa(i) for i in range(5)])
            raise RuntimeError("boom")
    assert not p.exists() and not tmp_name(p).exists()


def test_disk_full_is_a_clear_error(tmp_path, monkeypatch) -> None:
    def full(self, *a, **k):  # noqa: ANN001, ANN002, ANN003
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    p = tmp_path / "qa" / "part-00000.parquet"
    w = ShardWriter(p, "qa", row_group_rows=2)
    with pytest.raises(WriteError, match="disk full"):
        w.extend([make_qa(i) for i in range(3)])
    w.abort()
    assert not p.exists() and not tmp_name(p).exists()
