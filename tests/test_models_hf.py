"""The hf adapter end to end with a tiny randomly initialised LLaVA-style model built offline in the
test (no download), on the 20-row fixture dataset; predictions feed radvqa eval."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # belt and braces: these tests never reach a hub

torch = pytest.importorskip("torch", reason="hf tests need torch: pip install torch==2.13.0 '.[hf]'")
pytest.importorskip("transformers", reason="hf tests need transformers: pip install '.[hf]'")

from radvqa.models.base import AdapterError  # noqa: E402
from radvqa.models.predict import PredictOptions, Predictor  # noqa: E402
from radvqa.models.registry import get_adapter  # noqa: E402

DATA = Path(__file__).parent / "data" / "models" / "vqa20"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    from radvqa.models.tiny import build_tiny_llava

    return build_tiny_llava(tmp_path_factory.mktemp("tiny") / "llava")


def lines(p: Path) -> list[dict]:
    return [json.loads(x) for x in p.read_text().splitlines()]


def test_tiny_model_end_to_end_batched(tiny, tmp_path):
    adapter = get_adapter(f"hf:{tiny}", device="cpu", dtype="float32", max_tokens=3)
    assert adapter.model_type == "llava" and adapter.box_convention == "norm1"
    calls: list[int] = []
    real = adapter.generate
    adapter.generate = lambda reqs: (calls.append(len(reqs)), real(reqs))[1]  # type: ignore[method-assign]
    out = tmp_path / "p.jsonl"
    s = Predictor(adapter, PredictOptions(batch_size=4, progress=False)).run(DATA, out)
    assert s.written == 20 and s.errors == 1 and s.requests == 19
    assert calls == [4, 4, 4, 4, 3]  # batched: 19 answerable rows in batches of 4
    got = lines(out)
    import pyarrow.parquet as pq

    assert [g["qa_id"] for g in got] == pq.read_table(DATA / "qa").column("qa_id").to_pylist()
    ok = [g for g in got if not g.get("error")]
    assert len(ok) == 19 and all(isinstance(g["prediction"], str) for g in ok)
    meta = json.loads((tmp_path / "p.jsonl.meta.json").read_text())
    assert meta["model"] == f"hf:{tiny}" and meta["params"]["dtype"] == "float32"
    assert meta["run_params"]["device"] == "cpu" and meta["box_convention"] == "norm1"
    # greedy decoding is deterministic: a second run (no cache) gives the same text
    out2 = tmp_path / "q.jsonl"
    Predictor(get_adapter(f"hf:{tiny}", device="cpu", dtype="float32", max_tokens=3),
              PredictOptions(batch_size=3, progress=False)).run(DATA, out2)
    assert [g["prediction"] for g in lines(out2)] == [g["prediction"] for g in got]


def test_batch_failure_isolated_to_its_row(tiny, tmp_path):
    adapter = get_adapter(f"hf:{tiny}", device="cpu", max_tokens=2)
    real = adapter._batch

    def flaky(reqs):
        if any("mediastinum" in r.prompt for r in reqs):
            raise RuntimeError("boom")
        return real(reqs)

    adapter._batch = flaky  # type: ignore[method-assign]
    out = tmp_path / "p.jsonl"
    Predictor(adapter, PredictOptions(batch_size=8, limit=8, progress=False)).run(DATA, out)
    got = lines(out)
    bad = [g for g in got if g.get("error")]
    assert len(got) == 8 and len(bad) == 2 and all("boom" in g["error"] for g in bad)


def test_predictions_feed_eval(tiny, tmp_path):
    out = tmp_path / "p.jsonl"
    from typer.testing import CliRunner

    from radvqa.cli import app

    r = CliRunner().invoke(app, ["predict", str(DATA), "--model", f"hf:{tiny}", "--out", str(out),
                                 "--device", "cpu", "--dtype", "float32", "--batch-size", "8",
                                 "--max-tokens", "4", "--no-cache", "--no-progress"])
    assert r.exit_code == 0, r.output
    from radvqa.eval.predictions import join, load_predictions

    preds = load_predictions(out)
    import pyarrow.parquet as pq

    ids = pq.read_table(DATA / "qa").column("qa_id").to_pylist()
    joined = join(ids, preds)
    assert joined.matched == 20 and not joined.extra_ids
    if any(c.name == "eval" for c in app.registered_commands):
        rep = tmp_path / "report"
        r = CliRunner().invoke(app, ["eval", str(DATA), "--predictions", str(out), "--out", str(rep)])
        assert r.exit_code == 0, r.output
        assert any(rep.iterdir())


def test_bad_hf_specs():
    with pytest.raises(AdapterError, match="no model directory"):
        get_adapter("hf:./no/such/dir")
    with pytest.raises(AdapterError, match="--dtype"):
        get_adapter(f"hf:{DATA}", dtype="int3")


def test_gemma3_style_model(tmp_path):
    from radvqa.models.tiny import build_tiny_gemma3

    path = build_tiny_gemma3(tmp_path / "gemma3")
    adapter = get_adapter(f"hf:{path}", device="cpu", max_tokens=3)
    assert adapter.model_type == "gemma3"
    out = tmp_path / "p.jsonl"
    s = Predictor(adapter, PredictOptions(batch_size=4, limit=6, progress=False)).run(DATA, out)
    assert s.written == 6 and s.errors == 0
    assert all(isinstance(g["prediction"], str) for g in lines(out))


def test_qwen2vl_reports_the_size_it_saw(tmp_path):
    pytest.importorskip("torchvision", reason="transformers builds Qwen2-VL processors only with torchvision")
    from radvqa.models.base import Request
    from radvqa.models.images import load_image
    from radvqa.models.tiny import build_tiny_qwen2vl

    path = build_tiny_qwen2vl(tmp_path / "qwen")
    adapter = get_adapter(f"hf:{path}", device="cpu", max_tokens=3)
    assert adapter.box_convention == "norm1000"
    img = load_image(DATA / "images" / "nih" / "00014716_007.jpg")
    r = adapter.generate([Request(qa_id="x", prompt="Where?", images=(img,))])[0]
    assert r.error is None and r.seen_sizes == [(112, 112)]  # processor max_pixels 112x112
