"""``radvqa build``: the whole pipeline, with a progress bar and a summary table."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer


class _RichProgress:
    """Draws build progress with rich (one bar per phase)."""

    def __init__(self, console: Any, enabled: bool = True) -> None:
        from rich.progress import (
            BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn,
        )

        self.console = console
        self.bar = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[extra]}"),
            TimeElapsedColumn(), TimeRemainingColumn(), console=console, disable=not enabled, transient=False,
        )
        self.task: Any = None
        self.qa_rows = 0
        self._inside: dict[int, int] = {}

    def __enter__(self) -> _RichProgress:
        self.bar.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bar.stop()

    def phase(self, name: str, total: int | None = None) -> None:
        if self.task is not None:
            t = self.bar.tasks[-1]
            if t.total is None:
                self.bar.update(self.task, total=t.completed)
        self.task = self.bar.add_task(name, total=total, extra="")

    def advance(self, n: int = 1) -> None:
        if self.task is not None:
            self.bar.advance(self.task, n)

    def studies_done(self, shard: int, n: int) -> None:
        """Progress inside a shard (in-process runs); shard_done adds the rest."""
        self._inside[shard] = self._inside.get(shard, 0) + n
        self.advance(n)

    def shard_done(self, stats: Any) -> None:
        """``stats``: the shard's ``run.tasks.ShardStats``."""
        self.qa_rows += stats.qa_rows
        done = self._inside.pop(stats.shard, 0)
        if self.task is not None:
            self.bar.update(self.task, advance=stats.studies_in - done, extra=f"{self.qa_rows:,} QA rows")

    def message(self, text: str) -> None:
        self.console.print(f"[dim]{text}[/dim]")


def _summary(console: Any, manifest: dict[str, Any], out: Path) -> None:
    from rich.table import Table

    c = manifest["counts"]
    t = Table(title=f"radvqa build: {manifest['source']} -> {out}", show_lines=False)
    t.add_column("count")
    t.add_column("value", justify="right")
    for k in ("studies_in", "studies_out", "studies_rejected", "patients", "qa_rows", "qa_rows_with_image",
              "qa_rows_without_image", "image_files", "rejected_lines"):
        t.add_row(k, f"{c.get(k, 0):,}")
    for k, v in c.get("qa_by_strategy", {}).items():
        t.add_row(f"QA {k}", f"{v:,}")
    grades = ", ".join(f"{k} {v:,}" for k, v in c.get("grades", {}).items())
    if grades:
        t.add_row("grades", grades)
    splits = ", ".join(f"{k} {v:,}" for k, v in c.get("qa_by_split", {}).items())
    if splits:
        t.add_row("QA by split", splits)
    wall = manifest["timings"].get("wall", 0.0)
    t.add_row("wall time", f"{wall:.1f} s")
    if wall > 0:
        t.add_row("QA rows / s", f"{c.get('qa_rows', 0) / wall:,.0f}")
    console.print(t)
    from radvqa.io.stats import image_warning

    warn = image_warning(c)
    if warn:
        console.print(f"[bold yellow]warning:[/bold yellow] {warn}", highlight=False)
    for note in manifest.get("notes") or []:
        console.print(f"[yellow]note:[/yellow] {note}", highlight=False)
    reasons = manifest.get("rejects_by_reason") or {}
    if reasons:
        r = Table(title="rejected records by reason (rejected.jsonl)")
        r.add_column("stage: reason")
        r.add_column("lines", justify="right")
        for k, v in list(reasons.items())[:15]:
            r.add_row(k, f"{v:,}")
        if len(reasons) > 15:
            r.add_row(f"... {len(reasons) - 15} more reasons", f"{sum(list(reasons.values())[15:]):,}")
        console.print(r)


def register(app: typer.Typer) -> None:
    """Add ``build``."""

    @app.command("build")
    def build_cmd(
        source: str = typer.Argument("sample", help="source name (sample, openi, nih-cxr14, synthetic, ...); default: the bundled sample"),
        inputs: Optional[list[Path]] = typer.Option(None, "--input", "-i", help="input file or folder (repeatable)"),
        out: Path = typer.Option(Path("radvqa-out"), "--out", "-o", help="output folder"),
        strategies: Optional[str] = typer.Option(None, "--strategies",
                                                 help="comma-separated QA strategies: qba, vindr, rin, diff (the default set) and probe (negation / side question pairs, only when named)"),
        seed: int = typer.Option(0, "--seed", help="random seed (same seed + input -> same rows)"),
        workers: int = typer.Option(1, "--workers", "-w", min=1, help="worker processes (or Ray CPUs)"),
        executor: str = typer.Option("local", "--executor", help="local (this process, or a process pool with --workers > 1), process or ray (ray joins RAY_ADDRESS, else starts one; see docs/scale-out.md)"),
        limit: Optional[int] = typer.Option(None, "--limit", min=1, help="read at most N input records"),
        resume: bool = typer.Option(False, "--resume", help="continue an interrupted build in --out (only unfinished shards are redone)"),
        overwrite: bool = typer.Option(False, "--overwrite", help="replace the radvqa dataset already in --out (refused otherwise)"),
        allow_empty: bool = typer.Option(False, "--allow-empty", help="keep a dataset with no QA row (an error otherwise, saying why per strategy)"),
        studies: Optional[int] = typer.Option(None, "--studies", min=1, help="synthetic source: number of studies"),
        extractor: str = typer.Option("rules", "--extractor", help="report extractor: rules or llm"),
        llm_url: Optional[str] = typer.Option(None, "--llm-url", help="--extractor llm: OpenAI-compatible base URL"),
        llm_model: Optional[str] = typer.Option(None, "--llm-model", help="--extractor llm: model name"),
        shard_studies: int = typer.Option(1000, "--shard-studies", min=1, help="target studies per shard (shard count is a power of two; = run.shards.DEFAULT_SHARD_STUDIES)"),
        template_dir: Optional[Path] = typer.Option(None, "--template-dir", exists=True, file_okay=False,
                                                    help="folder of <family>.yaml templates replacing the packaged ones"),
        priors: Optional[Path] = typer.Option(None, "--priors", exists=True, dir_okay=False,
                                              help="priors YAML replacing the packaged one (negative sampling weights)"),
        min_grade: Optional[str] = typer.Option(None, "--min-grade", help="drop QA rows graded below this (A++, A+, A, B, C or D)"),
        label_only: str = typer.Option("omit", "--label-only",
                                       help="a label the report does not back (no report observation matches it): omit (state nothing from it) or state-as-label (\"The study is indexed with the MeSH term ...\", grade C)"),
        unvouched: str = typer.Option("omit", "--unvouched",
                                      help="a positive finding the extractor read only in part (words of its sentence it did not read, a cause cue, mixed sides...; docs/generation.md round 10): omit (state nothing from it) or keep (state it, grade C)"),
        incomplete_lists: str = typer.Option("omit", "--incomplete-lists",
                                             help="a list answer (\"Describe the lung fields.\") of a scope where the report states a positive no row states, or a finding's description (\"Describe any nodule.\") beside a reading of it no row states: omit (not generated: it would read as all there is) or grade (kept, grade B or C, reason completeness:finding_not_stated)"),
        cap_scale: float = typer.Option(1.0, "--cap-scale", min=0.0, help="multiply every template's per-study cap (0.5: a lighter dataset)"),
        max_per_study: Optional[int] = typer.Option(None, "--max-per-study", min=1, help="most QA rows per study (after per-template caps)"),
        vindr_positive_share: float = typer.Option(0.417, "--vindr-positive-share", min=0.0, max=1.0,
                                                   help="vindr: share of positive questions per image"),
        vindr_questions_per_image: int = typer.Option(6, "--vindr-questions-per-image", min=0, help="vindr: questions per image"),
        reflacx_present_from: Optional[int] = typer.Option(None, "--reflacx-present-from", min=1, max=5,
                                                           help="reflacx: a reader's label counts as present from this certainty (1-5; default 3, the authors' rule)"),
        reflacx_below_threshold: Optional[str] = typer.Option(None, "--reflacx-below-threshold",
                                                              help="reflacx: a label selected below that certainty is absent (default) or uncertain"),
        split_ratios: str = typer.Option("0.8,0.1,0.1", "--split-ratios", help="train,validate,test shares for sources without a split"),
        strict: bool = typer.Option(False, "--strict", help="stop with an error at the first rejected record"),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
        pipeline: Optional[str] = typer.Option(None, "--pipeline", hidden=True,
                                               help="module:factory replacing the stage chain (tests, benchmarks)"),
    ) -> None:
        """Build a VQA dataset: sources -> extract -> localize -> generate -> grade -> sharded Parquet
        + manifest.json + rejected.jsonl + dataset card. With no SOURCE: the bundled sample into ./radvqa-out."""
        from rich.console import Console

        from radvqa.io.parquet import WriteError
        from radvqa.run.builder import BuildOptions, build
        from radvqa.run.errors import BuildError

        console = Console(stderr=True)
        from radvqa.generate import STRATEGIES, GenerateOptions

        strat = tuple(s.strip() for s in strategies.split(",") if s.strip()) if strategies else STRATEGIES
        try:
            ratios = tuple(float(x) for x in split_ratios.split(","))
        except ValueError:
            raise typer.BadParameter(f"{split_ratios!r}: three numbers, e.g. 0.8,0.1,0.1", param_hint="--split-ratios") from None
        if len(ratios) != 3:
            raise typer.BadParameter(f"{split_ratios!r}: three numbers, e.g. 0.8,0.1,0.1", param_hint="--split-ratios")
        gen_opts = GenerateOptions(
            strategies=strat, seed=seed, max_per_study=max_per_study, cap_scale=cap_scale,
            vindr_positive_share=vindr_positive_share, vindr_questions_per_image=vindr_questions_per_image,
            min_grade=min_grade, split_ratios=ratios, label_only=label_only,  # type: ignore[arg-type]
            unvouched=unvouched, incomplete_lists=incomplete_lists,
            template_dir=str(template_dir.resolve()) if template_dir else None,
            priors=str(priors.resolve()) if priors else None)
        from radvqa.run.executors import EXECUTORS

        if executor not in EXECUTORS:
            raise typer.BadParameter(f"unknown executor {executor!r} ({', '.join(EXECUTORS)})", param_hint="--executor")
        if extractor not in ("rules", "llm"):
            raise typer.BadParameter(f"unknown extractor {extractor!r} (rules or llm)", param_hint="--extractor")
        ex_opts: dict[str, Any] = {}
        if extractor == "llm":
            if not llm_url or not llm_model:
                raise typer.BadParameter("--extractor llm needs --llm-url and --llm-model", param_hint="--extractor")
            ex_opts = {"url": llm_url, "model": llm_model}
        src_opts: dict[str, Any] = {}
        if reflacx_present_from is not None:
            src_opts["present_from"] = reflacx_present_from
        if reflacx_below_threshold is not None:
            if reflacx_below_threshold not in ("absent", "uncertain"):
                raise typer.BadParameter(f"{reflacx_below_threshold!r}: absent or uncertain", param_hint="--reflacx-below-threshold")
            src_opts["below_threshold"] = reflacx_below_threshold
        if src_opts and source != "reflacx":
            raise typer.BadParameter(f"applies to the reflacx source only, not {source!r}",
                                     param_hint="--reflacx-present-from / --reflacx-below-threshold")
        opts = BuildOptions(
            source=source, source_options=src_opts, inputs=[str(p) for p in inputs or []], out=str(out), generate=gen_opts,
            workers=workers, executor=executor, limit=limit, resume=resume, studies=studies, extractor=extractor,
            extractor_options=ex_opts, shard_studies=shard_studies, pipeline=pipeline, strict=strict,
            overwrite=overwrite, allow_empty=allow_empty,
        )
        try:
            with _RichProgress(console, enabled=not quiet) as prog:
                manifest = build(opts, progress=prog)  # type: ignore[arg-type]
        except (BuildError, WriteError) as exc:
            console.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(1) from None
        _summary(console, manifest, out)
