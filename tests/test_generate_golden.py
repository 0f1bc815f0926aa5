"""Golden snapshot: the rendered text of a fixed set of questions and answers (one study per
strategy, mini ontology, seed 0). A wording change must be deliberate: regenerate with
``RADVQA_UPDATE_GOLDEN=1 .venv/bin/pytest tests/test_generate_golden.py`` and bump the template's
``version``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "data" / "generate"))
from helpers import box_sg, cxr_report_sg, mini_ontology, normal_report_sg, rin_sg  # noqa: E402

from radvqa.generate import GenerateOptions, Generator  # noqa: E402

GOLDEN = Path(__file__).parent / "data" / "generate" / "golden.json"


def _render() -> list[dict]:
    g = Generator(mini_ontology(), GenerateOptions(seed=0))
    prior = cxr_report_sg(study_id="openi:G0", patient="openi:pg", time="1")
    cases = [
        (cxr_report_sg(study_id="openi:G1", patient="openi:pg", time="2"), prior),
        (normal_report_sg(study_id="openi:G2"), None),
        (box_sg(study_id="vindr-cxr:G3", readers=3, source="vindr-cxr"), None),
        (rin_sg(study_id="radimagenet:G4"), None),
    ]
    out = []
    for sg, pr in cases:
        for r in g.generate(sg, pr):
            out.append({"qa_id": r.qa_id, "template": f"{r.template_id}@{r.template_version}",
                        "question": r.question, "answer": r.answer, "short": r.answer_short,
                        "tags": [p.tag for p in r.answer_parts], "grade": r.grade})
    return out


def test_golden_snapshot():
    got = _render()
    if os.environ.get("RADVQA_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    # a missing snapshot is a failure, never silently recreated (it would pass whatever changed)
    assert GOLDEN.exists(), f"{GOLDEN} is missing; create it deliberately with RADVQA_UPDATE_GOLDEN=1"
    want = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a == b, f"rendered text changed for {b['template']}: {b} -> {a}"
