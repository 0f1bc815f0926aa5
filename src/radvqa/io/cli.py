"""``radvqa stats``, ``radvqa validate``, ``radvqa export``."""

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
