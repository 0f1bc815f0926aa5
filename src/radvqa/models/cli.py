"""Commands of this area (filled in by the area's owner)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this area's commands to the ``radvqa`` app."""
