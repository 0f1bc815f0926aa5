"""One shard, start to finish: load its studies from the spill, run the pipeline in (patient, time)
order, write ``scene_graphs/part-K.parquet`` and ``qa/part-K.parquet`` (temp name + rename), the
shard's reject lines, and last of all the completion marker with the shard's statistics.

A shard is complete iff its marker exists and the files it lists have the recorded sizes; anything
else is redone by ``--resume``. The function is a plain top-level function of plain data so the
process pool and Ray can ship it.
"""

from __future__ import annotations

import gc
import json
import os

import msgspec
import time
from collections import Counter
from operator import attrgetter
from pathlib import Path
from collections.abc import Callable
from typing import Any

from radvqa.io.atomic import state_dir, write_atomic
from radvqa.io.parquet import ShardWriter, shard_name, tmp_name
from radvqa.model import Reject, SceneGraph
from radvqa.run.pipeline import make_pipeline
from radvqa.run.shards import load_shard_studies, shard_spill_files
from radvqa.run.tasks import ShardStats, ShardTask

_STRATEGY = attrgetter("strategy")
_QTYPE = attrgetter("question_type")
_SPLIT = attrgetter("split")
_GRADE = attrgetter("grade")


def _has_image(q: Any) -> bool:
    """io.stats.image_counts' rule, on a row before it is written: every one of its image paths
    is set (a worker counts its shard's rows as it writes them; the parent adds the counts up)."""
    p = q.image_paths
    return bool(p) and all(p)


def marker_path(out: Path, shard: int) -> Path:
    return state_dir(out) / "shards" / f"part-{shard:05d}.done.json"


def rejects_path(out: Path, shard: int) -> Path:
    return state_dir(out) / "shards" / f"part-{shard:05d}.rejected.jsonl"


write_text_atomic = write_atomic  # the one atomic writer lives in radvqa.io.atomic


def shard_is_complete(out: Path, shard: int) -> ShardStats | None:
    """The shard's stats if it finished (marker present, files whole), else None."""
    mp = marker_path(out, shard)
    if not mp.exists():
        return None
    try:
        stats = msgspec.json.decode(mp.read_bytes(), type=ShardStats)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    for rel, size in stats.files.items():
        p = out / rel
        if not p.exists() or p.stat().st_size != size:
            return None
    return stats


def clear_shard(out: Path, shard: int) -> None:
    """Remove every trace of an unfinished shard before redoing it."""
    name = shard_name(shard)
    for p in (
        out / "qa" / name, out / "scene_graphs" / name,
        tmp_name(out / "qa" / name), tmp_name(out / "scene_graphs" / name),
        marker_path(out, shard), rejects_path(out, shard),
    ):
        try:
            p.unlink()
        except FileNotFoundError:
            pass


def _ungraded(c: Counter[str | None]) -> Counter[str]:
    out: Counter[str] = Counter()
    for k, v in c.items():
        out[k or "ungraded"] += v
    return out


def run_shard(task: ShardTask, on_studies: Callable[[int, int], None] | None = None) -> ShardStats:
    """Process one shard.
    ``on_studies(shard, n)``: called every 100 studies (in-process runs draw progress with it)."""
    # A shard allocates millions of short-lived container objects (QA rows, answer parts, boxes)
    # that reference counting frees; with the default gen-0 threshold (700) the cyclic collector
    # runs thousands of times per shard and measured ~15% of the CPU. A high threshold keeps the
    # collector for real cycles only; restored afterwards (run_local runs in the caller's process).
    gc_before = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, 20, 10)
    try:
        return _run_shard(task, on_studies)
    finally:
        gc.set_threshold(*gc_before)


GC_THRESHOLD = 100_000


def _run_shard(task: ShardTask, on_studies: Callable[[int, int], None] | None) -> ShardStats:
    out = Path(task.out)
    shard = task.shard
    n_shards = task.n_shards
    options = task.options
    t_start = time.perf_counter()
    c_start = time.process_time()
    clear_shard(out, shard)

    c0 = time.process_time()
    studies = load_shard_studies(Path(task.spill), shard, n_shards, task.n_parts)
    t_load = time.process_time() - c0

    pipe = make_pipeline(options)
    # the pipeline (and its generator) outlives the shard: its count starts again here
    not_stated = getattr(getattr(pipe, "generator", None), "not_stated", None)
    if not_stated is not None:
        not_stated.clear()
    normal_blocked = getattr(getattr(pipe, "generator", None), "normal_blocked", None)
    if normal_blocked is not None:
        normal_blocked.clear()
    withheld = getattr(getattr(pipe, "generator", None), "rows_withheld", None)
    if withheld is not None:
        withheld.clear()
    name = shard_name(shard)
    sg_writer = ShardWriter(out / "scene_graphs" / name, "scene_graphs", options.get("sg_row_group_rows"))
    qa_writer = ShardWriter(out / "qa" / name, "qa", options.get("qa_row_group_rows"))
    rejects: list[Reject] = []
    by_strategy: Counter[str] = Counter()
    by_type: Counter[str] = Counter()
    by_grade: Counter[str] = Counter()
    by_split: Counter[str] = Counter()
    sg_by_split: Counter[str] = Counter()
    studies_out = studies_rejected = 0
    rows_with_image = image_files = image_records = 0
    t_write = 0.0
    patients: set[str] = set()
    try:
        prior: SceneGraph | None = None
        prev_id: str | None = None
        for i, study in enumerate(studies):
            if on_studies is not None and i and i % 100 == 0:
                on_studies(shard, 100)
            if prior is not None and prior.patient_id != study.patient_id:
                prior = None
            if study.id == prev_id:
                rejects.append(Reject(source=study.source, ref=study.id, reason="duplicate study id (an earlier record with this id was used)", stage="source"))
                studies_rejected += 1
                continue
            prev_id = study.id
            try:
                res = pipe.process(study, prior)
            except Exception as exc:  # noqa: BLE001 - one bad study must not sink the shard
                from radvqa.run.pipeline import StudyResult, _reason

                res = StudyResult(None, [], [Reject(source=study.source, ref=study.id,
                                                    reason=f"pipeline failed: {_reason(exc)}", stage="pipeline")])
            rejects.extend(res.rejects)
            if res.scene_graph is None:
                studies_rejected += 1
                continue
            studies_out += 1
            patients.add(study.patient_id)
            sg = res.scene_graph
            sg_by_split[sg.split or "none"] += 1
            qa = res.qa
            if qa:
                # Counter.update(map(...)) counts in C: no bytecode per QA row
                by_strategy.update(map(_STRATEGY, qa))
                by_type.update(map(_QTYPE, qa))
                by_grade.update(map(_GRADE, qa))
                by_split.update(map(_SPLIT, qa))
                rows_with_image += sum(map(_has_image, qa))
            if sg.images:
                image_records += len(sg.images)
                image_files += sum(1 for im in sg.images if im.path)
            tw = time.process_time()
            sg_writer.add(sg)
            qa_writer.extend(res.qa)
            t_write += time.process_time() - tw
            prior = sg
        tw = time.process_time()
        sg_writer.close()
        qa_writer.close()
        t_write += time.process_time() - tw
    except BaseException:
        sg_writer.abort()
        qa_writer.abort()
        raise

    rej_lines = "".join(
        json.dumps({"source": r.source, "ref": r.ref, "reason": r.reason, "stage": r.stage}, ensure_ascii=False) + "\n"
        for r in rejects
    )
    write_text_atomic(rejects_path(out, shard), rej_lines)
    files = {
        f"scene_graphs/{name}": (out / "scene_graphs" / name).stat().st_size,
        f"qa/{name}": (out / "qa" / name).stat().st_size,
    }
    images = {"qa_rows_with_image": rows_with_image, "qa_rows_without_image": qa_writer.rows - rows_with_image,
              "image_files": image_files, "images_without_file": image_records - image_files}
    # stages in CPU seconds of this worker; "wall" = this shard's elapsed time
    timings = {"load": t_load, **pipe.timings, "write": t_write}
    timings["total"] = time.process_time() - c_start
    timings["wall"] = time.perf_counter() - t_start
    stats = ShardStats(
        shard=shard,
        n_shards=n_shards,
        studies_in=len(studies),
        studies_out=studies_out,
        studies_rejected=studies_rejected,
        patients=len(patients),
        qa_rows=qa_writer.rows,
        scene_graph_rows=sg_writer.rows,
        qa_by_strategy=dict(sorted(by_strategy.items())),
        qa_by_question_type=dict(sorted(by_type.items())),
        grades=dict(sorted(_ungraded(by_grade).items())),
        qa_by_split=dict(sorted(by_split.items())),
        studies_by_split=dict(sorted(sg_by_split.items())),
        rejects_by_stage=dict(sorted(Counter(r.stage for r in rejects).items())),
        reject_lines=len(rejects),
        files=files,
        timings=timings,
        pid=os.getpid(),
        image_counts=images,
        findings_not_stated=dict(sorted(not_stated.items())) if not_stated is not None else None,
        normal_claims_blocked=dict(sorted(normal_blocked.items())) if normal_blocked is not None else None,
        rows_withheld=dict(sorted(withheld.items())) if withheld is not None else None,
    )
    write_text_atomic(marker_path(out, shard), json.dumps(stats.to_dict(), indent=1, sort_keys=True))
    if task.drop_spill:
        # only now: a shard without its marker is redone by --resume from these files
        for p in shard_spill_files(Path(task.spill), shard, n_shards, task.n_parts):
            try:
                p.unlink()
            except FileNotFoundError:
                pass
    return stats
