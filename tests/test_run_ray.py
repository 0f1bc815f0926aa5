"""--executor ray gives the same files as the local executor (skipped when the ray extra is absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from radvqa.run.builder import build

from test_run_build import files_bytes, opts, records  # noqa: E402  (tests/ is on sys.path under pytest)

ray = pytest.importorskip("ray")


def test_ray_output_identical_to_local(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)  # start a local Ray instance
    recs = records(200)
    build(opts(tmp_path / "local", workers=1), records=recs)
    m = build(opts(tmp_path / "ray", workers=2, executor="ray"), records=recs)
    assert m["options"]["executor"] == "ray"
    assert files_bytes(tmp_path / "ray") == files_bytes(tmp_path / "local")
    assert (tmp_path / "ray" / "rejected.jsonl").read_bytes() == (tmp_path / "local" / "rejected.jsonl").read_bytes()
    assert not ray.is_initialized()  # the local instance it started is shut down
