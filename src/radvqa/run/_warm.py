"""Imported once in the process-pool's fork server (``executors.run_pool``): builds the stage
pipeline for this build's options there, so every worker forked from it starts with the heavy
modules imported and the rules extractor compiled, instead of each worker redoing ~1.5 CPU-s.

The options come in ``RADVQA_WARM_OPTIONS`` (JSON, set by the parent before the fork server
starts). Anything going wrong here only means no warm-up: each worker then builds its pipeline
itself (``make_pipeline`` caches by the full options, so a stale warm pipeline is never used).
"""

from __future__ import annotations

import gc
import json
import os

# Arrow buffers of every forked worker from the C library's malloc, not pyarrow's bundled mimalloc:
# mimalloc keeps the pages that a shard's row groups freed resident (its 1 GiB reserved region held
# ~25 MB dirty per worker after a shard), glibc gives them back. Measured on the dev VM (a worker
# forked from this server, 3 synthetic shards of ~1,300 studies): peak RSS 126-132 -> 107 MB, CPU
# the same or lower (write stage 3.2-4.3 -> 2.9-3.3 CPU-s); on the 16-vCPU device a worker of a
# 200k-study build went 151-155 -> 116-117 MB RSS (docs/scale-out.md, session 7). The bytes
# written do not depend on the allocator. Arrow reads the variable once, when its C++ default pool is first asked for, so
# it is set here, before anything imports pyarrow (``pa.set_memory_pool`` would reach only
# pyarrow's Python-level calls, not the Parquet writer). A pool the user chose is left alone.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")


class _NoPandas:
    """A meta-path finder that makes ``import pandas`` fail while it is installed."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("pandas is not loaded in build workers", name=name)
        return None


def _first_calls() -> None:
    """Modules that a shard would otherwise import on first use, once per worker (the Parquet
    writer's compute kernels); imported here they are shared by every forked worker. Nothing
    stateful of the pipeline is run (a study processed here could change generator state that the
    workers inherit).

    pyarrow's first ``pa.array`` asks whether pandas is installed, by importing it (~35 MB in each
    process, which every forked worker then counts in its RSS: 16 workers x 35 MB = 0.56 GB of the
    build's RSS sum). A build converts Python lists, never pandas objects, so that first call runs
    with pandas hidden: pyarrow notes "no pandas" once and for all. The finder is removed at once, so
    code that imports pandas itself still can (and ``Table.to_pandas`` still works)."""
    import io
    import sys

    import pyarrow as pa
    import pyarrow.compute  # noqa: F401
    import pyarrow.parquet as pq

    from radvqa.io.schema import codec

    hide = "pandas" not in sys.modules
    finder = _NoPandas()
    if hide:
        sys.meta_path.insert(0, finder)
    try:
        pa.array([0])  # consults pandas (an empty array of a given type does not)
        for kind in ("qa", "scene_graphs"):
            c = codec(kind)
            pq.write_table(pa.Table.from_arrays([pa.array([], type=f.type) for f in c.schema], schema=c.schema),
                           io.BytesIO())
    finally:
        if hide:
            sys.meta_path.remove(finder)


def _trim() -> None:
    """Give the C heap's free pages back before the workers fork: every resident page of this
    server is mapped into each worker and counted in its RSS (dev VM: -3 MB here, so -3 MB in
    each worker). glibc only; elsewhere nothing happens."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _warm() -> None:
    raw = os.environ.get("RADVQA_WARM_OPTIONS")
    try:
        from radvqa.io.schema import codec
        from radvqa.run import worker  # noqa: F401 - imports pyarrow.parquet, the IR, the writer
        from radvqa.run.pipeline import make_pipeline

        codec("qa")
        codec("scene_graphs")
        _first_calls()
        if raw:
            make_pipeline(json.loads(raw))
        # what is built so far lives as long as the workers: keep it out of every collection, and
        # keep the collector from touching (and so copying) the forked pages
        gc.collect()
        gc.freeze()
        _trim()
    except Exception:  # noqa: BLE001 - the fork server must survive any failure here
        pass


_warm()
