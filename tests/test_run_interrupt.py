"""`radvqa build` interrupted for real (Ctrl-C to the process group, or SIGKILL of every process),
then `--resume`: ends byte-identical to an uninterrupted run. Runs the CLI as a subprocess with the
minimal stage chain so it tests the runner, not the generators."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from radvqa.io.parquet import shard_files

ARGS = ["synthetic", "--studies", "6000", "--shard-studies", "100", "--workers", "2", "--quiet",
        "--pipeline", "radvqa.run.minimal:MinimalPipeline", "--seed", "5"]
RADVQA = [sys.executable, "-m", "radvqa"]


def _files(out: Path) -> dict[str, bytes]:
    return {f"{k}/{p.name}": p.read_bytes() for k in ("qa", "scene_graphs") for p in shard_files(out, k)}


def _markers(out: Path) -> int:
    d = out / ".radvqa" / "shards"
    return len(list(d.glob("*.done.json"))) if d.exists() else 0


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ref") / "out"
    r = subprocess.run([*RADVQA, "build", *ARGS, "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_interrupt_then_resume_is_identical(reference: Path, tmp_path: Path, sig: int) -> None:
    out = tmp_path / "out"
    # 3 ms per study: 6,000 studies on 2 workers take >= 9 s, so the build is still running when
    # interrupted after its third shard, however fast the machine (the env var is not an option:
    # the resumed run's fingerprint matches)
    env = {**os.environ, "RADVQA_MINIMAL_DELAY_S": "0.003"}
    p = subprocess.Popen([*RADVQA, "build", *ARGS, "--out", str(out)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True, env=env)
    deadline = time.time() + 120
    while _markers(out) < 3 and p.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert p.poll() is None, "the build ended before it could be interrupted"
    os.killpg(p.pid, sig)  # every process of the build: driver and workers
    _, err = p.communicate(timeout=120)
    assert p.returncode != 0
    if sig == signal.SIGINT:
        assert "interrupted" in err and "--resume" in err
    assert not (out / "manifest.json").exists()
    n_done = _markers(out)
    assert 0 < n_done < 64
    r = subprocess.run([*RADVQA, "build", *ARGS, "--out", str(out), "--resume"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "already complete" in r.stderr
    assert _files(out) == _files(reference)
    assert (out / "rejected.jsonl").read_bytes() == (reference / "rejected.jsonl").read_bytes()
    leftovers = [q for k in ("qa", "scene_graphs") for q in (out / k).glob(".*.tmp")]
    assert leftovers == []
