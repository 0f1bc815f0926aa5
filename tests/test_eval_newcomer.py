"""#17 evaluation items on the real VQA-RAD files: report.html rendered by markdown-it-py (no raw
backticks), multi-valued categories in one spelling, `baseline text-only` then `eval` with the
default split scores the test split only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from radvqa.cli import app
from radvqa.eval.dataset import load_qa
from radvqa.eval.importers import iter_vqa_rad, write_dataset

VQA_RAD = Path(__file__).parent / "data" / "eval" / "vqa-rad"  # the real release, copied into the repository
LLAVA = VQA_RAD / "predictions" / "llava-med-v1" / "answer-file.jsonl"


@pytest.fixture(scope="module")
def vqarad(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("vq")
    write_dataset(out, iter_vqa_rad(VQA_RAD), "vqa-rad", [str(VQA_RAD)], {})
    return out


def test_multi_valued_categories_are_one_spelling(vqarad: Path) -> None:
    from radvqa.eval.aggregate import norm_category

    types = set(load_qa(vqarad)["question_type"])
    multi = {t for t in types if "," in t}
    assert multi and all(t == norm_category(t) for t in multi)
    assert norm_category("PRES, ATTRIB") == norm_category("ATTRIB, PRES") == "ATTRIB, PRES"
    raw = json.loads((VQA_RAD / "VQA_RAD Dataset Public.json").read_text())
    spellings = {r["question_type"] for r in raw if "," in r["question_type"]}
    assert len(spellings) > len(multi)  # the release spells some the two ways


def test_report_html_is_rendered_markdown(vqarad: Path, tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["eval", str(vqarad), "-p", str(LLAVA), "--protocol", "llava-med",
                                 "--out", str(tmp_path / "rep"), "--no-plots", "--no-audit"])
    assert r.exit_code == 0, r.output
    page = (tmp_path / "rep" / "report.html").read_text()
    text = re.sub(r"<[^>]+>", "", page)
    assert "`" not in text and "**" not in text and "<table>" in page and "<code>" in page
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "`" in md  # the markdown has code spans: they became <code>, not raw backticks


def test_baseline_then_eval_default_scores_test_only(vqarad: Path, tmp_path: Path) -> None:
    p = tmp_path / "bow.jsonl"
    r = CliRunner().invoke(app, ["baseline", "text-only", str(vqarad), "--out", str(p)])
    assert r.exit_code == 0, r.output
    assert len(p.read_text().splitlines()) == 451  # VQA-RAD's official test split
    r = CliRunner().invoke(app, ["eval", str(vqarad), "-p", str(p), "--out", str(tmp_path / "e"), "--no-plots", "--no-audit"])
    assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "e" / "report.json").read_text())
    o = rep["overall"]
    assert o["closed"]["n"] == 272 and o["open"]["n"] == 179


def test_stats_of_an_imported_benchmark_counts_files_found(vqarad: Path, tmp_path: Path) -> None:
    """#17: `stats` counts image files found, not image ids (this copy of VQA-RAD ships no image)."""
    from radvqa.io.stats import compute_stats

    s = compute_stats(vqarad)
    assert s["images"] == 0 and s["images_without_file"] == 314 and s["qa_rows_without_image"] == 2248
