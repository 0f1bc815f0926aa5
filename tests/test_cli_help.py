"""#17: ``--help`` names values the classic way (PATH, INTEGER, TEXT; flags bare), never typer's
``<bool>`` / ``<list[Path]>`` placeholders, and a dataset argument is called DATASET."""

from __future__ import annotations

import re

import typer
from typer.testing import CliRunner

from radvqa.cli import app


def _commands(cmd, prefix=()):
    if getattr(cmd, "commands", None):
        for name, sub in cmd.commands.items():
            yield from _commands(sub, (*prefix, name))
    else:
        yield prefix


def test_no_type_placeholders_in_any_help():
    runner = CliRunner()
    cmds = list(_commands(typer.main.get_command(app)))
    assert len(cmds) > 10
    for c in cmds:
        r = runner.invoke(app, [*c, "--help"], env={"COLUMNS": "200"})
        assert r.exit_code == 0, (c, r.output)
        bad = re.findall(r"<(?:bool|str|int|float|path|list\[[^\]]*\]|Path)>|\{[a-z_]+\}", r.output)
        assert not bad, (c, bad)


def test_dataset_argument_is_named_dataset():
    runner = CliRunner()
    for c in ("export", "stats", "validate"):
        r = runner.invoke(app, [c, "--help"], env={"COLUMNS": "200"})
        assert re.search(rf"Usage: radvqa {c} \[OPTIONS\] DATASET", r.output), r.output
    r = runner.invoke(app, ["build", "--help"], env={"COLUMNS": "200"})
    assert "--out" in r.output and "-o      PATH" in r.output
