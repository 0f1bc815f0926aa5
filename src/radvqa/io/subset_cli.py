"""``radvqa subset``: a named subset of a build (balanced evaluation subset, or a grade tier)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    """Add this area's commands to the ``radvqa`` app."""

    @app.command("subset")
    def subset_cmd(
        dataset: Path = typer.Argument(..., help="a radvqa build output folder (the parent)"),
        out: Path = typer.Option(..., "--out", "-o", help="new output folder for the subset"),
        balanced: bool = typer.Option(False, "--balanced", help="evaluation subset a blind model cannot pass: "
                                      "yes/no cells balanced, multiple-choice letters uniform, none/0 answers capped"),
        tier: Optional[str] = typer.Option(None, "--tier", help="grade tier: pretrain (B or better) or finetune "
                                           "(A or better); thresholds in quality/data/tiers.yaml"),
        seed: int = typer.Option(0, "--seed", help="seed of the down-sampling (same parent + seed -> same subset)"),
        split: Optional[list[str]] = typer.Option(None, "--split", help="split(s) to draw from (repeatable); "
                                                  "--balanced default: test; --tier default: all"),
        shortcuts: bool = typer.Option(True, "--shortcuts/--no-shortcuts", help="run the shortcut audit into the card"),
    ) -> None:
        """Write a subset of DATASET to --out with the build contract (Parquet shards, manifest with its own
        seed and the parent, rejected.jsonl, card); `radvqa validate` passes on it."""
        from rich.console import Console
        from rich.table import Table

        from radvqa.io.subset import SubsetError, subset

        try:
            m = subset(dataset, out, balanced=balanced, tier=tier, seed=seed, splits=split or None, shortcuts=shortcuts)
        except (SubsetError, FileNotFoundError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
        c, s = m["counts"], m["subset"]
        t = Table(title=f"radvqa subset ({s['name']}): {dataset} -> {out}")
        t.add_column("count")
        t.add_column("value", justify="right")
        for k in ("studies_in", "studies_out", "studies_rejected", "qa_rows"):
            t.add_row(k, f"{c[k]:,}")
        t.add_row("closed rows kept", f"{s['closed_rows_kept']:,} of {s['parent_closed_rows_in_splits']:,}"
                  + (f" ({100 * s['closed_rows_kept_share']:.1f}%)" if s["closed_rows_kept_share"] is not None else ""))
        if s.get("yes_share") is not None:
            t.add_row("yes share", f"{100 * s['yes_share']:.1f}%")
        t.add_row("question types lost", ", ".join(s["question_types_lost"]) or "none")
        for k, v in s.get("cells", {}).items():
            t.add_row(f"cells: {k}", f"{v:,}")
        for k, v in s["rows_dropped_by_reason"].items():
            t.add_row(f"left out: {k}", f"{v:,}")
        t.add_row("wall time", f"{m['timings']['wall']:.1f} s")
        Console().print(t)
