"""#17: reasoning states only what the data holds. NIH's labels are text-mined (never "expert
readers"); a finding without a box never "has its box" somewhere; a box says who drew it."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from radvqa.run.builder import BuildOptions, build
from radvqa.sources import sample_inputs


@pytest.fixture(scope="module")
def nih(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("n") / "o"
    from radvqa.generate.engine import GenerateOptions

    build(BuildOptions(source="nih-cxr14", inputs=[str(sample_inputs()[1])], generate=GenerateOptions(strategies=("vindr",)),
                       out=str(out)))
    return pq.read_table(out / "qa", columns=["study_id", "reasoning", "boxes", "findings", "answer_parts"]).to_pylist()


def test_nih_reasoning_names_the_text_mined_labeller_not_expert_readers(nih: list[dict]) -> None:
    texts = [r["reasoning"] for r in nih if r["reasoning"]]
    assert len(texts) > 100
    assert not [t for t in texts if "expert reader" in t]
    assert any("text mining of the report" in t for t in texts)


def test_a_box_is_mentioned_only_where_one_exists(nih: list[dict]) -> None:
    boxed_claims = ("its box lies", "A box drawn by")
    for r in nih:
        t = r["reasoning"] or ""
        has_box = bool(r["boxes"]) or any(p["boxes"] for p in r["answer_parts"] or [])
        if any(c in t for c in boxed_claims):
            assert has_box, (r["study_id"], t)
    unboxed = [r for r in nih if "no box marks where it lies" in (r["reasoning"] or "")]
    assert unboxed  # positive labels without a box say so (a "what" row may mix boxed and unboxed findings)
    drawn = [r["reasoning"] for r in nih if r["boxes"]]
    assert drawn and all("a radiologist (NIH's box list)" in t for t in drawn if "box" in t)
