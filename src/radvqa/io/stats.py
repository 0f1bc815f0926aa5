"""``radvqa stats DIR``: statistics computed from the Parquet files themselves (not the manifest),
streamed shard by shard with pyarrow compute."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from radvqa.io.parquet import iter_batches, shard_files


def _vc(col: pa.Array | pa.ChunkedArray) -> dict[Any, int]:
    return {d["values"]: d["counts"] for d in pc.value_counts(col).to_pylist()}


def compute_stats(out: Path | str) -> dict[str, Any]:
    out = Path(out)
    if not shard_files(out, "qa") and not shard_files(out, "scene_graphs"):
        raise FileNotFoundError(f"no qa/part-*.parquet or scene_graphs/part-*.parquet under {out}")
    rows = 0
    by: dict[str, Counter[Any]] = {k: Counter() for k in ("strategy", "question_type", "grade", "split", "source")}
    short_by_type: dict[str, Counter[Any]] = defaultdict(Counter)
    n_boxes = n_parts = rows_with_boxes = 0
    studies: set[str] = set()
    patients: set[str] = set()
    cols = ["strategy", "question_type", "grade", "split", "source", "answer_short", "boxes", "answer_parts",
            "study_id", "patient_id"]
    for b in iter_batches(out, "qa", columns=cols, batch_size=50_000):
        rows += b.num_rows
        for k in by:
            by[k].update(_vc(b.column(k)))
        nb = pc.list_value_length(b.column("boxes")).fill_null(0)
        n_boxes += int(pc.sum(nb).as_py() or 0)
        rows_with_boxes += int(pc.sum(pc.greater(nb, 0)).as_py() or 0)
        n_parts += int(pc.sum(pc.list_value_length(b.column("answer_parts")).fill_null(0)).as_py() or 0)
        g = pa.table({"t": b.column("question_type"), "a": b.column("answer_short")}).group_by(["t", "a"]).aggregate([([], "count_all")])
        for t, a, n in zip(g.column("t").to_pylist(), g.column("a").to_pylist(), g.column("count_all").to_pylist()):
            short_by_type[t][a] += n
        studies.update(pc.unique(b.column("study_id")).to_pylist())
        patients.update(pc.unique(b.column("patient_id")).to_pylist())
    sg_rows = 0
    sg_images = 0
    sg_obs = 0
    for b in iter_batches(out, "scene_graphs", columns=["images", "observations"], batch_size=20_000):
        sg_rows += b.num_rows
        sg_images += int(pc.sum(pc.list_value_length(b.column("images")).fill_null(0)).as_py() or 0)
        sg_obs += int(pc.sum(pc.list_value_length(b.column("observations")).fill_null(0)).as_py() or 0)
    yes_no: dict[str, dict[str, int]] = {}
    for t, c in sorted(short_by_type.items()):
        if set(c) & {"yes", "no"}:
            yes_no[t] = {"yes": c.get("yes", 0), "no": c.get("no", 0)}
    return {
        "qa_rows": rows,
        "studies_with_qa": len(studies),
        "patients_with_qa": len(patients),
        "scene_graphs": sg_rows,
        "images": sg_images,
        "observations": sg_obs,
        "boxes_per_row": round(n_boxes / rows, 3) if rows else 0.0,
        "rows_with_boxes": rows_with_boxes,
        "answer_parts_per_row": round(n_parts / rows, 3) if rows else 0.0,
        **{f"by_{k}": dict(sorted(v.items(), key=lambda kv: (-kv[1], str(kv[0])))) for k, v in by.items()},
        "yes_no_by_question_type": yes_no,
    }
