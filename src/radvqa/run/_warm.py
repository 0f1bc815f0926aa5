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


def _warm() -> None:
    raw = os.environ.get("RADVQA_WARM_OPTIONS")
    try:
        from radvqa.io.schema import codec
        from radvqa.run import worker  # noqa: F401 - imports pyarrow.parquet, the IR, the writer
        from radvqa.run.pipeline import make_pipeline

        codec("qa")
        codec("scene_graphs")
        if raw:
            make_pipeline(json.loads(raw))
        # what is built so far lives as long as the workers: keep it out of every collection, and
        # keep the collector from touching (and so copying) the forked pages
        gc.collect()
        gc.freeze()
    except Exception:  # noqa: BLE001 - the fork server must survive any failure here
        pass


_warm()
