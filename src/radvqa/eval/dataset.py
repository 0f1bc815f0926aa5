"""Read a radvqa dataset directory (DIR/qa/part-*.parquet) for scoring.

Reads through ``pyarrow.dataset`` so it works whichever writer produced the shards; only
the columns scoring needs are loaded, as Python lists (columnar: one list per column).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Sequence

EVAL_COLUMNS = (
    "qa_id",
    "source",
    "split",
    "study_id",
    "strategy",
    "question_type",
    "template_id",
    "question",
    "answer",
    "answer_short",
    "choices",
    "polarity",
    "findings",
    "regions",
    "boxes",
    "image_ids",
    "image_paths",
    "modality",
    "answer_parts",
)
REQUIRED = ("qa_id", "question", "answer")
# few distinct values per dataset: kept as integer codes + a table (CatColumn), 1-4 bytes a
# row instead of an 8-byte pointer, and grouped with numpy
CATEGORY_COLUMNS = ("source", "split", "study_id", "strategy", "question_type", "template_id", "polarity", "modality", "answer_short")
LIST_COLUMNS = ("findings", "regions", "image_ids", "image_paths")


class DatasetError(ValueError):
    pass


def qa_files(root: str | Path) -> list[Path]:
    root = Path(root)
    qa_dir = root / "qa"
    if not qa_dir.is_dir():
        raise DatasetError(f"{root}: no qa/ folder (expected {qa_dir}/part-*.parquet)")
    files = sorted(qa_dir.glob("*.parquet"))
    if not files:
        raise DatasetError(f"{qa_dir}: no .parquet files")
    return files


def load_qa(root: str | Path, columns: tuple[str, ...] = EVAL_COLUMNS, batch_size: int = 65_536) -> dict[str, list[Any]]:
    """Columns of every QA row (sorted by shard file name, then row order). Missing optional
    columns come back as lists of None; a missing required column is an error."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    files = qa_files(root)
    dset = ds.dataset([str(f) for f in files], format="parquet")
    names = set(dset.schema.names)
    lacking = [c for c in REQUIRED if c not in names]
    if lacking:
        raise DatasetError(f"{root}/qa: required columns missing: {lacking}")
    present = [c for c in columns if c in names]
    pool = pa.default_memory_pool()
    batches = dset.to_batches(columns=present, batch_size=batch_size, batch_readahead=1, fragment_readahead=1, memory_pool=pool)
    out, n = rows_from_batches(batches, columns, present)
    pool.release_unused()
    ids = out["qa_id"]
    if len(set(ids)) != n:
        seen: set[str] = set()
        dup = next(i for i in ids if i in seen or seen.add(i))  # type: ignore[func-returns-value]
        raise DatasetError(f"{root}/qa: qa_id {dup!r} occurs more than once")
    return out


def rows_from_batches(batches: Any, columns: tuple[str, ...], present: list[str]) -> tuple[dict[str, Any], int]:
    """Record batches of QA rows -> the columnar form scoring reads (``load_qa``'s result,
    without its duplicate check), and the row count. Also used on a partition of the rows
    (eval.stream), so both paths hold the same values."""
    import numpy as np

    # read in batches and convert each to Python at once: the whole table in Arrow memory
    # (~250 MB a million rows) next to its Python copy would set the run's peak, and the
    # allocator keeps freed Arrow buffers; a batch at a time bounds that part to one batch
    parts: dict[str, list[Any]] = {c: [] for c in present}
    pools: dict[str, dict[Any, Any]] = {c: {} for c in present}
    n = 0
    for batch in batches:
        n += batch.num_rows
        for c in present:
            col = batch.column(c)
            if c == "boxes":
                parts[c].append(BoxColumn.from_arrow(col, pools[c]))
            elif c == "answer_parts":
                parts[c].extend(_multi_parts(col))
            elif c in LIST_COLUMNS:
                parts[c].append(ListColumn.from_arrow(col, pools[c]))
            elif c == "choices":
                parts[c].extend(_interned_lists(col, pools[c]))
            elif c == "qa_id":
                parts[c].extend(col.to_pylist())  # unique by contract: nothing to share
            elif c in CATEGORY_COLUMNS and _is_string(col):
                parts[c].append(_codes(col, pools[c]))
            else:
                parts[c].extend(interned_pylist(col, pools[c]))
    cat_pools = {c: pools[c] for c in CATEGORY_COLUMNS if c in pools}
    batch = col = pools = None  # type: ignore[assignment]
    out: dict[str, Any] = {}
    for c in columns:
        if c not in present:
            out[c] = [None] * n
        elif c in LIST_COLUMNS:
            out[c] = ListColumn.concat(parts.pop(c))
        elif c == "boxes":
            out[c] = BoxColumn.concat(parts.pop(c))
        elif c in CATEGORY_COLUMNS and cat_pools[c] is not None and (not parts[c] or isinstance(parts[c][0], np.ndarray)):
            out[c] = CatColumn.build(parts.pop(c), cat_pools[c])
        else:
            out[c] = parts.pop(c)
    return out, n


def _is_string(col: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_string(col.type) or pa.types.is_large_string(col.type)


def _codes(col: Any, pool: dict[Any, int]) -> Any:
    """Global int32 codes of a string batch; ``pool`` maps value -> code across batches
    (None, the null, is a value like any other)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    enc = pc.dictionary_encode(arr)
    local = enc.dictionary.to_pylist() + [None]
    mapping = np.fromiter((pool.setdefault(v, len(pool)) for v in local), dtype=np.int32, count=len(local))
    idx = pc.fill_null(enc.indices, len(local) - 1).to_numpy(zero_copy_only=False)
    return mapping[idx]


class CatColumn(Sequence[Any]):
    """A string column of few distinct values: ``codes`` (the smallest int type that fits)
    index ``table``. Reads like a list of str | None (row i is ``table[codes[i]]``)."""

    __slots__ = ("codes", "table")

    def __init__(self, codes: Any, table: list[Any]) -> None:
        self.codes = codes
        self.table = table

    @classmethod
    def build(cls, parts: list[Any], pool: dict[Any, int]) -> "CatColumn":
        import numpy as np

        table: list[Any] = [None] * len(pool)
        for v, k in pool.items():
            table[k] = v
        codes = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
        dt = np.int8 if len(table) < 128 else np.int16 if len(table) < 32768 else np.int32
        return cls(codes.astype(dt), table)

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self.table[k] for k in self.codes[i].tolist()]
        return self.table[self.codes[i]]

    def __iter__(self) -> Iterator[Any]:
        t = self.table
        for k in range(0, len(self.codes), 65_536):  # chunks: no million-int list at once
            yield from map(t.__getitem__, self.codes[k : k + 65_536].tolist())

    def take(self, idx: Any) -> "CatColumn":
        import numpy as np

        return CatColumn(self.codes[np.asarray(idx, dtype=np.int64)], self.table)

    def groups(self) -> dict[str, list[int]]:
        """value -> row indices (rows in order), None and "" left out, as the list form."""
        import numpy as np

        out: dict[str, list[int]] = {}
        order = np.argsort(self.codes, kind="stable")
        sorted_codes = self.codes[order]
        bounds = np.flatnonzero(np.diff(sorted_codes)) + 1
        starts = np.concatenate(([0], bounds)) if len(order) else np.zeros(0, dtype=np.int64)
        ends = np.concatenate((bounds, [len(order)])) if len(order) else np.zeros(0, dtype=np.int64)
        for a, b in zip(starts.tolist(), ends.tolist()):
            v = self.table[int(sorted_codes[a])]
            if v is None or v == "":
                continue
            out[str(v)] = order[a:b].tolist()
        return out


class ListColumn:
    """A list<string> column kept as (offsets, flat values): row i is
    ``values[offsets[i]:offsets[i+1]]``. Building a Python list per row for a million rows
    costs about a second per column; most rows are only grouped, never looked at one by one."""

    __slots__ = ("offsets", "values")

    def __init__(self, offsets: Any, values: list[Any]) -> None:
        self.offsets = offsets
        self.values = values

    @classmethod
    def from_arrow(cls, col: Any, pool: dict[Any, Any] | None = None) -> "ListColumn":
        import numpy as np
        import pyarrow as pa

        arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        offsets = np.asarray(arr.offsets, dtype=np.int64)
        start, stop = int(offsets[0]), int(offsets[-1])
        values = interned_pylist(arr.values.slice(start, stop - start), pool)
        return cls(offsets - start, values)

    @classmethod
    def concat(cls, parts: list["ListColumn"]) -> "ListColumn":
        import numpy as np

        if len(parts) == 1:
            return parts[0]
        if not parts:
            return cls(np.zeros(1, dtype=np.int64), [])
        offs = [parts[0].offsets]
        values = list(parts[0].values)
        for p in parts[1:]:
            offs.append(p.offsets[1:] + len(values))
            values.extend(p.values)
        return cls(np.concatenate(offs), values)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> list[Any]:
        return self.values[self.offsets[i] : self.offsets[i + 1]]

    def __iter__(self) -> Any:
        o = self.offsets.tolist()
        v = self.values
        for a, b in zip(o[:-1], o[1:]):
            yield v[a:b]

    def take(self, idx: list[int]) -> "ListColumn":
        import numpy as np

        ix = np.asarray(idx, dtype=np.int64)
        lengths = self.offsets[ix + 1] - self.offsets[ix]
        new_off = np.zeros(len(ix) + 1, dtype=np.int64)
        np.cumsum(lengths, out=new_off[1:])
        v = self.values
        vals = [x for a, b in zip(self.offsets[ix].tolist(), self.offsets[ix + 1].tolist()) for x in v[a:b]]
        return ListColumn(new_off, vals)

    def groups(self) -> dict[str, list[int]]:
        """value -> row indices (a row appears once per value it holds)."""
        import numpy as np

        n = len(self)
        parents = np.repeat(np.arange(n), np.diff(self.offsets))
        out: dict[str, list[int]] = {}
        for val, row in zip(self.values, parents.tolist()):
            if val is None or val == "":
                continue
            lst = out.get(val)
            if lst is None:
                out[val] = [row]
            elif lst[-1] != row:
                lst.append(row)
        return out


POOL_MAX = 200_000  # distinct strings shared across batches, per column


def interned_pylist(col: Any, pool: dict[Any, Any] | None = None) -> list[Any]:
    """``col.to_pylist()`` with one shared Python object per distinct value. to_pylist makes
    a new str per row, so a column of a million rows holding a dozen strategies costs ~60 MB
    of duplicate strings; sharing them costs one pointer (8 bytes) per row. Strings only;
    other types are converted as they are. ``pool`` (str -> str) shares strings across
    calls (batches); it stops growing at POOL_MAX (a unique-text column gains nothing)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)) or len(arr) == 0:
        return arr.to_pylist()
    enc = pc.dictionary_encode(arr)
    table: list[Any] = enc.dictionary.to_pylist()
    if pool is not None:
        if len(pool) < POOL_MAX:
            table = [pool.setdefault(v, v) for v in table]
        else:
            table = [pool.get(v, v) for v in table]
    table.append(None)  # code for null
    idx = pc.fill_null(enc.indices, len(table) - 1).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return list(map(table.__getitem__, idx.tolist()))


def _interned_lists(col: Any, seen: dict[Any, Any] | None = None, chunk: int = 65_536) -> list[Any]:
    """A list<string> column (``choices``) as Python lists, rows with the same options
    sharing one list object (read only: nothing mutates them). Converted in chunks so the
    transient per-row lists stay bounded."""
    import pyarrow as pa

    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if seen is None:
        seen = {}
    out: list[Any] = []
    for start in range(0, len(arr), chunk):
        for v in arr.slice(start, chunk).to_pylist():
            if v is None:
                out.append(None)
                continue
            key = tuple(v)
            hit = seen.get(key)
            if hit is None:
                hit = v
                if len(seen) < POOL_MAX:
                    seen[key] = v
            out.append(hit)
    return out


class BoxColumn(Sequence[Any]):
    """The ``boxes`` column as offsets + an (m, 4) float64 array of x1, y1, x2, y2 + the image
    id of each box: row i reads as [(image_id, x1, y1, x2, y2), ...] (what scoring expects),
    built on access. A tuple and four floats per box cost ~180 bytes; this ~40."""

    __slots__ = ("offsets", "xyxy", "image_ids")

    def __init__(self, offsets: Any, xyxy: Any, image_ids: list[Any]) -> None:
        self.offsets = offsets
        self.xyxy = xyxy
        self.image_ids = image_ids

    @classmethod
    def from_arrow(cls, col: Any, pool: dict[Any, Any] | None = None) -> "BoxColumn":
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if arr.null_count:
            arr = pc.fill_null(arr, pa.scalar([], type=arr.type))
        offsets = np.asarray(arr.offsets, dtype=np.int64)
        start, stop = int(offsets[0]), int(offsets[-1])
        vals = arr.values.slice(start, stop - start)
        if len(vals) == 0:
            return cls(offsets - start, np.zeros((0, 4)), [])
        xyxy = np.column_stack([vals.field(k).to_numpy(zero_copy_only=False).astype(np.float64) for k in ("x1", "y1", "x2", "y2")])
        return cls(offsets - start, xyxy, interned_pylist(vals.field("image_id"), pool))

    @classmethod
    def concat(cls, parts: list["BoxColumn"]) -> "BoxColumn":
        import numpy as np

        if len(parts) == 1:
            return parts[0]
        if not parts:
            return cls(np.zeros(1, dtype=np.int64), np.zeros((0, 4)), [])
        offs = [parts[0].offsets]
        total = int(parts[0].offsets[-1])
        ids = list(parts[0].image_ids)
        for p in parts[1:]:
            offs.append(p.offsets[1:] + total)
            total += int(p.offsets[-1])
            ids.extend(p.image_ids)
        return cls(np.concatenate(offs), np.concatenate([p.xyxy for p in parts]), ids)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def _row(self, a: int, b: int) -> list[tuple[Any, float, float, float, float]]:
        if a == b:
            return []
        ids = self.image_ids
        return [(ids[k], *xy) for k, xy in zip(range(a, b), self.xyxy[a:b].tolist())]

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        return self._row(int(self.offsets[i]), int(self.offsets[i + 1]))

    def __iter__(self) -> Iterator[Any]:
        o = self.offsets.tolist()
        for a, b in zip(o[:-1], o[1:]):
            yield self._row(a, b)

    def take(self, idx: Any) -> "BoxColumn":
        import numpy as np

        ix = np.asarray(idx, dtype=np.int64)
        starts, ends = self.offsets[ix], self.offsets[ix + 1]
        new_off = np.zeros(len(ix) + 1, dtype=np.int64)
        np.cumsum(ends - starts, out=new_off[1:])
        flat = np.concatenate([np.arange(a, b) for a, b in zip(starts.tolist(), ends.tolist())]) if len(ix) else np.zeros(0, dtype=np.int64)
        flat = flat.astype(np.int64)
        return BoxColumn(new_off, self.xyxy[flat] if flat.size else np.zeros((0, 4)), [self.image_ids[k] for k in flat.tolist()])


def _multi_parts(col: Any) -> list[list[dict[str, Any]] | None]:
    """answer_parts only where an answer has more than one part (what tag F1 reads);
    None elsewhere, to skip building millions of nested dicts."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False)
    out: list[list[dict[str, Any]] | None] = [None] * len(arr)
    idx = np.flatnonzero(lengths > 1)
    if idx.size:
        for i, v in zip(idx.tolist(), arr.take(pa.array(idx)).to_pylist()):
            out[i] = v
    return out


class ImageSizes:
    """(width, height) of stored images, needed to turn normalised boxes into pixels.
    Looks in scene_graphs/*.parquet (Image.width/height), then opens the file (PIL reads
    only the header) relative to the dataset folder or as given."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._by_id: dict[str, tuple[int, int]] | None = None
        self._by_path: dict[str, tuple[int, int] | None] = {}

    def _load_graph_sizes(self) -> dict[str, tuple[int, int]]:
        sizes: dict[str, tuple[int, int]] = {}
        files = sorted((self.root / "scene_graphs").glob("*.parquet"))
        if not files:
            return sizes
        import pyarrow.dataset as ds

        dset = ds.dataset([str(f) for f in files], format="parquet")
        if "images" not in dset.schema.names:
            return sizes
        for imgs in dset.to_table(columns=["images"]).column("images").to_pylist():
            for im in imgs or []:
                if im.get("width") and im.get("height"):
                    sizes[str(im["id"])] = (int(im["width"]), int(im["height"]))
        return sizes

    def get(self, image_id: str | None, image_path: str | None) -> tuple[int, int] | None:
        if self._by_id is None:
            self._by_id = self._load_graph_sizes()
        if image_id is not None and image_id in self._by_id:
            return self._by_id[image_id]
        if not image_path:
            return None
        if image_path in self._by_path:
            return self._by_path[image_path]
        size = None
        for cand in (self.root / image_path, Path(image_path)):
            if cand.is_file():
                from PIL import Image

                with Image.open(cand) as im:
                    size = (int(im.width), int(im.height))
                break
        self._by_path[image_path] = size
        return size
