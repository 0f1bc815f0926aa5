"""Is DuckDB faster than radvqa's own pyarrow row-group code for `radvqa stats` and the viewer's
filtered queries? (issue #17: adopt it only if it is.)

    python benchmarks/duckdb_vs_arrow.py DATASET [--repeat 3]

DATASET is a `radvqa build` output. For each task both implementations compute the same answer
(checked equal) and the best of ``--repeat`` wall times is printed, with the 1-minute load average:

- stats: `radvqa.io.stats.compute_stats` vs one DuckDB SQL pass per aggregate over qa/*.parquet;
- viewer count: `ViewerDataset.count` (facet filter strategy + finding list filter + free text),
  cold (new dataset object) vs DuckDB `count(*)` with the same WHERE;
- viewer page: the first 20 rows of that filter at offset 1,000 (all columns).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any, Callable


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    t_best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        t_best = min(t_best, time.perf_counter() - t0)
    return t_best, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    import duckdb

    from radvqa.io.stats import compute_stats
    from radvqa.viewer.query import Filters, ViewerDataset

    glob = str(a.dataset / "qa" / "*.parquet")
    con = duckdb.connect()
    con.execute("SET threads TO 2")  # the development machine has 2 cores; the arrow code uses them too

    def duck_stats() -> dict[str, Any]:
        out: dict[str, Any] = {}
        q = f"read_parquet('{glob}')"
        out["qa_rows"] = con.execute(f"SELECT count(*) FROM {q}").fetchone()[0]
        for k in ("strategy", "question_type", "grade", "split", "source"):
            out[f"by_{k}"] = dict(con.execute(f"SELECT {k}, count(*) FROM {q} GROUP BY 1").fetchall())
        r = con.execute(f"SELECT count(DISTINCT study_id), count(DISTINCT patient_id), "
                        f"sum(len(boxes)), sum(CASE WHEN len(boxes) > 0 THEN 1 ELSE 0 END), sum(len(answer_parts)) FROM {q}").fetchone()
        out["studies_with_qa"], out["patients_with_qa"], nb, out["rows_with_boxes"], n_parts = r
        out["yes_no"] = con.execute(f"SELECT question_type, answer_short, count(*) FROM {q} "
                                    "WHERE answer_short IN ('yes', 'no') GROUP BY 1, 2").fetchall()
        out["boxes"] = nb
        # the same extra work compute_stats does: rows with / without an image file, scene graphs
        out["qa_rows_with_image"] = con.execute(
            f"SELECT count(*) FROM {q} WHERE len(image_paths) > 0 "
            "AND len(list_filter(image_paths, lambda x: x IS NULL OR x = '')) = 0").fetchone()[0]
        sg = f"read_parquet('{a.dataset / 'scene_graphs' / '*.parquet'}')"
        out["scene_graphs"], out["image_records"], out["observations"] = con.execute(
            f"SELECT count(*), sum(len(images)), sum(len(observations)) FROM {sg}").fetchone()
        out["images"] = con.execute(f"SELECT count(*) FROM (SELECT unnest(images) AS im FROM {sg}) "
                                    "WHERE im.path IS NOT NULL AND im.path <> ''").fetchone()[0]
        return out

    load = os.getloadavg()[0]
    t_arrow, s_arrow = best(lambda: compute_stats(a.dataset), a.repeat)
    t_duck, s_duck = best(duck_stats, a.repeat)
    for k in ("qa_rows", "studies_with_qa", "patients_with_qa", "rows_with_boxes", "qa_rows_with_image",
              "scene_graphs", "image_records", "observations", "images"):
        assert s_arrow[k] == s_duck[k], (k, s_arrow[k], s_duck[k])
    assert dict(s_arrow["by_strategy"]) == s_duck["by_strategy"]
    rows = s_arrow["qa_rows"]
    print(f"dataset {a.dataset}: {rows:,} QA rows; load average {load:.2f}; best of {a.repeat}")
    print(f"stats         arrow (compute_stats) {t_arrow:7.3f} s   duckdb {t_duck:7.3f} s   "
          "(same numbers, checked equal)")

    # a filter with a facet, a list facet and free text
    v0 = ViewerDataset(a.dataset)
    strat = max(v0.facets()["facets"]["strategy"], key=lambda kv: kv[1])[0]  # the largest strategy
    finding = "pleural_effusion"
    word = "effusion"
    flt = Filters.make({"strategy": [strat], "finding": [finding]}, word)

    def arrow_count() -> int:
        return ViewerDataset(a.dataset).count(flt)  # cold: a new object has no count cache

    where = (f"strategy = '{strat}' AND list_contains(findings, '{finding}') "
             f"AND contains(lower(question), '{word}')")

    def duck_count() -> int:
        return con.execute(f"SELECT count(*) FROM read_parquet('{glob}') WHERE {where}").fetchone()[0]

    t_ac, n_a = best(arrow_count, a.repeat)
    t_dc, n_d = best(duck_count, a.repeat)
    assert n_a == n_d, (n_a, n_d)
    print(f"viewer count  arrow (ViewerDataset) {t_ac:7.3f} s   duckdb {t_dc:7.3f} s   ({n_a:,} rows match)")
    off = min(1000, max(0, n_a - 20))

    def arrow_page() -> list[str]:
        return [r["qa_id"] for r in ViewerDataset(a.dataset).query(flt, offset=off, limit=20).rows]

    def duck_page() -> list[str]:
        # file order as the viewer pages (filename, then row number inside the file)
        return [r[0] for r in con.execute(
            f"SELECT qa_id FROM read_parquet('{glob}', filename=true, file_row_number=true) WHERE {where} "
            f"ORDER BY filename, file_row_number LIMIT 20 OFFSET {off}").fetchall()]

    t_ap, p_a = best(arrow_page, a.repeat)
    t_dp, p_d = best(duck_page, a.repeat)
    assert p_a == p_d
    print(f"viewer page   arrow (ViewerDataset) {t_ap:7.3f} s   duckdb {t_dp:7.3f} s   (20 rows at offset {off:,})")


if __name__ == "__main__":
    main()
