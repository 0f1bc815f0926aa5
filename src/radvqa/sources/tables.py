"""Which input file is which table: recognised by its header (columns), never by its file name.

Publishers and mirrors rename and compress tables (``vinbigdata-train.csv.gz``,
``chexpert_train.csv.gz``), so every adapter finds its tables the same way:

- a file the user names explicitly is read whatever it is called, plain or gzip (detected by its
  magic bytes, not its suffix), with or without a UTF-8 byte-order mark, LF or CRLF line ends; its
  header must match one of the adapter's layouts, else the error names the closest layout and the
  columns it lacks;
- in a folder, ``*.csv`` / ``*.csv.gz`` / ``*.tsv`` files down to depth 2 are read the same way, and
  files whose header matches no layout are passed over (a dataset folder holds other tables too).

Each recognised file is announced through ``Source.note`` ("... recognised as <layout>"), so the
user sees which layout was taken.
"""

from __future__ import annotations

import csv
import gzip
import io
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GZIP_MAGIC = b"\x1f\x8b"
BOM = "\ufeff"
# Files that are never tables, whatever their header would look like (images, archives, reports).
NOT_TABLES = (".png", ".jpg", ".jpeg", ".dcm", ".dicom", ".tgz", ".tar", ".xml", ".txt", ".json", ".jsonl", ".zip")
TABLE_NAMES = (".csv", ".csv.gz", ".tsv", ".tsv.gz")


def is_gzip(path: Path) -> bool:
    """True when the file starts with the gzip magic bytes (the name does not matter)."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == GZIP_MAGIC
    except OSError:
        return False


def open_binary(path: Path) -> Any:
    """Binary stream of a plain or gzip file (gzip recognised by content)."""
    if is_gzip(path):
        # 64 KiB: big enough for speed, small enough that a truncated .gz keeps the rows before the cut
        return io.BufferedReader(gzip.open(path, "rb"), 1 << 16)  # type: ignore[arg-type]
    return open(path, "rb")


class _ByteRange:
    """``readline`` over the bytes [lo, hi) of a stream whose ``lo`` is a line start (a part of a
    table, see ``plan_line_ranges``): lines after ``hi`` belong to the next part."""

    def __init__(self, raw: Any, hi: int | None, pos: int) -> None:
        self.raw = raw
        self.hi = hi
        self.pos = pos

    def readline(self, size: int = -1) -> bytes:
        if self.hi is not None and self.pos >= self.hi:
            return b""
        line = self.raw.readline(size)
        self.pos += len(line)
        return line

    def close(self) -> None:
        self.raw.close()


def open_binary_range(path: Path, lo: int = 0, hi: int | None = None) -> Any:
    """``open_binary`` from byte ``lo`` (of the decompressed text for a gzip file: it is
    decompressed up to there and the bytes dropped, which costs ~5 ms a MB; parsing is what a part
    spreads) up to byte ``hi``."""
    raw = open_binary(path)
    if lo == 0 and hi is None:
        return raw
    if lo:
        raw.seek(lo)  # gzip: forward seek = decompress and discard
    return _ByteRange(raw, hi, lo)


def text_before(path: Path, lo: int) -> str | None:
    """The (decompressed) text of bytes [0, lo) when it is UTF-8 without CR or NUL: then, in a
    table without quotes, its lines split on commas are the rows csv reads (``read_csv_rows_split``)
    and an earlier part's rows can be scanned ~5x faster than line by line. None otherwise."""
    with open_binary(path) as f:
        data = f.read(lo)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\r" in text or "\x00" in text else text


# a part of a table below this many rows costs more in process start and re-read side tables than
# the parse it spreads
MIN_PART_ROWS = 2_000


def plan_line_ranges(path: Path, n_parts: int, min_rows: int | None = None,
                     chunk: int = 1 << 20) -> list[dict[str, int | None]] | None:
    """Cut a table into at most ``n_parts`` consecutive byte ranges of about equal size, each
    starting at a line start, in one pass over its (decompressed) bytes that parses nothing. Each
    range: ``{"lo", "hi" (None: to the end), "line0", "line_hi"}`` with ``line0`` / ``line_hi`` the
    number of lines before ``lo`` / ``hi`` (so a part's rejects name the same line numbers as one
    reader's). The header is in the
    first range. None (read the table whole) when it has fewer than ``min_rows`` rows a part, when
    it holds a double quote anywhere (a quoted field may span lines, so a line start need not be
    a record start; the tables of NIH, CheXpert, VinDr and MIMIC have none), or when it cannot be
    read to the end (a damaged .gz: one reader says where the damage starts)."""
    min_rows = MIN_PART_ROWS if min_rows is None else min_rows
    if n_parts <= 1:
        return None
    try:
        size = _text_size(path)
        cuts: list[tuple[int, int]] = []  # (offset of a line start, lines before it)
        targets = [size * i // n_parts for i in range(1, n_parts)]
        ti = 0
        pos = lines = 0
        with open_binary(path) as f:
            while True:
                buf = f.read(chunk)
                if not buf:
                    break
                if b'"' in buf:
                    return None
                while ti < len(targets) and targets[ti] < pos + len(buf):
                    j = buf.find(b"\n", max(targets[ti] - pos, 0))
                    if j < 0:
                        break  # the line runs into the next chunk: cut after its end there
                    at = pos + j + 1
                    if not cuts or cuts[-1][0] < at:
                        cuts.append((at, lines + buf.count(b"\n", 0, j + 1)))
                    ti += 1
                    while ti < len(targets) and targets[ti] < at:
                        ti += 1  # a long line covered the next target too
                lines += buf.count(b"\n")
                pos += len(buf)
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error):
        return None
    cuts = [c for c in cuts if c[0] < pos and c[1] >= 1]  # never an empty last part or a cut in the header
    k = len(cuts) + 1
    if k <= 1:
        return None
    if lines < min_rows * k:
        # fewer parts: plan again (a second pass, over a small table)
        fewer = min(k - 1, lines // max(min_rows, 1))
        return plan_line_ranges(path, fewer, min_rows, chunk) if fewer < n_parts else None
    bounds = [(0, 0)] + cuts
    return [{"lo": lo, "line0": l0, "hi": bounds[i + 1][0] if i + 1 < len(bounds) else None,
             "line_hi": bounds[i + 1][1] if i + 1 < len(bounds) else None}
            for i, (lo, l0) in enumerate(bounds)]


def _text_size(path: Path) -> int:
    """Bytes of the (decompressed) text: a gzip file's ISIZE trailer (exact below 4 GiB for one
    member; only an estimate otherwise, which just makes the parts less even)."""
    size = path.stat().st_size
    if not is_gzip(path):
        return size
    with open(path, "rb") as f:
        f.seek(max(size - 4, 0))
        isize = int.from_bytes(f.read(4), "little")
    return max(isize, size)


def loose(s: str) -> str:
    return "".join(ch for ch in s.lower() if ch.isalnum())


def read_header(path: Path, max_bytes: int = 1 << 16) -> list[str] | None:
    """The first CSV record of a file (BOM removed, cells stripped), or None when the file is not
    UTF-8 text with at least two columns (an image, an archive, a free-text file)."""
    try:
        with open_binary(path) as f:
            line = f.readline(max_bytes)
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None
    text = text.lstrip(BOM)
    if not text.strip():
        return None
    delim = "\t" if text.count("\t") > text.count(",") else ","
    try:
        row = next(csv.reader([text.rstrip("\r\n")], delimiter=delim))
    except (csv.Error, StopIteration):
        return None
    return [c.strip() for c in row] if len(row) >= 2 else None


@dataclass(frozen=True)
class Layout:
    """One kind of table an adapter reads: a key, a human name, and the columns that identify it
    (every name in ``columns``; at least one of ``any_of`` when given), compared loosely (case,
    spaces and punctuation ignored)."""

    key: str
    name: str
    columns: tuple[str, ...]
    any_of: tuple[str, ...] = ()
    prefix: tuple[str, ...] = field(default=())  # columns matched by prefix (NIH's "Bbox [x,y,w,h]")

    def missing(self, header: list[str]) -> list[str]:
        have = {loose(h) for h in header}
        miss = [c for c in self.columns if loose(c) not in have]
        miss += [p + "..." for p in self.prefix if not any(h.startswith(loose(p)) for h in have)]
        if self.any_of and not any(loose(c) in have for c in self.any_of):
            miss.append(" or ".join(self.any_of))
        return miss


def files_depth2(p: Path, suffixes: tuple[str, ...] | None = None) -> list[Path]:
    """Files in a folder and its direct subfolders (a dataset's top), sorted; with ``suffixes``
    only those whose lower-cased name ends with one of them. Unreadable folders are skipped."""
    out: list[Path] = []
    try:
        entries = sorted(p.iterdir())
    except OSError:
        return out
    for f in entries:
        if f.is_file() and (suffixes is None or f.name.lower().endswith(suffixes)):
            out.append(f)
        elif f.is_dir():
            try:
                out += [g for g in sorted(f.iterdir())
                        if g.is_file() and (suffixes is None or g.name.lower().endswith(suffixes))]
            except OSError:
                pass
    return out


def table_files(p: Path) -> list[Path]:
    """Table-named files in a folder, depth 2 (tables sit at a dataset's top), sorted."""
    return files_depth2(p, TABLE_NAMES)


def recognise_tables(
    source: Any, inputs: Iterable[Path], layouts: list[Layout], *, explicit_other: Any = None
) -> dict[str, list[Path]]:
    """Tables among the inputs, by layout key (each list in input order). The first layout a header
    matches wins, so list the more specific ones first.

    ``explicit_other(path) -> bool``: an explicitly named file the adapter uses otherwise (an
    archive, an image): left alone. Any other explicitly named file must match a layout, else
    ``SourceError`` says which columns the closest layout lacks."""
    from radvqa.sources.base import SourceError

    found: dict[str, list[Path]] = {lay.key: [] for lay in layouts}
    for p in inputs:
        explicit = p.is_file()
        files = [p] if explicit else table_files(p) if p.is_dir() else []
        for f in files:
            if explicit and (f.name.lower().endswith(NOT_TABLES) or (explicit_other is not None and explicit_other(f))):
                continue
            header = read_header(f)
            lay = None
            if header is not None:
                lay = next((x for x in layouts if not x.missing(header)), None)
            if lay is not None:
                found[lay.key].append(f)
                source.note(f"{f}: recognised as {lay.name} (by its columns{', gzip' if is_gzip(f) else ''})")
            elif explicit:
                if header is None:
                    raise SourceError(f"{source.name}: {f}: not a table (no CSV header line of UTF-8 text)")
                best = min(layouts, key=lambda x: len(x.missing(header)))
                raise SourceError(
                    f"{source.name}: {f}: its columns match no {source.name} table; closest: {best.name}, "
                    f"missing column(s) {', '.join(best.missing(header))} (header: {header[:12]})"
                )
    return found


def split_from_name(path: Path, default: str = "train") -> str:
    """A table's split from words in its file name (``valid``/``val`` -> validation names kept as
    the adapter's convention by the caller; ``test``; else ``default``)."""
    n = path.name.lower()
    for suffix in (".gz", ".csv", ".tsv"):
        if n.endswith(suffix):
            n = n[: -len(suffix)]
    words = set("".join(ch if ch.isalnum() else " " for ch in n).split())
    if "test" in words or any(w.startswith("test") for w in words):
        return "test"
    if words & {"valid", "val", "validation", "validate", "dev"}:
        return "valid"
    return default
