"""#17: commands tell the truth through their exit code and leave nothing behind when they fail.

- build: an existing dataset in --out is refused unless --overwrite / --resume; a bad source, path
  or table leaves no OUT/ (no .radvqa/) and draws no progress bar; a build that writes no QA row
  says why per strategy and exits 1 unless --allow-empty; a strategy that wrote nothing is noted.
- predict: the README path (default build, then predict --limit 40) sends only rows with an image;
  every request failing is exit 1.
- import of an empty folder leaves nothing.
Exit codes (docs/CLI.md): 0 success, 1 the command failed, 2 the command line is wrong."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from radvqa.cli import app

sys.path.insert(0, str(Path(__file__).parent))
from test_models_openai import FakeServer  # noqa: E402

runner = CliRunner()


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("s") / "radvqa-out"
    r = runner.invoke(app, ["build", "--out", str(out), "--quiet"])
    assert r.exit_code == 0, r.output
    return out


def test_default_build_notes_the_strategy_that_wrote_nothing(sample: Path, tmp_path: Path) -> None:
    # every strategy writes rows on the default sample (rin on chest labels since #14): no note
    m = json.loads((sample / "manifest.json").read_text())
    assert all(m["counts"]["qa_by_strategy"].get(s, 0) > 0 for s in ("qba", "vindr", "rin", "diff"))
    assert m["notes"] == []
    # OpenI reports alone have no follow-ups: diff writes nothing, and the manifest says why
    from radvqa.sources import sample_inputs

    openi = next(str(p) for p in sample_inputs() if p.name == "openi")
    out = tmp_path / "o"
    r = runner.invoke(app, ["build", "openi", "--input", openi, "--out", str(out), "--quiet", "--strategies", "qba,diff"])
    assert r.exit_code == 0, r.output
    m = json.loads((out / "manifest.json").read_text())
    assert m["counts"]["qa_by_strategy"].get("diff", 0) == 0
    assert any(n.startswith("diff: 0 rows; it needs two or more studies of one patient") for n in m["notes"])


def test_existing_dataset_refused_unless_overwrite(sample: Path, tmp_path: Path) -> None:
    before = (sample / "manifest.json").read_bytes()
    r = runner.invoke(app, ["build", "--out", str(sample), "--quiet", "--limit", "3"])
    text = " ".join(r.output.split())  # rich wraps long lines
    assert r.exit_code == 1 and "already holds a radvqa dataset" in text and "--overwrite" in text
    assert (sample / "manifest.json").read_bytes() == before
    out = tmp_path / "o"
    assert runner.invoke(app, ["build", "--out", str(out), "--quiet", "--limit", "3"]).exit_code == 0
    r = runner.invoke(app, ["build", "--out", str(out), "--quiet", "--limit", "3", "--overwrite"])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("args", [
    ["nosuch"],
    ["openi", "--input", "/nonexistent/reports.tgz"],
    ["chexpert", "--input", "BAD_TABLE"],
])
def test_failed_build_leaves_nothing_and_draws_no_bar(args: list[str], tmp_path: Path) -> None:
    bad = tmp_path / "chexpert_train.csv"
    bad.write_text("a,b\n1,2\n")
    args = [str(bad) if a == "BAD_TABLE" else a for a in args]
    out = tmp_path / "out"
    r = runner.invoke(app, ["build", *args, "--out", str(out)])
    assert r.exit_code == 1 and "error:" in r.output
    assert "reading sources" not in r.output
    assert not out.exists()


def test_empty_result_says_why_and_fails_unless_allowed(tmp_path: Path) -> None:
    out = tmp_path / "e"
    args = ["build", "openi", "--input", str(Path(__file__).parent / "data" / "sources" / "openi"),
            "--strategies", "vindr,diff", "--out", str(out), "--quiet"]
    r = runner.invoke(app, args)
    assert r.exit_code == 1, r.output
    text = " ".join(r.output.split())
    assert "no QA rows were written" in text and "vindr: 0 rows; it needs expert image labels" in text
    assert "diff: 0 rows; it needs two or more studies of one patient" in text and "--allow-empty" in text
    assert not out.exists()
    r = runner.invoke(app, [*args, "--allow-empty"])
    assert r.exit_code == 0, r.output
    assert json.loads((out / "manifest.json").read_text())["counts"]["qa_rows"] == 0


def test_import_of_an_empty_folder_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    out = tmp_path / "vq"
    r = runner.invoke(app, ["import", "vqa-rad", str(tmp_path / "empty"), "--out", str(out)])
    assert r.exit_code == 1, r.output
    assert not out.exists() or not any(out.iterdir())


def test_predict_on_the_default_build_sends_only_rows_with_an_image(sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "p.jsonl"
    with FakeServer() as server:
        r = runner.invoke(app, ["predict", str(sample), "--model", "openai:test-vlm", "--base-url", server.url,
                                "--out", str(out), "--limit", "40", "--no-cache", "--no-progress"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 40 and not [x for x in rows if x.get("error")]
    assert "without an image file were kept out" in r.output


def test_predict_where_every_request_fails_exits_1(sample: Path, tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = runner.invoke(app, ["predict", str(sample), "--model", "openai:test-vlm", "--base-url",
                            f"http://127.0.0.1:{port}/v1", "--out", str(tmp_path / "p.jsonl"), "--limit", "2",
                            "--max-retries", "0", "--no-cache", "--no-progress"])
    assert r.exit_code == 1 and "every one of the 2 requests failed" in r.output


def test_validate_of_an_empty_folder_says_which_checks_did_not_run(tmp_path: Path) -> None:
    r = runner.invoke(app, ["validate", str(tmp_path)], env={"COLUMNS": "200"})
    assert r.exit_code == 1
    rows = [ln for ln in r.output.splitlines() if ln.startswith("│")]
    assert not [ln for ln in rows if " ok " in ln]
    assert sum("NOT RUN" in ln for ln in rows) == 7
