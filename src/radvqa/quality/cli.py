"""Commands of the quality area."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this area's commands to the ``radvqa`` app."""
