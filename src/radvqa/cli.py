"""The ``radvqa`` command line. Each area registers its own commands (``<area>/cli.py``:
``register(app)``) so the areas stay independent and imports stay lazy where they are heavy."""

from __future__ import annotations

import importlib

import typer

from radvqa.cli_help import plain_placeholders

plain_placeholders()

app = typer.Typer(
    name="radvqa",
    help="Build grounded radiology VQA datasets from reports, labels and boxes; export, predict, evaluate.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Order is the order of `radvqa --help`.
_AREAS = (
    "radvqa.run.cli",  # build
    "radvqa.sources.cli",  # sources
    "radvqa.extract.cli",  # extract, label
    "radvqa.ontology.cli",  # ontology
    "radvqa.io.cli",  # stats, validate, export, subset
    "radvqa.quality.cli",  # grade (judge pass)
    "radvqa.models.cli",  # predict, baseline
    "radvqa.eval.cli",  # eval, import
    "radvqa.viewer.cli",  # view
)

for _mod in _AREAS:
    importlib.import_module(_mod).register(app)


@app.command("version")
def version() -> None:
    """Print the radvqa version."""
    from radvqa import __version__

    typer.echo(__version__)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
