"""``radvqa ontology``: counts and integrity checks of the ontology (package data or another copy)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Add this area's commands to the ``radvqa`` app."""

    @app.command("ontology")
    def ontology(
        check: Path | None = typer.Option(
            None, "--check", help="Validate another copy of the ontology (a directory of YAML files) "
                                  "instead of the package data."),
        show_errors: int = typer.Option(20, "--show-errors", help="Problems listed per failing check."),
        openi: Path | None = typer.Option(
            None, "--openi", help="Also measure how many OpenI MeSH major codes map: NLMCXR_reports.tgz or a "
                                  "directory of its XML files (e.g. ../shared/data/iu-xray/NLMCXR_reports.tgz)."),
    ) -> None:
        """Print ontology counts (findings by category, regions, schemes) and its integrity checks.
        Exit code 1 when a check fails."""
        from rich.console import Console
        from rich.table import Table

        from radvqa.ontology.core import DATA_DIR, check_ontology

        console = Console()
        path = check if check is not None else DATA_DIR
        onto, checks = check_ontology(path)
        console.print(f"[bold]ontology[/bold] {path}")

        if onto is not None:
            console.print(f"version {onto.version}: {len(onto.findings)} findings, {len(onto.regions)} regions "
                          f"({sum(r.boxable for r in onto.regions.values())} boxable, "
                          f"{sum(r.imagenome_name is not None for r in onto.regions.values())} Chest ImaGenome), "
                          f"{len(onto.anatomies)} anatomies, {len(onto.finding_terms())} finding terms")
            cats = Table(title="Findings by category")
            cats.add_column("category")
            cats.add_column("subcategory")
            cats.add_column("findings", justify="right")
            counts = Counter((f.category, f.subcategory or "-") for f in onto.findings.values())
            for cat in onto.categories:
                total = sum(n for (c, _), n in counts.items() if c == cat)
                cats.add_row(f"[bold]{cat}[/bold]", "", f"[bold]{total}[/bold]")
                for (c, sub), n in sorted(counts.items()):
                    if c == cat:
                        cats.add_row("", sub, str(n))
            console.print(cats)
            sch = Table(title="Label schemes")
            sch.add_column("scheme")
            sch.add_column("title")
            sch.add_column("labels", justify="right")
            sch.add_column("no-finding labels", justify="right")
            sch.add_column("findings used", justify="right")
            for name, s in sorted(onto.schemes.items()):
                used = {i for ids in s.labels.values() for i in ids}
                sch.add_row(name, s.title, str(len(s.labels)), str(sum(not v for v in s.labels.values())),
                            str(len(used)))
            console.print(sch)

        tab = Table(title="Integrity checks")
        tab.add_column("check")
        tab.add_column("status")
        tab.add_column("detail")
        for c in checks:
            tab.add_row(c.name, "[green]pass[/green]" if c.passed else "[red]FAIL[/red]",
                        c.detail if c.passed else f"{len(c.errors)} problem(s)")
        console.print(tab)
        if openi is not None and onto is not None:
            from radvqa.ontology.coverage import openi_mesh_coverage

            if not openi.exists():
                console.print(f"--openi {openi}: no such file or directory", style="bold red")
                raise typer.Exit(code=1)
            cov = openi_mesh_coverage(onto, openi)
            console.print(f"OpenI MeSH coverage: {cov.codes_mapped}/{cov.codes} major codes map "
                          f"({cov.code_rate:.1%}); {cov.reports_fully_mapped}/{cov.reports} reports fully mapped",
                          highlight=False)
            if cov.unmapped:
                top = ", ".join(f"{k} ({n})" for k, n in cov.unmapped[:10])
                console.print(f"most frequent unmapped: {top}", markup=False, highlight=False, soft_wrap=True)
        failed = [c for c in checks if not c.passed]
        for c in failed:
            for e in c.errors[:show_errors]:
                console.print("x " + e, markup=False, highlight=False, soft_wrap=True)
            if len(c.errors) > show_errors:
                console.print(f"  ... {len(c.errors) - show_errors} more", markup=False)
        if failed:
            console.print(f"FAIL: {len(failed)} of {len(checks)} checks failed", style="bold red")
            raise typer.Exit(code=1)
        console.print(f"OK: all {len(checks)} checks passed", style="bold green")
