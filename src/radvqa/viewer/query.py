"""Facets and filtered, paged queries answered from the Parquet shards of a dataset.

Nothing loads the whole table. The dataset is cut into *units* (one Parquet row group each, in
shard-file order). A query reads only the columns its filters need, unit by unit, and remembers
how many rows of each unit matched (an LRU cache keyed by the filters). A page then re-reads just
the one or two units that hold rows ``offset .. offset+limit`` and takes those rows with all their
columns. With no filters, counting is free (Parquet metadata) and a page touches one unit.

Filter semantics: several values of one facet are OR-ed, different facets are AND-ed; free text
is split on whitespace and every word must occur in the question (case-insensitive). The token
``NULL_TOKEN`` selects rows whose value is null (e.g. polarity of an open question).
"""

from __future__ import annotations

import math
import os
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from radvqa.viewer.images import image_size
from radvqa.viewer.paths import DatasetError, FileGate, declared_image_roots, load_manifest

NULL_TOKEN = "__null__"
_THREADS = max(1, min(8, os.cpu_count() or 1))
MAX_LIMIT = 200

# request parameter -> (column, is a list column)
FACETS: dict[str, tuple[str, bool]] = {
    "strategy": ("strategy", False),
    "question_type": ("question_type", False),
    "finding": ("findings", True),
    "region": ("regions", True),
    "grade": ("grade", False),
    "split": ("split", False),
    "polarity": ("polarity", False),
    "source": ("source", False),
}
TEXT_COLUMN = "question"


class QueryError(ValueError):
    """A request the viewer cannot answer (bad parameter); the server turns it into HTTP 400."""


MAX_QUERY_CHARS = 200
MAX_QUERY_WORDS = 8
MAX_FACET_VALUES = 64


@dataclass(frozen=True)
class Filters:
    values: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (facet name, allowed values), sorted
    text: tuple[str, ...] = ()  # lower-cased words, all must occur in the question

    @classmethod
    def make(cls, facets: Mapping[str, Iterable[str]] | None = None, text: str = "") -> Filters:
        vals: list[tuple[str, tuple[str, ...]]] = []
        for name, allowed in (facets or {}).items():
            if name not in FACETS:
                raise QueryError(f"unknown filter {name!r}; known: {', '.join(FACETS)}")
            items = tuple(sorted({v for v in allowed if v != ""}))
            if len(items) > MAX_FACET_VALUES:
                raise QueryError(f"filter {name!r} has {len(items)} values; at most {MAX_FACET_VALUES}")
            if items:
                vals.append((name, items))
        if len(text) > MAX_QUERY_CHARS:
            raise QueryError(f"search text too long ({len(text)} characters; at most {MAX_QUERY_CHARS})")
        words = tuple(dict.fromkeys(w.lower() for w in text.split() if w))
        if len(words) > MAX_QUERY_WORDS:
            # every word is a substring scan of every question: bound the work per request
            raise QueryError(f"search text has {len(words)} words; at most {MAX_QUERY_WORDS}")
        return cls(tuple(sorted(vals)), words)

    @property
    def empty(self) -> bool:
        return not self.values and not self.text

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: list(v) for k, v in self.values}
        if self.text:
            out["q"] = " ".join(self.text)
        return out


@dataclass
class _Unit:
    fragment: pads.ParquetFileFragment  # one row group
    rows: int


@dataclass
class Page:
    total: int
    offset: int
    limit: int
    rows: list[dict[str, Any]] = field(default_factory=list)


class ViewerDataset:
    """Read-only access to ``DIR/qa/part-*.parquet`` (+ manifest, scene graphs, image roots)."""

    def __init__(self, dataset_dir: str | os.PathLike[str], *, cache_size: int = 64):
        self.dir = Path(os.path.abspath(dataset_dir))
        if not self.dir.is_dir():
            raise DatasetError(f"{self.dir}: not a directory")
        self.manifest = load_manifest(self.dir)
        qa_dir = self.dir / "qa"
        files = sorted(str(p) for p in qa_dir.glob("*.parquet")) if qa_dir.is_dir() else []
        if not files:
            raise DatasetError(
                f"{self.dir}: no QA shards (expected qa/part-*.parquet, as `radvqa build` writes)"
            )
        try:
            self.dataset = pads.dataset(files, format="parquet")
        except (pa.ArrowInvalid, OSError) as exc:
            raise DatasetError(f"{qa_dir}: cannot read the Parquet shards ({exc})") from exc
        self.schema = self.dataset.schema
        self.columns = set(self.schema.names)
        self.units: list[_Unit] = []
        for frag in self.dataset.get_fragments():
            for rg in frag.split_by_row_group():
                rg.ensure_complete_metadata()
                n = sum(r.num_rows for r in rg.row_groups)
                if n:
                    self.units.append(_Unit(rg, n))
        self.total_rows = sum(u.rows for u in self.units)
        self.gate = FileGate(self.dir, declared_image_roots(self.manifest, self.dir))
        self._lock = threading.Lock()
        self._counts: OrderedDict[Filters, list[int]] = OrderedDict()
        self._cache_size = cache_size
        self._facets: dict[str, Any] | None = None
        self._size_cache: dict[str, tuple[int, int] | None] = {}

    # -- facets -------------------------------------------------------------------------------
    def facets(self) -> dict[str, Any]:
        """Value counts of every facet column over the whole dataset (computed once, then
        cached): ``{"total": n, "facets": {name: [[value, count], ...]}, "manifest": {...}}``.
        Values are sorted by count (descending), then by value; null appears as NULL_TOKEN."""
        with self._lock:
            if self._facets is not None:
                return self._facets
        present = {name: col for name, (col, _) in FACETS.items() if col in self.columns}
        counters: dict[str, Counter[str]] = {name: Counter() for name in present}
        cols = sorted(set(present.values()))
        if cols:
            for batch in self.dataset.to_batches(columns=cols):
                for name, col in present.items():
                    arr = batch.column(col)
                    if FACETS[name][1]:
                        arr = pc.list_flatten(arr)
                    vc = pc.value_counts(arr)
                    for value, count in zip(
                        vc.field("values").to_pylist(), vc.field("counts").to_pylist(), strict=True
                    ):
                        counters[name][NULL_TOKEN if value is None else str(value)] += count
        result = {
            "total": self.total_rows,
            "facets": {
                name: [[v, c] for v, c in sorted(cnt.items(), key=lambda kv: (-kv[1], kv[0]))]
                for name, cnt in counters.items()
            },
            "manifest": self.manifest_summary(),
            "dataset": self.dir.name,
            "has_reports": self.has_scene_graphs,
        }
        with self._lock:
            self._facets = result
        return result

    @property
    def has_scene_graphs(self) -> bool:
        sg_dir = self.dir / "scene_graphs"
        return sg_dir.is_dir() and any(sg_dir.glob("*.parquet"))

    def manifest_summary(self) -> dict[str, Any]:
        return _manifest_summary(self.manifest)

    # -- queries ------------------------------------------------------------------------------
    def count(self, filters: Filters) -> int:
        return sum(self._unit_counts(filters))

    def query(
        self,
        filters: Filters,
        offset: int = 0,
        limit: int = 20,
        columns: list[str] | None = None,
    ) -> Page:
        if offset < 0:
            raise QueryError(f"offset must be >= 0, got {offset}")
        if not 1 <= limit <= MAX_LIMIT:
            raise QueryError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
        counts = self._unit_counts(filters)
        total = sum(counts)
        page = Page(total=total, offset=offset, limit=limit)
        cols = [c for c in (columns or self.schema.names) if c in self.columns]
        skip = offset
        for unit, n in zip(self.units, counts, strict=True):
            if len(page.rows) >= limit:
                break
            if n <= skip:
                skip -= n
                continue
            idx = np.flatnonzero(self._mask(unit, filters))
            want = idx[skip : skip + (limit - len(page.rows))]
            skip = 0
            if len(want):
                table = unit.fragment.take(pa.array(want, type=pa.int64()), columns=cols)
                page.rows.extend(table.to_pylist())
        return page

    def sample(self, n: int, seed: int = 0, filters: Filters | None = None) -> list[dict[str, Any]]:
        """``n`` rows drawn without replacement, reproducibly for (dataset, filters, seed), in
        dataset order. Reads only the units the chosen rows lie in."""
        import random

        filters = filters or Filters()
        counts = self._unit_counts(filters)
        total = sum(counts)
        chosen = sorted(random.Random(seed).sample(range(total), min(n, total)))
        rows: list[dict[str, Any]] = []
        start = 0
        ci = 0
        for unit, cnt in zip(self.units, counts, strict=True):
            local = []
            while ci < len(chosen) and chosen[ci] < start + cnt:
                local.append(chosen[ci] - start)
                ci += 1
            start += cnt
            if local:
                idx = np.flatnonzero(self._mask(unit, filters))[local]
                rows.extend(unit.fragment.take(pa.array(idx, type=pa.int64())).to_pylist())
        return rows

    def _unit_counts(self, filters: Filters) -> list[int]:
        if filters.empty:
            return [u.rows for u in self.units]
        with self._lock:
            hit = self._counts.get(filters)
            if hit is not None:
                self._counts.move_to_end(filters)
                return hit
        # one pass over the filter columns, row group by row group (Arrow decodes outside the
        # GIL, so a few threads help on a large dataset; memory stays one unit per thread)
        def count(u: _Unit) -> int:
            return int(np.count_nonzero(self._mask(u, filters)))

        if len(self.units) > 4 and _THREADS > 1:
            with ThreadPoolExecutor(_THREADS) as pool:
                counts = list(pool.map(count, self.units))
        else:
            counts = [count(u) for u in self.units]
        with self._lock:
            self._counts[filters] = counts
            while len(self._counts) > self._cache_size:
                self._counts.popitem(last=False)
        return counts

    def _mask(self, unit: _Unit, filters: Filters) -> np.ndarray:
        """Boolean mask over the unit's rows, reading only the columns the filters touch."""
        if filters.empty:
            return np.ones(unit.rows, dtype=bool)
        needed: list[str] = [FACETS[name][0] for name, _ in filters.values]
        if filters.text:
            needed.append(TEXT_COLUMN)
        missing = sorted({c for c in needed if c not in self.columns})
        if missing:
            # a filter on a column the dataset lacks matches nothing: say so rather than guess
            raise QueryError(f"this dataset has no column {', '.join(missing)} to filter on")
        table = unit.fragment.to_table(columns=sorted(set(needed)))
        mask = np.ones(table.num_rows, dtype=bool)
        for name, allowed in filters.values:
            col, is_list = FACETS[name]
            mask &= _match(table.column(col).combine_chunks(), allowed, is_list)
        if filters.text:
            q = table.column(TEXT_COLUMN)
            for word in filters.text:
                m = pc.fill_null(pc.match_substring(q, word, ignore_case=True), False)
                mask &= m.to_numpy(zero_copy_only=False)
        return mask

    # -- presentation -------------------------------------------------------------------------
    def image_info(self, image_path: str) -> dict[str, Any]:
        """URL and stored size of one image of a row (size read from the file header, cached)."""
        url, real = self.gate.url_for(image_path)
        info: dict[str, Any] = {"path": image_path, "url": url, "width": None, "height": None}
        if real is not None:
            key = str(real)
            if key not in self._size_cache:
                self._size_cache[key] = image_size(real)
            size = self._size_cache[key]
            if size:
                info["width"], info["height"] = size
        return info

    def present(self, row: dict[str, Any]) -> dict[str, Any]:
        """A row made JSON-ready for the page, with ``images`` = [{id, path, url, width, height}]."""
        out = {k: _jsonable(v) for k, v in row.items()}
        ids = row.get("image_ids") or []
        paths = row.get("image_paths") or []
        images = []
        for i, p in enumerate(paths):
            info = self.image_info(p) if p else {"path": p, "url": None, "width": None, "height": None}
            info["id"] = ids[i] if i < len(ids) else None
            images.append(info)
        out["images"] = images
        return out

    def study(self, study_id: str) -> dict[str, Any] | None:
        """The scene-graph row of one study (report text and sentences), or None."""
        return self.studies([study_id]).get(study_id)

    def studies(self, study_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Scene-graph rows (report, indication) of the given studies, read with a pushed-down
        filter (row groups whose study_id statistics exclude them are skipped)."""
        ids = sorted(set(study_ids))
        sg_dir = self.dir / "scene_graphs"
        files = sorted(str(p) for p in sg_dir.glob("*.parquet")) if sg_dir.is_dir() else []
        if not files or not ids:
            return {}
        sg = pads.dataset(files, format="parquet")
        if "study_id" not in sg.schema.names:
            return {}
        cols = [c for c in ("study_id", "patient_id", "source", "report", "indication", "split")
                if c in sg.schema.names]
        table = sg.to_table(columns=cols, filter=pc.field("study_id").isin(ids))
        out: dict[str, dict[str, Any]] = {}
        for row in table.to_pylist():
            out.setdefault(row["study_id"], {k: _jsonable(v) for k, v in row.items()})
        return out


def _match(arr: pa.Array, allowed: tuple[str, ...], is_list: bool) -> np.ndarray:
    want_null = NULL_TOKEN in allowed
    values = pa.array([v for v in allowed if v != NULL_TOKEN], type=pa.string())
    if is_list:
        n = len(arr)
        flat = pc.list_flatten(arr)
        parents = pc.list_parent_indices(arr).to_numpy(zero_copy_only=False)
        hit = pc.fill_null(pc.is_in(pc.cast(flat, pa.string()), value_set=values), False)
        mask = np.zeros(n, dtype=bool)
        mask[parents[hit.to_numpy(zero_copy_only=False)]] = True
        if want_null:  # "none": the list is null or empty
            lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False)
            mask |= lengths == 0
        return mask
    m = pc.fill_null(pc.is_in(pc.cast(arr, pa.string()), value_set=values), False)
    mask = m.to_numpy(zero_copy_only=False).copy()
    if want_null:
        mask |= pc.is_null(arr).to_numpy(zero_copy_only=False)
    return mask


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if v is None or isinstance(v, str | int | float | bool):
        return v
    return str(v)  # dates, decimals: shown as text


def _manifest_summary(manifest: dict[str, Any]) -> dict[str, Any]:
    keep = ("version", "radvqa_version", "source", "seed", "created", "counts")
    return {k: _jsonable(manifest[k]) for k in keep if k in manifest}

