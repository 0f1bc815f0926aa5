"""``build(...)``: sources -> spill by patient -> shards (extract, localize, generate, write) ->
manifest, rejected.jsonl, dataset card. The same function backs ``radvqa build``.

Phases, each restartable, both run by one executor (``run/executors.py``: this process, a process
pool or Ray):
1. *read*: the workers read the sources, each one part (``run/reader.py``: a source that can be split
   plans consecutive parts; others are one part), and route studies to that part's bucket files by
   patient hash (``run/shards.py``); source rejects go to ``.radvqa/source.rejected.jsonl`` in part
   order; ``.radvqa/spill.done.json`` marks it done. Records given to ``build(records=...)`` are
   spilled by this process (one part).
2. *shards*: each shard is processed by ``run/worker.run_shard``; each finished shard leaves a
   completion marker with its statistics, then deletes its own spill files (unless kept).
3. *finish*: rejects concatenated in a fixed order, manifest from the markers, dataset card; what is
   left of the spill (folders, the parts' reject files) is deleted.

``--resume`` skips phase 1 when its marker exists and every shard whose marker is valid; it refuses
to resume a run made with other options (the fingerprint in ``.radvqa/run.json``).
"""

from __future__ import annotations

import gc
import json
import os
import re
import shutil
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from radvqa import __version__
from radvqa.generate.engine import KNOWN_STRATEGIES, GenerateOptions
from radvqa.io.atomic import atomic_path
from radvqa.io.manifest import REJECTED, build_counts, merge_shard_stats, write_manifest
from radvqa.io.parquet import shard_files
from radvqa.io.schema import SCHEMA_VERSION
from radvqa.model import Reject, Study
from radvqa.run.errors import BuildError
from radvqa.run.executors import Executor, LocalExecutor, TaskFailed, make_executor
from radvqa.run.imagepaths import PathRelativizer, image_roots_for
from radvqa.run.reader import build_ontology, configure, make_source, plan_parts, rejects_file, spill_part
from radvqa.run.shards import DEFAULT_SHARD_STUDIES, N_BUCKETS, plan_shards
from radvqa.run.tasks import ReadStats, ReadTask, ShardStats, ShardTask
from radvqa.run.worker import (
    GC_THRESHOLD,
    clear_shard, marker_path, rejects_path, shard_is_complete, state_dir, write_text_atomic,
)

ALL_STRATEGIES = KNOWN_STRATEGIES  # the one list lives in radvqa.generate (default set + optional ones)

__all__ = ["ALL_STRATEGIES", "BuildError", "BuildOptions", "Progress", "build", "resume_state"]


@dataclass
class BuildOptions:
    source: str = "sample"
    inputs: list[str] = field(default_factory=list)
    out: str = "radvqa-out"
    # every generation option (strategies, seed, caps, grades, templates, priors, ...), one struct
    generate: GenerateOptions = field(default_factory=GenerateOptions)
    workers: int = 1
    executor: str = "local"
    limit: int | None = None
    resume: bool = False
    studies: int | None = None  # synthetic source: number of studies
    source_options: dict[str, Any] = field(default_factory=dict)  # the source's typed options (reflacx: present_from, ...)
    extractor: str = "rules"
    extractor_options: dict[str, Any] = field(default_factory=dict)
    shard_studies: int = DEFAULT_SHARD_STUDIES
    qa_row_group_rows: int | None = None
    sg_row_group_rows: int | None = None
    pipeline: str | None = None  # "module:factory" replacing the real stage chain (tests, benchmarks)
    pipeline_options: dict[str, Any] = field(default_factory=dict)  # extra options for that factory
    keep_spill: bool = False
    strict: bool = False  # the first reject is an error (source rejects stop the read at once)
    overwrite: bool = False  # replace an existing radvqa dataset in ``out`` (refused otherwise)
    allow_empty: bool = False  # a build that writes no QA row is an error unless allowed

    @property
    def strategies(self) -> tuple[str, ...]:
        return self.generate.strategies

    @property
    def seed(self) -> int:
        return self.generate.seed

    def generate_dict(self) -> dict[str, Any]:
        """The generation options as JSON data (lists, not tuples: as run.json reads back)."""
        return msgspec.json.decode(msgspec.json.encode(self.generate))

    def fingerprint(self) -> dict[str, Any]:
        """What must match for ``--resume`` to continue a run (not workers / executor)."""
        return {
            "radvqa_version": __version__,
            "schema_version": SCHEMA_VERSION,
            "source": self.source,
            "inputs": [str(Path(p).resolve()) for p in self.inputs],
            **self.generate_dict(),  # strategies, seed, every other generation option
            "limit": self.limit,
            "studies": self.studies,
            # only when given: builds of sources without options keep the fingerprint they had
            **({"source_options": self.source_options} if self.source_options else {}),
            "extractor": self.extractor,
            "extractor_options": self.extractor_options,
            "shard_studies": self.shard_studies,
            "qa_row_group_rows": self.qa_row_group_rows,
            "sg_row_group_rows": self.sg_row_group_rows,
            "pipeline": self.pipeline,
            "pipeline_options": self.pipeline_options,
        }

    def worker_options(self) -> dict[str, Any]:
        return {
            "generate": self.generate_dict(),
            "seed": self.seed,  # for pipelines other than the stage chain (run/minimal.py)
            "extractor": self.extractor,
            "extractor_options": self.extractor_options,
            "qa_row_group_rows": self.qa_row_group_rows,
            "sg_row_group_rows": self.sg_row_group_rows,
            "pipeline": self.pipeline,
            **self.pipeline_options,
        }


class Progress:
    """What ``build`` reports while running (the CLI draws it with rich; default: silent)."""

    def phase(self, name: str, total: int | None = None) -> None: ...
    def advance(self, n: int = 1) -> None: ...
    def shard_done(self, stats: ShardStats) -> None: ...
    def part_done(self, stats: ReadStats) -> None: ...
    def studies_done(self, shard: int, n: int) -> None: ...
    def message(self, text: str) -> None: ...


# -- output folder -------------------------------------------------------------------------------

def _prepare_out(out: Path, opts: BuildOptions) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildError(f"cannot create output folder {out}: {exc.strerror}") from exc
    if not os.access(out, os.W_OK | os.X_OK):
        raise BuildError(f"cannot write to output folder {out}: permission denied")
    run_file = state_dir(out) / "run.json"
    fp = opts.fingerprint()
    if opts.resume:
        if run_file.exists():
            old = json.loads(run_file.read_text(encoding="utf-8"))
            if old != fp:
                diff = sorted(k for k in set(old) | set(fp) if old.get(k) != fp.get(k))
                raise BuildError(
                    f"cannot --resume {out}: it was started with other options ({', '.join(diff)} differ); "
                    "rerun with the same options, or without --resume to start over"
                )
            return
        # nothing to resume: start fresh (an empty or foreign folder falls through to the checks below)
    existing = [p.name for p in out.iterdir()]
    if existing and not (out / "manifest.json").exists() and not (out / ".radvqa").exists():
        raise BuildError(f"output folder {out} is not empty and is not a radvqa output ({', '.join(sorted(existing)[:5])}); choose another --out")
    if existing and not opts.overwrite:
        what = "a radvqa dataset" if (out / "manifest.json").exists() else "an unfinished radvqa build"
        raise BuildError(f"output folder {out} already holds {what}: pass --overwrite to replace it, "
                         "--resume to continue it, or choose another --out")
    # an earlier radvqa output is replaced: only the files a build writes are removed (exports and
    # other files beside them are left alone)
    for name in ("qa", "scene_graphs", ".radvqa"):
        p = out / name
        if p.is_dir():
            shutil.rmtree(p)
    for name in ("manifest.json", REJECTED, "README.md", "qa_stats.png"):
        try:
            (out / name).unlink()
        except FileNotFoundError:
            pass
    write_text_atomic(run_file, json.dumps(fp, indent=1, sort_keys=True))


# -- phase 1: read sources -------------------------------------------------------------------------


def _read_phase(out: Path, opts: BuildOptions, progress: Progress, executor: Executor,
                records: Iterable[Study | Reject] | None = None) -> dict[str, Any]:
    st = state_dir(out)
    done = st / "spill.done.json"
    if opts.resume and done.exists():
        progress.message("resume: sources already read")
        return json.loads(done.read_text(encoding="utf-8"))
    spill_dir = st / "spill"
    if spill_dir.exists():
        shutil.rmtree(spill_dir)
    spill_dir.mkdir(parents=True)
    t0 = time.perf_counter()
    t_par = 0.0  # seconds inside the executor (the readers' parallel work)
    if records is not None:
        # many short-lived objects per study, freed by reference counting: see worker.run_shard
        gc_before = gc.get_threshold()
        gc.set_threshold(GC_THRESHOLD, 20, 10)
        try:
            parts = [_spill_records(spill_dir, opts, progress, records)]
        finally:
            gc.set_threshold(*gc_before)
    else:
        tasks = _read_tasks(spill_dir, opts)
        progress.phase("reading sources", len(tasks) if len(tasks) > 1 else None)
        t1 = time.perf_counter()
        try:
            parts = executor.run(tasks, lambda r: _part_done(progress, r))
        except TaskFailed as exc:
            raise BuildError(f"reading the sources failed: {exc}" if str(exc) == "interrupted" else str(exc)) from exc
        t_par = time.perf_counter() - t1
    parts.sort(key=lambda r: r.part)
    _concat(st / "source.rejected.jsonl", [rejects_file(spill_dir, r.part) for r in parts])
    n_studies = sum(r.studies for r in parts)
    reads = [r.records_read for r in parts]
    info = {
        "studies": n_studies,
        "records_read": None if None in reads else sum(reads),  # type: ignore[arg-type]
        "source_rejects": sum(r.source_rejects for r in parts),
        "source_row_rejects": sum(r.row_rejects for r in parts),
        "n_shards": plan_shards(n_studies, opts.shard_studies),
        "n_buckets": N_BUCKETS,
        "n_parts": len(parts),
        "seconds": round(time.perf_counter() - t0, 4),
        "parallel_seconds": round(t_par, 4),
        # the slowest part (wall), and the parts' read seconds summed (what one reader would take)
        "part_seconds_max": max((r.seconds for r in parts), default=0.0),
        "part_seconds_sum": round(sum(r.seconds for r in parts), 4),
    }
    write_text_atomic(done, json.dumps(info, indent=1))
    return info


def _part_done(progress: Progress, stats: ReadStats) -> None:
    progress.advance(1)
    hook = getattr(progress, "part_done", None)  # a Progress written before this hook has none
    if hook is not None:
        hook(stats)


def _check_source(opts: BuildOptions, progress: Progress) -> None:
    """The source, its inputs and its first record, checked before anything is created or drawn
    (#17): a bad source name, path or table leaves no OUT/.radvqa and no progress bar, and the
    layout each input table was recognised as is said once (sources/tables.py). The records
    themselves are then read by the read tasks (run/reader.py), in parallel where the source can
    be split; this costs one extra start of the source (its tables' headers and first record)."""
    src = make_source(opts.source, opts.source_options)  # a registry name or "module:Class"; BuildError if unknown
    if hasattr(src, "studies"):  # generated sources (synthetic, replicated) size themselves
        return
    if opts.studies is not None:
        raise BuildError("--studies applies to the synthetic source only")
    inputs: list[Path] = [Path(p) for p in opts.inputs]
    if opts.source == "sample" and not inputs:
        from radvqa.sources import sample_inputs

        inputs = list(sample_inputs())
    if not inputs:
        raise BuildError(f"source {opts.source!r} needs --input PATH (one or more)")
    for p in inputs:
        if not p.exists():
            raise BuildError(f"source {opts.source!r}: input not found: {p}")
    from radvqa.sources.base import SourceError

    src.notify = progress.message
    it = iter(src.iter_records(inputs, ontology=build_ontology(), limit=1))
    try:
        next(it, None)
    except SourceError as exc:
        raise BuildError(f"source {opts.source!r}: {exc}") from None
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()



def _read_tasks(spill_dir: Path, opts: BuildOptions) -> list[ReadTask]:
    src = make_source(opts.source, opts.source_options)
    inputs: list[str] = [str(Path(p).resolve()) for p in opts.inputs]
    if opts.source == "sample" and not inputs:
        from radvqa.sources import sample_inputs

        inputs = [str(p) for p in sample_inputs()]
    configure(src, opts.studies, opts.seed, opts.limit, opts.source)
    if not inputs and not hasattr(src, "studies"):
        raise BuildError(f"source {opts.source!r} needs --input PATH (one or more)")
    for p in inputs:
        if not Path(p).exists():
            raise BuildError(f"source {opts.source!r}: input not found: {p}")
    # a few parts per worker: parts differ in cost, and a worker that finishes early takes the next
    specs = plan_parts(src, inputs, opts.workers * READ_PARTS_PER_WORKER if opts.workers > 1 else 1,
                       opts.limit, opts.strict)
    roots = image_roots_for(_input_paths(opts))
    return [ReadTask(spill=str(spill_dir.resolve()), part=k, n_parts=len(specs), source=opts.source, inputs=inputs,
                     image_roots=roots, cwd=os.getcwd(), studies=opts.studies, seed=opts.seed, limit=opts.limit,
                     strict=opts.strict, spec=spec, source_options=dict(opts.source_options))
            for k, spec in enumerate(specs)]


READ_PARTS_PER_WORKER = 2


def _spill_records(spill_dir: Path, opts: BuildOptions, progress: Progress,
                   records: Iterable[Study | Reject]) -> ReadStats:
    """Records handed to ``build`` by the caller: spilled here, as part 0."""
    # image paths become relative to the input roots here, once per study (see run/imagepaths.py)
    relativize = PathRelativizer(image_roots_for(_input_paths(opts))).study
    progress.phase("reading sources", opts.studies if opts.source == "synthetic" else opts.limit)
    return spill_part(records, spill_dir, 0, opts.source, opts.strict, relativize, on_record=progress.advance)


def _concat(dst: Path, parts: list[Path]) -> None:
    with open(dst, "wb") as w:
        for p in parts:
            if p.exists():
                with open(p, "rb") as r:
                    shutil.copyfileobj(r, w)


# -- phase 2: shards -------------------------------------------------------------------------------


def _run_shards(executor: Executor, tasks: list[ShardTask], progress: Progress) -> list[ShardStats]:
    try:
        return executor.run(tasks, progress.shard_done)
    except TaskFailed as exc:
        # what is on disk, not what this process had collected: shards finished by workers after
        # the last result came back (an interrupt) are complete and kept too (#17: "0 of 64")
        from radvqa.run.worker import marker_path

        if not tasks:
            raise BuildError(f"{exc}; {exc.done} of {exc.total} shards are complete and kept: "
                             "rerun the same command with --resume to finish") from exc
        n_all = tasks[0].n_shards
        done = sum(1 for t in tasks if marker_path(Path(t.out), t.shard).exists())
        kept = done + (n_all - len(tasks))  # shards complete before this run (resume) are kept too
        raise BuildError(f"{exc}; {kept} of {n_all} shards are complete and kept: "
                         "rerun the same command with --resume to finish") from exc


def build(opts: BuildOptions | None = None, progress: Progress | None = None,
          records: Iterable[Study | Reject] | None = None, **kwargs: Any) -> dict[str, Any]:
    """Run the whole build; returns the manifest (also written to ``OUT/manifest.json``).

    ``records``: an iterable of ``Study`` / ``Reject`` used instead of reading ``opts.source``
    (programmatic use, tests, benchmarks); ``opts.source`` then only names it in the manifest."""
    if opts is None:
        opts = BuildOptions(**kwargs)
    elif kwargs:
        opts = BuildOptions(**{**asdict(opts), **kwargs})
    progress = progress or Progress()
    unknown = [s for s in opts.strategies if s not in ALL_STRATEGIES]
    if unknown:
        raise BuildError(f"unknown strategy {', '.join(unknown)} (known: {', '.join(ALL_STRATEGIES)})")
    try:
        opts.generate.check()
    except ValueError as exc:
        raise BuildError(f"generation options: {exc}") from None
    if opts.workers < 1:
        raise BuildError("--workers must be >= 1")
    out = Path(opts.out)
    t_start = time.perf_counter()
    # the sources are read (not handed over as records, nor read already by the run resumed)
    reads_sources = records is None and not (opts.resume and (state_dir(out) / "spill.done.json").exists())
    if reads_sources:
        # source and inputs checked before anything is created or drawn: a bad source name or
        # path leaves no OUT/.radvqa and no progress bar (a bad table fails in the read phase,
        # which then removes what it wrote)
        _check_source(opts, progress)
    fresh = not out.exists() or not any(out.iterdir())
    _prepare_out(out, opts)

    executor = make_executor(opts.executor, opts.workers, opts.worker_options(), progress.studies_done)
    try:
        start = getattr(executor, "start", None)
        if start is not None:  # the pool's warm-up (and the readers' start) overlap the read planning
            start(read=reads_sources and hasattr(make_source(opts.source, opts.source_options), "plan_parts"))
        return _build(out, opts, progress, executor, records, t_start, fresh)
    finally:
        executor.close()


def _build(out: Path, opts: BuildOptions, progress: Progress, executor: Executor,
           records: Iterable[Study | Reject] | None, t_start: float, fresh: bool) -> dict[str, Any]:
    try:
        read = _read_phase(out, opts, progress, executor, records)
    except BaseException:
        _discard(out, fresh)  # a failed read leaves nothing behind (#17)
        raise
    n_shards = int(read["n_shards"])
    n_parts = int(read.get("n_parts", 1))
    spill = state_dir(out) / "spill"

    finished: dict[int, ShardStats] = {}
    todo: list[ShardTask] = []
    for k in range(n_shards):
        stats = shard_is_complete(out, k) if opts.resume else None
        if stats is not None:
            finished[k] = stats
        else:
            if not spill.exists():
                raise BuildError(f"cannot resume {out}: shard {k} is unfinished and the spill is gone; rerun without --resume")
            clear_shard(out, k)
            todo.append(ShardTask(out=str(out.resolve()), spill=str(spill.resolve()), shard=k, n_shards=n_shards,
                                  n_parts=n_parts, options=opts.worker_options(), drop_spill=not opts.keep_spill))
    resumed = len(finished)
    if finished:
        progress.message(f"resume: {len(finished)} of {n_shards} shards already complete")
    progress.phase("building shards", read["studies"])
    t_shards = time.perf_counter()
    card_imports = _preload_card(executor)
    for st in finished.values():
        progress.advance(st.studies_in)
    for st in _run_shards(executor, todo, progress):
        finished[st.shard] = st
    # the workers (and the fork server) are done: let them go before the finish phase, which then
    # runs beside no idle worker still holding its shard-phase memory (16 workers: ~1.9 GiB RSS);
    # ``build`` closes it again in any case (a no-op then)
    executor.close()

    # -- phase 3: finish
    t_fin = time.perf_counter()
    progress.phase("writing manifest and card", 1)
    stats_list = [finished[k].to_dict() for k in range(n_shards)]
    total = merge_shard_stats(stats_list)
    counts = build_counts(total, int(read["source_rejects"]), int(read["studies"]),
                          row_rejects=int(read.get("source_row_rejects") or 0), records_read=read.get("records_read"))
    _merge_rejects(out, n_shards)
    by_reason = reject_reasons(out / "rejected.jsonl")
    if opts.strict and by_reason:
        with open(out / "rejected.jsonl", encoding="utf-8") as f:
            first = json.loads(f.readline())
        raise BuildError(f"--strict: {sum(by_reason.values())} reject(s); first: {first.get('stage')} "
                         f"{first.get('ref')}: {first.get('reason')}")
    # files of a previous run with more shards must not linger
    keep = {f"part-{k:05d}.parquet" for k in range(n_shards)}
    for kind in ("qa", "scene_graphs"):
        for f in shard_files(out, kind):
            if f.name not in keep:
                f.unlink()
    counts.update(_image_counts(out, stats_list))  # rows and images with / without an image file (#17)
    if counts.get("qa_rows", 0) == 0 and not opts.allow_empty:
        why = empty_reasons(opts.strategies, counts, by_reason=by_reason)
        _discard(out, fresh, everything=True)
        raise BuildError("no QA rows were written, so no dataset was kept: " + "; ".join(why)
                         + ". Pass --allow-empty to keep an empty dataset.")
    cpu = dict(total["timings"])
    cpu.pop("wall", None)
    timings: dict[str, Any] = {
        "read_sources": read["seconds"],  # wall seconds of the read phase (all readers)
        "read_parts": read.get("n_parts", 1),
        "read_parallel": read.get("parallel_seconds", 0.0),  # of which inside the executor (the readers)
        # the slowest part and all parts summed (seconds each reader spent on its part): against
        # read_parallel they show what starting the readers costs
        "read_part_max": read.get("part_seconds_max", 0.0),
        "read_part_sum": read.get("part_seconds_sum", 0.0),
        "shards": 0.0,  # wall seconds of the shard phase (all workers)
        "stages_cpu": cpu,  # CPU seconds summed over workers: load, extract, localize, generate, write, total
    }
    timings["shards"] = round(t_fin - t_shards, 4)
    manifest: dict[str, Any] = {
        "manifest_version": 1,
        "radvqa_version": __version__,
        "schema_version": SCHEMA_VERSION,
        "source": opts.source,
        "inputs": [str(p) for p in opts.inputs] or _default_inputs(opts.source),
        # stored image paths are relative to the first of these that contains them (imagepaths.py)
        "image_roots": image_roots_for(_input_paths(opts)),
        "seed": opts.seed,
        "options": {
            **opts.generate_dict(), "limit": opts.limit, "studies": opts.studies,
            **({"source_options": opts.source_options} if opts.source_options else {}),
            "extractor": opts.extractor, "workers": opts.workers, "executor": opts.executor,
            "shard_studies": opts.shard_studies, "resumed_shards": resumed,
            **({"nodes": len(executor.nodes)} if hasattr(executor, "nodes") else {}),
        },
        # which rules engine this process ran (radvqa info): compiled (mypyc) or pure Python; the
        # scene graphs are the same either way, the timings are not
        "extractor": {"name": opts.extractor, "compiled": _engine_compiled(opts.extractor)},
        "counts": counts,
        # a requested strategy that wrote nothing, and why (#17: rin on chest sources said nothing)
        "notes": empty_reasons(opts.strategies, counts, only_empty=True),
        "rejects_by_reason": by_reason,
        "shards": {"count": n_shards, "qa": [f"qa/part-{k:05d}.parquet" for k in range(n_shards)],
                   "scene_graphs": [f"scene_graphs/part-{k:05d}.parquet" for k in range(n_shards)]},
        "timings": timings,
    }
    from radvqa.io.card import write_card

    if card_imports is not None:
        card_imports.join()  # done long ago in a build of any size; the import lock would wait anyway
    t_card = time.perf_counter()
    manifest["timings"]["card"] = 0.0
    manifest["timings"]["wall"] = 0.0
    write_manifest(out, manifest)
    write_card(out, manifest)
    manifest["timings"]["card"] = round(time.perf_counter() - t_card, 4)
    manifest["timings"]["finish"] = round(time.perf_counter() - t_fin, 4)
    manifest["timings"]["wall"] = round(time.perf_counter() - t_start, 4)
    write_manifest(out, manifest)
    progress.advance(1)
    if not opts.keep_spill and spill.exists():
        shutil.rmtree(spill, ignore_errors=True)
    return manifest




def _preload_card(executor: Executor) -> threading.Thread | None:
    """With the shards built by other processes, this one only waits: it imports the card's
    plotting modules meanwhile (io.card.preload), off the serial finish. Not with the in-process
    executor, where the thread would take the GIL from the shard work."""
    if isinstance(executor, LocalExecutor):
        return None
    from radvqa.io.card import preload

    def run() -> None:
        try:
            preload()
        except Exception:  # noqa: BLE001 - the card imports them again and reports any error
            pass

    t = threading.Thread(target=run, name="radvqa-card-preload", daemon=True)
    t.start()
    return t


def _engine_compiled(extractor: str) -> bool:
    """Whether the rules engine is compiled (false for another extractor: it runs no such engine)."""
    from radvqa.extract.compiled import is_compiled

    return extractor == "rules" and is_compiled()


def _image_counts(out: Path, stats: list[dict[str, Any]]) -> dict[str, int]:
    """The shards' own image counts added up (each worker counted its shard), else (a shard
    finished by an older version, resumed) one pass over the output."""
    if all(s.get("image_counts") is not None for s in stats):
        total: Counter[str] = Counter()
        for s in stats:
            total.update(s["image_counts"])
        keys = ("qa_rows_with_image", "qa_rows_without_image", "image_files", "images_without_file")
        return {k: int(total[k]) for k in keys}
    from radvqa.io.stats import image_counts

    return image_counts(out)


def _discard(out: Path, fresh: bool, everything: bool = False) -> None:
    """Remove what a failed build wrote: the whole folder when the build created it (or found it
    empty), else its state folder (and with ``everything`` the dataset files it wrote)."""
    try:
        if fresh and out.exists():
            shutil.rmtree(out)
            return
        shutil.rmtree(state_dir(out), ignore_errors=True)
        if everything:
            for name in ("qa", "scene_graphs"):
                shutil.rmtree(out / name, ignore_errors=True)
            for name in ("manifest.json", REJECTED, "README.md", "qa_stats.png"):
                (out / name).unlink(missing_ok=True)
    except OSError:
        pass


def empty_reasons(strategies: Sequence[str], counts: dict[str, Any], only_empty: bool = False,
                  by_reason: dict[str, int] | None = None) -> list[str]:
    """One line per requested strategy that wrote no row: what it needs (generate/data/strategy_needs.yaml)."""
    from importlib import resources

    import yaml

    needs = yaml.safe_load(resources.files("radvqa.generate").joinpath("data/strategy_needs.yaml").read_text("utf-8")) or {}
    by = counts.get("qa_by_strategy", {}) or {}
    lines = []
    if not only_empty and counts.get("studies_out", 0) == 0:
        top = ", ".join(f"{k} ({v:,})" for k, v in list((by_reason or {}).items())[:3])
        lines.append(f"no study was usable ({counts.get('studies_in', 0):,} read, "
                     f"{counts.get('studies_rejected', 0):,} rejected{'; most common: ' + top if top else ''})")
    for s in strategies:
        if not by.get(s):
            lines.append(f"{s}: 0 rows; it needs {needs.get(s, 'see docs/generation.md')}")
    return lines


def _input_paths(opts: BuildOptions) -> list[str]:
    return [str(p) for p in opts.inputs] or _default_inputs(opts.source)


def _default_inputs(source: str) -> list[str]:
    if source != "sample":
        return []
    from radvqa.sources import sample_inputs

    return [str(p) for p in sample_inputs()]


_DIGITS = re.compile(r"\d+(?:\.\d+)?")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def reject_reasons(path: Path) -> dict[str, int]:
    """Reject lines grouped by stage and reason, numbers and quoted values folded ("3 cells, header
    has 5" and "4 cells, header has 5" are one reason), most frequent first."""
    counts: dict[str, int] = {}
    if path.exists():
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    key = f"{r.get('stage', 'source')}: " + _DIGITS.sub("N", _QUOTED.sub("'…'", str(r.get("reason", ""))))
                    counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _merge_rejects(out: Path, n_shards: int) -> None:
    """rejected.jsonl = source rejects, then each shard's, in shard order (deterministic)."""
    st = state_dir(out)
    with atomic_path(out / REJECTED) as tmp, open(tmp, "wb") as w:
        src = st / "source.rejected.jsonl"
        if src.exists():
            with open(src, "rb") as r:
                shutil.copyfileobj(r, w)
        for k in range(n_shards):
            p = rejects_path(out, k)
            if p.exists():
                with open(p, "rb") as r:
                    shutil.copyfileobj(r, w)


def resume_state(out: Path) -> dict[str, Any]:
    """How far an interrupted build got (for messages and tests)."""
    st = state_dir(out)
    info: dict[str, Any] = {"read_done": (st / "spill.done.json").exists()}
    if info["read_done"]:
        n = int(json.loads((st / "spill.done.json").read_text())["n_shards"])
        info["n_shards"] = n
        info["complete"] = [k for k in range(n) if marker_path(out, k).exists()]
    return info

