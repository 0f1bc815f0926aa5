"""Streaming ``radvqa eval``: the questions and the predictions are hashed into the same
partitions, each partition is scored on its own (by one process or a pool), and the report is
built from what the partitions return. Memory is bounded by a partition, not by the dataset,
except for a few bytes a row that the aggregation reads (see ``CompactAggregator``).

Partition key: the part of an id after its last ":" (zlib.crc32). A prediction keyed by
``qa_id`` and one keyed by the benchmark's native id (the part of ``qa_id`` after its first
":") share that suffix with their question, so both ways of joining (predictions.join) stay
inside a partition.

Passes:

1. the parent reads the QA shards once, writing each partition's rows (Arrow IPC, lz4) with
   their row number, and keeps the grouping columns as integer codes; it reads the predictions
   file once (every malformed line raises here, naming it), writing each partition's records;
2. per partition (``match_part``): which rows a prediction matches by qa_id and by native id;
   the parent then applies ``--split`` and the join rule of the in-memory path to the totals;
3. per partition (``score_part``): join, score, tag counts, parse-failure and box-error
   tallies, circular-evaluation keys, per-question lines; the parent puts the per-row scores
   into numpy columns in row order, so means and intervals are computed on the very arrays
   the in-memory path builds (identical numbers, tests/test_eval_stream.py).
"""

from __future__ import annotations

import hashlib
import heapq
import json
import os
import struct
import tempfile
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from radvqa.eval.aggregate import Aggregator
from radvqa.eval.dataset import (EVAL_COLUMNS, REQUIRED, CatColumn, DatasetError, _codes, qa_files,
                                 rows_from_batches)
from radvqa.eval.predictions import Prediction, PredictionError, PredictionStore, RecordsHead, iter_records, native_id

PART_ROWS = 125_000  # rows a partition aims at: ~1.6 KB each while scored -> ~200 MB a partition
STREAM_ABOVE = 1_000_000  # evaluate() streams datasets with more rows than this (unless told)
KINDS = ("yes_no", "choice", "count", "short", "open", "closed")
STATUS = ("parsed", "unparsed", "missing")
GROUP_COLUMNS = ("split", "strategy", "question_type", "modality", "polarity")
_LEN = struct.Struct("<I")


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
class CodeListColumn:
    """A list<string> column as offsets + int32 codes into ``table`` (findings, regions):
    what ``eval.dataset.ListColumn`` holds, in 4 bytes a value instead of a pointer."""

    def __init__(self, offsets: np.ndarray, codes: np.ndarray, table: list[Any]) -> None:
        self.offsets, self.codes, self.table = offsets, codes, table

    def take_mask(self, mask: np.ndarray) -> "CodeListColumn":
        lengths = np.diff(self.offsets)[mask]
        keep = np.repeat(mask, np.diff(self.offsets))
        off = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=off[1:])
        return CodeListColumn(off, self.codes[keep], self.table)

    def groups(self) -> dict[str, np.ndarray]:
        """value -> rows holding it (each row once, in order); None and "" left out."""
        n = len(self.offsets) - 1
        rows = np.repeat(np.arange(n, dtype=np.int32 if n < 2**31 else np.int64), np.diff(self.offsets))
        out: dict[str, np.ndarray] = {}
        if not rows.size:
            return out
        order = np.argsort(self.codes, kind="stable")  # rows ascend within a value: they are in row order
        c, r = self.codes[order], rows[order]
        del order, rows
        keep = np.ones(len(c), dtype=bool)
        keep[1:] = (c[1:] != c[:-1]) | (r[1:] != r[:-1])
        c, r = c[keep], r[keep]
        bounds = np.flatnonzero(np.diff(c)) + 1
        for a, b in zip(np.concatenate(([0], bounds)).tolist(), np.concatenate((bounds, [len(c)])).tolist()):
            v = self.table[int(c[a])]
            if v is None or v == "":
                continue
            out[v] = r[a:b]
        return out


class _ListCodes:
    def __init__(self) -> None:
        self.pool: dict[Any, int] = {}
        self.offsets: list[np.ndarray] = []
        self.codes: list[np.ndarray] = []
        self.total = 0

    def add(self, col: Any) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if pa.types.is_null(arr.type):
            self.offsets.append(np.full(len(arr), self.total, dtype=np.int64))
            return
        off = np.asarray(arr.offsets, dtype=np.int64)
        start, stop = int(off[0]), int(off[-1])
        vals = arr.values.slice(start, stop - start)
        if not (pa.types.is_string(vals.type) or pa.types.is_large_string(vals.type)):
            vals = pc.cast(vals, pa.string())
        self.offsets.append(off[1:] - start + self.total)
        self.codes.append(_codes(vals, self.pool) if len(vals) else np.zeros(0, dtype=np.int32))
        self.total += stop - start

    def build(self) -> CodeListColumn:
        table: list[Any] = [None] * len(self.pool)
        for v, k in self.pool.items():
            table[k] = v
        # the smallest types that hold them: this column is kept for every row of the dataset
        off_t = np.int32 if self.total < 2**31 else np.int64
        off = np.concatenate([np.zeros(1, dtype=off_t)] + [o.astype(off_t) for o in self.offsets])
        self.offsets = []
        codes = np.concatenate(self.codes) if self.codes else np.zeros(0, dtype=np.int32)
        return CodeListColumn(off, codes.astype(np.int16) if len(table) < 2**15 else codes, table)


@dataclass
class Spilled:
    """What the parent keeps after reading the dataset once: row count, the grouping
    columns as codes, the partitions' files."""

    n: int
    groups: dict[str, Any]
    present: list[str]
    has_mdv: bool  # a Medical-Diff-VQA row exists (captioning metrics may be due)


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
    pools: dict[str, dict[Any, int]] = {c: {} for c in GROUP_COLUMNS}
    codes: dict[str, list[np.ndarray]] = {c: [] for c in GROUP_COLUMNS}
    lists = {c: _ListCodes() for c in ("findings", "regions")}
    has_mdv = False
    n = 0
    pool = pa.default_memory_pool()
    for batch in dset.to_batches(columns=present, batch_size=batch_size, batch_readahead=1, fragment_readahead=1, memory_pool=pool):
        m = batch.num_rows
        if not m:
            continue
        ids = batch.column("qa_id").to_pylist()
        parts = np.fromiter((part_of(str(q), n_parts) for q in ids), dtype=np.int64, count=m)
        for c in GROUP_COLUMNS:
            col = batch.column(c) if c in names else pa.nulls(m, pa.string())
            if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
                col = pc.cast(col, pa.string())
            codes[c].append(_codes(col, pools[c]))
        for c, lc in lists.items():
            lc.add(batch.column(c) if c in names else pa.nulls(m))
        if "strategy" in names and not has_mdv:
            has_mdv = bool(pc.any(pc.equal(batch.column("strategy"), "medical-diff-vqa")).as_py())
        order = np.argsort(parts, kind="stable")
        tagged = batch.append_column("_row", pa.array(np.arange(n, n + m, dtype=np.int64))).take(pa.array(order))
        counts = np.bincount(parts, minlength=n_parts)
        start = 0
        for p in np.flatnonzero(counts).tolist():
            k = int(counts[p])
            if writers[p] is None:
                writers[p] = pa.ipc.new_stream(str(tmp / f"qa-{p:05d}.arrows"), tagged.schema, options=opts)
            writers[p].write_batch(tagged.slice(start, k))
            start += k
        n += m
    for w in writers:
        if w is not None:
            w.close()
    pool.release_unused()
    groups: dict[str, Any] = {}
    for c in GROUP_COLUMNS:
        groups[c] = CatColumn.build(codes.pop(c), pools[c])
    for c, lc in lists.items():
        groups[c] = lc.build()
    return Spilled(n=n, groups=groups, present=present, has_mdv=has_mdv)


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


def match_part(job: Job, p: int) -> dict[str, Any]:
    """Per row of the partition: its row number, split, and whether a prediction has its
    qa_id / its native id (also for the baseline file); the first repeated qa_id and
    prediction id."""
    tmp = Path(job.tmp)
    t = _read_qa(tmp, p, ["_row", "qa_id"] + (["split"] if "split" in job.present else []))
    out: dict[str, Any] = {"p": p}
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
        out[f"{prefix}_direct"] = np.fromiter((q in seen for q in ids), dtype=bool, count=len(ids))
        out[f"{prefix}_native"] = np.fromiter((native_id(q) in seen for q in ids), dtype=bool, count=len(ids))
    if t is None:
        return out
    rows = t.column("_row").to_numpy()
    ids = t.column("qa_id").to_pylist()
    out["rows"] = rows
    seen_q: set[str] = set()
    for r, q in zip(rows.tolist(), ids):
        if q in seen_q:
            out["qa_dup"] = (r, q)
            break
        seen_q.add(q)
    # the first row of each split value (the error message of a split without matches)
    splits = t.column("split").to_pylist() if "split" in job.present else [None] * len(ids)
    first: dict[Any, tuple[int, str]] = {}
    for r, q, s in zip(rows.tolist(), ids, splits):
        if s not in first:
            first[s] = (r, q)
    out["first_by_split"] = first
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


def _first_seen(counter: dict[Any, list[int]], key: Any, row: int) -> None:
    hit = counter.get(key)
    if hit is None:
        counter[key] = [1, row]
    else:
        hit[0] += 1


def _digest(x: Any) -> tuple[int, int]:
    h = hashlib.blake2b(repr(x).encode("utf-8", "surrogatepass"), digest_size=16).digest()
    return int.from_bytes(h[:8], "little", signed=True), int.from_bytes(h[8:], "little", signed=True)


def _floats(col: Any) -> np.ndarray:
    return col.numpy() if hasattr(col, "numpy") else np.array([np.nan if v is None else v for v in col], dtype=float)


_KIND_CODE = {k: i for i, k in enumerate(KINDS)}
_STATUS_CODE = {k: i for i, k in enumerate(STATUS)}


def _score_cols(sc: Any) -> dict[str, np.ndarray]:
    kind = np.fromiter(map(_KIND_CODE.__getitem__, sc.kind), dtype=np.int8, count=len(sc.kind))
    status = np.fromiter(map(_STATUS_CODE.__getitem__, sc.status), dtype=np.int8, count=len(sc.status))
    cols = {c: _floats(getattr(sc, c)) for c in ("correct", "exact", "tok_p", "tok_r", "tok_f1", "iou", "script_score")}
    cols["kind"] = kind
    cols["status"] = status
    return cols


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
    out: dict[str, Any] = {"p": p, "rows": rows_g, "n": n, "first": (int(rows_g[0]), qa_ids[0])}
    out.update(_score_cols(sc))
    out["grounding"] = np.array(sc.grounding, dtype=bool)
    out["gold_boxes"] = np.array(sc.gold_boxes, dtype=np.int32)
    out["pred_boxes"] = np.array([-1 if x is None else x for x in sc.pred_boxes], dtype=np.int32)
    out["missing"] = (len(missing), [(int(rows_g[i]), qa_ids[i]) for i in missing[:50]])
    extra.sort()
    out["extra"] = (len(extra), extra[:50])
    # tallies whose ties are broken by first occurrence: (count, first row)
    reasons: dict[tuple[str, str], list[int]] = {}
    for i, (k, st, why) in enumerate(zip(sc.kind, sc.status, sc.reason)):
        if st == "unparsed":
            _first_seen(reasons, (k, why or "?"), int(rows_g[i]))
    out["reasons"] = reasons
    yn: dict[tuple[str, str], int] = {}
    for i, k in enumerate(sc.kind):
        if k == "yes_no":
            gold = (rows["answer_short"][i] or "").strip().lower()
            st = sc.status[i]
            key = (gold, sc.value[i] if st == "parsed" else st)
            yn[key] = yn.get(key, 0) + 1
    out["yes_no"] = yn
    g, gold_n, iou = out["grounding"], out["gold_boxes"], out["iou"]
    gmask = (g & (gold_n > 0)) | (g & (gold_n == 0) & ~np.isnan(iou))
    errs: dict[str, list[int]] = {}
    for i in np.flatnonzero(gmask).tolist():
        e = sc.box_error[i]
        if e:
            _first_seen(errs, e, int(rows_g[i]))
    out["box_errors"] = errs
    # circular evaluation: the group key and the option order of each choice row, hashed
    circ: list[tuple[int, int, int, int, int]] = []
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    for i, k in enumerate(sc.kind):
        if k != "choice":
            continue
        ch = rows["choices"][i] or []
        gold = rows["answer_short"][i]
        gold_text = ch[letters.index(gold)] if gold in letters[: len(ch)] else gold
        a, b = _digest((rows["study_id"][i], rows["template_id"][i], tuple(sorted(ch)), gold_text))
        c, d = _digest(tuple(rows["choices"][i]))
        circ.append((int(rows_g[i]), a, b, c, d))
    out["circular"] = np.array(circ, dtype=np.int64).reshape(-1, 5)
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
        w.write_table(tbl, max_chunksize=8192)
    del tbl
    if job.audit_train is not None or job.base_native is not None:
        out["chance"] = chance_levels(rows, sc)
        if job.base_native is not None:  # --baseline FILE
            bkeys = [native_id(q) for q in qa_ids] if job.base_native else qa_ids
            base_preds = _aligned(job, p, "base", bkeys)[0]
        else:
            base_preds = _baseline_preds(_audit_rows(job.audit_train, rows), rows, "bow")
        out["base"] = _score_cols(Scorer(job.protocol, box_format=job.box_format).score(rows, base_preds))
        if job.audit_train is not None:
            prior = _baseline_preds(_audit_rows(job.audit_train, rows), rows, "prior")
            out["prior"] = _score_cols(Scorer(job.protocol, box_format=job.box_format).score(rows, prior))
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


# -- aggregation -----------------------------------------------------------------------------
@dataclass
class Columns:
    """Per-row scores of the evaluated rows, in row order: float64 where a mean is taken,
    int8 codes for kind and status."""

    n: int
    f: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def empty(cls, n: int, floats: tuple[str, ...]) -> "Columns":
        c = cls(n)
        for k in floats:
            c.f[k] = np.full(n, np.nan)
        c.f["kind"] = np.zeros(n, dtype=np.int8)
        c.f["status"] = np.zeros(n, dtype=np.int8)
        return c

    def put(self, pos: np.ndarray, part: dict[str, np.ndarray]) -> None:
        for k, a in self.f.items():
            a[pos] = part[k]


class CompactAggregator(Aggregator):
    """``Aggregator`` over numpy columns in row order (what the partitions returned) and the
    tallies merged from them; block(), overall(), grounding() and the breakdowns are the
    parent class's code on the same arrays."""

    def __init__(self, cols: Columns, groups: dict[str, Any], B: int, seed: int, extra: dict[str, Any] | None = None,
                 grounding: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> None:
        self.rows = groups
        self.B = B
        self.seed = seed
        self.n = cols.n
        f = cols.f
        self.correct, self.f1, self.p, self.r = f["correct"], f["tok_f1"], f["tok_p"], f["tok_r"]
        self.exact, self.iou = f["exact"], f["iou"]
        self.kind_codes = f["kind"]
        self.unparsed = f["status"] == 1
        self.missing = f["status"] == 2
        self.extra = extra or {}
        self._grounding = grounding

    def kinds(self) -> list[str]:
        return sorted(KINDS[k] for k in np.unique(self.kind_codes).tolist()) if self.n else []

    def kind_mask(self, k: str) -> np.ndarray:
        return self.kind_codes == KINDS.index(k)

    def polarity_mask(self, k: str) -> np.ndarray:
        col = self.rows["polarity"]
        hits = [c for c, v in enumerate(col.table) if (v or "none") == k]
        return np.isin(col.codes, hits)

    def groups(self, key: str) -> dict[str, Any]:  # type: ignore[override]
        if key == "kind":
            return {k: np.flatnonzero(self.kind_mask(k)) for k in self.kinds()}
        col = self.rows["findings" if key == "finding" else "regions" if key == "region" else key]
        if isinstance(col, CodeListColumn):
            return col.groups()
        order = np.argsort(col.codes, kind="stable")
        sc = col.codes[order]
        bounds = np.flatnonzero(np.diff(sc)) + 1
        out: dict[str, np.ndarray] = {}
        if not len(order):
            return out
        for a, b in zip(np.concatenate(([0], bounds)).tolist(), np.concatenate((bounds, [len(order)])).tolist()):
            v = col.table[int(sc[a])]
            if v is None or v == "":
                continue
            out[str(v)] = order[a:b]
        return out

    def grounding_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        assert self._grounding is not None
        return self._grounding

    def box_errors(self, mask: np.ndarray) -> Any:
        from collections import Counter

        # counted in the partitions over the same mask; ties in first-row order
        return Counter(dict(_ranked(self.extra.get("box_errors", {}))))

    def parse_failures(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        by: dict[str, dict[str, list[int]]] = {}
        for (k, why), v in self.extra.get("reasons", {}).items():
            by.setdefault(k, {})[why] = v
        for k in self.kinds():
            m = self.kind_mask(k)
            out[k] = {"n": int(m.sum()), "unparsed": int(self.unparsed[m].sum()), "missing": int(self.missing[m].sum()),
                      "reasons": dict(_ranked(by.get(k, {})))}
        return out

    def yes_no_confusion(self) -> dict[str, dict[str, int]] | None:
        yn: dict[tuple[str, str], int] = self.extra.get("yes_no", {})
        if not yn:
            return None
        cols = ("yes", "no", "unparsed", "missing")
        return {g: {c: int(yn.get((g, c), 0)) for c in cols} for g in ("yes", "no")}

    def circular(self) -> dict[str, Any] | None:
        from collections import Counter

        from radvqa.eval.aggregate import mean_ci

        c: np.ndarray = self.extra.get("circular", np.zeros((0, 5), dtype=np.int64))
        if not len(c):
            return None
        # groups = equal key hashes; a group is rotated when it holds more than one option order
        c = c[np.lexsort((c[:, 0], c[:, 4], c[:, 3], c[:, 2], c[:, 1]))]
        pos = c[:, 0]
        new_g = np.ones(len(c), dtype=bool)
        new_g[1:] = (c[1:, 1] != c[:-1, 1]) | (c[1:, 2] != c[:-1, 2])
        new_s = new_g.copy()
        new_s[1:] |= (c[1:, 3] != c[:-1, 3]) | (c[1:, 4] != c[:-1, 4])
        gid = np.cumsum(new_g) - 1
        starts = np.flatnonzero(new_g)
        orders = np.bincount(gid, weights=new_s)
        size = np.bincount(gid)
        first = np.minimum.reduceat(pos, starts)
        all_right = np.minimum.reduceat((self.correct[pos] == 1.0).astype(np.int8), starts)
        single = self.block(np.sort(pos), with_ci=False).get("closed", {})
        out: dict[str, Any] = {"questions": int(len(c)), "single_pass_accuracy": single.get("accuracy")}
        rot = np.flatnonzero(orders > 1)
        rot = rot[np.argsort(first[rot], kind="stable")]  # in order of first occurrence, as the dict of groups
        if rot.size:
            blk = mean_ci(all_right[rot].astype(float), self.B, self.seed)
            out.update({
                "groups_with_rotations": int(rot.size),
                "rotations_per_group": dict(Counter(size[rot].tolist())),
                "circular_accuracy": blk["mean"],
                "ci95": blk["ci95"],
            })
        else:
            out["groups_with_rotations"] = 0
            out["note"] = "no rotated copies of any question: circular accuracy not applicable"
        return out


def _ranked(tally: dict[Any, list[int]]) -> list[tuple[Any, int]]:
    """(key, count), most frequent first, ties in order of first occurrence (Counter.most_common
    over rows in order)."""
    return [(k, v[0]) for k, v in sorted(tally.items(), key=lambda kv: (-kv[1][0], kv[1][1]))]


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
    flags = {k: np.zeros(n, dtype=bool) for k in ("pred_direct", "pred_native", "base_direct", "base_native")}
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
        if "rows" not in r:
            continue
        for k in flags:
            flags[k][r["rows"]] = r[k]
        q = r.get("qa_dup")
        if q is not None and (qa_dup is None or q < qa_dup):
            qa_dup = q
        for s, fr in r["first_by_split"].items():
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
    split_col: CatColumn = sp.groups["split"]
    present_codes = np.unique(split_col.codes).tolist() if n else []
    present_vals = [split_col.table[c] for c in present_codes]
    keep: list[Any] | None = None
    if split == "all":
        rule = "all rows (--split all)"
    elif split != "auto":
        if split not in present_vals:
            raise EvalError(f"no rows of split {split!r} (present: {sorted(set(present_vals))})")
        keep, rule = [split], f"split {split} (--split {split})"
    else:
        hit = flags["pred_direct"]
        if int(hit.sum()) < min(n, ps.records):
            hit = hit | flags["pred_native"]
        hit_vals = {split_col.table[c] for c in np.unique(split_col.codes[hit]).tolist()}
        if hit_vals and hit_vals != set(present_vals):
            keep = sorted(hit_vals)
            rule = f"split {', '.join(keep)} (auto: the splits holding the matched predictions)"
        else:
            rule = "all rows (auto)"
    if keep is None:
        mask = np.ones(n, dtype=bool)
    else:
        mask = np.isin(split_col.codes, [c for c, v in enumerate(split_col.table) if v in keep])
    n_sub = int(mask.sum())

    def join_mode(direct: np.ndarray, native: np.ndarray, records: int) -> bool:
        d = int(direct[mask].sum())
        return d < min(n_sub, records) and int(native[mask].sum()) > d

    job.native = join_mode(flags["pred_direct"], flags["pred_native"], ps.records)
    matched = int(flags["pred_native" if job.native else "pred_direct"][mask].sum())
    if matched == 0:
        firsts = [fr for s, fr in first_by_split.items() if keep is None or s in keep]
        first_q = min(firsts)[1] if firsts else None
        raise EvalError(
            f"no prediction matches a question: ids like {ps.first_id!r} (field {ps.id_field!r}) "
            f"vs qa_id like {first_q!r}; use --id-field"
        )
    job.keep_splits = keep
    if bs is not None:
        job.base_native = join_mode(flags["base_direct"], flags["base_native"], bs.records)
    flags = {}
    # the shortcut audit's training rows, as evaluate._training_rows decides them
    train_desc = ""
    n_train = 0
    if audit:
        if "train" in present_vals and keep is not None and "train" not in keep:
            job.audit_train, train_desc = str(dataset), "train split"
            n_train = int((split_col.codes == split_col.table.index("train")).sum())
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
    t_load = time.perf_counter()

    # 8 bytes a row each, for every evaluated row: script_score only where it is reported
    floats = ("correct", "exact", "tok_p", "tok_r", "tok_f1", "iou") + (("script_score",) if protocol == "llava-med" else ())
    pos_of_row = (np.cumsum(mask, dtype=np.int64) - 1).astype(np.int32 if n < 2**31 else np.int64)
    cols = Columns.empty(n_sub, floats)
    audit_cols: dict[str, Columns] = {}
    chance = None
    # box counts in 2 bytes (a question with more than 32,767 boxes is clipped there)
    grounding = (np.zeros(n_sub, dtype=bool), np.zeros(n_sub, dtype=np.int16), np.full(n_sub, -1, dtype=np.int16))
    extra: dict[str, Any] = {"reasons": {}, "yes_no": {}, "box_errors": {}, "circular": []}
    tags: dict[str, Any] | None = None
    missing_n = extra_n = 0
    missing_ids: list[tuple[int, str]] = []
    extra_ids: list[tuple[int, str]] = []
    caption: list[Any] = []
    judged: list[Any] = []
    bench: list[Any] = []
    done = 0
    worker_rss = 0
    for r in _map(score_part, job, list(range(n_parts)), workers):
        extra_n += r["extra"][0]
        extra_ids = heapq.nsmallest(50, extra_ids + r["extra"][1])
        if "rows" not in r:
            continue
        pos = pos_of_row[r["rows"]]
        cols.put(pos, r)
        grounding[0][pos] = r["grounding"]
        grounding[1][pos] = np.minimum(r["gold_boxes"], 32767)
        grounding[2][pos] = np.minimum(r["pred_boxes"], 32767)
        for k in ("reasons", "box_errors"):
            for key, (cnt, first) in r[k].items():
                hit = extra[k].get(key)
                if hit is None:
                    extra[k][key] = [cnt, int(pos_of_row[first])]
                else:
                    hit[0] += cnt
                    hit[1] = min(hit[1], int(pos_of_row[first]))
        for key, cnt in r["yes_no"].items():
            extra["yes_no"][key] = extra["yes_no"].get(key, 0) + cnt
        circ = r["circular"]
        if len(circ):
            circ[:, 0] = pos_of_row[circ[:, 0]]
            extra["circular"].append(circ)
        tags = _merge_tags(tags, r.get("tags"))
        missing_n += r["missing"][0]
        missing_ids = heapq.nsmallest(50, missing_ids + r["missing"][1])
        caption.extend(r.get("caption", []))
        judged.extend(r.get("judge", []))
        bench.extend(r["bench"])
        if "chance" in r:
            if chance is None:
                chance = np.full(n_sub, np.nan)
                for k in ("base",) + (("prior",) if "prior" in r else ()):
                    audit_cols[k] = Columns.empty(n_sub, floats)
            chance[pos] = r["chance"]
            for k, c in audit_cols.items():
                c.put(pos, r[k])
        done += r["n"]
        worker_rss = max(worker_rss, r["peak_rss_kb"])
        if progress is not None:
            progress(done, n_sub)
    del pos_of_row
    _mem("scored")
    extra["circular"] = np.concatenate(extra["circular"]) if extra["circular"] else np.zeros((0, 5), dtype=np.int64)
    t_score = time.perf_counter()

    groups = {c: (sp.groups[c] if keep is None else _take(sp.groups[c], mask)) for c in (*GROUP_COLUMNS, "findings", "regions")}
    agg = CompactAggregator(cols, groups, bootstrap, seed, extra, grounding)
    report = _report_head(dataset, predictions, protocol, n_sub, rule, n, ps, matched, missing_n, missing_ids, extra_n, extra_ids,
                          bootstrap, seed, job.native)
    report["overall"] = agg.overall()
    _mem("overall")
    report["parse_failures"] = agg.parse_failures()
    if protocol == "llava-med":
        from radvqa.eval.evaluate import llava_med_figures

        f = cols.f
        report["llava_med"] = llava_med_figures(agg.kind_mask("closed"), agg.kind_mask("open"), f["correct"], f["script_score"],
                                                f["tok_r"], f["tok_p"], f["tok_f1"], f["exact"])
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
        from radvqa.eval.evaluate import shortcut_audit

        if "base" in audit_cols:
            _TRAIN_CACHE.clear()
            if baseline is not None:
                name = str(baseline)
            else:
                name = f"text-only bag-of-words (trained on {n_train} rows of the {train_desc})"
            prior_agg = prior_name = None
            if "prior" in audit_cols:
                prior_agg = CompactAggregator(audit_cols["prior"], groups, 0, seed)
                prior_name = f"answer prior: the most frequent answer of each answer kind in the {train_desc}"
            report["shortcut_audit"] = shortcut_audit(groups, agg, CompactAggregator(audit_cols["base"], groups, 0, seed), name,
                                                      prior=prior_agg, prior_name=prior_name, chance=chance)
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
    for pattern in ("qa-*.arrows", "pred-*.msgpack", "base-*.msgpack"):
        for f in tmp.glob(pattern):
            f.unlink()
    report["timings_s"].update(partitions=n_parts, workers=workers, scoring_process_peak_rss_mb=round(worker_rss / 1024))
    report["_per_question"] = PerQuestion(tmpd, n_parts)
    return report


def _take(col: Any, mask: np.ndarray) -> Any:
    if isinstance(col, CodeListColumn):
        return col.take_mask(mask)
    return CatColumn(col.codes[mask], col.table)


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

