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


@app.command("info")
def info() -> None:
    """Print the version, the Python and which extraction engine is installed (pure Python, or
    compiled with mypyc: RADVQA_COMPILE=1 pip install .), so that a timing can be read."""
    import platform

    from radvqa import __version__
    from radvqa.extract.compiled import engine_info

    eng = engine_info()
    kind = "compiled (mypyc)" if eng["compiled"] else "pure Python"
    if not eng["compiled"] and eng["modules_compiled"]:
        kind = f"partly compiled ({eng['modules_compiled']} of {eng['modules']} modules)"
    typer.echo(f"radvqa {__version__}")
    typer.echo(f"python {platform.python_version()} ({platform.python_implementation()})")
    typer.echo(f"extraction engine: {kind}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
