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


def image_counts(out: Path | str) -> dict[str, int]:
    """Rows and images with and without an image file (#17: an NIH build had 1,877 of 771,148 rows
    with an image, and nothing said so). A row counts as having its image when every one of its
    image paths is set (the source found the file)."""
    out = Path(out)
    with_img = without = 0
    for b in iter_batches(out, "qa", columns=["image_paths"], batch_size=100_000):
        col = b.column("image_paths")
        n_paths = pc.list_value_length(col).fill_null(0)
        flat = pc.list_flatten(col)
        empty = pc.or_(pc.is_null(flat), pc.equal(pc.utf8_length(flat.fill_null("")), 0))
        parents = pc.list_parent_indices(col)
        n_empty = pa.table({"p": parents, "e": pc.cast(empty, pa.int64())}).group_by("p").aggregate([("e", "sum")])
        bad = set(p for p, e in zip(n_empty.column("p").to_pylist(), n_empty.column("e_sum").to_pylist()) if e)
        ok = int(pc.sum(pc.greater(n_paths, 0)).as_py() or 0) - len(bad)
        with_img += ok
        without += b.num_rows - ok
    files = records = 0
    for b in iter_batches(out, "scene_graphs", columns=["images"], batch_size=20_000):
        flat = pc.list_flatten(b.column("images"))
        records += len(flat)
        paths = pc.struct_field(flat, "path") if len(flat) else pa.array([], pa.string())
        files += int(pc.sum(pc.greater(pc.utf8_length(paths.fill_null("")), 0)).as_py() or 0)
    if not shard_files(out, "scene_graphs"):
        # an imported benchmark has no scene graphs and its importer does not check files: its
        # images are the distinct paths of its rows, counted as found only when the file exists
        # (VQA-RAD's release ships the test images only)
        exists = _FileCheck(out)
        ids_without: set[str] = set()
        with_img = without = 0
        for b in iter_batches(out, "qa", columns=["image_paths", "image_ids"], batch_size=100_000):
            for ps, ids in zip(b.column("image_paths").to_pylist(), b.column("image_ids").to_pylist()):
                found = [bool(p) and exists(p) for p in ps or []]
                with_img += bool(found) and all(found)
                without += not (found and all(found))
                for k, ok in enumerate(found):
                    if not ok:
                        ids_without.add((ids[k] if ids and k < len(ids) else None) or (ps[k] or f"row image {k}"))
        files = sum(1 for ok in exists.memo.values() if ok)
        records = files + len(ids_without)
    return {"qa_rows_with_image": with_img, "qa_rows_without_image": without,
            "image_files": files, "images_without_file": records - files}


class _FileCheck:
    """Whether a stored image path names an existing file: absolute, or under the manifest's
    image roots / inputs or the dataset folder (memoised per path)."""

    def __init__(self, out: Path) -> None:
        import json

        roots: list[Path] = []
        try:
            m = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
            roots = [Path(r) for r in (m.get("image_roots") or []) + (m.get("inputs") or []) if isinstance(r, str)]
        except (OSError, ValueError, AttributeError):
            pass
        self.roots = [r if r.is_dir() else r.parent for r in roots] + [out]
        self.memo: dict[str, bool] = {}

    def __call__(self, p: str) -> bool:
        hit = self.memo.get(p)
        if hit is None:
            q = Path(p)
            hit = q.is_file() if q.is_absolute() else any((r / q).is_file() for r in self.roots)
            self.memo[p] = hit
        return hit


def image_warning(counts: dict[str, Any]) -> str | None:
    """A loud line when most QA rows have no image file (a label-only or report-only build)."""
    w, wo = int(counts.get("qa_rows_with_image", 0)), int(counts.get("qa_rows_without_image", 0))
    if wo and wo >= w:
        return (f"{wo:,} of {w + wo:,} QA rows ({100 * wo / (w + wo):.1f}%) have no image file: the images were not "
                "given (pass the image folder with --input) or not found; a vision model cannot answer these rows "
                "(export and predict skip them by default)")
    return None


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
    imgs = image_counts(out)
    return {
        "qa_rows": rows,
        "studies_with_qa": len(studies),
        "patients_with_qa": len(patients),
        "scene_graphs": sg_rows,
        "images": imgs["image_files"],  # image files found (an image id without its file is not counted)
        "images_without_file": imgs["images_without_file"],
        "image_records": sg_images,
        "qa_rows_with_image": imgs["qa_rows_with_image"],
        "qa_rows_without_image": imgs["qa_rows_without_image"],
        "observations": sg_obs,
        "boxes_per_row": round(n_boxes / rows, 3) if rows else 0.0,
        "rows_with_boxes": rows_with_boxes,
        "answer_parts_per_row": round(n_parts / rows, 3) if rows else 0.0,
        **{f"by_{k}": dict(sorted(v.items(), key=lambda kv: (-kv[1], str(kv[0])))) for k, v in by.items()},
        "yes_no_by_question_type": yes_no,
    }
