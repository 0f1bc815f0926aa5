"""Can a blind model pass? Shortcut figures of the natural OpenI and NIH ChestX-ray14 builds
against their balanced test subsets (issue 14's targets).

    python benchmarks/shortcuts.py                       # builds both from ../shared/data
    python benchmarks/shortcuts.py --openi DIR --nih DIR # reuse existing builds
    python benchmarks/shortcuts.py --nih-limit 20000     # a smaller NIH build

For each build: the closed rows of the parent's test split and of ``radvqa subset --balanced``;
majority accuracy by exact question text and by template (learned on the parent's train split),
the text-only bag-of-words baseline and chance, on yes/no and on multiple-choice rows; the share
of the parent test split's closed rows the subset keeps, and the question types kept.

Targets: balanced majority-by-exact-text <= 55% on yes/no; bag-of-words within 5 points of chance
on yes/no and multiple choice; the subset keeps >= 30% of the parent test split's closed rows and
every question type. Wall times are lower bounds on a shared machine (load average printed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from radvqa.io.manifest import read_manifest  # noqa: E402
from radvqa.io.subset import subset  # noqa: E402
from radvqa.eval.shortcuts import audit  # noqa: E402


def _build(source: str, inputs: list[str], out: Path, workers: int, limit: int | None) -> float:
    from radvqa.run.builder import BuildOptions, build

    if out.exists():
        shutil.rmtree(out)
    t = time.perf_counter()
    build(BuildOptions(source=source, inputs=inputs, out=str(out), workers=workers, limit=limit))
    return time.perf_counter() - t


def _pct(x: float | None) -> str:
    return "   -  " if x is None else f"{100 * x:5.1f}%"


def _report(name: str, parent: Path, work: Path) -> dict[str, bool]:
    out = work / f"{name}-balanced"
    if out.exists():
        shutil.rmtree(out)
    t0 = time.perf_counter()
    m = subset(parent, out, balanced=True, seed=0)
    t_sub = time.perf_counter() - t0
    t0 = time.perf_counter()
    full = audit(parent)
    sub = audit(out)
    t_audit = time.perf_counter() - t0
    s = m["subset"]
    print(f"\n== {name}: {parent} ({read_manifest(parent)['counts']['qa_rows']:,} rows) -> {out} "
          f"({m['counts']['qa_rows']:,} rows; subset {t_sub:.1f} s, two audits {t_audit:.1f} s)")
    print(f"{'':34s} {'kind':7s} {'n':>8s} {'yes':>7s} {'maj/text':>9s} {'maj/tpl':>8s} {'bow':>7s} {'chance':>7s}")
    ok: dict[str, bool] = {}
    for label, r, yes_share in (("natural build, test split", full, None), ("balanced subset", sub, s["yes_share"])):
        for kind in ("yes_no", "choice"):
            k = r["by_kind"].get(kind)
            if not k:
                print(f"{label:34s} {kind:7s} {0:8d}   (no rows)")
                continue
            ys = yes_share if kind == "yes_no" else None
            print(f"{label:34s} {kind:7s} {k['n']:8,d} {_pct(ys):>7s} {_pct(k['majority_by_text']):>9s} "
                  f"{_pct(k['majority']):>8s} {_pct(k['bow']):>7s} {_pct(k['chance']):>7s}")
    yn = sub["by_kind"].get("yes_no")
    if yn:
        ok["yes/no majority by exact text <= 55%"] = yn["majority_by_text"] <= 0.55
        ok["yes/no bag-of-words within 5 points of chance"] = abs(yn["bow"] - yn["chance"]) <= 0.05
    mc = sub["by_kind"].get("choice")
    if mc:
        ok["MC bag-of-words within 5 points of chance"] = abs(mc["bow"] - mc["chance"]) <= 0.05
    kept = s["closed_rows_kept_share"]
    print(f"closed rows of the parent test split kept: {s['closed_rows_kept']:,} of {s['parent_closed_rows_in_splits']:,} "
          f"({_pct(kept).strip()}); question types kept: "
          f"{s['question_types_of_parent_splits'] - len(s['question_types_lost'])} of {s['question_types_of_parent_splits']}"
          f" (lost: {', '.join(s['question_types_lost']) or 'none'})")
    print(f"cells: {s['cells']}; rows left out: {s['rows_dropped_by_reason']}")
    print(f"flagged (> 10 points above chance, n >= {sub['min_n']}): templates {full['templates_flagged']} -> "
          f"{sub['templates_flagged']}; cells {full['cells_flagged']} of {full['cells_with_min_n']} -> "
          f"{sub['cells_flagged']} of {sub['cells_with_min_n']}")
    ok["keeps >= 30% of the test split's closed rows"] = bool(kept is not None and kept >= 0.30)
    ok["keeps every question type"] = not s["question_types_lost"]
    for k, v in ok.items():
        print(f"  target {'PASS' if v else 'FAIL'}: {k}")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--work", type=Path, default=Path("/tmp/radvqa-bench-shortcuts"))
    ap.add_argument("--openi", type=Path, help="an existing OpenI build (else built from --data)")
    ap.add_argument("--nih", type=Path, help="an existing NIH ChestX-ray14 build (else built from --data)")
    ap.add_argument("--nih-limit", type=int, default=None, help="build NIH from at most N records")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--skip-nih", action="store_true")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {os.getloadavg()[0]:.2f} (1 min)")
    builds: list[tuple[str, Path]] = []
    openi = a.openi
    if openi is None:
        openi = a.work / "openi"
        s = _build("openi", [str(a.data / "iu-xray" / "NLMCXR_reports.tgz")], openi, a.workers, None)
        print(f"built OpenI in {s:.1f} s")
    builds.append(("openi", openi))
    if not a.skip_nih:
        nih = a.nih
        if nih is None:
            nih = a.work / "nih"
            s = _build("nih-cxr14", [str(a.data / "nih-cxr14")], nih, a.workers, a.nih_limit)
            print(f"built NIH ChestX-ray14 in {s:.1f} s" + (f" (--nih-limit {a.nih_limit})" if a.nih_limit else ""))
        builds.append(("nih-cxr14", nih))
    results = {name: _report(name, path, a.work) for name, path in builds}
    print(f"\nload average at end: {os.getloadavg()[0]:.2f} (1 min)")
    failed = [f"{n}: {k}" for n, r in results.items() for k, v in r.items() if not v]
    print("all targets met" if not failed else "targets missed: " + "; ".join(failed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
