"""Streaming eval (eval.stream): scored by hash partitions, in one process or a pool, the report
and per_question.jsonl are byte-identical to the in-memory scorer's on real VQA-RAD answers
(with the trained text-only baselines of the shortcut audit) and on the hand-built fixture
(grounding, circular multiple choice, parse failures, tags)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_eval import LLAVA, small, vqarad  # noqa: E402,F401  (module fixtures, reused)

from radvqa.eval.dataset import DatasetError  # noqa: E402
from radvqa.eval.evaluate import EvalError, evaluate  # noqa: E402
from radvqa.eval.predictions import PredictionError  # noqa: E402
from radvqa.eval.report import write_report  # noqa: E402


def _files(rep: dict, out: Path) -> dict[str, bytes]:
    write_report(rep, out, plots=False)
    return {f: (out / f).read_bytes() for f in ("report.json", "report.md", "per_question.jsonl")}


def _same(tmp: Path, ds: Path, pf: Path, runs: tuple[tuple[int, int], ...], **kw: object) -> dict:
    ref = evaluate(ds, pf, **kw)
    want = _files(ref, tmp / "mem")
    for parts, workers in runs:
        got = evaluate(ds, pf, partitions=parts, workers=workers, **kw)
        assert got["timings_s"]["partitions"] == parts
        files = _files(got, tmp / f"p{parts}w{workers}")
        for name in want:
            assert files[name] == want[name], (name, parts, workers)
    return ref


def test_stream_matches_memory_on_vqa_rad(vqarad: Path, tmp_path: Path) -> None:
    rep = _same(tmp_path / "a", vqarad, LLAVA / "answer-file.jsonl", ((4, 1),), bootstrap=100)
    assert rep["shortcut_audit"]["by_question_type"]  # the trained baselines ran on both paths
    assert rep["evaluated"]["rows"] == 451 and rep["predictions"]["joined_by"] == "native"
    _same(tmp_path / "b", vqarad, LLAVA / "answer-file.jsonl", ((3, 2),), protocol="llava-med", bootstrap=0, audit=False)


def test_stream_matches_memory_on_hand_fixture(small: tuple[Path, Path], tmp_path: Path) -> None:
    root, pf = small
    rep = _same(tmp_path, root, pf, ((1, 1), (5, 1)), bootstrap=200)
    assert rep["multiple_choice"]["groups_with_rotations"] == 2 and rep["grounding"]["positive_questions"]["n"] == 3
    assert rep["predictions"]["missing_ids"] == ["q04"] and rep["predictions"]["unmatched_ids"] == ["zzz"]


def test_stream_errors_name_the_input(small: tuple[Path, Path], tmp_path: Path) -> None:
    root, pf = small
    lines = pf.read_text().splitlines()
    dup = tmp_path / "dup.jsonl"
    dup.write_text("\n".join(lines + [lines[2]]) + "\n")
    with pytest.raises(PredictionError, match=rf"dup.jsonl:{len(lines) + 1}: duplicate prediction for id 'q03'"):
        evaluate(root, dup, partitions=3)
    none = tmp_path / "none.jsonl"
    none.write_text(json.dumps({"qa_id": "x1", "prediction": "yes"}) + "\n")
    with pytest.raises(EvalError, match="no prediction matches a question: ids like 'x1'.*qa_id like 'q01'"):
        evaluate(root, none, partitions=2)
    with pytest.raises(EvalError, match="no rows of split 'val'"):
        evaluate(root, pf, split="val", partitions=2)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + "\n{not json\n")
    with pytest.raises(PredictionError, match="bad.jsonl:2: not JSON"):
        evaluate(root, bad, partitions=2)
    twice = tmp_path / "twice"
    (twice / "qa").mkdir(parents=True)
    shard = next((root / "qa").glob("*.parquet"))
    for k in (1, 2):
        (twice / "qa" / f"part-{k}.parquet").write_bytes(shard.read_bytes())
    with pytest.raises(DatasetError, match="qa_id 'q01' occurs more than once"):
        evaluate(twice, pf, partitions=4)


def test_cli_partitions(small: tuple[Path, Path], tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from radvqa.cli import app

    root, pf = small
    outs = {}
    for name, extra in (("mem", []), ("parts", ["--partitions", "3"])):
        r = CliRunner().invoke(app, ["eval", str(root), "-p", str(pf), "-o", str(tmp_path / name), "--no-plots", "--bootstrap", "0", *extra])
        assert r.exit_code == 0, r.output
        outs[name] = [(tmp_path / name / f).read_bytes() for f in ("report.json", "per_question.jsonl", "metrics.json")]
    assert outs["parts"] == outs["mem"]
