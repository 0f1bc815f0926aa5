"""``build(...)``: sources -> spill by patient -> shards (extract, localize, generate, write) ->
manifest, rejected.jsonl, dataset card. The same function backs ``radvqa build``.

Phases, each restartable:
1. *read*: stream the source, route studies to bucket files by patient hash (``run/shards.py``);
   source rejects go to ``.radvqa/source.rejected.jsonl``; ``.radvqa/spill.done.json`` marks it done.
2. *shards*: each shard is processed by ``run/worker.run_shard`` on this process, a process pool or
   Ray; each finished shard leaves a completion marker with its statistics.
3. *finish*: rejects concatenated in a fixed order, manifest from the markers, dataset card; the
   spill is deleted.

``--resume`` skips phase 1 when its marker exists and every shard whose marker is valid; it refuses
to resume a run made with other options (the fingerprint in ``.radvqa/run.json``).
"""

from __future__ import annotations

import gc
import json
import os
import re
import shutil
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from radvqa import __version__
from radvqa.generate.engine import STRATEGIES, GenerateOptions
from radvqa.io.atomic import atomic_path
from radvqa.io.manifest import REJECTED, build_counts, merge_shard_stats, write_manifest
from radvqa.io.parquet import shard_files
from radvqa.io.schema import SCHEMA_VERSION
from radvqa.model import Reject, Study
from radvqa.sources.base import ROW_STAGE
from radvqa.sources.base import SourceError
from radvqa.run.imagepaths import PathRelativizer, image_roots_for
from radvqa.run.shards import DEFAULT_SHARD_STUDIES, N_BUCKETS, SpillWriter, plan_shards
from radvqa.run.worker import (
    GC_THRESHOLD,
    clear_shard, marker_path, rejects_path, shard_is_complete, state_dir, write_text_atomic,
)

ALL_STRATEGIES = STRATEGIES  # the one list lives in radvqa.generate


class BuildError(RuntimeError):
    """A build could not finish; the message says why and what to do."""


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
    extractor: str = "rules"
    extractor_options: dict[str, Any] = field(default_factory=dict)
    shard_studies: int = DEFAULT_SHARD_STUDIES
    qa_row_group_rows: int | None = None
    sg_row_group_rows: int | None = None
    pipeline: str | None = None  # "module:factory" replacing the real stage chain (tests, benchmarks)
    pipeline_options: dict[str, Any] = field(default_factory=dict)  # extra options for that factory
    keep_spill: bool = False
    strict: bool = False  # the first reject is an error (source rejects stop the read at once)

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
    def shard_done(self, stats: dict[str, Any]) -> None: ...
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


def _source_records(opts: BuildOptions, progress: Progress) -> Any:
    from radvqa.sources import get_source, sample_inputs

    try:
        src = get_source(opts.source)
    except KeyError as exc:
        raise BuildError(str(exc.args[0]) if exc.args else str(exc)) from None
    inputs: Sequence[Path | str] = [Path(p) for p in opts.inputs]
    if opts.source == "sample" and not inputs:
        inputs = sample_inputs()
    if opts.source == "synthetic":
        src.studies = opts.studies if opts.studies is not None else (opts.limit or 1000)
        src.seed = opts.seed
    elif opts.studies is not None:
        raise BuildError("--studies applies to the synthetic source only")
    elif not inputs:
        raise BuildError(f"source {opts.source!r} needs --input PATH (one or more)")
    for p in inputs:
        if not Path(p).exists():
            raise BuildError(f"source {opts.source!r}: input not found: {p}")
    try:
        from radvqa.ontology import load_ontology

        onto = load_ontology()
    except ImportError:
        onto = None
    except Exception as exc:  # noqa: BLE001 - OntologyError and friends: say so, do not trace back
        raise BuildError(f"cannot load the ontology: {exc}") from None
    return src.iter_records(list(inputs), ontology=onto, limit=opts.limit)


def _read_phase(out: Path, opts: BuildOptions, progress: Progress,
                records: Iterable[Study | Reject] | None = None) -> dict[str, Any]:
    # many short-lived objects per study, freed by reference counting: see worker.run_shard
    gc_before = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, 20, 10)
    try:
        return _read_sources(out, opts, progress, records)
    finally:
        gc.set_threshold(*gc_before)


def _read_sources(out: Path, opts: BuildOptions, progress: Progress,
                  records: Iterable[Study | Reject] | None) -> dict[str, Any]:
    st = state_dir(out)
    done = st / "spill.done.json"
    if opts.resume and done.exists():
        progress.message("resume: sources already read")
        return json.loads(done.read_text(encoding="utf-8"))
    spill_dir = st / "spill"
    if spill_dir.exists():
        shutil.rmtree(spill_dir)
    t0 = time.perf_counter()
    writer = SpillWriter(spill_dir)
    # image paths become relative to the input roots here, once per study (see run/imagepaths.py)
    relativize = PathRelativizer(image_roots_for(_input_paths(opts))).study
    n_rej = n_row_rej = 0
    rej_file = st / "source.rejected.jsonl"
    progress.phase("reading sources", opts.studies if opts.source == "synthetic" else opts.limit)
    try:
        with open(rej_file, "w", encoding="utf-8") as rf:
            stream = records if records is not None else _source_records(opts, progress)
            for rec in stream:
                if isinstance(rec, Study):
                    writer.add(relativize(rec))
                elif isinstance(rec, Reject):
                    if opts.strict:
                        raise BuildError(f"--strict: {rec.source} {rec.ref}: {rec.reason}")
                    rf.write(json.dumps({"source": rec.source, "ref": rec.ref, "reason": rec.reason, "stage": rec.stage or "source"}, ensure_ascii=False) + "\n")
                    if rec.stage == ROW_STAGE:
                        n_row_rej += 1  # a box/label/size row, not a study: not in studies_in
                    else:
                        n_rej += 1
                else:
                    raise BuildError(f"source {opts.source!r} yielded {type(rec).__name__}, expected Study or Reject")
                progress.advance()
        writer.close()
    except SourceError as exc:
        writer.abort()
        raise BuildError(f"source {opts.source!r}: {exc}") from None
    except OSError as exc:
        writer.abort()
        raise BuildError(f"cannot write the spill under {spill_dir}: {exc.strerror or exc}") from exc
    except BaseException:
        writer.abort()
        raise
    n_studies = sum(writer.counts)
    # the adapter's own count of records read (see sources.base.ReadCounts): a record read but
    # neither spilled nor rejected is a silent drop, which the spill-based count cannot see
    read = getattr(getattr(stream, "counts", None), "read", None)
    if read is not None and read != n_studies + n_rej:
        raise BuildError(f"source {opts.source!r} read {read} records but {n_studies} studies + {n_rej} rejects "
                         f"came out: {read - n_studies - n_rej} dropped without a reject line (a bug; please report)")
    info = {
        "studies": n_studies,
        "records_read": read,
        "source_rejects": n_rej,
        "source_row_rejects": n_row_rej,
        "n_shards": plan_shards(n_studies, opts.shard_studies),
        "n_buckets": N_BUCKETS,
        "seconds": round(time.perf_counter() - t0, 4),
    }
    write_text_atomic(done, json.dumps(info, indent=1))
    return info


# -- phase 2: shards -------------------------------------------------------------------------------


def _run_tasks(tasks: list[dict[str, Any]], opts: BuildOptions, progress: Progress) -> list[dict[str, Any]]:
    from radvqa.run.executors import run_local, run_pool, run_ray

    if not tasks:
        return []
    if opts.executor == "ray":
        return run_ray(tasks, opts.workers, progress.shard_done)
    if opts.executor != "local":
        raise BuildError(f"unknown executor {opts.executor!r} (local or ray)")
    if opts.workers <= 1 or len(tasks) == 1:
        return run_local(tasks, progress.shard_done, progress.studies_done)
    return run_pool(tasks, opts.workers, progress.shard_done)


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
    _prepare_out(out, opts)

    read = _read_phase(out, opts, progress, records)
    n_shards = int(read["n_shards"])
    spill = state_dir(out) / "spill"

    finished: dict[int, dict[str, Any]] = {}
    todo: list[dict[str, Any]] = []
    for k in range(n_shards):
        stats = shard_is_complete(out, k) if opts.resume else None
        if stats is not None:
            finished[k] = stats
        else:
            if not spill.exists():
                raise BuildError(f"cannot resume {out}: shard {k} is unfinished and the spill is gone; rerun without --resume")
            clear_shard(out, k)
            todo.append({"out": str(out), "spill": str(spill), "shard": k, "n_shards": n_shards,
                         "options": opts.worker_options()})
    resumed = len(finished)
    if finished:
        progress.message(f"resume: {len(finished)} of {n_shards} shards already complete")
    progress.phase("building shards", read["studies"])
    t_shards = time.perf_counter()
    for st in finished.values():
        progress.advance(int(st["studies_in"]))
    for st in _run_tasks(todo, opts, progress):
        finished[int(st["shard"])] = st

    # -- phase 3: finish
    t_fin = time.perf_counter()
    progress.phase("writing manifest and card", 1)
    stats_list = [finished[k] for k in range(n_shards)]
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
    cpu = dict(total["timings"])
    cpu.pop("wall", None)
    timings: dict[str, Any] = {
        "read_sources": read["seconds"],  # wall seconds, driver
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
            "extractor": opts.extractor, "workers": opts.workers, "executor": opts.executor,
            "shard_studies": opts.shard_studies, "resumed_shards": resumed,
        },
        "counts": counts,
        "rejects_by_reason": by_reason,
        "shards": {"count": n_shards, "qa": [f"qa/part-{k:05d}.parquet" for k in range(n_shards)],
                   "scene_graphs": [f"scene_graphs/part-{k:05d}.parquet" for k in range(n_shards)]},
        "timings": timings,
    }
    from radvqa.io.card import write_card

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

