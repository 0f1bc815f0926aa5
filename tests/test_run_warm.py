"""The pandas-free fork server (run/_warm.py): #19's scale-out change that must not change output."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest


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


def test_warm_fork_server_uses_the_system_allocator_unless_told() -> None:
    """Workers forked from the warm server allocate Arrow buffers with malloc (returned to the OS
    between row groups), unless the user picked a pool (ARROW_DEFAULT_MEMORY_POOL)."""
    code = (
        "import io\n"
        "import radvqa.run._warm\n"
        "import pyarrow as pa, pyarrow.parquet as pq\n"
        "pq.write_table(pa.table({'a': pa.array(list(range(1000)))}), io.BytesIO())\n"
        "print(pa.default_memory_pool().backend_name)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("RADVQA_WARM_OPTIONS", None)
    env.pop("ARROW_DEFAULT_MEMORY_POOL", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "system", r.stderr
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**env, "ARROW_DEFAULT_MEMORY_POOL": "jemalloc"})
    assert r.returncode == 0 and r.stdout.strip() == "jemalloc", r.stderr
