"""Carry hand marks over to a new build and score it: what a code change did to marked rows.

    python benchmarks/audit_rescore.py MARKED.csv... --build DIR [--reasons] [--list-changed]
        [--polarity negative]

Each marked row (tests/data/audit/*.csv, ``benchmarks/audit_sample.py``) is looked up in the new
build by study id and question:

- the answer is byte-identical -> the row is kept, its verdict carried, with the NEW grade and
  grade reasons;
- no row of that study asks the question -> omitted;
- the answer changed -> changed (its verdict is unknown; listed with ``--list-changed``).

Printed per file and pooled: positive rows kept / omitted / changed; the content-error rate of the
kept positive rows (Wilson 95%) overall and per new grade; the A++ share of kept positive rows.
``--polarity negative`` scores the marked negative rows instead (round 11a: which "normal" and
negative rows a change removed, and whether they were right). ``--reasons``: per grade-reason name (the text before "(" or "->"), the kept positive rows that
carry it and their content errors, beside the rows that do not (how well a criterion separates
wrong rows from right ones).
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from audit_sample import CONTENT_ERRORS, wilson  # noqa: E402

GRADE_ORDER = ("A++", "A+", "A", "B", "C", "D")


def read_build(build: Path) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(study id, question) -> the build's rows (answer, grade, reasons)."""
    import pyarrow.parquet as pq

    out: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    files = sorted((build / "qa").glob("*.parquet"))
    if not files:
        raise SystemExit(f"{build}: no qa/*.parquet (not a radvqa build)")
    for f in files:
        for r in pq.read_table(f, columns=["study_id", "question", "answer", "grade", "grade_reasons",
                                            "polarity"]).to_pylist():
            out[(r["study_id"], r["question"])].append(r)
    return out


def rescore(marked: Path, rows: dict[tuple[str, str], list[dict[str, Any]]],
            polarity: str = "positive") -> list[dict[str, Any]]:
    """The marked file's rows of ``polarity`` (positive: stating a finding) with ``status`` (kept / omitted / changed), ``wrong``
    (content error, kept rows) and the new ``grade`` and ``reasons``."""
    out: list[dict[str, Any]] = []
    with marked.open(newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if r["polarity"] != polarity or not r.get("verdict"):
                continue
            cands = rows.get((r["study_id"], r["question"]), [])
            same = [c for c in cands if c["answer"] == r["answer"]]
            rec = {"file": marked.name, "study_id": r["study_id"], "question": r["question"],
                   "answer": r["answer"], "old_grade": r["grade"],
                   "wrong": r["verdict"] == "error" and r["error"] in CONTENT_ERRORS,
                   "error": r["error"], "note": r.get("note", "")}
            if same:
                rec.update(status="kept", grade=same[0]["grade"], reasons=list(same[0]["grade_reasons"] or []))
            elif cands:
                rec.update(status="changed", grade=cands[0]["grade"], reasons=list(cands[0]["grade_reasons"] or []),
                           new_answer=cands[0]["answer"])
            else:
                rec.update(status="omitted", grade=None, reasons=[])
            out.append(rec)
    return out


def _rate(k: int, n: int) -> str:
    if n == 0:
        return "-"
    lo, hi = wilson(k, n) or (0.0, 0.0)
    return f"{k}/{n} = {100 * k / n:.1f}% ({100 * lo:.1f}-{100 * hi:.1f})"


def summary(name: str, recs: list[dict[str, Any]], polarity: str = "positive") -> list[str]:
    st = Counter(r["status"] for r in recs)
    kept = [r for r in recs if r["status"] == "kept"]
    lines = [f"## {name}",
             f"{polarity} rows {len(recs)}: kept {st['kept']}, omitted {st['omitted']}, changed {st['changed']}",
             f"content errors of kept {polarity}s: {_rate(sum(r['wrong'] for r in kept), len(kept))}",
             f"content errors of omitted {polarity}s (as marked): "
             f"{_rate(sum(r['wrong'] for r in recs if r['status'] == 'omitted'), st['omitted'])}",
             f"content errors of changed {polarity}s (old marks): "
             f"{_rate(sum(r['wrong'] for r in recs if r['status'] == 'changed'), st['changed'])}"]
    by = defaultdict(list)
    for r in kept:
        by[r["grade"]].append(r)
    for g in GRADE_ORDER:
        if by.get(g):
            lines.append(f"  {g:>3}: {_rate(sum(r['wrong'] for r in by[g]), len(by[g]))}")
    if kept:
        lines.append(f"A++ share of kept {polarity}s: {len(by.get('A++', []))}/{len(kept)} = "
                     f"{100 * len(by.get('A++', [])) / len(kept):.1f}%")
    return lines


def reason_name(reason: str) -> str:
    return reason.split("(", 1)[0].split("->", 1)[0]


def by_reason(recs: list[dict[str, Any]]) -> list[str]:
    kept = [r for r in recs if r["status"] == "kept"]
    names = Counter(n for r in kept for n in {reason_name(x) for x in r["reasons"]})
    lines = ["| reason | kept positives with it: content errors | without it |", "|---|---|---|"]
    for n, _ in names.most_common():
        w = [r for r in kept if n in {reason_name(x) for x in r["reasons"]}]
        wo = [r for r in kept if n not in {reason_name(x) for x in r["reasons"]}]
        lines.append(f"| {n} | {_rate(sum(r['wrong'] for r in w), len(w))} | "
                     f"{_rate(sum(r['wrong'] for r in wo), len(wo))} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("marked", nargs="+", type=Path)
    ap.add_argument("--build", type=Path, required=True)
    ap.add_argument("--reasons", action="store_true", help="per grade reason: errors with and without it")
    ap.add_argument("--list-changed", action="store_true", help="list the rows whose answer changed")
    ap.add_argument("--list", choices=("omitted", "kept-C"), help="list omitted rows or kept rows graded C")
    ap.add_argument("--polarity", choices=("positive", "negative"), default="positive",
                    help="which marked rows to score (default: rows stating a finding)")
    a = ap.parse_args(argv)
    rows = read_build(a.build)
    pooled: list[dict[str, Any]] = []
    for m in a.marked:
        recs = rescore(m, rows, a.polarity)
        pooled.extend(recs)
        if len(a.marked) > 1:
            print("\n".join(summary(m.name, recs, a.polarity)))
    print("\n".join(summary("pooled" if len(a.marked) > 1 else a.marked[0].name, pooled, a.polarity)))
    if a.reasons:
        print("\n".join(by_reason(pooled)))
    if a.list_changed:
        for r in pooled:
            if r["status"] == "changed":
                print(f"changed {r['file']} {r['study_id']} | {r['question']}\n  old: {r['answer']}\n  new: {r['new_answer']}")
    if a.list:
        for r in pooled:
            if (a.list == "omitted" and r["status"] == "omitted") or \
                    (a.list == "kept-C" and r["status"] == "kept" and r["grade"] == "C"):
                print(f"{'WRONG' if r['wrong'] else 'right'} {r['file']} {r['study_id']} | {r['question']}\n"
                      f"  {r['answer']}\n  {[x for x in r['reasons'] if '(' in x]} {r['error']} {r['note']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
