"""Read a radvqa dataset directory (DIR/qa/part-*.parquet) for scoring.

Reads through ``pyarrow.dataset`` so it works whichever writer produced the shards; only
the columns scoring needs are loaded, as Python lists (columnar: one list per column).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def load_qa(root: str | Path, columns: tuple[str, ...] = EVAL_COLUMNS) -> dict[str, list[Any]]:
    """Columns of every QA row (sorted by shard file name, then row order). Missing optional
    columns come back as lists of None; a missing required column is an error."""
    import pyarrow.dataset as ds

    files = qa_files(root)
    dset = ds.dataset([str(f) for f in files], format="parquet")
    names = set(dset.schema.names)
    lacking = [c for c in REQUIRED if c not in names]
    if lacking:
        raise DatasetError(f"{root}/qa: required columns missing: {lacking}")
    present = [c for c in columns if c in names]
    table = dset.to_table(columns=present)
    n = table.num_rows
    out: dict[str, list[Any]] = {}
    for c in columns:
        if c not in present:
            out[c] = [None] * n
        elif c == "boxes":
            out[c] = _boxes(table.column(c))
        elif c == "answer_parts":
            out[c] = _multi_parts(table.column(c))
        elif c in LIST_COLUMNS:
            out[c] = ListColumn.from_arrow(table.column(c))
        else:
            out[c] = table.column(c).to_pylist()
    ids = out["qa_id"]
    if len(set(ids)) != n:
        seen: set[str] = set()
        dup = next(i for i in ids if i in seen or seen.add(i))  # type: ignore[func-returns-value]
        raise DatasetError(f"{root}/qa: qa_id {dup!r} occurs more than once")
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
    def from_arrow(cls, col: Any) -> "ListColumn":
        import numpy as np
        import pyarrow as pa

        arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        offsets = np.asarray(arr.offsets, dtype=np.int64)
        start, stop = int(offsets[0]), int(offsets[-1])
        values = arr.values.slice(start, stop - start).to_pylist()
        return cls(offsets - start, values)

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


def _boxes(col: Any) -> list[list[tuple[Any, float, float, float, float]]]:
    """Per row: [(image_id, x1, y1, x2, y2), ...], read from the flattened struct arrays
    (a dict per box from to_pylist costs several times more on million-row sets)."""
    import numpy as np
    import pyarrow as pa

    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    offsets = np.asarray(arr.offsets)
    vals = arr.values
    n = len(arr)
    if len(vals) == 0:
        return [[] for _ in range(n)]
    x1, y1, x2, y2 = (vals.field(k).to_numpy(zero_copy_only=False).tolist() for k in ("x1", "y1", "x2", "y2"))
    img = vals.field("image_id").to_pylist()
    boxes = list(zip(img, x1, y1, x2, y2))
    out: list[list[tuple[Any, float, float, float, float]]] = []
    for i in range(n):
        a, b = offsets[i], offsets[i + 1]
        out.append(boxes[a:b] if b > a else [])
    return out


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
