"""Draw a stratified sample of a built dataset for a person to mark by hand.

    python benchmarks/audit_sample.py DIR [--n 200] [--seed 13] [--out sample.csv]
    python benchmarks/audit_sample.py --score MARKED.csv     # error rate per grade of a marked file

Strata: question type x grade x polarity. Every stratum gets at least one row (while rows remain),
the rest is spread in proportion to the strata's sizes (largest remainders), drawn with a fixed seed.
Beside each row the CSV carries the report text (FINDINGS / IMPRESSION / INDICATION sentences, one
line each) and the evidence sentences the row cites (``provenance``), so each row can be judged
against the report alone. The marker fills ``verdict`` (correct / error) and ``error`` (one of
``ERRORS``) and may leave a ``note``; see tests/data/audit/MARKING.md.
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ERRORS = ("polarity", "side", "severity", "certainty", "unsupported", "location", "contradiction",
          "wording", "other")
CONTENT_ERRORS = frozenset({"polarity", "side", "severity", "certainty", "unsupported", "location",
                            "contradiction"})
FIELDS = ("sample_id", "qa_id", "study_id", "question_type", "grade", "polarity", "grade_reasons", "question",
          "answer", "evidence", "report", "verdict", "error", "note")


def _read(dataset: Path) -> tuple[list[dict[str, Any]], dict[str, str]]:
    import pyarrow.parquet as pq

    cols = ["qa_id", "study_id", "question_type", "grade", "polarity", "grade_reasons", "question", "answer",
            "provenance"]
    rows: list[dict[str, Any]] = []
    for f in sorted((dataset / "qa").glob("*.parquet")):
        rows.extend(pq.read_table(f, columns=cols).to_pylist())
    reports: dict[str, str] = {}
    for f in sorted((dataset / "scene_graphs").glob("*.parquet")):
        for sg in pq.read_table(f, columns=["study_id", "report"]).to_pylist():
            rep = sg.get("report") or {}
            sents = rep.get("sentences") or []
            if sents:
                reports[sg["study_id"]] = "\n".join(f"{s['id']} [{s['section']}] {s['text']}" for s in sents)
            else:
                reports[sg["study_id"]] = rep.get("text") or ""
    if not rows:
        raise SystemExit(f"{dataset}: no qa/*.parquet rows")
    return rows, reports


def stratified(rows: list[dict[str, Any]], n: int, seed: int) -> list[dict[str, Any]]:
    """At least one row per stratum (question type x grade x polarity), the rest proportional."""
    strata: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        strata[(r["question_type"] or "", r["grade"] or "", r["polarity"] or "none")].append(r)
    keys = sorted(strata)
    rng = random.Random(seed)
    for k in keys:
        strata[k].sort(key=lambda r: r["qa_id"])
        rng.shuffle(strata[k])
    take = {k: 0 for k in keys}
    budget = n
    for k in keys:  # one each, while the budget lasts (smallest strata first)
        if budget <= 0:
            break
        take[k] = 1
        budget -= 1
    total = sum(len(strata[k]) - take[k] for k in keys)
    if budget > 0 and total > 0:
        quotas = {k: budget * (len(strata[k]) - take[k]) / total for k in keys}
        floor = {k: int(q) for k, q in quotas.items()}
        left = budget - sum(floor.values())
        for k in sorted(keys, key=lambda k: (-(quotas[k] - floor[k]), k))[:left]:
            floor[k] += 1
        for k in keys:
            take[k] = min(len(strata[k]), take[k] + floor[k])
    out = [r for k in keys for r in strata[k][: take[k]]]
    rng.shuffle(out)
    return out


def write_sample(dataset: Path, out: Path, n: int, seed: int) -> int:
    rows, reports = _read(dataset)
    picked = stratified(rows, n, seed)
    with out.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        for i, r in enumerate(picked, 1):
            w.writerow({"sample_id": i, "qa_id": r["qa_id"], "study_id": r["study_id"],
                        "question_type": r["question_type"], "grade": r["grade"], "polarity": r["polarity"] or "",
                        "grade_reasons": "; ".join(r["grade_reasons"] or ()), "question": r["question"],
                        "answer": r["answer"], "evidence": "\n".join(r["provenance"] or ()),
                        "report": reports.get(r["study_id"], ""), "verdict": "", "error": "", "note": ""})
    return len(picked)


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float] | None:
    """Wilson score interval (95%) of a proportion k/n; None for n = 0."""
    if n <= 0:
        return None
    p = k / n
    d = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / d
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / d
    return max(0.0, mid - half), min(1.0, mid + half)


def score(path: Path) -> dict[str, Any]:
    """Error rates per grade (and for rows stating a positive finding) of a marked sample."""
    with path.open(newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("verdict")]
    bad = [r for r in rows if r["verdict"] not in ("correct", "error")]
    if bad:
        raise SystemExit(f"{path}: verdict must be correct or error (row {bad[0]['sample_id']})")
    unknown = [r for r in rows if r["verdict"] == "error" and r["error"] not in ERRORS]
    if unknown:
        raise SystemExit(f"{path}: error must be one of {ERRORS} (row {unknown[0]['sample_id']})")

    def rate(rs: list[dict[str, str]]) -> dict[str, Any]:
        err = sum(r["verdict"] == "error" for r in rs)
        content = sum(r["verdict"] == "error" and r["error"] in CONTENT_ERRORS for r in rs)
        return {"rows": len(rs), "errors": err, "content_errors": content,
                "error_rate": err / len(rs) if rs else None, "error_ci95": wilson(err, len(rs)),
                "content_error_rate": content / len(rs) if rs else None,
                "content_error_ci95": wilson(content, len(rs))}

    pos_rows = [r for r in rows if r["polarity"] == "positive"]
    top = [r for r in pos_rows if r["grade"] == "A++"]
    out: dict[str, Any] = {"all": rate(rows), "by_grade": {}, "positive_by_grade": {},
                           "positive_in_top_grade_sample": len(top) / len(pos_rows) if pos_rows else None,
                           "positive": rate([r for r in rows if r["polarity"] == "positive"]),
                           "errors": dict(Counter(r["error"] for r in rows if r["verdict"] == "error"))}
    for g in sorted({r["grade"] for r in rows}, key=lambda g: ("A++", "A+", "A", "B", "C", "D").index(g)):
        out["by_grade"][g] = rate([r for r in rows if r["grade"] == g])
        pos = [r for r in rows if r["grade"] == g and r["polarity"] == "positive"]
        if pos:
            out["positive_by_grade"][g] = rate(pos)
    return out


def table(res: dict[str, Any]) -> str:
    """Markdown table of ``score``: rows wrong (any error) and content errors per grade, with
    Wilson 95% intervals, then the rows that state a positive finding."""
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    def ci(c: tuple[float, float] | None) -> str:
        return "-" if c is None else f"{100 * c[0]:.1f}-{100 * c[1]:.1f}%"

    lines = ["| rows | n | wrong | rate (95% CI) | content errors | rate (95% CI) |",
             "|---|---|---|---|---|---|"]

    def add(name: str, r: dict[str, Any]) -> None:
        lines.append(f"| {name} | {r['rows']} | {r['errors']} | {pct(r['error_rate'])} ({ci(r['error_ci95'])}) | "
                     f"{r['content_errors']} | {pct(r['content_error_rate'])} ({ci(r['content_error_ci95'])}) |")

    for g, r in res["by_grade"].items():
        add(f"grade {g}", r)
    add("all", res["all"])
    for g, r in res["positive_by_grade"].items():
        add(f"positive, grade {g}", r)
    add("positive, all grades", res["positive"])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset", nargs="?", type=Path, help="a radvqa build folder")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--out", type=Path, default=Path("audit_sample.csv"))
    ap.add_argument("--score", type=Path, help="a marked sample CSV: print error rates per grade")
    ap.add_argument("--table", action="store_true", help="with --score: a Markdown table instead of JSON")
    a = ap.parse_args(argv)
    if a.score:
        import json

        res = score(a.score)
        if a.table:
            print(table(res))
        else:
            print(json.dumps(res, indent=1))
        return 0
    if a.dataset is None:
        ap.error("DIR is required (or --score FILE)")
    k = write_sample(a.dataset, a.out, a.n, a.seed)
    print(f"wrote {k} rows to {a.out} (seed {a.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
