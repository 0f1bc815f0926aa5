"""How fast the viewer answers on a large dataset, and how much memory it needs.

    python benchmarks/viewer_query.py [--dataset DIR | --rows 2000000] [--work /tmp/radvqa-viewer-bench]

With ``--dataset`` it times an existing ``radvqa build`` output; otherwise it writes a synthetic one
first: the viewer test fixture's QA rows (real NIH images and boxes, hand-made QA) repeated to
``--rows`` rows with fresh qa_ids, in shards of 250,000 rows and 10,000-row ZSTD row groups (the
layout ``radvqa.io`` writes). Prints, each timed once cold (first request with those filters)
and once warm (same request again): open, facets, unfiltered first/last page, a facet filter, a
list filter (finding), a free-text search, a combined filter, a deep page of a filter; then peak
memory (max RSS) against the size of the QA shards on disk.
"""

from __future__ import annotations

import argparse
import importlib.util
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _synthesize(out: Path, rows: int) -> Path:
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from radvqa.model import to_builtins

    spec = importlib.util.spec_from_file_location("viewer_fixture", ROOT / "tests/data/viewer/fixture.py")
    fx = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(fx)
    base = pa.Table.from_pylist([to_builtins(r) for r in fx.make_rows()])
    (out / "qa").mkdir(parents=True, exist_ok=True)
    shard_rows = 250_000
    reps = -(-shard_rows // base.num_rows)
    block = pa.concat_tables([base] * reps).slice(0, shard_rows)
    qa_col = block.schema.get_field_index("qa_id")
    written = 0
    k = 0
    while written < rows:
        n = min(shard_rows, rows - written)
        ids = pa.array([f"bench-{written + i:09d}" for i in range(n)])
        # a new study every 8 rows, a new patient every 16: ids vary as in a real build
        studies = pa.array([f"bench:s{(written + i) // 8:08d}" for i in range(n)])
        patients = pa.array([f"bench:p{(written + i) // 16:08d}" for i in range(n)])
        t = block.slice(0, n).set_column(qa_col, "qa_id", ids)
        t = t.set_column(t.schema.get_field_index("study_id"), "study_id", studies)
        t = t.set_column(t.schema.get_field_index("patient_id"), "patient_id", patients)
        pq.write_table(t, out / "qa" / f"part-{k:05d}.parquet", row_group_size=10_000,
                       compression="zstd", compression_level=3)
        written += n
        k += 1
    (out / "manifest.json").write_text(json.dumps({"version": "bench", "source": "nih",
                                                   "image_roots": [str(ROOT / "tests/data/viewer")]}))
    return out


def _timed(label: str, fn) -> object:
    t0 = time.perf_counter()
    res = fn()
    dt = time.perf_counter() - t0
    print(f"  {label:<44} {dt * 1000:9.1f} ms")
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", type=Path, help="an existing dataset directory")
    ap.add_argument("--rows", type=int, default=2_000_000, help="rows of the synthetic dataset")
    ap.add_argument("--work", type=Path, default=Path("/tmp/radvqa-viewer-bench"))
    ap.add_argument("--synthesize-only", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.synthesize_only:
        _synthesize(args.synthesize_only, args.rows)
        return 0

    from radvqa.viewer.query import Filters, ViewerDataset

    if args.dataset:
        ds_dir = args.dataset
    else:
        ds_dir = args.work / f"rows-{args.rows}"
        if not (ds_dir / "manifest.json").exists():
            # in a child process, so the peak memory printed below is the viewer's alone
            import subprocess

            t0 = time.perf_counter()
            subprocess.run([sys.executable, __file__, "--synthesize-only", str(ds_dir), "--rows", str(args.rows)], check=True)
            print(f"wrote {args.rows} synthetic rows to {ds_dir} in {time.perf_counter() - t0:.1f} s")
    disk = sum(p.stat().st_size for p in (ds_dir / "qa").glob("*.parquet"))
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"dataset {ds_dir}: QA shards {disk / 1e6:.1f} MB on disk")

    data = _timed("open (footers only)", lambda: ViewerDataset(ds_dir))
    assert isinstance(data, ViewerDataset)
    print(f"  rows {data.total_rows}, units (row groups) {len(data.units)}")
    _timed("facets (cold: one pass over 7 columns)", data.facets)
    _timed("facets (warm)", data.facets)
    last = max(0, data.total_rows - 20)
    cases = [
        ("unfiltered page 1", Filters(), 0),
        ("unfiltered last page", Filters(), last),
        ("strategy=vindr page 1", Filters.make({"strategy": ["vindr"]}), 0),
        ("finding=pleural_effusion page 1", Filters.make({"finding": ["pleural_effusion"]}), 0),
        ("q='pleural effusion' page 1", Filters.make(text="pleural effusion"), 0),
        ("split=train & grade=A++,A+ & region=left_lung", Filters.make({"split": ["train"], "grade": ["A++", "A+"], "region": ["left_lung"]}), 0),
    ]
    for label, f, offset in cases:
        page = _timed(f"{label} (cold)", lambda f=f, o=offset: data.query(f, o, 20))
        _timed(f"{label} (warm)", lambda f=f, o=offset: data.query(f, o, 20))
        print(f"    -> {page.total} matches, {len(page.rows)} rows returned")
    f = Filters.make({"strategy": ["vindr"]})
    deep = max(0, data.count(f) - 20)
    _timed(f"strategy=vindr page at offset {deep} (warm counts)", lambda: data.query(f, deep, 20))
    _timed("present() 20 rows (image URLs + sizes)", lambda: [data.present(r) for r in data.query(Filters(), 0, 20).rows])
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"peak RSS {rss / 1024:.0f} MB (at start {rss0 / 1024:.0f} MB); QA shards {disk / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
