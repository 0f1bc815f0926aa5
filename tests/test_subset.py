"""`radvqa subset` (balanced evaluation subsets, grade tiers) and the shortcut audit, on the
bundled sample build (real reports, labels and boxes)."""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from radvqa.cli import app
from radvqa.io.parquet import ShardWriter, read_table
from radvqa.io.subset import SubsetError, load_tiers, question_subject, subset, template_group, yes_no
from radvqa.io.validate import validate
from radvqa.model import GRADES, QA
from radvqa.eval.shortcuts import audit, cli_main, write_audit
from radvqa.io.card import write_card
from radvqa.run.builder import BuildOptions, build

EVAL_SPLITS = ("validation", "test")  # the sample's test split alone is 18 studies: use both


@pytest.fixture(scope="module")
def parent(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("parent") / "sample"
    build(BuildOptions(out=str(out), shard_studies=16))
    return out


@pytest.fixture(scope="module")
def balanced(parent: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bal") / "balanced"
    m = subset(parent, out, balanced=True, seed=3, splits=EVAL_SPLITS)
    write_audit(out, audit(out))  # what `radvqa subset` does after writing
    write_card(out, m)
    return out


def _rows(d: Path) -> list[dict]:
    return read_table(d, "qa", ["qa_id", "split", "patient_id", "study_id", "question_type", "template_id", "question",
                                "answer", "answer_short", "choices", "grade"]).to_pylist()


def test_balanced_subset_contract_and_patients(parent: Path, balanced: Path) -> None:
    rep = validate(balanced)
    assert rep.ok, rep.errors()
    m = json.loads((balanced / "manifest.json").read_text())
    sub = m["subset"]
    assert m["seed"] == 3 and sub["seed"] == 3 and sub["name"] == "balanced"
    assert sub["parent"]["path"] == str(parent.resolve()) and sub["parent"]["seed"] == 0
    c = m["counts"]
    assert c["studies_in"] == c["studies_out"] + c["studies_rejected"]
    rows = _rows(balanced)
    assert rows and {r["split"] for r in rows} <= set(EVAL_SPLITS)
    train_patients = {r["patient_id"] for r in _rows(parent) if r["split"] == "train"}
    assert train_patients and not ({r["patient_id"] for r in rows} & train_patients)
    # every kept row is a parent row, unchanged
    by_id = {r["qa_id"]: r for r in _rows(parent)}
    assert all(by_id[r["qa_id"]] == r for r in rows)
    card = (balanced / "README.md").read_text()
    assert "## Subset" in card and "## Shortcut audit" in card and "## Tiers" in card


def test_balanced_cells_within_40_60(balanced: Path) -> None:
    """Cells: (template group, subject); rin's closed+ and closed- share their wordings and are one group."""
    assert template_group("rin.pathology_closed_pos") == template_group("rin.pathology_closed_neg")
    cells: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for r in _rows(balanced):
        a = yes_no(r["answer_short"], r["choices"])
        if a:
            cells[(template_group(r["template_id"]), question_subject(r["template_id"], r["question"]))][a] += 1
    assert len(cells) >= 10
    for key, c in cells.items():
        share = c["yes"] / (c["yes"] + c["no"])
        assert 0.4 <= share <= 0.6, (key, c)


def test_multiple_choice_positions_uniform(balanced: Path) -> None:
    pos: dict[tuple[str, int], Counter[str]] = defaultdict(Counter)
    for r in _rows(balanced):
        if r["choices"]:
            letter = r["answer_short"]
            pos[(r["question_type"], len(r["choices"]))][letter] += 1
            # answer text and short answer agree on the letter
            assert r["answer"].startswith(f"The answer is {letter}")
    assert pos, "the sample's subset has multiple-choice rows"
    for key, c in pos.items():
        assert len(set(c.values())) == 1 and len(c) == key[1], (key, c)
    # picking the no-finding option never beats chance
    mc = [r for r in _rows(balanced) if r["choices"]]
    none = [r for r in mc if r["choices"][ord(r["answer_short"]) - 65] == "no pathology seen"]
    assert len(none) <= len(mc) / 4


def test_none_answers_capped(balanced: Path) -> None:
    cells: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for r in _rows(balanced):
        s = r["answer_short"]
        if s is not None and not r["choices"] and not yes_no(s, r["choices"]):
            k = (template_group(r["template_id"]), question_subject(r["template_id"], r["question"]))
            cells[k]["neg" if s.lower() in ("none", "0") else "pos"] += 1
    assert any(c["neg"] for c in cells.values())
    for k, c in cells.items():
        assert c["neg"] <= c["pos"], (k, c)


def test_subset_deterministic_and_seeded(parent: Path, balanced: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    subset(parent, again, balanced=True, seed=3, splits=EVAL_SPLITS)
    a = [r["qa_id"] for r in _rows(balanced)]
    assert a == [r["qa_id"] for r in _rows(again)]
    for k in ("qa", "scene_graphs"):
        for f in sorted((balanced / k).glob("part-*.parquet")):
            assert pq.read_table(f).equals(pq.read_table(again / k / f.name))


def test_tier_subset(parent: Path, tmp_path: Path) -> None:
    out = tmp_path / "ft"
    m = subset(parent, out, tier="finetune")
    assert validate(out).ok, validate(out).errors()
    lim = GRADES.index(load_tiers()["finetune"]["min_grade"])
    rows = _rows(out)
    assert rows and all(GRADES.index(r["grade"]) <= lim for r in rows)
    parent_n = sum(1 for r in _rows(parent) if GRADES.index(r["grade"]) <= lim)
    assert m["counts"]["qa_rows"] == parent_n == m["subset"]["parent_tier_counts"]["finetune"]
    assert "| finetune | A or better |" in (out / "README.md").read_text()


def test_subset_cli_and_errors(parent: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli"
    res = CliRunner().invoke(app, ["subset", str(parent), "--balanced", "--out", str(out), "--no-shortcuts"])
    assert res.exit_code == 0, res.output
    assert validate(out).ok
    res = CliRunner().invoke(app, ["subset", str(parent), "--balanced", "--out", str(out)])
    assert res.exit_code == 1 and "not empty" in res.output
    with pytest.raises(SubsetError):
        subset(parent, tmp_path / "x", balanced=True, tier="pretrain")
    with pytest.raises(SubsetError, match="unknown tier"):
        subset(parent, tmp_path / "y", tier="nope")


def _qa(i: int, split: str, tpl: str, question: str, short: str) -> QA:
    return QA(qa_id=f"q{i}", source="t", split=split, patient_id=f"p{i}", study_id=f"s{i}", strategy="t",
              question_type=tpl.split(".")[1], template_id=tpl, template_version=1, question=question,
              answer=short.capitalize() + ".", answer_short=short)


def test_shortcut_audit_flags_guessable_template(tmp_path: Path, capsys) -> None:
    """A template whose answer is always "no" is flagged; one with answers independent of the
    question is not."""
    rng = random.Random(0)
    rows = []
    for i in range(600):
        split = "train" if i < 400 else "test"
        rows.append(_qa(2 * i, split, "t.guessable", "Is the image affected by artifacts?", "no"))
        rows.append(_qa(2 * i + 1, split, "t.fair", f"Is there any finding {i % 7}?", rng.choice(["yes", "no"])))
    with ShardWriter(tmp_path / "qa" / "part-00000.parquet", "qa") as w:
        w.extend(rows)
    r = audit(tmp_path)
    tpl = {t["template_id"]: t for t in r["templates"]}
    assert tpl["t.guessable"]["flag"] and tpl["t.guessable"]["majority"] == 1.0 and tpl["t.guessable"]["chance"] == 0.5
    assert not tpl["t.fair"]["flag"] and abs(tpl["t.fair"]["bow"] - 0.5) < 0.15
    assert r["cells_flagged"] >= 1
    assert cli_main(tmp_path, tmp_path / "audit.json") == 0
    assert "t.guessable" in capsys.readouterr().out
    assert json.loads((tmp_path / "audit.json").read_text())["templates_flagged"] == 1
