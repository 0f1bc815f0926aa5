"""Executors: the same tasks (``run/tasks.py``: parts of the sources to read, shards to build) run in
this process, in a process pool, or on Ray, behind one protocol:

    class Executor(Protocol):
        def run(self, tasks, on_done) -> list[Result]   # results in completion order
        def close(self) -> None

``EXECUTORS`` maps a name to its class; a new executor is one class and one line there. An executor
is made once per build and serves both phases (read, then shards); the process executor reads with
light spawned processes while its shard pool's fork server warms up.

Output never depends on the executor: a task's output depends only on its own data, files are
named by part or shard index, and ``build`` orders the results.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Protocol

from radvqa.run.errors import BuildError
from radvqa.run.tasks import ReadTask, Result, ShardTask, Task

OnDone = Callable[[Any], None]


class TaskFailed(BuildError):
    """A task failed; ``done`` tasks of this run had finished (their outputs are kept)."""

    def __init__(self, msg: str, done: int, total: int) -> None:
        super().__init__(msg)
        self.done = done
        self.total = total


def execute(task: Task, on_studies: Callable[[int, int], None] | None = None) -> Result:
    """Run one task in this process (what every executor calls in its workers)."""
    if isinstance(task, ShardTask):
        from radvqa.run.worker import run_shard

        return run_shard(task, on_studies)
    if isinstance(task, ReadTask):
        from radvqa.run.reader import run_read

        return run_read(task)
    raise TypeError(f"not a task: {type(task).__name__}")


def _label(task: Task) -> str:
    return f"shard {task.shard}" if isinstance(task, ShardTask) else f"source part {task.part}"


class Executor(Protocol):
    def run(self, tasks: Sequence[Task], on_done: OnDone) -> list[Any]: ...

    def close(self) -> None: ...


class LocalExecutor:
    """Tasks one after the other in this process (``--workers 1``)."""

    def __init__(self, workers: int = 1, on_studies: Callable[[int, int], None] | None = None) -> None:
        self.on_studies = on_studies

    def run(self, tasks: Sequence[Task], on_done: OnDone) -> list[Any]:
        results: list[Any] = []
        for t in tasks:
            try:
                st = execute(t, self.on_studies)
            except KeyboardInterrupt:
                raise TaskFailed("interrupted", len(results), len(tasks)) from None
            except BuildError:
                raise
            except OSError as exc:
                raise TaskFailed(str(exc), len(results), len(tasks)) from exc
            results.append(st)
            on_done(st)
        return results

    def close(self) -> None:
        pass


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


class ProcessExecutor:
    """A process pool of ``workers`` processes on this machine for the shards, forked from a fork
    server that holds the warm pipeline (started by ``start`` or on first use, kept until
    ``close``), and a light pool for the read phase.

    Readers need no pipeline: they get their own processes, started with ``spawn`` (a fresh
    interpreter that imports only the reader and the source, ~0.2 s), while the fork server builds
    the warm pipeline (~1 s) beside them for the shard phase. Before, the readers were the
    shard workers and waited for that warm-up: on the 16-core device the read phase of a 16-worker
    build began ~1 s late (docs/scale-out.md, session 9)."""

    def __init__(self, workers: int, options: dict[str, Any] | None = None) -> None:
        self.workers = max(1, workers)
        self.options = options or {}
        self._pool: ProcessPoolExecutor | None = None
        self._ctx: Any = None
        self._readers: ProcessPoolExecutor | None = None

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._ctx = _pool_context(self.options)
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=self._ctx)
        return self._pool

    def start(self, read: bool = False) -> None:
        """Start the fork server now, without waiting for it: it builds the warm pipeline
        (``run._warm``) while this process plans and reads the sources, instead of after. With
        ``read`` (a source the workers read in parts) the readers are started too, so that they
        boot while this process plans the parts."""
        self._get_pool()
        # the fork server first: its warm-up is the longer one
        if self._ctx is not None and self._ctx.get_start_method() == "forkserver":
            try:
                from multiprocessing import forkserver

                forkserver.ensure_running()  # returns once the server process is launched
            except Exception:  # noqa: BLE001 - the first shard task starts it in any case
                pass
        if read and self._readers is None:
            self._readers = _reader_pool(self.workers)
            for _ in range(self.workers):
                self._readers.submit(_reader_ready)  # each submit starts one process while none is idle

    def run(self, tasks: Sequence[Task], on_done: OnDone) -> list[Any]:
        if not tasks:
            return []
        if all(isinstance(t, ReadTask) for t in tasks):
            readers, self._readers = self._readers, None
            if readers is None:
                readers = _reader_pool(min(self.workers, len(tasks)))
            try:
                return _run_in(readers, tasks, on_done)
            finally:
                readers.shutdown(wait=True, cancel_futures=True)
        try:
            return _run_in(self._get_pool(), tasks, on_done)
        except BaseException:
            self._shutdown(wait_=True)
            raise

    def _shutdown(self, wait_: bool) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=wait_, cancel_futures=True)
            self._pool = None
            _stop_forkserver(self._ctx)

    def close(self) -> None:
        if self._readers is not None:  # started, never used (the build failed before reading)
            self._readers.shutdown(wait=True, cancel_futures=True)
            self._readers = None
        self._shutdown(wait_=True)


def _reader_pool(workers: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))


def _reader_ready() -> None:
    """A reader's first job: import the reader and load the ontology (what every part needs)."""
    from radvqa.run.reader import build_ontology

    build_ontology()


def _run_in(pool: ProcessPoolExecutor, tasks: Sequence[Task], on_done: OnDone) -> list[Any]:
    """Every task on ``pool``; ``on_done`` for each as it completes; the first failure cancels the
    tasks not started and raises TaskFailed (tasks already running finish: #17)."""
    results: list[Any] = []
    env = dict(os.environ)
    futures = {pool.submit(_pool_task, t, env): t for t in tasks}
    pending = set(futures)
    try:
        while pending:
            # each task as it completes, so progress advances (FIRST_EXCEPTION waited for all of them)
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                exc = f.exception()
                if exc is not None:
                    for p in pending:
                        p.cancel()
                    what = _label(futures[f])
                    if isinstance(exc, BrokenProcessPool):
                        raise TaskFailed(f"a worker process died while building {what} (killed, or out of memory)",
                                         len(results), len(tasks)) from exc
                    if isinstance(exc, BuildError):
                        raise TaskFailed(str(exc), len(results), len(tasks)) from exc
                    raise TaskFailed(f"{what} failed: {exc}", len(results), len(tasks)) from exc
                st = f.result()
                results.append(st)
                on_done(st)
    except KeyboardInterrupt:
        for p in pending:
            p.cancel()
        # tasks already running finish and are kept (#17): the caller counts them on disk
        pool.shutdown(wait=True, cancel_futures=True)
        raise TaskFailed("interrupted", len(results), len(tasks)) from None
    return results


def _pool_task(task: Task, env: dict[str, str]) -> Result:
    """execute() with the parent's environment as it is now (as a spawned worker would have it):
    a fork server keeps the environment of the moment it started."""
    if os.environ != env:
        os.environ.clear()
        os.environ.update(env)
    return execute(task)


def _stop_forkserver(ctx: Any) -> None:
    """The fork server holds a warm pipeline (~200 MB); stop it so the next build in this process
    starts a fresh one with its own options. Private API, hence the guard: if it is missing, the
    server just stays (correct, only not freed)."""
    if ctx is None or ctx.get_start_method() != "forkserver":
        return
    try:
        from multiprocessing import forkserver

        forkserver._forkserver._stop()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001
        pass


class RayExecutor:
    """Tasks on Ray: joins the cluster named by ``RAY_ADDRESS`` (or already initialised), else starts
    a local one with ``workers`` CPUs. Every path in a task (inputs, spill, output folder) must be on
    storage that all nodes see at the same path (docs/scale-out.md)."""

    def __init__(self, workers: int, options: dict[str, Any] | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise BuildError("--executor ray needs the ray extra: pip install 'radvqa[ray]'") from None
        self.ray = ray
        self.started = False
        if not ray.is_initialized():
            address = os.environ.get("RAY_ADDRESS")
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)
                self.started = True
        self.remote = ray.remote(num_cpus=1, max_retries=0)(_ray_execute)
        self.nodes: set[str] = set()  # Ray node ids that ran a task (a two-node test checks both did)

    def run(self, tasks: Sequence[Task], on_done: OnDone) -> list[Any]:
        ray = self.ray
        refs = {self.remote.remote(t): t for t in tasks}
        results: list[Any] = []
        pending = list(refs)
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                for r in ready:
                    try:
                        st, node = ray.get(r)
                    except Exception as exc:  # noqa: BLE001 - ray wraps worker errors in its own types
                        for p in pending:
                            ray.cancel(p, force=True)
                        cause = getattr(exc, "cause", None)
                        msg = str(cause) if isinstance(cause, BuildError) else f"{_label(refs[r])} failed on Ray: {exc}"
                        raise TaskFailed(msg, len(results), len(tasks)) from exc
                    self.nodes.add(node)
                    results.append(st)
                    on_done(st)
        except KeyboardInterrupt:
            for p in pending:
                ray.cancel(p, force=True)
            raise TaskFailed("interrupted", len(results), len(tasks)) from None
        return results

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()
            self.started = False


def _ray_execute(task: Task) -> tuple[Result, str]:
    import ray

    return execute(task), ray.get_runtime_context().get_node_id()


EXECUTORS: dict[str, Callable[..., Executor]] = {
    "local": LocalExecutor,
    "process": ProcessExecutor,
    "ray": RayExecutor,
}


def make_executor(name: str, workers: int, options: dict[str, Any] | None = None,
                  on_studies: Callable[[int, int], None] | None = None) -> Executor:
    """``local`` with more than one worker is the process pool (what ``--executor local -w N`` means)."""
    if name == "local" and workers > 1:
        name = "process"
    try:
        cls = EXECUTORS[name]
    except KeyError:
        raise BuildError(f"unknown executor {name!r} ({', '.join(EXECUTORS)})") from None
    if cls is LocalExecutor:
        return LocalExecutor(workers, on_studies)
    return cls(workers, options)
