"""ShardWriter.extend: row groups hold exactly ``row_group_rows`` rows whatever the batch sizes
(one study's rows at a time, or many), so output bytes never depend on how rows were handed in;
and the columnar converter keeps nulls and empty lists apart."""

from __future__ import annotations

import pyarrow.parquet as pq

from radvqa.io.parquet import ShardWriter, read_qa
from radvqa.io.schema import codec
from radvqa.model import QA, AnswerPart, Box


def make_qa(i: int, study: int = 1) -> QA:
    box = Box(image_id=f"i{study}", x1=1.0, y1=2.0, x2=30.0, y2=40.0, source="expert", reader="R2", label="nodule")
    return QA(
        qa_id=f"q{i}", source="openi", split="train", patient_id=f"P{study}", study_id=f"openi:CXR{study}",
        strategy="qba", question_type="D02_has_finding", template_id="D02.v", template_version=2,
        question="Is there a nodule?", answer=f"Yes ({i}).", image_ids=[f"i{study}"], image_paths=["a.png"],
        answer_short="yes", choices=["yes", "no"] if i % 2 else None, findings=["nodule"],
        answer_parts=[AnswerPart(part_type="main", text="Yes.", findings=["nodule"], boxes=[box] * (i % 3)),
                      AnswerPart(part_type="details", text="Small.", level=1, severity="small")],
        boxes=[box], grade="A+",
    )


def _write(path, batches: list[list[QA]], rg: int) -> list[int]:
    w = ShardWriter(path / "qa" / "part-00000.parquet", "qa", rg)
    for b in batches:
        w.extend(b)
    w.close()
    md = pq.ParquetFile(path / "qa" / "part-00000.parquet").metadata
    return [md.row_group(i).num_rows for i in range(md.num_row_groups)]


def test_row_groups_independent_of_batch_sizes(tmp_path) -> None:
    rows = [make_qa(i, study=i // 4) for i in range(45)]
    sizes = [3, 10, 0, 20, 1, 7, 4]  # smaller, larger and several times the row group
    batches, k = [], 0
    for n in sizes:
        batches.append(rows[k:k + n])
        k += n
    a, b = tmp_path / "a", tmp_path / "b"
    assert _write(a, batches, 7) == [7, 7, 7, 7, 7, 7, 3]
    assert _write(b, [[r] for r in rows], 7) == [7, 7, 7, 7, 7, 7, 3]
    assert (a / "qa" / "part-00000.parquet").read_bytes() == (b / "qa" / "part-00000.parquet").read_bytes()
    assert [q.qa_id for q in read_qa(a)] == [q.qa_id for q in rows]


def test_converter_keeps_null_and_empty_lists_apart() -> None:
    q1, q2 = make_qa(1), make_qa(2)
    q1.choices = None
    q2.choices = []
    t = codec("qa").to_table([q1, q2])
    assert t.column("choices").to_pylist() == [None, []]
    back = codec("qa").from_table(t)
    assert back[0].choices is None and back[1].choices == []
    assert back == [q1, q2]
