"""``radvqa view``: browse a dataset directory (live server) or write a static sample page."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    """Add this area's commands to the ``radvqa`` app."""

    @app.command("view")
    def view(
        directory: Path = typer.Argument(Path("radvqa-out"), help="Dataset directory written by `radvqa build` (manifest.json, qa/part-*.parquet); default ./radvqa-out, where `radvqa build` writes."),
        port: int = typer.Option(8765, "--port", "-p", help="Port to listen on (0 = any free port)."),
        host: str = typer.Option("127.0.0.1", "--host", help="Address to bind. Anything but loopback exposes the data to your network."),
        html: Path | None = typer.Option(None, "--html", help="Write a self-contained static page to this file instead of serving."),
        sample: int = typer.Option(100, "--sample", "-n", min=1, help="Rows in the static page (with --html)."),
        seed: int = typer.Option(0, "--seed", help="Seed of the static page's row sample."),
        where: list[str] = typer.Option([], "--where", help="Static page only: keep rows with FACET=VALUE (repeatable), e.g. --where strategy=qba."),
        max_side: int = typer.Option(512, "--max-side", min=32, help="Static page: longest image side in pixels after downscaling."),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every request."),
    ) -> None:
        """Browse a generated dataset: image with the answer's boxes, question, answer parts and
        tags, grade, provenance; filters and paging. Serves on 127.0.0.1 unless --host."""
        from radvqa.viewer.paths import DatasetError
        from radvqa.viewer.query import Filters, QueryError, ViewerDataset

        try:
            data = ViewerDataset(directory)
        except DatasetError as exc:
            typer.echo(f"radvqa view: {exc}", err=True)
            raise typer.Exit(1) from None

        if html is not None:
            from radvqa.viewer.export import export_html

            facets: dict[str, list[str]] = {}
            for cond in where:
                name, sep, value = cond.partition("=")
                if not sep or not value:
                    typer.echo(f"radvqa view: --where expects FACET=VALUE, got {cond!r}", err=True)
                    raise typer.Exit(2)
                facets.setdefault(name.strip(), []).append(value.strip())
            try:
                filters = Filters.make(facets)
                stats = export_html(data, html, sample, seed=seed, filters=filters, max_side=max_side)
            except QueryError as exc:
                typer.echo(f"radvqa view: {exc}", err=True)
                raise typer.Exit(2) from None
            typer.echo(
                f"wrote {html}: {stats['items']} items, {stats['images_embedded']} images embedded, "
                f"{stats['images_missing']} not found, {stats['images_without_path']} without a file in the rows, "
                f"{stats['bytes'] / 1e6:.1f} MB"
            )
            return
        if where:
            typer.echo("radvqa view: --where applies to --html only (the live page has filters)", err=True)
            raise typer.Exit(2)

        from radvqa.viewer.server import ViewerServer

        try:
            server = ViewerServer(data, host, port, verbose=verbose)
        except OSError as exc:
            typer.echo(f"radvqa view: cannot listen on {host}:{port} ({exc.strerror or exc}); try --port 0", err=True)
            raise typer.Exit(1) from None
        if not server.loopback_only:
            typer.echo(f"warning: serving on {host}, reachable from other machines", err=True)
        typer.echo(f"radvqa view: {data.total_rows} QA rows from {data.dir}")
        typer.echo(f"open {server.url}  (Ctrl-C to stop)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
