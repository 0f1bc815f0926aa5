"""``radvqa audit shortcuts DATASET``: can a model that never sees the image answer? (In eval, not
quality: it scores the text-only baselines of ``radvqa.eval.baselines``, and eval is the layer
above quality in docs/ARCHITECTURE.md.)

Per template and per (template, question) cell -- the question text names the finding, region
or subcategory asked about -- on the closed rows (yes/no, multiple choice, count, short). A
"template" here is a template group (``radvqa.io.subset.template_group``): templates with the same
question wordings, such as rin's closed+ (always "yes") and closed- (always "no"), are one question
to a model that reads only the text, so they are learned and scored together:

- ``majority``: the cell's most frequent answer in the train split, scored on the evaluated rows
  (a cell unseen in training falls back to its template's majority, then the answer kind's);
- ``bow``: the text-only bag-of-words baseline of ``radvqa.eval.baselines`` (naive Bayes over the
  question words, trained on the train split);
- ``chance``: uniform guessing: 1/2 for yes/no, 1/k for k options, 1/(distinct answers of the
  template in training) for count and short answers;
- ``flag``: the better of majority and bow is more than ``FLAG_PP`` points above chance, and its
  95% Wilson lower bound is above chance (cells with fewer than ``min_n`` evaluated rows are listed
  but not flagged: too noisy).

Evaluated rows: the test split. Training rows: the dataset's own train split, or, for a subset
without one (``radvqa subset --balanced``), the train split of the parent build its manifest
names. Nothing is tuned on the evaluated rows.

The result goes to ``DATASET/shortcuts.json`` and into the dataset card (``io/card.py``).
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from radvqa.io.manifest import read_manifest
from radvqa.io.parquet import shard_files
from radvqa.io.subset import template_group

FLAG_PP = 10.0
MIN_N = 20
AUDIT_FILE = "shortcuts.json"
COLUMNS = ["qa_id", "split", "question_type", "template_id", "question", "answer", "answer_short", "choices"]
AUDITED_KINDS = ("yes_no", "choice", "count", "short")


class ShortcutError(ValueError):
    pass


def _load(root: Path, split: str | None, exclude: str | None = None) -> dict[str, list[Any]]:
    cols: dict[str, list[Any]] = {c: [] for c in COLUMNS}
    for f in shard_files(root, "qa"):
        t = pq.read_table(f, columns=COLUMNS)
        if split is not None:
            t = t.filter(pc.equal(t.column("split"), split))
        elif exclude is not None:
            t = t.filter(pc.not_equal(t.column("split"), exclude))
        # only closed rows are audited: the text-only model is trained and scored on them alone
        t = t.filter(pc.or_kleene(pc.is_valid(t.column("answer_short")), pc.greater(pc.list_value_length(t.column("choices")), 0)))
        for c in COLUMNS:
            cols[c].extend(t.column(c).to_pylist())
    return cols


def training_source(dataset: Path) -> tuple[Path, str]:
    """Where the train rows come from: the dataset itself, or its parent (a subset)."""
    dataset = Path(dataset)
    files = shard_files(dataset, "qa")
    if not files:
        raise ShortcutError(f"{dataset}: no qa/part-*.parquet files (is it a radvqa build output?)")
    for f in files:
        sp = pq.read_table(f, columns=["split"]).column("split")
        if pc.any(pc.equal(sp, "train")).as_py():
            return dataset, "train split of the dataset"
    try:
        m = read_manifest(dataset)
    except (FileNotFoundError, ValueError):
        m = {}
    parent = ((m.get("subset") or {}).get("parent") or {}).get("path")
    if parent and Path(parent).is_dir():
        return Path(parent), f"train split of the parent build {parent}"
    raise ShortcutError(f"{dataset} has no train split and names no parent build with one: "
                        "nothing to learn the majority answers and the text-only model from")


def _wilson_low(p: float, n: int, z: float = 1.96) -> float:
    """Lower end of the 95% Wilson score interval of a proportion ``p`` over ``n`` trials."""
    if n <= 0:
        return 0.0
    d = 1 + z * z / n
    c = p + z * z / (2 * n)
    return (c - z * ((p * (1 - p) + z * z / (4 * n)) / n) ** 0.5) / d


def _key_stats() -> dict[str, Any]:
    return {"n": 0, "majority": 0, "bow": 0, "chance": 0.0}


def audit(dataset: Path | str, min_n: int = MIN_N, eval_split: str = "test") -> dict[str, Any]:
    """The shortcut table of ``dataset`` (see the module docstring)."""
    from radvqa.eval.baselines import _target, run_baseline
    from radvqa.eval.scoring import Scorer

    dataset = Path(dataset)
    train_root, train_from = training_source(dataset)
    train = _load(train_root, "train")
    ev = _load(dataset, eval_split)
    if not ev["qa_id"]:
        ev = _load(dataset, None, exclude="train")  # a subset of other splits: everything it holds
        eval_desc = "all non-train rows"
    else:
        eval_desc = f"split {eval_split}"
    if not train["qa_id"]:
        raise ShortcutError(f"no closed rows in the train split of {train_root}")
    sc = Scorer("radvqa")

    def kinds(rows: dict[str, list[Any]]) -> list[str]:
        return [sc.kind_of({"answer_short": s, "choices": ch, "question_type": qt})
                for s, ch, qt in zip(rows["answer_short"], rows["choices"], rows["question_type"])]

    tk, ek = kinds(train), kinds(ev)

    def target(rows: dict[str, list[Any]], i: int, k: str) -> str:
        return _target({"answer_short": rows["answer_short"][i], "answer": rows["answer"][i]}, k)

    by_text: dict[tuple[str, str, str], Counter[str]] = defaultdict(Counter)
    by_tpl: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    by_kind: dict[str, Counter[str]] = defaultdict(Counter)
    for i, k in enumerate(tk):
        if k not in AUDITED_KINDS:
            continue
        t = target(train, i, k)
        grp = template_group(train["template_id"][i])
        by_text[(k, grp, train["question"][i])][t] += 1
        by_tpl[(k, grp)][t] += 1
        by_kind[k][t] += 1

    def top(c: Counter[str] | None) -> str | None:
        return min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] if c else None

    # text-only model: trained on train, predicting the evaluated rows (marked apart by split)
    combined = {c: train[c] + ev[c] for c in COLUMNS}
    combined["split"] = ["train"] * len(train["qa_id"]) + ["__eval__"] * len(ev["qa_id"])
    combined["qa_id"] = [f"t{i}" for i in range(len(train["qa_id"]))] + [f"e{i}" for i in range(len(ev["qa_id"]))]
    bow: dict[str, str] = {}
    if ev["qa_id"]:
        ids, preds, _info = run_baseline(combined, "bow", train_split="train", eval_split="__eval__")
        bow = dict(zip(ids, preds))

    tpl_stats: dict[str, dict[str, Any]] = defaultdict(_key_stats)
    cell_stats: dict[tuple[str, str], dict[str, Any]] = defaultdict(_key_stats)
    types: dict[str, set[str]] = defaultdict(set)
    kind_stats: dict[str, dict[str, Any]] = defaultdict(lambda: {**_key_stats(), "majority_text": 0})
    for i, k in enumerate(ek):
        if k not in AUDITED_KINDS:
            continue
        tpl, q, qt = template_group(ev["template_id"][i]), ev["question"][i], ev["question_type"][i]
        types[tpl].add(qt)
        gold = target(ev, i, k)
        m_tpl = top(by_tpl.get((k, tpl))) or top(by_kind.get(k)) or ""
        m_text = top(by_text.get((k, tpl, q))) or m_tpl
        b = bow.get(f"e{i}", "")
        if k == "yes_no":
            ch = 0.5
        elif k == "choice":
            ch = 1.0 / max(1, len(ev["choices"][i] or []))
        else:
            ch = 1.0 / max(1, len(by_tpl.get((k, tpl)) or by_kind.get(k) or [1]))
        for st, maj in ((tpl_stats[tpl], m_tpl), (cell_stats[(tpl, q)], m_text)):
            st["n"] += 1
            st["majority"] += maj == gold
            st["bow"] += b == gold
            st["chance"] += ch
            st["kind"] = k
        ks = kind_stats[k]
        ks["n"] += 1
        ks["majority"] += m_tpl == gold
        ks["majority_text"] += m_text == gold
        ks["bow"] += b == gold
        ks["chance"] += ch

    def finish(st: dict[str, Any], flag_min: int) -> dict[str, Any]:
        n = st["n"]
        out = {"n": n, "kind": st.get("kind"), "majority": st["majority"] / n, "bow": st["bow"] / n,
               "chance": st["chance"] / n}
        if "majority_text" in st:
            out["majority_by_text"] = st["majority_text"] / n
        best = max(out["majority"], out["bow"])
        out["above_chance_pp"] = round(100.0 * (best - out["chance"]), 2)
        # more than FLAG_PP above chance, and not by sampling noise: the 95% Wilson lower bound of
        # the better accuracy is above chance too (a balanced cell of 25 rows reads 60% by luck)
        out["flag"] = bool(n >= flag_min and out["above_chance_pp"] > FLAG_PP and _wilson_low(best, n) > out["chance"])
        return out

    templates = [{"question_type": "+".join(sorted(types[tpl])), "template_id": tpl, **finish(st, min_n)}
                 for tpl, st in sorted(tpl_stats.items())]
    cells = [{"question_type": "+".join(sorted(types[tpl])), "template_id": tpl, "question": q, **finish(st, min_n)}
             for (tpl, q), st in sorted(cell_stats.items())]
    by_kind_out = {k: finish(st, 1) for k, st in sorted(kind_stats.items())}
    return {
        "dataset": str(dataset),
        "evaluated": eval_desc,
        "evaluated_rows": sum(s["n"] for s in kind_stats.values()),
        "trained_on": train_from,
        "train_rows": sum(1 for k in tk if k in AUDITED_KINDS),
        "flag_above_chance_pp": FLAG_PP,
        "min_n": min_n,
        "by_kind": by_kind_out,
        "templates": templates,
        "templates_flagged": sum(t["flag"] for t in templates),
        "cells": cells,
        "cells_flagged": sum(c["flag"] for c in cells),
        "cells_with_min_n": sum(c["n"] >= min_n for c in cells),
    }


def write_audit(dataset: Path | str, result: dict[str, Any]) -> Path:
    from radvqa.io.atomic import write_atomic

    p = Path(dataset) / AUDIT_FILE
    write_atomic(p, json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    return p


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100.0 * x:.1f}%"


def print_table(result: dict[str, Any], max_cells: int = 25) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console()
    con.print(f"shortcut audit of {result['dataset']}: {result['evaluated_rows']:,} closed rows ({result['evaluated']}), "
              f"trained on {result['train_rows']:,} rows ({result['trained_on']})", highlight=False)
    t = Table(title="by answer kind")
    for c in ("kind", "n", "majority (template)", "majority (exact text)", "bag-of-words", "chance"):
        t.add_column(c, justify="left" if c == "kind" else "right")
    for k, s in result["by_kind"].items():
        t.add_row(k, f"{s['n']:,}", _pct(s["majority"]), _pct(s.get("majority_by_text")), _pct(s["bow"]), _pct(s["chance"]))
    con.print(t)
    t = Table(title=f"by template (flag: > {result['flag_above_chance_pp']:.0f} points above chance, n >= {result['min_n']})")
    for c in ("question type", "template", "n", "majority", "bag-of-words", "chance", "flag"):
        t.add_column(c, justify="left" if c in ("question type", "template") else "right")
    for r in result["templates"]:
        t.add_row(r["question_type"], r["template_id"], f"{r['n']:,}", _pct(r["majority"]), _pct(r["bow"]),
                  _pct(r["chance"]), "[red]FLAG[/red]" if r["flag"] else "")
    con.print(t)
    flagged = sorted((c for c in result["cells"] if c["flag"]), key=lambda c: (-c["n"], c["question"]))
    t = Table(title=f"flagged (type x question) cells: {result['cells_flagged']:,} of {result['cells_with_min_n']:,} "
                    f"with n >= {result['min_n']} (largest {min(max_cells, len(flagged))} shown)")
    for c in ("question type", "question", "n", "majority", "bag-of-words", "chance"):
        t.add_column(c, justify="left" if c in ("question type", "question") else "right")
    for r in flagged[:max_cells]:
        t.add_row(r["question_type"], r["question"], f"{r['n']:,}", _pct(r["majority"]), _pct(r["bow"]), _pct(r["chance"]))
    con.print(t)


def cli_main(dataset: Path, json_out: Path | None) -> int:
    """``radvqa audit shortcuts DATASET [--json FILE]``: print the table, store it beside the dataset
    (``shortcuts.json``) and in its card. Exit code 0, or 1 when the audit cannot run."""
    try:
        result = audit(dataset)
    except (ShortcutError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print_table(result)
    if json_out is not None:
        Path(json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(json_out).write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    try:
        write_audit(dataset, result)
        from radvqa.io.card import write_card

        write_card(Path(dataset), read_manifest(dataset))
    except (OSError, FileNotFoundError) as exc:  # a read-only dataset: the printed table is the result
        print(f"warning: could not update {dataset}/{AUDIT_FILE} and the card: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # manual use until `radvqa audit shortcuts` dispatches here
    import argparse

    ap = argparse.ArgumentParser(prog="python -m radvqa.eval.shortcuts")
    ap.add_argument("dataset", type=Path)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    raise SystemExit(cli_main(a.dataset, a.json))
