"""Every generation option of docs/generation.md reaches the rows from `radvqa build` (issue 18,
item 3): template folder, priors, minimum grade, cap scale, per-study cap, ... travel in
``BuildOptions.generate`` to the workers and land in the manifest."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import yaml
from typer.testing import CliRunner

from radvqa.cli import app

PACKAGED = Path(__file__).parents[1] / "src" / "radvqa" / "generate"


def _build(out: Path, *args: str) -> list[dict]:
    r = CliRunner().invoke(app, ["build", "--out", str(out), "--quiet", "--strategies", "qba", "--limit", "12", *args])
    assert r.exit_code == 0, r.output + repr(r.exception)
    return pq.read_table(out / "qa").select(["study_id", "template_id", "question", "grade"]).to_pylist()


def test_generation_options_reach_the_rows(tmp_path):
    base = _build(tmp_path / "base")
    # a template folder whose B01 asks in other words ...
    tdir = tmp_path / "templates"
    tdir.mkdir()
    qba = yaml.safe_load((PACKAGED / "templates" / "qba.yaml").read_text())
    b01 = next(t for t in qba["templates"] if t["id"] == "qba.B01_describe_all")
    b01["questions"] = ["What does this radiograph show overall?"]
    (tdir / "qba.yaml").write_text(yaml.safe_dump(qba, sort_keys=False))
    # ... and priors that put all the negative-sampling weight on one finding (bulla)
    priors = yaml.safe_load((PACKAGED / "data" / "priors.yaml").read_text())
    priors["finding_positive_rate"] = {"bulla": 1.0}
    priors["default_finding_rate"] = 0.0
    pfile = tmp_path / "priors.yaml"
    pfile.write_text(yaml.safe_dump(priors))
    data = _build(tmp_path / "data", "--template-dir", str(tdir), "--priors", str(pfile))
    assert {r["question"] for r in data if r["template_id"] == "qba.B01_describe_all"} == {
        "What does this radiograph show overall?"}

    def bulla(rows: list[dict]) -> set[str]:
        return {r["study_id"] for r in rows if r["template_id"] == "qba.D02_has_finding" and "bulla" in r["question"]}
    # (a study that negates many findings may leave the sampled negative no slot)
    assert len(bulla(data)) >= len({r["study_id"] for r in data}) // 2 and len(bulla(data)) > 2 * len(bulla(base))
    # grade floor, cap scale and per-study cap
    out = tmp_path / "lean"
    lean = _build(out, "--min-grade", "A", "--cap-scale", "0.5", "--max-per-study", "20")
    per_study = Counter(r["study_id"] for r in lean)
    assert lean and max(per_study.values()) <= 20 < max(Counter(r["study_id"] for r in base).values())
    assert {r["grade"] for r in lean} <= {"A++", "A+", "A"} and "B" in {r["grade"] for r in base}
    o = json.loads((out / "manifest.json").read_text())["options"]
    assert o["cap_scale"] == 0.5 and o["min_grade"] == "A" and o["max_per_study"] == 20
    o = json.loads((tmp_path / "data" / "manifest.json").read_text())["options"]
    assert o["template_dir"] == str(tdir.resolve()) and o["priors"] == str(pfile.resolve())


def test_bad_generation_option_is_a_clear_error(tmp_path):
    r = CliRunner().invoke(app, ["build", "--out", str(tmp_path / "x"), "--quiet", "--min-grade", "Z"])
    assert r.exit_code == 1 and "min_grade must be one of" in r.output
    r = CliRunner().invoke(app, ["build", "--out", str(tmp_path / "y"), "--quiet", "--split-ratios", "0.8,0.2"])
    assert r.exit_code != 0 and "three numbers" in r.output
