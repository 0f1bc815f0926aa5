"""``radvqa sources``: the source adapters ``radvqa build SOURCE`` accepts, with what each reads.
(Registered when ``radvqa.sources.cli`` is listed in ``radvqa.cli._AREAS``.)"""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("sources")
    def sources() -> None:
        """List the source adapters for `radvqa build SOURCE --input PATH` and what they read."""
        from rich.console import Console
        from rich.table import Table

        from radvqa.sources import SOURCES, get_source

        table = Table("source", "reads")
        for name in SOURCES:
            try:
                desc = getattr(get_source(name), "description", "") or ""
            except KeyError as e:  # a module not present in this tree
                desc = f"(unavailable: {e.args[0] if e.args else e})"
            table.add_row(name, desc)
        Console().print(table)
