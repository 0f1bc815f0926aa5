"""Worker pinning (run/affinity.py), the pandas-free fork server (run/_warm.py) and the shard's
lazily decoded studies (run/shards.ShardStudies): #19's scale-out changes that must not change output."""

from __future__ import annotations

import importlib.util
import multiprocessing as mp
import os
import subprocess
import sys
from pathlib import Path

import pytest

from radvqa.model import Study
from radvqa.run.affinity import ENV, pin_plan, pin_worker, spread_cpus
from radvqa.run.shards import ShardStudies, SpillWriter, load_shard_studies, part_dir, read_bucket, study_sort_key


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


def test_shard_studies_order_equals_decoded_sort(tmp_path: Path) -> None:
    """Equal sort keys keep source order across parts (the first of duplicate ids first), unknown
    times sort after known ones, and iterating decodes the same studies as reading them whole."""
    def st(i: int, patient: str, time: str | None, sid: str | None = None) -> Study:
        return Study(id=sid or f"s:{i}", patient_id=patient, source="s", report_text=f"text {i}", study_time=time)

    recs = [st(0, "p1", "2020-02"), st(1, "p1", None), st(2, "p1", "2020-01"), st(3, "p2", "2020-01", "s:dup"),
            st(4, "p2", "2020-01", "s:dup"), st(5, "p0", None), st(6, "p2", "2020-01", "s:dup")]
    for part, chunk in enumerate((recs[:4], recs[4:])):
        w = SpillWriter(part_dir(tmp_path, part), block=64)
        for r in chunk:
            w.add(r)
        w.close()
    got: list[Study] = []
    for shard in range(2):
        lazy = ShardStudies(tmp_path, shard, 2, n_parts=2)
        whole = [s for b in range(256) if b % 2 == shard for p in range(2)
                 if (part_dir(tmp_path, p) / f"b{b:03d}.bin").exists()
                 for s in read_bucket(part_dir(tmp_path, p) / f"b{b:03d}.bin")]
        whole.sort(key=study_sort_key)
        assert len(lazy) == len(whole) and list(lazy) == whole == load_shard_studies(tmp_path, shard, 2, n_parts=2)
        got.extend(whole)
    dups = [s.report_text for s in sorted(got, key=study_sort_key) if s.id == "s:dup"]
    assert dups == ["text 3", "text 4", "text 6"]


def test_shard_studies_truncated_spill_is_an_error(tmp_path: Path) -> None:
    w = SpillWriter(part_dir(tmp_path, 0))
    w.add(Study(id="s:1", patient_id="p", source="s"))
    w.close()
    f = next(part_dir(tmp_path, 0).glob("b*.bin"))
    f.write_bytes(f.read_bytes()[:-3])
    with pytest.raises(ValueError, match="truncated spill record"):
        ShardStudies(tmp_path, 0, 1)
