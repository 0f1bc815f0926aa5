"""Streaming ``radvqa eval``: the questions and the predictions are hashed into the same
partitions, each partition is scored on its own (by one process or a pool), and the report is
built from what the partitions return. The parent keeps no per-question array: a partition
returns mergeable statistics (eval.cells.Cells: per reported cell exact sums, counts and at most
20,000 values for a bootstrap) and tallies, so the parent's memory depends on the number of
cells, not of questions (the few rows of the benchmark blocks, the captioning metrics of
Medical-Diff-VQA open answers and the judge's questions are still kept whole).

Partition key: the part of an id after its last ":" (zlib.crc32). A prediction keyed by
``qa_id`` and one keyed by the benchmark's native id (the part of ``qa_id`` after its first
":") share that suffix with their question, so both ways of joining (predictions.join) stay
inside a partition.

Passes:

1. the parent reads the QA shards once, writing each partition's rows (Arrow IPC, lz4) with
   their row number; it reads the predictions file once (every malformed line raises here,
   naming it), writing each partition's records;
2. per partition (``match_part``): per split value, how many rows a prediction matches by
   qa_id and by native id; the parent applies ``--split`` and the join rule of the in-memory
   path to the totals;
3. per partition (``score_part``): join, score, ``Cells`` (also for the shortcut audit's
   baselines), tag counts, per-question lines; the choice rows' circular-evaluation keys go to
   a file in buckets of the group hash;
4. per bucket (``circ_bucket``): circular evaluation over whole groups, summed.

The in-memory path builds the same Cells from all rows at once, and Cells sum exactly, so both
give byte-identical reports (tests/test_eval_stream.py).
"""

from __future__ import annotations

import heapq
import json
import os
import struct
import tempfile
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from radvqa.eval.cells import CellAggregator, Cells, Circular, circular_rows, shortcut_audit
from radvqa.eval.dataset import (EVAL_COLUMNS, REQUIRED, DatasetError, qa_files,
                                 rows_from_batches)
from radvqa.eval.predictions import Prediction, PredictionError, PredictionStore, RecordsHead, iter_records, native_id

PART_ROWS = 125_000  # rows a partition aims at: ~1.6 KB each while scored -> ~200 MB a partition
STREAM_ABOVE = 1_000_000  # evaluate() streams datasets with more rows than this (unless told)
_LEN = struct.Struct("<I")
_SPILL_ROWS = 4096  # rows a partition's QA spill writes at once


def _mem(what: str) -> None:
    if os.environ.get("RADVQA_EVAL_MEMLOG"):
        st = dict(ln.split(":", 1) for ln in open("/proc/self/status") if ln.startswith(("VmRSS", "VmHWM")))
        print(f"[mem] {what}: rss {st['VmRSS'].strip()}, peak {st['VmHWM'].strip()}", flush=True)


def part_of(key: str, n: int) -> int:
    if ":" in key:
        key = key[key.rfind(":") + 1:]
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % n


def partitions_for(rows: int) -> int:
    return max(1, -(-rows // PART_ROWS))


def dataset_rows(root: str | Path) -> int:
    """Row count from the Parquet footers (no data read)."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(str(f)).metadata.num_rows for f in qa_files(root))


# -- pass 1: spill -----------------------------------------------------------------------------
@dataclass
class Spilled:
    """What the parent keeps after reading the dataset once: the row count, the columns
    present, and whether a Medical-Diff-VQA row exists (captioning metrics may be due)."""

    n: int
    present: list[str]
    has_mdv: bool


def spill_qa(root: str | Path, n_parts: int, tmp: Path, batch_size: int = 65_536) -> Spilled:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    files = qa_files(root)
    dset = ds.dataset([str(f) for f in files], format="parquet")
    names = set(dset.schema.names)
    lacking = [c for c in REQUIRED if c not in names]
    if lacking:
        raise DatasetError(f"{root}/qa: required columns missing: {lacking}")
    present = [c for c in EVAL_COLUMNS if c in names]
    writers: list[Any] = [None] * n_parts
    opts = pa.ipc.IpcWriteOptions(compression="lz4")
    has_mdv = False
    n = 0
    pool = pa.default_memory_pool()
    # a partition's rows are written ~_SPILL_ROWS at a time: one IPC message per batch and
    # partition made the writes (and their per-buffer compression) grow as batches x partitions,
    # 141,000 writes of ~300 rows at 42M questions
    pending: list[list[Any]] = [[] for _ in range(n_parts)]
    pend_n = [0] * n_parts

    def flush(p: int, schema: Any) -> None:
        if writers[p] is None:
            writers[p] = pa.ipc.new_stream(str(tmp / f"qa-{p:05d}.arrows"), schema, options=opts)
        for b in pa.Table.from_batches(pending[p]).combine_chunks().to_batches():
            writers[p].write_batch(b)
        pending[p].clear()
        pend_n[p] = 0
    for batch in dset.to_batches(columns=present, batch_size=batch_size, batch_readahead=1, fragment_readahead=1, memory_pool=pool):
        m = batch.num_rows
        if not m:
            continue
        ids = batch.column("qa_id").to_pylist()
        parts = np.fromiter((part_of(str(q), n_parts) for q in ids), dtype=np.int64, count=m)
        if "strategy" in names and not has_mdv:
            has_mdv = bool(pc.any(pc.equal(batch.column("strategy"), "medical-diff-vqa")).as_py())
        order = np.argsort(parts, kind="stable")
        tagged = batch.append_column("_row", pa.array(np.arange(n, n + m, dtype=np.int64))).take(pa.array(order))
        counts = np.bincount(parts, minlength=n_parts)
        start = 0
        for p in np.flatnonzero(counts).tolist():
            k = int(counts[p])
            pending[p].append(tagged.slice(start, k))
            pend_n[p] += k
            if pend_n[p] >= _SPILL_ROWS:
                flush(p, tagged.schema)
            start += k
        n += m
    for p in range(n_parts):
        if pending[p]:
            flush(p, pending[p][0].schema)
    for w in writers:
        if w is not None:
            w.close()
    pool.release_unused()
    return Spilled(n=n, present=present, has_mdv=has_mdv)


@dataclass
class PredSpill:
    id_field: str
    text_field: str
    records: int
    lines: int
    first_id: str | None


def spill_predictions(path: str | Path, id_field: str | None, text_field: str | None, n_parts: int, tmp: Path,
                      prefix: str, chunk: int = 4096) -> PredSpill:
    """Each record (line number, id, text, extras) to its partition's file, in msgpack chunks."""
    import msgspec

    enc = msgspec.msgpack.Encoder().encode
    head = RecordsHead()
    bufs: list[list[Any]] = [[] for _ in range(n_parts)]
    fhs: list[Any] = [None] * n_parts

    def flush(p: int) -> None:
        if fhs[p] is None:
            fhs[p] = open(tmp / f"{prefix}-{p:05d}.msgpack", "wb")
        data = enc(bufs[p])
        fhs[p].write(_LEN.pack(len(data)))
        fhs[p].write(data)
        bufs[p].clear()

    records = 0
    try:
        for lineno, key, text, extra in iter_records(str(path), id_field, text_field, head):
            records += 1
            p = part_of(key, n_parts)
            b = bufs[p]
            b.append((lineno, key, text, extra))
            if len(b) >= chunk:
                flush(p)
        for p in range(n_parts):
            if bufs[p]:
                flush(p)
    finally:
        for fh in fhs:
            if fh is not None:
                fh.close()
    return PredSpill(head.id_field, head.text_field, records, head.lines, head.first_id)


def _read_preds(tmp: Path, prefix: str, p: int) -> Iterator[Any]:
    import msgspec

    path = tmp / f"{prefix}-{p:05d}.msgpack"
    if not path.is_file():
        return
    dec = msgspec.msgpack.Decoder().decode
    with open(path, "rb") as fh:
        while True:
            h = fh.read(4)
            if not h:
                break
            yield from dec(fh.read(_LEN.unpack(h)[0]))


def _read_qa(tmp: Path, p: int, columns: list[str] | None = None) -> Any:
    import pyarrow as pa

    path = tmp / f"qa-{p:05d}.arrows"
    if not path.is_file():
        return None
    with pa.ipc.open_stream(str(path)) as r:
        t = r.read_all()
    return t.select(columns) if columns is not None else t


def _spill(dataset: Any, predictions: Any, baseline: Any, id_field: str | None, text_field: str | None, n_parts: int,
           tmp: Path, apart: bool) -> tuple[Spilled, PredSpill, PredSpill | None]:
    """Both spills; ``apart``: at once, each in a child process, so the reading's transient
    memory (Arrow buffers, the allocator's leftovers: ~0.5 GB at 10M rows) is never the parent's.
    Errors are raised in the in-memory path's order (the dataset's first)."""
    if not apart:
        sp = spill_qa(dataset, n_parts, tmp)
        ps = spill_predictions(predictions, id_field, text_field, n_parts, tmp, "pred")
        bs = spill_predictions(baseline, None, None, n_parts, tmp, "base") if baseline is not None else None
        return sp, ps, bs
    import multiprocessing as mp

    with ProcessPoolExecutor(max_workers=3 if baseline is not None else 2, mp_context=mp.get_context("forkserver")) as ex:
        f_qa = ex.submit(spill_qa, dataset, n_parts, tmp)
        f_p = ex.submit(spill_predictions, predictions, id_field, text_field, n_parts, tmp, "pred")
        f_b = ex.submit(spill_predictions, baseline, None, None, n_parts, tmp, "base") if baseline is not None else None
        return f_qa.result(), f_p.result(), (f_b.result() if f_b is not None else None)


# -- pass 2: match ---------------------------------------------------------------------------
@dataclass
class Job:
    tmp: str
    dataset: str
    present: list[str]
    protocol: str = "radvqa"
    box_format: str = "auto"
    keep_splits: list[Any] | None = None  # None: every row
    native: bool = False
    base_native: bool | None = None  # the --baseline file's join (None: no such file)
    audit_train: str | None = None  # dataset whose train split trains the text-only baselines
    want_caption: bool = False
    want_judge: bool = False
    n_parts: int = 1
    circ_buckets: int = 1  # pass 4's buckets of choice rows (by circular group hash)


def match_part(job: Job, p: int) -> dict[str, Any]:
    """Per split value of the partition's rows: [rows, rows whose qa_id has a prediction, rows
    whose native id has one, rows with either; the same two for the baseline file] and its
    first (row, qa_id); the first repeated qa_id and prediction id."""
    tmp = Path(job.tmp)
    t = _read_qa(tmp, p, ["_row", "qa_id"] + (["split"] if "split" in job.present else []))
    out: dict[str, Any] = {"p": p}
    hits: dict[str, np.ndarray] = {}
    for prefix in ("pred", "base"):
        seen: set[str] = set()
        dup = None
        for rec in _read_preds(tmp, prefix, p):
            k = rec[1]
            if k in seen:
                if dup is None or rec[0] < dup[0]:
                    dup = (rec[0], k)
            seen.add(k)
        out[f"{prefix}_dup"] = dup
        if t is None:
            continue
        ids = t.column("qa_id").to_pylist()
        hits[f"{prefix}_direct"] = np.fromiter((q in seen for q in ids), dtype=bool, count=len(ids))
        hits[f"{prefix}_native"] = np.fromiter((native_id(q) in seen for q in ids), dtype=bool, count=len(ids))
    if t is None:
        return out
    rows = t.column("_row").to_numpy()
    ids = t.column("qa_id").to_pylist()
    seen_q: set[str] = set()
    for r, q in zip(rows.tolist(), ids):
        if q in seen_q:
            out["qa_dup"] = (r, q)
            break
        seen_q.add(q)
    splits = t.column("split").to_pylist() if "split" in job.present else [None] * len(ids)
    codes: dict[Any, int] = {}
    code = np.fromiter((codes.setdefault(s, len(codes)) for s in splits), dtype=np.int64, count=len(splits))
    cols = [hits["pred_direct"], hits["pred_native"], hits["pred_direct"] | hits["pred_native"], hits["base_direct"], hits["base_native"]]
    by: dict[Any, list[Any]] = {}
    for s, c in codes.items():
        m = code == c
        first = int(np.argmax(m))
        by[s] = [int(m.sum())] + [int(x[m].sum()) for x in cols] + [(int(rows[first]), ids[first])]
    out["by_split"] = by
    return out


# -- pass 3: score ---------------------------------------------------------------------------
_TRAIN_CACHE: dict[str, Any] = {}


def _train_rows(path: str) -> dict[str, list[Any]]:
    """The train split's columns the text-only baselines read (cached per process)."""
    hit = _TRAIN_CACHE.get(path)
    if hit is None:
        import pyarrow.compute as pc
        import pyarrow.dataset as ds

        from radvqa.eval.evaluate import _BASE_COLUMNS

        dset = ds.dataset([str(f) for f in qa_files(path)], format="parquet")
        names = set(dset.schema.names)
        cols = [c for c in _BASE_COLUMNS if c in names]
        t = dset.to_table(columns=cols, filter=pc.field("split") == "train")
        hit = {c: (t.column(c).to_pylist() if c in names else [None] * t.num_rows) for c in _BASE_COLUMNS}
        _TRAIN_CACHE.clear()
        _TRAIN_CACHE[path] = hit
    return hit


def _take_rows(t: Any, keep: list[Any] | None) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    if keep is None:
        return t
    mask = pc.is_in(t.column("split"), value_set=pa.array(keep, type=t.schema.field("split").type), skip_nulls=False)
    return t.filter(mask)


def _aligned(job: Job, p: int, prefix: str, keys: list[str]) -> tuple[Any, list[int], Any]:
    """Predictions of the partition in row order (Aligned), the rows without one, and the
    (line, id) of records no row asked for."""
    from radvqa.eval.predictions import Aligned

    store = PredictionStore()
    lines: list[int] = []
    ids: list[str] = []
    for lineno, key, text, extra in _read_preds(Path(job.tmp), prefix, p):
        if extra is None:
            store.add(key, Prediction(text))
        else:
            boxes, fmt, size, err = extra
            store.add(key, Prediction(text, boxes, fmt, None if size is None else tuple(size), err))
        lines.append(lineno)
        ids.append(key)
    get = store.index.get
    pos = np.fromiter((get(k, -1) for k in keys), dtype=np.int32, count=len(keys))
    keyset = set(keys)
    extra_recs = [(ln, k) for ln, k in zip(lines, ids) if k not in keyset]
    return Aligned(store, pos), np.flatnonzero(pos < 0).tolist(), extra_recs


def score_part(job: Job, p: int) -> dict[str, Any]:
    import gc

    # a partition's rows are millions of small objects that form no cycles: as evaluate() does,
    # the cyclic collector is paused while they are scored (in a pool worker too)
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _score_part(job, p)
    finally:
        if enabled:
            gc.enable()


def _score_part(job: Job, p: int) -> dict[str, Any]:
    import pyarrow as pa

    from radvqa.eval.dataset import ImageSizes
    from radvqa.eval.evaluate import _baseline_preds, chance_levels, tag_counts
    from radvqa.eval.scoring import Scorer

    tmp = Path(job.tmp)
    t = _read_qa(tmp, p)
    if t is not None:
        t = _take_rows(t, job.keep_splits)
    if t is None or t.num_rows == 0:
        # no evaluated row here: every prediction of the partition is unmatched
        extra = sorted((rec[0], rec[1]) for rec in _read_preds(tmp, "pred", p))
        return {"p": p, "extra": (len(extra), extra[:50])}
    rows_g = t.column("_row").to_numpy()
    rows, n = rows_from_batches(t.to_batches(), EVAL_COLUMNS, job.present)
    t = None
    qa_ids = rows["qa_id"]
    keys = [native_id(q) for q in qa_ids] if job.native else qa_ids
    aligned, missing, extra = _aligned(job, p, "pred", keys)
    scorer = Scorer(job.protocol, box_format=job.box_format, sizes=ImageSizes(job.dataset))
    sc = scorer.score(rows, aligned)
    texts = aligned.texts()
    out: dict[str, Any] = {"p": p, "n": n}
    # the report's numbers as mergeable cells: nothing a row goes back to the parent
    cells = Cells.of(rows, sc, rows_g, circular=False)
    # circular evaluation groups rows of a study across partitions: the choice rows go to
    # bucket files by group hash, and pass 4 reduces one bucket (whole groups) at a time
    circ = circular_rows(rows, sc, cells.a)  # type: ignore[attr-defined]
    nb = job.circ_buckets
    bucket = np.mod(circ[:, 1], nb)
    circ = circ[np.argsort(bucket, kind="stable")]
    with open(tmp / f"circ-{p:05d}.bin", "wb") as fh:
        fh.write(np.ascontiguousarray(circ).tobytes())
    np.save(tmp / f"circ-{p:05d}.idx.npy", np.concatenate(([0], np.cumsum(np.bincount(bucket, minlength=nb)))).astype(np.int64))
    out["missing"] = (len(missing), [(int(rows_g[i]), qa_ids[i]) for i in missing[:50]])
    extra.sort()
    out["extra"] = (len(extra), extra[:50])
    if job.protocol == "radvqa":
        out["tags"] = tag_counts(rows, texts, sc)
    open_idx = [i for i, k in enumerate(sc.kind) if k == "open"]
    if job.want_caption:
        out["caption"] = [(int(rows_g[i]), rows["answer"][i], texts[i], rows["question_type"][i], rows["strategy"][i]) for i in open_idx]
    # rows of the benchmark-specific blocks (probe pairs, CXReasonBench): few, kept whole
    from radvqa.eval.cxreasonbench import SOURCE as CXR_SOURCE
    from radvqa.eval.pairs import STRATEGY as PROBE

    out["bench"] = [(int(rows_g[i]), qa_ids[i], st, so, rows["study_id"][i], rows["question"][i], rows["answer"][i], texts[i],
                     sc.correct[i], sc.value[i])
                    for i, (st, so) in enumerate(zip(rows["strategy"], rows["source"])) if st == PROBE or so == CXR_SOURCE]
    if job.want_judge:
        out["judge"] = [(int(rows_g[i]), rows["question"][i], rows["answer"][i], texts[i]) for i, k in enumerate(sc.kind) if k in ("open", "short")]
    # per-question lines, written to a file in row order for report.write_report to merge
    pq_path = tmp / f"perq-{p:05d}.arrows"
    tbl = pa.table({
        "_row": pa.array(rows_g, type=pa.int64()),
        "qa_id": pa.array(qa_ids, type=pa.string()),
        "kind": pa.array(sc.kind, type=pa.string()),
        "status": pa.array(sc.status, type=pa.string()),
        "reason": pa.array(list(sc.reason), type=pa.string()),
        "extracted": pa.array(sc.value, type=pa.string()),
        "correct": pa.array(list(sc.correct), type=pa.float64()),
        "token_f1": pa.array(list(sc.tok_f1), type=pa.float64()),
        "iou": pa.array(list(sc.iou), type=pa.float64()),
    })
    with pa.ipc.new_stream(str(pq_path), tbl.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as w:
        # small batches: writing per_question.jsonl holds one decoded batch of every partition
        w.write_table(tbl, max_chunksize=512)
    del tbl
    if job.audit_train is not None or job.base_native is not None:
        cells.add_chance(rows, chance_levels(rows, sc))
        if job.base_native is not None:  # --baseline FILE
            bkeys = [native_id(q) for q in qa_ids] if job.base_native else qa_ids
            base_preds = _aligned(job, p, "base", bkeys)[0]
        else:
            base_preds = _baseline_preds(_audit_rows(job.audit_train, rows), rows, "bow")
        out["base"] = Cells.of(rows, Scorer(job.protocol, box_format=job.box_format).score(rows, base_preds), rows_g, full=False).detach()
        if job.audit_train is not None:
            prior = _baseline_preds(_audit_rows(job.audit_train, rows), rows, "prior")
            out["prior"] = Cells.of(rows, Scorer(job.protocol, box_format=job.box_format).score(rows, prior), rows_g, full=False).detach()
    out["cells"] = cells.detach()
    import resource

    out["peak_rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # of the process that scored it
    return out


def _audit_rows(train_path: str, rows: dict[str, Any]) -> dict[str, Any]:
    """evaluate._training_rows for a partition: the train rows, then the partition's rows."""
    from radvqa.eval.evaluate import _BASE_COLUMNS

    src = _train_rows(train_path)
    n_train = len(src["qa_id"])
    out: dict[str, Any] = {}
    for c in _BASE_COLUMNS:
        col_e = rows.get(c)
        out[c] = list(src[c]) + (list(col_e) if col_e is not None else [None] * len(rows["qa_id"]))
    out["split"] = ["train"] * n_train + ["__eval__"] * len(rows["qa_id"])
    out["qa_id"] = [f"t{i}" for i in range(n_train)] + [f"e{i}" for i in range(len(rows["qa_id"]))]
    out["_n_train"] = n_train
    return out


# -- pass 4: circular evaluation ---------------------------------------------------------------
def circ_bucket(job: Job, b: int) -> Circular:
    """Circular evaluation of bucket ``b``: its slice of every partition's choice rows."""
    tmp = Path(job.tmp)
    parts = []
    for p in range(job.n_parts):
        f = tmp / f"circ-{p:05d}.bin"
        if not f.is_file():
            continue
        idx = np.load(tmp / f"circ-{p:05d}.idx.npy")
        a, z = int(idx[b]), int(idx[b + 1])
        if z > a:
            with open(f, "rb") as fh:
                fh.seek(a * 48)
                parts.append(np.frombuffer(fh.read((z - a) * 48), dtype=np.int64).reshape(-1, 6))
    return Circular.of(np.concatenate(parts) if parts else np.zeros((0, 6), dtype=np.int64))


class PerQuestion:
    """The partitions' per-question files: ``write_jsonl`` merges them in row order into
    per_question.jsonl (report.write_report), then they go with the temporary folder."""

    def __init__(self, tmp: tempfile.TemporaryDirectory, n_parts: int) -> None:  # type: ignore[type-arg]
        self.tmp = tmp
        self.n_parts = n_parts

    def _lines(self, p: int) -> Iterator[tuple[int, str]]:
        import pyarrow as pa

        path = Path(self.tmp.name) / f"perq-{p:05d}.arrows"
        if not path.is_file():
            return
        with pa.ipc.open_stream(str(path)) as r:
            for batch in r:
                d = batch.to_pydict()
                for row, q, kind, st, why, val, ok, f1, iou in zip(d["_row"], d["qa_id"], d["kind"], d["status"], d["reason"],
                                                                    d["extracted"], d["correct"], d["token_f1"], d["iou"]):
                    yield row, json.dumps({"qa_id": q, "kind": kind, "status": st, "reason": why, "extracted": val,
                                           "correct": ok, "token_f1": f1, "iou": iou}, ensure_ascii=False)

    def write_jsonl(self, fh: Any) -> None:
        buf: list[str] = []
        for _, line in heapq.merge(*(self._lines(p) for p in range(self.n_parts)), key=lambda x: x[0]):
            buf.append(line)
            if len(buf) >= 8192:
                fh.write("\n".join(buf) + "\n")
                buf.clear()
        if buf:
            fh.write("\n".join(buf) + "\n")


# -- the run ---------------------------------------------------------------------------------
def _map(fn: Callable[[Job, int], Any], job: Job, parts: list[int], workers: int) -> Iterator[Any]:
    if workers <= 1 or len(parts) <= 1:
        for p in parts:
            yield fn(job, p)
        return
    import multiprocessing as mp

    with ProcessPoolExecutor(max_workers=min(workers, len(parts)), mp_context=mp.get_context("forkserver")) as ex:
        yield from ex.map(fn, [job] * len(parts), parts)


def evaluate_stream(dataset: str | Path, predictions: str | Path, protocol: str, id_field: str | None, text_field: str | None,
                    split: str, box_format: str, bootstrap: int, seed: int, judge: Any, baseline: str | Path | None, audit: bool,
                    progress: Callable[[int, int], None] | None, partitions: int | None, workers: int) -> dict[str, Any]:
    """``evaluate`` by partitions; same report (``_per_question`` is a PerQuestion)."""
    from radvqa.eval.evaluate import EvalError

    t0 = time.perf_counter()
    n_rows = dataset_rows(dataset)
    n_parts = partitions or partitions_for(n_rows)
    tmpd = tempfile.TemporaryDirectory(prefix="radvqa-eval-", dir=os.environ.get("RADVQA_TMP"))
    tmp = Path(tmpd.name)
    base_file = baseline if (audit and baseline is not None) else None
    sp, ps, bs = _spill(dataset, predictions, base_file, id_field, text_field, n_parts, tmp,
                        apart=workers > 1 or n_rows > STREAM_ABOVE)
    _mem("spilled")
    job = Job(tmp=str(tmp), dataset=str(dataset), present=sp.present, protocol=protocol, box_format=box_format)
    n = sp.n
    # per split value: [rows, pred direct, pred native, pred either, base direct, base native]
    by_split: dict[Any, list[int]] = {}
    qa_dup = pred_dup = base_dup = None
    first_by_split: dict[Any, tuple[int, str]] = {}
    for r in _map(match_part, job, list(range(n_parts)), workers):
        for prefix in ("pred", "base"):
            d = r.get(f"{prefix}_dup")
            if d is not None:
                if prefix == "pred" and (pred_dup is None or d < pred_dup):
                    pred_dup = d
                if prefix == "base" and (base_dup is None or d < base_dup):
                    base_dup = d
        if "by_split" not in r:
            continue
        q = r.get("qa_dup")
        if q is not None and (qa_dup is None or q < qa_dup):
            qa_dup = q
        for s, v in r["by_split"].items():
            counts, fr = v[:-1], v[-1]
            by_split[s] = [x + y for x, y in zip(by_split.get(s, [0] * len(counts)), counts)]
            if s not in first_by_split or fr < first_by_split[s]:
                first_by_split[s] = fr
    _mem("matched")
    if qa_dup is not None:
        raise DatasetError(f"{dataset}/qa: qa_id {qa_dup[1]!r} occurs more than once")
    if pred_dup is not None:
        raise PredictionError(f"{predictions}:{pred_dup[0]}: duplicate prediction for id {pred_dup[1]!r}")
    if base_dup is not None:
        raise PredictionError(f"{baseline}:{base_dup[0]}: duplicate prediction for id {base_dup[1]!r}")

    # --split, as evaluate.choose_split
    present_vals = list(by_split)
    keep: list[Any] | None = None
    if split == "all":
        rule = "all rows (--split all)"
    elif split != "auto":
        if split not in present_vals:
            raise EvalError(f"no rows of split {split!r} (present: {sorted(set(present_vals))})")
        keep, rule = [split], f"split {split} (--split {split})"
    else:
        col = 1 if sum(v[1] for v in by_split.values()) >= min(n, ps.records) else 3
        hit_vals = {s for s, v in by_split.items() if v[col]}
        if hit_vals and hit_vals != set(present_vals):
            keep = sorted(hit_vals)
            rule = f"split {', '.join(keep)} (auto: the splits holding the matched predictions)"
        else:
            rule = "all rows (auto)"
    kept = [v for s, v in by_split.items() if keep is None or s in keep]
    n_sub = sum(v[0] for v in kept)

    def join_mode(direct: int, native: int, records: int) -> bool:
        d = sum(v[direct] for v in kept)
        return d < min(n_sub, records) and sum(v[native] for v in kept) > d

    job.native = join_mode(1, 2, ps.records)
    matched = sum(v[2 if job.native else 1] for v in kept)
    if matched == 0:
        firsts = [fr for s, fr in first_by_split.items() if keep is None or s in keep]
        first_q = min(firsts)[1] if firsts else None
        raise EvalError(
            f"no prediction matches a question: ids like {ps.first_id!r} (field {ps.id_field!r}) "
            f"vs qa_id like {first_q!r}; use --id-field"
        )
    job.keep_splits = keep
    if bs is not None:
        job.base_native = join_mode(4, 5, bs.records)
    # the shortcut audit's training rows, as evaluate._training_rows decides them
    train_desc = ""
    n_train = 0
    if audit:
        if "train" in present_vals and keep is not None and "train" not in keep:
            job.audit_train, train_desc = str(dataset), "train split"
            n_train = by_split["train"][0]
        elif "train" not in present_vals:
            try:
                m = json.loads((Path(dataset) / "manifest.json").read_text("utf-8"))
            except (OSError, ValueError):
                m = {}
            parent = ((m.get("subset") or {}).get("parent") or {}).get("path")
            if parent and (Path(parent) / "qa").is_dir():
                import pyarrow.compute as pc
                import pyarrow.dataset as ds

                pds = ds.dataset([str(f) for f in qa_files(parent)], format="parquet")
                if "split" in pds.schema.names:
                    n_train = pds.count_rows(filter=pc.field("split") == "train")
                if n_train:
                    job.audit_train, train_desc = str(parent), f"parent build's train split ({parent})"
    job.want_caption = sp.has_mdv and protocol == "radvqa"
    job.want_judge = judge is not None
    job.n_parts = n_parts
    job.circ_buckets = n_parts
    t_load = time.perf_counter()

    # what comes back from a partition is summed: cells, tallies, a few kept rows (the
    # benchmark blocks, captioning, the judge's questions), never a per-question array
    cells = base_cells = prior_cells = None
    tags: dict[str, Any] | None = None
    missing_n = extra_n = 0
    missing_ids: list[tuple[int, str]] = []
    extra_ids: list[tuple[int, str]] = []
    caption: list[Any] = []
    judged: list[Any] = []
    bench: list[Any] = []
    done = 0
    worker_rss = 0

    def merged(a: Cells | None, b: Cells | None) -> Cells | None:
        if a is None:
            return b
        if b is not None:
            a.add(b)
        return a

    for r in _map(score_part, job, list(range(n_parts)), workers):
        extra_n += r["extra"][0]
        extra_ids = heapq.nsmallest(50, extra_ids + r["extra"][1])
        if "cells" not in r:
            continue
        cells = merged(cells, r["cells"])
        base_cells = merged(base_cells, r.get("base"))
        prior_cells = merged(prior_cells, r.get("prior"))
        tags = _merge_tags(tags, r.get("tags"))
        missing_n += r["missing"][0]
        missing_ids = heapq.nsmallest(50, missing_ids + r["missing"][1])
        caption.extend(r.get("caption", []))
        judged.extend(r.get("judge", []))
        bench.extend(r["bench"])
        done += r["n"]
        worker_rss = max(worker_rss, r["peak_rss_kb"])
        if progress is not None:
            progress(done, n_sub)
    if cells is None:
        cells = Cells()
    for circ in _map(circ_bucket, job, list(range(job.circ_buckets)), workers):
        cells.circular.add(circ)
    _mem("scored")
    t_score = time.perf_counter()

    agg = CellAggregator(cells, bootstrap, seed)
    report = _report_head(dataset, predictions, protocol, n_sub, rule, n, ps, matched, missing_n, missing_ids, extra_n, extra_ids,
                          bootstrap, seed, job.native)
    report["overall"] = agg.overall()
    _mem("overall")
    report["parse_failures"] = agg.parse_failures()
    if protocol == "llava-med":
        report["llava_med"] = agg.llava_med()
    from radvqa.eval.evaluate import aggregate_blocks

    aggregate_blocks(report, agg)
    _mem("confusion, circular, grounding, breakdowns")
    if protocol == "radvqa":
        from radvqa.eval.evaluate import tag_block

        tb = tag_block(tags)
        if tb:
            report["tags"] = tb
        if caption and any(c[4] == "medical-diff-vqa" for c in caption):
            from radvqa.eval.caption import caption_block

            caption.sort()
            cap_rows = {"answer": [c[1] for c in caption], "question_type": [c[3] for c in caption]}
            report["captioning"] = caption_block(cap_rows, [c[2] for c in caption], ["open"] * len(caption))
    if bench:
        from types import SimpleNamespace

        from radvqa.eval.cxreasonbench import cxreasonbench_block
        from radvqa.eval.pairs import pairs_block
        from radvqa.eval.scoring import FloatColumn

        bench.sort()
        b_rows = {k: [b[j] for b in bench] for j, k in enumerate(("_row", "qa_id", "strategy", "source", "study_id", "question", "answer"))}
        b_scores = SimpleNamespace(correct=FloatColumn(b[8] for b in bench), value=[b[9] for b in bench])
        pb = pairs_block(dataset, b_rows, b_scores)
        if pb:
            report["probe_pairs"] = pb
        cb = cxreasonbench_block(dataset, b_rows, [b[7] for b in bench], b_scores, judge)
        if cb:
            report["cxreasonbench"] = cb
    if judge is not None:
        from radvqa.eval.judge import summarize

        judged.sort()
        verdicts = judge.judge_many([(q, a, t) for _, q, a, t in judged])
        report["judge"] = summarize(verdicts, judge.version, judge.cfg.model)
        report["judge"]["requests_sent"] = judge.requests
    if audit:
        if base_cells is not None:
            _TRAIN_CACHE.clear()
            if baseline is not None:
                name = str(baseline)
            else:
                name = f"text-only bag-of-words (trained on {n_train} rows of the {train_desc})"
            prior_agg = prior_name = None
            if prior_cells is not None:
                prior_agg = CellAggregator(prior_cells, 0, seed)
                prior_name = f"answer prior: the most frequent answer of each answer kind in the {train_desc}"
            report["shortcut_audit"] = shortcut_audit(agg, CellAggregator(base_cells, 0, seed), name, prior=prior_agg,
                                                      prior_name=prior_name, chance=True)
        else:
            report["shortcut_audit"] = {"note": "no --baseline given and no train split outside the evaluated rows "
                                                "(nor a parent build with one)"}
    meta = Path(str(predictions) + ".meta.json")
    if meta.is_file():
        try:
            report["predictions"]["meta"] = json.loads(meta.read_text("utf-8"))
        except ValueError as e:
            report["predictions"]["meta"] = {"error": f"unreadable {meta.name}: {e}"}
    report["timings_s"] = {
        "load_and_join": round(t_load - t0, 3),
        "score": round(t_score - t_load, 3),
        "aggregate_and_extras": round(time.perf_counter() - t_score, 3),
    }
    # the per-question files stay (in the temporary folder) until the report is written
    for pattern in ("qa-*.arrows", "pred-*.msgpack", "base-*.msgpack", "circ-*"):
        for f in tmp.glob(pattern):
            f.unlink()
    report["timings_s"].update(partitions=n_parts, workers=workers, scoring_process_peak_rss_mb=round(worker_rss / 1024))
    report["_per_question"] = PerQuestion(tmpd, n_parts)
    return report


def _merge_tags(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
    if b is None:
        return a
    if a is None or "error" in b:
        return {k: (list(v) if isinstance(v, list) else v) for k, v in b.items()}
    if "error" in a:
        return a
    for k, v in b.items():
        a[k] = [x + y for x, y in zip(a[k], v)] if k in a else list(v)
    return a


def _report_head(dataset: Any, predictions: Any, protocol: str, n_sub: int, rule: str, n: int, ps: PredSpill, matched: int,
                 missing_n: int, missing_ids: list[tuple[int, str]], extra_n: int, extra_ids: list[tuple[int, str]],
                 bootstrap: int, seed: int, native: bool) -> dict[str, Any]:
    from radvqa import __version__
    from radvqa.eval.parsers import Parser
    from radvqa.eval.scoring import PROTOCOL_VERSIONS
    from radvqa.eval.vocab import load_vocab

    return {
        "radvqa_version": __version__,
        "protocol": protocol,
        "protocol_version": PROTOCOL_VERSIONS[protocol],
        "parser_version": Parser().version,
        "parser_vocabulary_version": load_vocab()["version"],
        "dataset": str(dataset),
        "evaluated": {"rows": n_sub, "rule": rule, "dataset_rows": n},
        "predictions": {
            "path": str(predictions),
            "id_field": ps.id_field,
            "text_field": ps.text_field,
            "joined_by": "native" if native else "qa_id",
            "records": ps.records,
            "matched": matched,
            "missing": missing_n,
            "missing_ids": [q for _, q in missing_ids],
            "unmatched_records": extra_n,
            "unmatched_ids": [k for _, k in extra_ids],
            "note": "questions without a prediction are scored as wrong and counted under 'missing'",
        },
        "bootstrap": {"resamples": bootstrap, "seed": seed, "normal_approximation_above": 20_000, "binary_scores": "binomial form (exact)"},
    }

