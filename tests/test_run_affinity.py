"""Worker pinning (run/affinity.py) and the pandas-free fork server (run/_warm.py): #19's scale-out
changes that must not change output."""

from __future__ import annotations

import importlib.util
import multiprocessing as mp
import os
import subprocess
import sys
from pathlib import Path

import pytest

from radvqa.run.affinity import ENV, pin_plan, pin_worker, spread_cpus


def _fake_sysfs(root: Path, siblings: dict[int, str]) -> Path:
    for cpu, lst in siblings.items():
        d = root / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / "thread_siblings_list").write_text(lst + "\n")
    return root


def test_spread_cpus_one_per_physical_core_first(tmp_path: Path) -> None:
    # 4 cores x 2 hyperthreads, numbered as Linux does on most Intel hosts (cpu i and i+4 share a core)
    sysfs = _fake_sysfs(tmp_path, {c: f"{c % 4},{c % 4 + 4}" for c in range(8)})
    assert spread_cpus(list(range(8)), sysfs) == [0, 1, 2, 3, 4, 5, 6, 7]
    # siblings numbered next to each other (cpu 2k and 2k+1 share a core)
    sysfs2 = _fake_sysfs(tmp_path / "b", {c: f"{c - c % 2}-{c - c % 2 + 1}" for c in range(8)})
    assert spread_cpus(list(range(8)), sysfs2) == [0, 2, 4, 6, 1, 3, 5, 7]
    # only some CPUs allowed; a CPU without topology is its own core
    assert spread_cpus([0, 1, 2, 9], sysfs2) == [0, 2, 9, 1]


def test_pin_plan_is_opt_in_and_never_oversubscribes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert pin_plan(1) is None
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no sched_setaffinity here")
    monkeypatch.setenv(ENV, "1")
    n = len(os.sched_getaffinity(0))
    plan = pin_plan(n)
    assert plan is not None and sorted(plan) == sorted(os.sched_getaffinity(0))
    assert pin_plan(n + 1) is None  # more workers than CPUs: pinning would stack workers


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no sched_setaffinity here")
def test_pin_worker_takes_one_cpu_from_the_queue() -> None:
    before = os.sched_getaffinity(0)
    cpu = max(before)
    q = mp.get_context("spawn").Queue()
    q.put(cpu)
    try:
        pin_worker(q)
        assert os.sched_getaffinity(0) == {cpu}
        pin_worker(q)  # queue empty now: stays as it is, no error
        assert os.sched_getaffinity(0) == {cpu}
    finally:
        os.sched_setaffinity(0, before)


@pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="pandas not installed")
def test_warm_fork_server_has_no_pandas_but_pandas_still_imports() -> None:
    code = (
        "import sys, io\n"
        "import radvqa.run._warm\n"
        "import pyarrow as pa, pyarrow.parquet as pq\n"
        "from radvqa.io.schema import codec\n"
        "assert 'pandas' not in sys.modules, 'warm-up imported pandas'\n"
        "pq.write_table(pa.table({'a': pa.array([1, 2])}), io.BytesIO())\n"
        "assert 'pandas' not in sys.modules, 'pa.array imported pandas after the warm-up'\n"
        "import pandas\n"
        "assert pa.table({'a': [1]}).to_pandas().shape == (1, 1)\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("RADVQA_WARM_OPTIONS", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
