"""Pair consistency of the ``probe`` family (``radvqa.generate.probe``): two yes/no questions about
one observation that differ only in negation or only in side, linked by ``probe_pair:<kind>:<id>``
in their provenance. A pair counts as consistent only when BOTH answers are right (a model
answering "yes" to everything gets every pair wrong). Reported over the pairs whose two rows are
both among the evaluated rows, overall and per kind, with a 95% Wilson score interval; pairs with
one row outside the evaluated rows (a ``--max-per-study`` cut, a subset) are counted apart.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

PREFIX = "probe_pair:"
STRATEGY = "probe"


def wilson_interval(k: int, n: int, z: float = 1.96) -> list[float] | None:
    """95% Wilson score interval of k successes in n trials (None when n = 0)."""
    if n <= 0:
        return None
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return [max(0.0, c - h), min(1.0, c + h)]


def _pair_table(dataset: str | Path) -> dict[str, str]:
    """qa_id -> "kind:id" of the probe rows (a filtered read: eval does not load provenance)."""
    import pyarrow.dataset as ds

    from radvqa.eval.dataset import qa_files

    d = ds.dataset([str(f) for f in qa_files(dataset)], format="parquet")
    t = d.to_table(columns=["qa_id", "provenance"], filter=ds.field("strategy") == STRATEGY)
    out: dict[str, str] = {}
    for qid, prov in zip(t.column("qa_id").to_pylist(), t.column("provenance").to_pylist()):
        for item in prov or ():
            if item.startswith(PREFIX):
                out[qid] = item[len(PREFIX):]
                break
    return out


def pair_consistency(pairs_of: dict[str, str], qa_ids: list[str], correct: list[float | None]) -> dict[str, Any]:
    """``pairs_of``: qa_id -> "kind:pair id"; ``correct``: each evaluated row's 0/1 score."""
    groups: dict[str, list[int]] = {}
    for i, q in enumerate(qa_ids):
        p = pairs_of.get(q)
        if p is not None:
            groups.setdefault(p, []).append(i)
    by_kind: dict[str, list[int]] = {}
    incomplete = 0
    for key, ix in groups.items():
        if len(ix) != 2:
            incomplete += 1
            continue
        kind = key.split(":", 1)[0]
        both = all(correct[i] == 1.0 for i in ix)
        by_kind.setdefault(kind, []).append(int(both))

    def block(vals: list[int], rows_right: int, rows: int) -> dict[str, Any]:
        n, k = len(vals), sum(vals)
        return {"pairs": n, "consistent_pairs": k, "rate": (k / n) if n else None,
                "ci95_wilson": wilson_interval(k, n), "question_accuracy": (rows_right / rows) if rows else None}

    all_vals = [v for vs in by_kind.values() for v in vs]
    paired_rows = [i for ix in groups.values() if len(ix) == 2 for i in ix]
    out: dict[str, Any] = {
        "definition": "a pair counts as consistent only when both of its questions are answered right; "
                      "question_accuracy = the same rows scored one by one",
        **block(all_vals, sum(1 for i in paired_rows if correct[i] == 1.0), len(paired_rows)),
        "incomplete_pairs": incomplete,
        "by_kind": {},
    }
    for kind in sorted(by_kind):
        rows = [i for key, ix in groups.items() if len(ix) == 2 and key.split(":", 1)[0] == kind for i in ix]
        out["by_kind"][kind] = block(by_kind[kind], sum(1 for i in rows if correct[i] == 1.0), len(rows))
    return out


def pairs_block(dataset: str | Path, rows: dict[str, Any], scores: Any) -> dict[str, Any] | None:
    """The report block, or None when no evaluated row is a probe row."""
    if not has_value(rows["strategy"], STRATEGY):
        return None
    out = pair_consistency(_pair_table(dataset), list(rows["qa_id"]), list(scores.correct))
    return out if out["pairs"] or out["incomplete_pairs"] else None


def has_value(col: Any, value: str) -> bool:
    """Whether a category column may hold ``value`` (its table of distinct values, without a pass
    over the rows; a list is scanned)."""
    table = getattr(col, "table", None)
    return value in table if table is not None else any(v == value for v in col)
