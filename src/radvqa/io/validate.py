"""``radvqa validate DIR``: is a build output whole and consistent?

Checks (each reported with a pass/fail and the first problems found):
- files: manifest present; every shard it lists present; no leftover temporary shard files;
- readable: every Parquet file opens and every row group decodes (a corrupt or truncated shard is an
  error naming the file);
- schema: each shard's columns and types equal ``radvqa.io.schema``;
- ids: ``qa_id`` unique over all shards (64-bit hashes, sorted: memory ~8 bytes a row), study ids
  unique, every QA row's study present in the scene graphs;
- required: DESIGN.md's required QA columns are filled (no nulls / empty strings);
- boxes: every box (QA ``boxes`` and answer-part boxes, scene graph observation and region boxes) has
  x1 < x2, y1 < y2, lies inside its image (size from the scene graph) and names an image of its study;
- leakage: no patient has rows in two splits;
- counts: rows, studies, rejects and per-strategy counts equal the manifest's, and
  studies_in = studies_out + studies_rejected.

Work is columnar (pyarrow compute) and streams shard by shard.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from radvqa.io.manifest import MANIFEST, REJECTED
from radvqa.io.schema import codec

REQUIRED_QA = ("qa_id", "source", "split", "patient_id", "study_id", "strategy", "question_type",
               "template_id", "template_version", "question", "answer")
MAX_EXAMPLES = 10
_SEP = "\x1f"


@dataclass
class Check:
    name: str
    problems: list[str] = field(default_factory=list)
    count: int = 0  # number of problems (problems keeps only the first few)
    not_run: str | None = None  # why the check could not run (then it is not a pass: #17)

    def skip(self, why: str) -> None:
        self.not_run = why

    def fail(self, msg: str) -> None:
        self.count += 1
        if len(self.problems) < MAX_EXAMPLES:
            self.problems.append(msg)

    @property
    def ok(self) -> bool:
        return self.count == 0 and self.not_run is None


@dataclass
class Report:
    out: Path
    checks: dict[str, Check]
    stats: dict[str, Any]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks.values())

    def errors(self) -> list[str]:
        return ([f"{c.name}: {p}" for c in self.checks.values() for p in c.problems]
                + [f"{c.name}: not run ({c.not_run})" for c in self.checks.values() if c.not_run])


def _hash64(values: list[str]) -> np.ndarray:
    return np.fromiter(
        (int.from_bytes(hashlib.blake2b(v.encode("utf-8"), digest_size=8).digest(), "little") for v in values),
        dtype=np.uint64, count=len(values),
    )


def _flat_boxes(col: pa.ChunkedArray | pa.Array) -> tuple[pa.StructArray, np.ndarray]:
    """Flatten a list<box> column; returns (boxes, parent row index of each box)."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    parents = pc.list_parent_indices(arr).to_numpy(zero_copy_only=False)
    return pc.list_flatten(arr), parents


class _Images:
    """(study_id, image_id) -> (width, height), from the scene graphs."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.w: list[float] = []
        self.h: list[float] = []
        self._arr: pa.Array | None = None

    def add(self, study_ids: list[str], images: list[list[dict[str, Any]]]) -> None:
        for sid, ims in zip(study_ids, images):
            for im in ims or []:
                self.keys.append(f"{sid}{_SEP}{im['id']}")
                self.w.append(np.nan if im.get("width") is None else float(im["width"]))
                self.h.append(np.nan if im.get("height") is None else float(im["height"]))

    def finish(self) -> None:
        self._arr = pa.array(self.keys, type=pa.string())
        self._w = np.array(self.w, dtype=np.float64)
        self._h = np.array(self.h, dtype=np.float64)

    def lookup(self, keys: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        assert self._arr is not None
        idx = pc.fill_null(pc.index_in(keys, value_set=self._arr), -1).to_numpy(zero_copy_only=False).astype(np.int64)
        known = idx >= 0
        if not len(self._w):
            nan = np.full(len(idx), np.nan)
            return known, nan, nan.copy()
        safe = np.where(known, idx, 0)
        w = np.where(known, self._w[safe], np.nan)
        h = np.where(known, self._h[safe], np.nan)
        return known, w, h


def _check_boxes(check: Check, where: str, boxes: pa.StructArray, study_of_box: pa.Array, images: _Images,
                 row_ids: pa.Array, parents: np.ndarray, ref_of_box: pa.Array | None = None) -> None:
    """``ref_of_box``: the row's reference study (diff questions may box the earlier study's image)."""
    if len(boxes) == 0:
        return
    x1 = boxes.field("x1").to_numpy(zero_copy_only=False).astype(np.float64)
    y1 = boxes.field("y1").to_numpy(zero_copy_only=False).astype(np.float64)
    x2 = boxes.field("x2").to_numpy(zero_copy_only=False).astype(np.float64)
    y2 = boxes.field("y2").to_numpy(zero_copy_only=False).astype(np.float64)
    img = boxes.field("image_id")
    keys = pc.binary_join_element_wise(study_of_box, img, _SEP)
    known, w, h = images.lookup(keys)
    if ref_of_box is not None and not known.all():
        rkeys = pc.binary_join_element_wise(ref_of_box, img, _SEP)
        rknown, rw, rh = images.lookup(rkeys)
        use = ~known & rknown
        known = known | rknown
        w = np.where(use, rw, w)
        h = np.where(use, rh, h)
    bad_order = ~((x1 < x2) & (y1 < y2))
    eps = 1e-6
    outside = known & ~np.isnan(w) & ((x1 < -eps) | (y1 < -eps) | (x2 > w + eps) | (y2 > h + eps))
    nan = np.isnan(x1) | np.isnan(y1) | np.isnan(x2) | np.isnan(y2)
    bad = bad_order | outside | ~known | nan
    n_bad = int(np.count_nonzero(bad))
    for i in np.flatnonzero(bad)[:MAX_EXAMPLES]:
        i = int(i)
        rid = row_ids[int(parents[i])].as_py()
        box = [float(x1[i]), float(y1[i]), float(x2[i]), float(y2[i])]
        if not known[i]:
            why = f"image {img[i].as_py()!r} is not an image of study {study_of_box[i].as_py()!r}"
        elif nan[i] or bad_order[i]:
            why = f"box {box} does not have x1 < x2 and y1 < y2"
        else:
            why = f"box {box} lies outside its image ({int(w[i])}x{int(h[i])})"
        check.fail(f"{where} {rid}: {why}")
    check.count += max(0, n_bad - MAX_EXAMPLES)


def validate(out: Path | str) -> Report:
    out = Path(out)
    names = ("files", "readable", "schema", "ids", "required", "boxes", "leakage", "counts")
    checks = {n: Check(n) for n in names}
    stats: dict[str, Any] = {}
    if not out.is_dir():
        checks["files"].fail(f"{out} is not a folder")
        for n in names[1:]:
            checks[n].skip("no dataset folder")
        return Report(out, checks, stats)
    manifest: dict[str, Any] | None = None
    try:
        manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        checks["files"].fail(f"{MANIFEST} is missing")
    except ValueError as exc:
        checks["files"].fail(f"{MANIFEST} is not valid JSON: {exc}")

    files = {k: sorted((out / k).glob("part-*.parquet")) if (out / k).is_dir() else [] for k in ("qa", "scene_graphs")}
    for k in ("qa", "scene_graphs"):
        for tmp in sorted((out / k).glob(".*.tmp")) if (out / k).is_dir() else []:
            checks["files"].fail(f"unfinished temporary shard {tmp.relative_to(out)} (an interrupted build: rerun it with --resume)")
        if not files[k]:
            checks["files"].fail(f"no {k}/part-*.parquet files")
    if manifest:
        for k in ("qa", "scene_graphs"):
            for rel in manifest.get("shards", {}).get(k, []):
                if not (out / rel).exists():
                    checks["files"].fail(f"{rel} is listed in the manifest but missing")

    # -- scene graphs: ids, images, boxes --------------------------------------------------------
    images = _Images()
    study_ids: list[str] = []
    sg_rows = 0
    sg_split: dict[str, set[str]] = defaultdict(set)
    sg_cols = ["study_id", "patient_id", "split", "images", "observations", "region_boxes"]
    sg_tables: list[tuple[Path, pa.Table]] = []
    for f in files["scene_graphs"]:
        t = _read(f, out, sg_cols, checks, "scene_graphs")
        if t is None:
            continue
        sg_rows += t.num_rows
        sids = t.column("study_id").to_pylist()
        study_ids.extend(sids)
        images.add(sids, t.column("images").to_pylist())
        for pid, sp in zip(t.column("patient_id").to_pylist(), t.column("split").to_pylist()):
            if sp is not None:
                sg_split[pid].add(sp)
        sg_tables.append((f, t.select(["study_id", "observations", "region_boxes"])))
    images.finish()
    dup_studies = [s for s, n in Counter(study_ids).items() if n > 1]
    for s in dup_studies[:MAX_EXAMPLES]:
        checks["ids"].fail(f"study {s!r} has {Counter(study_ids)[s]} scene graph rows")
    checks["ids"].count += max(0, len(dup_studies) - MAX_EXAMPLES)
    for f, t in sg_tables:
        sid = t.column("study_id").combine_chunks()
        rb, parents = _flat_boxes(t.column("region_boxes"))
        _check_boxes(checks["boxes"], f"{f.name} region box of", rb, pc.take(sid, pa.array(parents)), images, sid, parents)
        obs, oparents = _flat_boxes(t.column("observations"))
        if len(obs):
            ob, bparents = _flat_boxes(obs.field("boxes"))
            rows = oparents[bparents] if len(bparents) else bparents
            _check_boxes(checks["boxes"], f"{f.name} observation box of", ob, pc.take(sid, pa.array(rows)), images, sid, rows)
    del sg_tables
    study_set = pa.array(sorted(set(study_ids)), type=pa.string())

    # -- QA ----------------------------------------------------------------------------------------
    hashes: list[np.ndarray] = []
    qa_rows = 0
    by_strategy: Counter[str] = Counter()
    qa_split: dict[str, set[str]] = defaultdict(set)
    qa_cols = ["qa_id", "patient_id", "study_id", "reference_study_id", "split", "strategy", "question_type", "template_id",
               "template_version", "question", "answer", "source", "boxes", "answer_parts"]
    for f in files["qa"]:
        pf = _open(f, out, checks)
        if pf is None:
            continue
        for rg in range(pf.num_row_groups):
            try:
                t = pf.read_row_group(rg, columns=qa_cols)
            except Exception as exc:  # noqa: BLE001 - any decode failure means a broken shard
                checks["readable"].fail(f"{f.relative_to(out)}: row group {rg} cannot be read ({type(exc).__name__}: {exc})")
                break
            qa_rows += t.num_rows
            ids = t.column("qa_id")
            hashes.append(_hash64([v if v is not None else "" for v in ids.to_pylist()]))
            for c in REQUIRED_QA:
                col = t.column(c)
                nulls = col.null_count
                empties = 0
                if pa.types.is_string(col.type):
                    empties = int(pc.sum(pc.equal(col, "")).as_py() or 0)
                if nulls or empties:
                    checks["required"].fail(f"{f.name} row group {rg}: column {c!r} has {nulls} nulls and {empties} empty values")
            by_strategy.update({d["values"]: d["counts"] for d in pc.value_counts(t.column("strategy")).to_pylist()})
            pairs = t.select(["patient_id", "split"]).group_by(["patient_id", "split"]).aggregate([])
            for pid, sp in zip(pairs.column("patient_id").to_pylist(), pairs.column("split").to_pylist()):
                qa_split[pid].add(sp)
            missing = pc.invert(pc.is_in(t.column("study_id"), value_set=study_set))
            n_missing = int(pc.sum(missing).as_py() or 0)
            if n_missing:
                first = pc.filter(t.column("study_id"), missing)[0].as_py()
                checks["ids"].fail(f"{f.name}: {n_missing} QA rows name a study with no scene graph (e.g. {first!r})")
            sid = t.column("study_id").combine_chunks()
            ref = t.column("reference_study_id").combine_chunks()
            qid = ids.combine_chunks()
            b, parents = _flat_boxes(t.column("boxes"))
            pa_par = pa.array(parents)
            _check_boxes(checks["boxes"], f"{f.name} QA", b, pc.take(sid, pa_par), images, qid, parents,
                         pc.take(ref, pa_par))
            parts, pparents = _flat_boxes(t.column("answer_parts"))
            if len(parts):
                pb, bparents = _flat_boxes(parts.field("boxes"))
                rows = pparents[bparents] if len(bparents) else bparents
                _check_boxes(checks["boxes"], f"{f.name} answer part of QA", pb, pc.take(sid, pa.array(rows)), images, qid,
                             rows, pc.take(ref, pa.array(rows)))
    if hashes:
        allh = np.sort(np.concatenate(hashes))
        n_dup = int(np.count_nonzero(allh[1:] == allh[:-1])) if len(allh) > 1 else 0
        if n_dup:
            checks["ids"].fail(f"{n_dup} duplicate qa_id values")
            dups = _find_duplicate_ids(files["qa"])
            for d in dups[: MAX_EXAMPLES - 1]:
                checks["ids"].fail(f"qa_id {d!r} appears more than once")
    for pid, splits in sorted(qa_split.items()):
        all_splits = splits | sg_split.get(pid, set())
        if len(all_splits) > 1:
            checks["leakage"].fail(f"patient {pid!r} is in splits {sorted(all_splits)}")
    for pid, splits in sorted(sg_split.items()):
        if len(splits) > 1 and pid not in qa_split:
            checks["leakage"].fail(f"patient {pid!r} has studies in splits {sorted(splits)}")

    # -- counts vs manifest --------------------------------------------------------------------------
    n_rej = 0
    rej = out / REJECTED
    if rej.exists():
        with open(rej, encoding="utf-8") as fh:
            for i, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                n_rej += 1
                try:
                    d = json.loads(line)
                    if not all(k in d for k in ("source", "ref", "reason")):
                        raise ValueError("missing source/ref/reason")
                except ValueError as exc:
                    checks["counts"].fail(f"{REJECTED} line {i} is not a reject record: {exc}")
    else:
        checks["files"].fail(f"{REJECTED} is missing")
    stats.update({"qa_rows": qa_rows, "scene_graphs": sg_rows, "rejected_lines": n_rej,
                  "patients": len(set(qa_split) | set(sg_split)), "qa_by_strategy": dict(sorted(by_strategy.items()))})
    if manifest:
        c = manifest.get("counts", {})
        expect = {"qa_rows": qa_rows, "scene_graphs": sg_rows, "studies_out": sg_rows, "rejected_lines": n_rej}
        for k, got in expect.items():
            if k in c and int(c[k]) != got:
                checks["counts"].fail(f"manifest says {k} = {c[k]}, the files hold {got}")
        if c.get("studies_in") != c.get("studies_out", 0) + c.get("studies_rejected", 0):
            checks["counts"].fail(f"studies_in {c.get('studies_in')} != studies_out {c.get('studies_out')} + studies_rejected {c.get('studies_rejected')}")
        if "qa_by_strategy" in c and dict(sorted(c["qa_by_strategy"].items())) != stats["qa_by_strategy"]:
            checks["counts"].fail(f"manifest QA by strategy {c['qa_by_strategy']} != files {stats['qa_by_strategy']}")
    # a check with nothing to look at did not pass: it did not run
    if not files["qa"] and not files["scene_graphs"]:
        for n in ("readable", "schema", "ids", "required", "boxes", "leakage"):
            checks[n].skip("no Parquet shards")
    elif not files["qa"]:
        for n in ("required", "leakage"):
            checks[n].skip("no qa/ shards")
    if not manifest:
        checks["counts"].skip("no manifest to compare with")
    return Report(out, checks, stats)


def _open(f: Path, out: Path, checks: dict[str, Check]) -> pq.ParquetFile | None:
    try:
        pf = pq.ParquetFile(f, page_checksum_verification=True)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid/OSError for broken footers
        checks["readable"].fail(f"{f.relative_to(out)} is corrupt or truncated ({type(exc).__name__}: {exc})")
        return None
    kind = f.parent.name
    probs = codec(kind).check_schema(pf.schema_arrow)
    for p in probs:
        checks["schema"].fail(f"{f.relative_to(out)}: {p}")
    return pf


def _read(f: Path, out: Path, columns: list[str], checks: dict[str, Check], kind: str) -> pa.Table | None:
    pf = _open(f, out, checks)
    if pf is None:
        return None
    try:
        return pf.read(columns=columns)
    except Exception as exc:  # noqa: BLE001
        checks["readable"].fail(f"{f.relative_to(out)} cannot be read ({type(exc).__name__}: {exc})")
        return None


def _find_duplicate_ids(files: list[Path]) -> list[str]:
    seen: set[str] = set()
    dups: list[str] = []
    for f in files:
        try:
            col = pq.read_table(f, columns=["qa_id"]).column("qa_id").to_pylist()
        except Exception:  # noqa: BLE001 - already reported as unreadable
            continue
        for v in col:
            if v in seen and len(dups) < MAX_EXAMPLES and v not in dups:
                dups.append(v)
            seen.add(v)
    return dups
