"""Executors: the same shard tasks run in this process, in a process pool, or on Ray.

Output never depends on the executor: a shard's rows depend only on its studies and the options, and
shard files are named by shard index. Results come back in completion order; ``build`` orders them.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from radvqa.run.worker import run_shard

Callback = Callable[[dict[str, Any]], None]


def _fail(msg: str, done: int, total: int, tasks: list[dict[str, Any]] | None = None) -> Exception:
    from radvqa.run.builder import BuildError

    if tasks:
        # what is on disk, not what this process had collected: shards finished by workers after
        # the last result came back (an interrupt) are complete and kept too (#17: "0 of 64")
        from radvqa.run.worker import marker_path

        done = sum(1 for t in tasks if marker_path(Path(t["out"]), int(t["shard"])).exists())
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
        raise _fail("interrupted", len(results), len(tasks), tasks) from None
    except OSError as exc:
        raise _fail(str(exc), len(results), len(tasks)) from exc
    return results


def _pool_context(options: dict[str, Any]) -> Any:
    """Workers start clean (no inherited threads or locks from the progress display): forked from a
    fork server that is itself a fresh interpreter. The fork server preloads ``radvqa.run._warm``,
    which builds this build's pipeline once, so workers do not each import pyarrow and compile the
    rules extractor. Where fork servers do not exist (Windows), plain spawn."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    import json

    # read by the fork server when it starts (the first pool of this process); a later build with
    # other options simply builds its pipeline in the workers (make_pipeline keys by options)
    os.environ["RADVQA_WARM_OPTIONS"] = json.dumps(options, sort_keys=True, default=str)
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["radvqa.run._warm"])
    return ctx


def run_pool(tasks: list[dict[str, Any]], workers: int, on_done: Callback) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    ctx = _pool_context(tasks[0]["options"] if tasks else {})
    pool = ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=ctx)
    env = dict(os.environ)
    futures = {pool.submit(_pool_shard, t, env): t["shard"] for t in tasks}
    pending = set(futures)
    try:
        while pending:
            # each shard as it completes, so progress advances (FIRST_EXCEPTION waited for all of them)
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
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
        # shards already running finish and are kept: count them once the pool has stopped
        pool.shutdown(wait=True, cancel_futures=True)
        raise _fail("interrupted", len(results), len(tasks), tasks) from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _stop_forkserver(ctx)
    return results


def _pool_shard(task: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    """run_shard with the parent's environment as it is now (as a spawned worker would have it):
    a fork server keeps the environment of the moment it started."""
    if os.environ != env:
        os.environ.clear()
        os.environ.update(env)
    return run_shard(task)


def _stop_forkserver(ctx: Any) -> None:
    """The fork server holds a warm pipeline (~200 MB); stop it so the next build in this process
    starts a fresh one with its own options. Private API, hence the guard: if it is missing, the
    server just stays (correct, only not freed)."""
    if ctx.get_start_method() != "forkserver":
        return
    try:
        from multiprocessing import forkserver

        forkserver._forkserver._stop()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001
        pass


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
