"""Sharded Parquet writing and reading.

A shard file is written under a temporary name beside its final one (``.part-00003.parquet.tmp``:
hidden, and not matched by ``*.parquet`` globs of readers) and renamed only once complete, so a
file named ``part-*.parquet`` is always whole. Any I/O failure (disk full, permission denied)
removes the temporary file and raises :class:`WriteError` naming the path and the cause.

Row groups hold ``row_group_rows`` rows (default 10,000 QA rows, a few MB compressed): small enough
to read one row group for random access, large enough for ZSTD to compress well. A page index is
written so readers can skip pages. Output bytes depend only on the rows given (no timestamps).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from radvqa.io.atomic import WriteError, atomic_path, tmp_name
from radvqa.io.atomic import explain as _explain
from radvqa.io.schema import ArrowCodec, codec

QA_ROW_GROUP_ROWS = 10_000
SG_ROW_GROUP_ROWS = 1_000
COMPRESSION = "zstd"
COMPRESSION_LEVEL = 3


def shard_name(index: int) -> str:
    return f"part-{index:05d}.parquet"


class ShardWriter:
    """Append IR objects; a row group is written each ``row_group_rows`` objects.

    Use as a context manager: a clean exit renames the temp file to ``path``; an exception removes
    it. ``path`` never exists half-written.
    """

    def __init__(self, path: Path | str, kind: str, row_group_rows: int | None = None) -> None:
        self.path = Path(path)
        self.codec: ArrowCodec = codec(kind)
        self.row_group_rows = row_group_rows or (QA_ROW_GROUP_ROWS if kind == "qa" else SG_ROW_GROUP_ROWS)
        self.tmp = tmp_name(self.path)
        self.rows = 0
        self._buf: list[Any] = []
        self._writer: pq.ParquetWriter | None = None
        self._closed = False

    # -- writing -------------------------------------------------------------------------------
    def _open(self) -> pq.ParquetWriter:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return pq.ParquetWriter(
                str(self.tmp),
                self.codec.schema,
                compression=COMPRESSION,
                compression_level=COMPRESSION_LEVEL,
                use_dictionary=True,
                write_statistics=True,
                write_page_index=True,
                # CRC32 per page: lets `radvqa validate` detect flipped bytes, not only truncation
                write_page_checksum=True,
            )
        except OSError as exc:
            raise WriteError(exc.errno, _explain(exc, self.tmp)) from exc

    def _flush(self) -> None:
        if not self._buf:
            return
        table = self.codec.to_table(self._buf)
        self._buf = []
        self.write_table(table)

    def write_table(self, table: pa.Table) -> None:
        if self._writer is None:
            self._writer = self._open()
        try:
            self._writer.write_table(table, row_group_size=self.row_group_rows)
        except OSError as exc:
            raise WriteError(exc.errno, _explain(exc, self.tmp)) from exc
        self.rows += table.num_rows

    def add(self, obj: msgspec.Struct) -> None:
        self._buf.append(obj)
        if len(self._buf) >= self.row_group_rows:
            self._flush()

    def extend(self, objs: Sequence[msgspec.Struct]) -> None:
        buf = self._buf
        room = self.row_group_rows - len(buf)
        if len(objs) < room:  # the common case: one study's rows fit in the open row group
            buf.extend(objs)
            return
        # row groups keep exactly row_group_rows rows whatever the batch sizes (byte-stable output)
        buf.extend(objs[:room])
        self._flush()
        rest = objs[room:]
        while rest:
            n = self.row_group_rows
            self._buf.extend(rest[:n])
            rest = rest[n:]
            if len(self._buf) >= self.row_group_rows:
                self._flush()

    # -- completion ------------------------------------------------------------------------------
    def close(self) -> Path:
        """Flush, close and rename into place. An empty shard still gets a (valid, empty) file."""
        if self._closed:
            return self.path
        try:
            self._flush()
            if self._writer is None:
                self._writer = self._open()
            self._writer.close()
            self._writer = None
            os.replace(self.tmp, self.path)
        except OSError as exc:
            self.abort()
            if isinstance(exc, WriteError):
                raise
            raise WriteError(exc.errno, _explain(exc, self.path)) from exc
        except BaseException:
            self.abort()
            raise
        self._closed = True
        return self.path

    def abort(self) -> None:
        """Drop everything written so far (the final path is never touched)."""
        self._buf = []
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001 - closing a broken writer may fail again; the file goes anyway
                pass
            self._writer = None
        try:
            self.tmp.unlink()
        except FileNotFoundError:
            pass
        except OSError:
            pass
        self._closed = True

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def write_table_atomic(path: Path | str, table: pa.Table, row_group_rows: int) -> None:
    """Write a whole table at once (temp name + rename)."""
    with atomic_path(path) as tmp:
        pq.write_table(
            table, str(tmp), compression=COMPRESSION, compression_level=COMPRESSION_LEVEL,
            row_group_size=row_group_rows, write_page_index=True, write_page_checksum=True,
        )


# -- reading -------------------------------------------------------------------------------------


def shard_files(out: Path | str, kind: str) -> list[Path]:
    """The complete shard files of a table, in shard order (temp files are never listed)."""
    d = Path(out) / kind
    if not d.is_dir():
        return []
    return sorted(p for p in d.glob("part-*.parquet") if p.is_file())


def damaged_shard(dataset: Path | str, exc: BaseException) -> str:
    """One line for an Arrow error met while reading a dataset: which shard is damaged (each is
    opened and read until one fails; only on this error path) and what to run next."""
    for kind in ("qa", "scene_graphs"):
        for f in shard_files(dataset, kind):
            try:
                pf = pq.ParquetFile(f)
                for _ in pf.iter_batches(batch_size=65_536):
                    pass
            except (pa.ArrowException, OSError) as e:
                why = " ".join(str(e).split())[:200]
                return f"damaged Parquet shard {f}: {why} (check with: radvqa validate {dataset})"
    # every shard reads: the error was elsewhere (an output file, a disk error); say just what it was
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def read_table(out: Path | str, kind: str, columns: list[str] | None = None) -> pa.Table:
    """All shards of ``kind`` ("qa" or "scene_graphs") as one table (for small outputs / tests)."""
    files = shard_files(out, kind)
    if not files:
        return codec(kind).schema.empty_table() if columns is None else codec(kind).schema.empty_table().select(columns)
    return pa.concat_tables([pq.read_table(f, columns=columns) for f in files])


def iter_batches(out: Path | str, kind: str, columns: list[str] | None = None,
                 batch_size: int = 10_000) -> Iterator[pa.RecordBatch]:
    """Stream record batches over all shards (memory bounded by ``batch_size``)."""
    for f in shard_files(out, kind):
        pf = pq.ParquetFile(f)
        yield from pf.iter_batches(batch_size=batch_size, columns=columns)


def iter_objects(out: Path | str, kind: str, batch_size: int = 2_000) -> Iterator[Any]:
    """Stream IR objects (``QA`` or ``SceneGraph``) over all shards, in stored order."""
    c = codec(kind)
    for batch in iter_batches(out, kind, batch_size=batch_size):
        yield from c.from_table(batch)


def read_qa(out: Path | str) -> list[Any]:
    return list(iter_objects(out, "qa"))


def read_scene_graphs(out: Path | str) -> list[Any]:
    return list(iter_objects(out, "scene_graphs"))
