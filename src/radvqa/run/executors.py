"""Executors: the same shard tasks run in this process, in a process pool, or on Ray.

Output never depends on the executor: a shard's rows depend only on its studies and the options, and
shard files are named by shard index. Results come back in completion order; ``build`` orders them.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from radvqa.run.worker import run_shard

Callback = Callable[[dict[str, Any]], None]


def _fail(msg: str, done: int, total: int) -> Exception:
    from radvqa.run.builder import BuildError

    return BuildError(f"{msg}; {done} of {total} shards are complete and kept: rerun the same command with --resume to finish")


def run_local(tasks: list[dict[str, Any]], on_done: Callback,
              on_studies: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    results = []
    try:
        for t in tasks:
            st = run_shard(t, on_studies)
            results.append(st)
            on_done(st)
    except KeyboardInterrupt:
        raise _fail("interrupted", len(results), len(tasks)) from None
    except OSError as exc:
        raise _fail(str(exc), len(results), len(tasks)) from exc
    return results


def run_pool(tasks: list[dict[str, Any]], workers: int, on_done: Callback) -> list[dict[str, Any]]:
    # spawn: workers start clean (no inherited threads or locks from the progress display).
    ctx = mp.get_context("spawn")
    results: list[dict[str, Any]] = []
    pool = ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=ctx)
    futures = {pool.submit(run_shard, t): t["shard"] for t in tasks}
    pending = set(futures)
    try:
        while pending:
            done, pending = wait(pending, return_when=FIRST_EXCEPTION)
            for f in done:
                exc = f.exception()
                if exc is not None:
                    for p in pending:
                        p.cancel()
                    if isinstance(exc, BrokenProcessPool):
                        raise _fail(f"a worker process died while building shard {futures[f]} (killed, or out of memory)",
                                    len(results), len(tasks)) from exc
                    raise _fail(f"shard {futures[f]} failed: {exc}", len(results), len(tasks)) from exc
                st = f.result()
                results.append(st)
                on_done(st)
    except KeyboardInterrupt:
        for p in pending:
            p.cancel()
        pool.shutdown(wait=False, cancel_futures=True)
        raise _fail("interrupted", len(results), len(tasks)) from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return results


def run_ray(tasks: list[dict[str, Any]], workers: int, on_done: Callback) -> list[dict[str, Any]]:
    """Joins the cluster named by RAY_ADDRESS, else starts a local one with ``workers`` CPUs.
    The output folder must be on storage every Ray node can write (shared file system)."""
    try:
        import ray
    except ImportError:
        from radvqa.run.builder import BuildError

        raise BuildError("--executor ray needs the ray extra: pip install 'radvqa[ray]'") from None
    started = False
    if not ray.is_initialized():
        address = os.environ.get("RAY_ADDRESS")
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)
        started = True
    remote = ray.remote(num_cpus=1, max_retries=0)(run_shard)
    refs = {remote.remote(t): t["shard"] for t in tasks}
    results: list[dict[str, Any]] = []
    pending = list(refs)
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for r in ready:
                try:
                    st = ray.get(r)
                except Exception as exc:  # noqa: BLE001 - ray wraps worker errors in its own types
                    for p in pending:
                        ray.cancel(p, force=True)
                    raise _fail(f"shard {refs[r]} failed on Ray: {exc}", len(results), len(tasks)) from exc
                results.append(st)
                on_done(st)
    finally:
        if started and not os.environ.get("RAY_ADDRESS"):
            ray.shutdown()
    return results
