"""The hand-annotated extraction gold set (tests/data/extraction_gold) is well formed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

GOLD = Path(__file__).parent / "data" / "extraction_gold"
SPLIT_CSV = Path("/work/shared/data/iu-xray/r2gen_split.csv")


def _checker():
    spec = importlib.util.spec_from_file_location("check_gold", GOLD / "check_gold.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def test_gold_files_pass_the_checker(capsys):
    args = ["--split-csv", str(SPLIT_CSV)] if SPLIT_CSV.exists() else []
    assert _checker().main(args) == 0, capsys.readouterr().out
    n = len((GOLD / "dev.jsonl").read_text().splitlines())
    assert n >= 100


def test_checker_rejects_bad_lines(tmp_path, capsys):
    rec = json.loads((GOLD / "dev.jsonl").read_text().splitlines()[0])
    obs = rec["observations"][0]
    bad = dict(rec, observations=[dict(obs, finding="no_such_finding", evidence="not in the text at all")])
    f = tmp_path / "dev.jsonl"
    f.write_text(json.dumps(rec) + "\n" + json.dumps(bad) + "\n")
    assert _checker().main([str(f)]) == 1
    out = capsys.readouterr().out
    assert "unknown finding id" in out and "not a substring" in out and "already in" in out


@pytest.mark.parametrize("field,value", [("certainty", "probable"), ("change", "better"), ("laterality", "both")])
def test_checker_rejects_values_outside_the_vocabulary(tmp_path, field, value, capsys):
    rec = json.loads((GOLD / "dev.jsonl").read_text().splitlines()[0])
    rec["observations"] = [dict(rec["observations"][0], **{field: value})]
    f = tmp_path / "dev.jsonl"
    f.write_text(json.dumps(rec) + "\n")
    assert _checker().main([str(f)]) == 1
    assert field in capsys.readouterr().out
