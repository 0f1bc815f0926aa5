"""The read phase, split over the workers: a source that can be cut into consecutive parts (the
synthetic source's patient ranges, a replicated dataset's position ranges, ...) plans its parts in
the driver, cheaply, and each worker reads one part and spills it to that part's own bucket files
(``run/shards.py``); the driver never reads a record. A source that cannot be split is one part,
read by one worker.

Output does not depend on the number of parts: parts are consecutive pieces of the source's record
order, a shard reads each bucket part after part (so studies keep their source order), and the
source rejects of the parts are concatenated in part order. Splittable sources implement

    plan_parts(inputs, n_parts, *, ontology, limit) -> list[spec] | None   (in the driver)
    iter_part(inputs, spec, *, ontology) -> Iterator[Study | Reject]      (in a worker)

where ``spec`` is plain data; ``None`` from ``plan_parts`` means "read me whole".
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from radvqa.model import Reject, Study
from radvqa.run.errors import BuildError
from radvqa.run.imagepaths import PathRelativizer
from radvqa.run.shards import SpillWriter, part_dir
from radvqa.run.tasks import ReadStats, ReadTask
from radvqa.sources.base import ROW_STAGE, SourceError

GC_THRESHOLD = 100_000


def make_source(name: str, options: dict[str, Any] | None = None) -> Any:
    """A source by registry name, or by "module:Class" (benchmarks and tests, like --pipeline).
    ``options``: the source's own typed options (its ``options_type``, e.g. ReflacxOptions),
    passed to its constructor; a source without options refuses them."""
    if ":" in name:
        mod, _, cls_name = name.partition(":")
        try:
            cls = getattr(importlib.import_module(mod), cls_name)
        except (ImportError, AttributeError) as exc:
            raise BuildError(f"cannot load source {name!r}: {exc}") from None
    else:
        from radvqa.sources import SOURCES

        try:
            cls = SOURCES.get(name)
        except KeyError as exc:
            raise BuildError(str(exc.args[0]) if exc.args else str(exc)) from None
    if not options:
        return cls()
    if getattr(cls, "options_type", None) is None:
        raise BuildError(f"source {name!r} takes no options (given: {', '.join(sorted(options))})")
    from radvqa.sources.base import SourceError

    try:
        return cls(**options)
    except SourceError as exc:
        raise BuildError(str(exc)) from None
    except TypeError as exc:
        raise BuildError(f"source {name!r}: {exc}") from None


def build_ontology() -> Any:
    """The ontology for reading sources; a broken one is one BuildError line, not a traceback."""
    try:
        from radvqa.ontology import load_ontology

        return load_ontology()
    except ImportError:
        return None
    except Exception as exc:  # noqa: BLE001 - OntologyError and friends: say so, do not trace back
        raise BuildError(f"cannot load the ontology: {exc}") from None


def configure(src: Any, studies: int | None, seed: int, limit: int | None, source: str) -> None:
    """Size options of sources that make or replicate studies (``--studies``)."""
    if hasattr(src, "studies"):
        src.studies = studies if studies is not None else (limit or 1000)
        if hasattr(src, "seed"):
            src.seed = seed
    elif studies is not None:
        raise BuildError(f"--studies applies to the synthetic source only, not {source!r}")


def plan_parts(src: Any, inputs: list[str], n_parts: int, limit: int | None, strict: bool) -> list[Any]:
    """The parts' specs ([None]: one part, the whole source). ``--limit`` (other than a source's
    own) and ``--strict`` read in one part: "the first N records" and "the first reject" are
    defined in source order, which one reader keeps without coordination."""
    plan = getattr(src, "plan_parts", None)
    if plan is None or n_parts <= 1 or strict or (limit is not None and not hasattr(src, "studies")):
        return [None]
    try:
        specs = plan([Path(p) for p in inputs], n_parts, ontology=build_ontology(), limit=limit)
    except SourceError as exc:
        raise BuildError(f"source {getattr(src, 'name', '?')!r}: {exc}") from None
    return list(specs) if specs else [None]


def _records(task: ReadTask, src: Any) -> Iterator[Study | Reject]:
    onto = build_ontology()
    if task.spec is None:
        return src.iter_records(list(task.inputs), ontology=onto, limit=task.limit)
    return src.iter_part([Path(p) for p in task.inputs], task.spec, ontology=onto)


def rejects_file(spill: Path, part: int) -> Path:
    return spill / f"p{part:04d}.rejected.jsonl"


def run_read(task: ReadTask) -> ReadStats:
    """Read one part of the sources into ``spill/pNNNN/`` (+ its source rejects)."""
    gc_before = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, 20, 10)  # many short-lived objects per study: see worker.run_shard
    try:
        return _run_read(task)
    finally:
        gc.set_threshold(*gc_before)


def _run_read(task: ReadTask) -> ReadStats:
    src = make_source(task.source, task.source_options)
    configure(src, task.studies, task.seed, task.limit, task.source)
    relativize = PathRelativizer(task.image_roots, cwd=task.cwd).study
    return spill_part(_records(task, src), Path(task.spill), task.part, task.source, task.strict, relativize)


def spill_part(records: Iterable[Any], spill: Path, part: int, source: str, strict: bool,
               relativize: Callable[[Study], Study], on_record: Callable[[], None] | None = None) -> ReadStats:
    """Spill one part's records into ``spill/pNNNN/`` and its source rejects beside it: what every
    read task does, and what ``build`` does with records handed to it (as part 0)."""
    t0 = time.perf_counter()
    writer = SpillWriter(part_dir(spill, part))
    n_rej = n_row_rej = 0
    try:
        with open(rejects_file(spill, part), "w", encoding="utf-8") as rf:
            for rec in records:
                if isinstance(rec, Study):
                    writer.add(relativize(rec))
                elif isinstance(rec, Reject):
                    if strict:
                        raise BuildError(f"--strict: {rec.source} {rec.ref}: {rec.reason}")
                    rf.write(json.dumps({"source": rec.source, "ref": rec.ref, "reason": rec.reason,
                                         "stage": rec.stage or "source"}, ensure_ascii=False) + "\n")
                    if rec.stage == ROW_STAGE:
                        n_row_rej += 1  # a box/label/size row, not a study: not in studies_in
                    else:
                        n_rej += 1
                else:
                    raise BuildError(f"source {source!r} yielded {type(rec).__name__}, expected Study or Reject")
                if on_record is not None:
                    on_record()
        writer.close()
    except SourceError as exc:
        writer.abort()
        raise BuildError(f"source {source!r}: {exc}") from None
    except OSError as exc:
        writer.abort()
        raise BuildError(f"cannot write the spill under {spill}: {exc.strerror or exc}") from exc
    except BaseException:
        writer.abort()
        raise
    n_studies = sum(writer.counts)
    return ReadStats(part=part, studies=n_studies, source_rejects=n_rej, row_rejects=n_row_rej,
                     records_read=check_read_count(source, records, n_studies, n_rej),
                     seconds=round(time.perf_counter() - t0, 4), pid=os.getpid())


def check_read_count(source: str, stream: Any, n_studies: int, n_rej: int) -> int | None:
    """The adapter's own count of records read (see sources.base.ReadCounts): a record read but
    neither spilled nor rejected is a silent drop, which the spill-based count cannot see."""
    read = getattr(getattr(stream, "counts", None), "read", None)
    if read is not None and read != n_studies + n_rej:
        raise BuildError(f"source {source!r} read {read} records but {n_studies} studies + {n_rej} rejects "
                         f"came out: {read - n_studies - n_rej} dropped without a reject line (a bug; please report)")
    return read
