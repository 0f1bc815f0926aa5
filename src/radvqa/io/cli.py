"""``radvqa stats``, ``radvqa validate``, ``radvqa export``, ``radvqa subset``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    """Add this area's commands to the ``radvqa`` app."""

    @app.command("stats")
    def stats_cmd(
        out: Path = typer.Argument(..., metavar="DATASET", help="a radvqa build output folder"),
        as_json: bool = typer.Option(False, "--json", help="print JSON instead of tables"),
    ) -> None:
        """Statistics of a built dataset, computed from its Parquet files."""
        from rich.console import Console
        from rich.table import Table

        from radvqa.io.stats import compute_stats

        try:
            s = compute_stats(out)
        except FileNotFoundError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
        if as_json:
            typer.echo(json.dumps(s, indent=1))
            return
        con = Console()
        t = Table(title=f"radvqa stats: {out}")
        t.add_column("count")
        t.add_column("value", justify="right")
        for k in ("qa_rows", "qa_rows_with_image", "qa_rows_without_image", "studies_with_qa", "patients_with_qa",
                  "scene_graphs", "images", "images_without_file", "observations",
                  "rows_with_boxes", "boxes_per_row", "answer_parts_per_row"):
            t.add_row("images (files found)" if k == "images" else k, f"{s[k]:,}" if isinstance(s[k], int) else str(s[k]))
        con.print(t)
        from radvqa.io.stats import image_warning

        warn = image_warning(s)
        if warn:
            con.print(f"[bold yellow]warning:[/bold yellow] {warn}", highlight=False)
        for k in ("by_strategy", "by_question_type", "by_grade", "by_split", "by_source"):
            tt = Table(title=k.replace("_", " "))
            tt.add_column("value")
            tt.add_column("rows", justify="right")
            tt.add_column("share", justify="right")
            total = sum(s[k].values()) or 1
            for v, n in s[k].items():
                tt.add_row(str(v), f"{n:,}", f"{100 * n / total:.1f}%")
            con.print(tt)
        if s["yes_no_by_question_type"]:
            tt = Table(title="yes / no balance by question type")
            for c in ("question type", "yes", "no", "yes share"):
                tt.add_column(c, justify="right" if c != "question type" else "left")
            for qt, d in s["yes_no_by_question_type"].items():
                tot = d["yes"] + d["no"]
                tt.add_row(qt, f"{d['yes']:,}", f"{d['no']:,}", f"{100 * d['yes'] / tot:.1f}%" if tot else "-")
            con.print(tt)

    @app.command("validate")
    def validate_cmd(out: Path = typer.Argument(..., metavar="DATASET", help="a radvqa build output folder")) -> None:
        """Check a built dataset: files readable (corrupt/truncated shards), schema, unique ids, boxes
        inside their images, no patient in two splits, counts equal to the manifest. Exit 1 on failure."""
        from rich.console import Console
        from rich.table import Table

        from radvqa.io.validate import validate

        rep = validate(out)
        con = Console()
        t = Table(title=f"radvqa validate: {out}")
        t.add_column("check")
        t.add_column("result")
        t.add_column("problems", justify="right")
        for c in rep.checks.values():
            if c.not_run:
                t.add_row(c.name, f"[yellow]NOT RUN[/yellow] ({c.not_run})", "-")
            else:
                t.add_row(c.name, "[green]ok[/green]" if c.ok else "[red]FAIL[/red]", str(c.count))
        con.print(t)
        for e in rep.errors():
            con.print(f"[red]-[/red] {e}", markup=True, highlight=False)
        if rep.stats:
            con.print(f"{rep.stats.get('qa_rows', 0):,} QA rows, {rep.stats.get('scene_graphs', 0):,} scene graphs, "
                      f"{rep.stats.get('rejected_lines', 0):,} reject lines")
        if not rep.ok:
            raise typer.Exit(1)

    @app.command("export")
    def export_cmd(
        dataset: Path = typer.Argument(..., metavar="DATASET", help="a radvqa build output folder"),
        fmt: str = typer.Option(..., "--format", "-f", help="llava | jsonl | qba-json | coco"),
        dest: Optional[Path] = typer.Option(None, "--out", "-o",
                                            help="destination file (llava, jsonl, coco: x.json) or folder (qba-json); "
                                                 "default: DATASET/export/..."),
        split: Optional[str] = typer.Option(None, "--split", help="only this split (train, validation, test)"),
        jsonl: bool = typer.Option(False, "--jsonl", help="llava: JSON Lines instead of one JSON array"),
        keep_imageless: bool = typer.Option(False, "--keep-imageless",
                                            help="llava, coco: keep rows without an image file (skipped and counted by default)"),
        per_study: bool = typer.Option(False, "--per-study", help="qba-json: one file per study (CXR-QBA's released tree) "
                                                                  "instead of one JSON Lines file per split"),
        box_format: str = typer.Option("norm1000", "--box-format", help="llava: norm1000 | norm1 | pixels"),
        image_root: Optional[str] = typer.Option(None, "--image-root", help="llava: prefix for relative image paths"),
        include_regions: bool = typer.Option(False, "--include-regions", help="coco: add anatomical region boxes"),
        absolute_images: bool = typer.Option(False, "--absolute-images", help="llava, coco: resolve relative image paths through the manifest's image_roots"),
    ) -> None:
        """Export a built dataset: LLaVA conversations (a JSON array; boxes in a declared text format),
        JSONL, CXR-QBA documents (one JSON Lines file per split), or COCO boxes. Written under a
        temporary name and renamed on success; a side file DEST.info.json says what was written."""
        from radvqa.io.export import export

        try:
            res = export(dataset, fmt, dest, box_format=box_format, image_root=image_root, include_regions=include_regions,
                         absolute_images=absolute_images, split=split, keep_imageless=keep_imageless, jsonl=jsonl,
                         per_study=per_study)
        except (ValueError, FileNotFoundError, FileExistsError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
        if res.get("skipped_no_image"):
            kind = "images" if fmt == "coco" else "rows"
            typer.echo(f"note: {res['skipped_no_image']:,} {kind} without an image file skipped "
                       "(--keep-imageless keeps them)", err=True)
        typer.echo(json.dumps(res))

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
            m = subset(dataset, out, balanced=balanced, tier=tier, seed=seed, splits=split or None)
        except (SubsetError, FileNotFoundError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
        if shortcuts:
            from radvqa.eval.shortcuts import ShortcutError, audit, write_audit
            from radvqa.io.card import write_card

            try:
                write_audit(out, audit(out))
                write_card(out, m)
            except ShortcutError as exc:
                typer.echo(f"note: no shortcut audit in the card: {exc}", err=True)
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
