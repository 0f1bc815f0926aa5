"""Shared plumbing for source adapters: the adapter base class, file discovery, streaming table
readers (plain or gzip), label mapping through the ontology, and image header reads.

Every adapter yields ``model.Study`` or ``model.Reject``; nothing is dropped without a Reject
saying why (contract: studies in = studies out + studies rejected).

Rules shared by the adapters:
- Ids: ``Study.id = "<source>:<dataset study id>"``, ``patient_id = "<source>:<dataset patient>"``
  (namespaced too, so patient-level splits never merge two datasets' patients).
- Unknown labels: in a closed scheme (nih14, chexpert14, vindr, radimagenet, generic terms) an
  unknown label rejects its record (a bad column *header* is an error at start, since it would
  reject every row). In open, large vocabularies (PadChest's ~190 labels, Chest ImaGenome's NLP
  attributes) an unmapped label is kept in ``meta`` (``unmapped_labels`` / ``imagenome_ignored``)
  and the study is used.
- Images are optional. A file counts as missing (Reject) only where the adapter knows it must exist:
  it is listed in a size table (NIH ``images.csv``), referenced by an explicit path (generic CSV),
  its study folder exists (MIMIC-CXR, CheXpert), or a flat image folder was given (OpenI, VinDr,
  PadChest, RadImageNet listing). Otherwise ``path=None`` and the size stays unknown or comes from
  the tables. An unreadable image is always a Reject. Sizes are read from file headers only.
- Boxes are in the stored file's pixels, rescaled when the stored file is a resized copy (NIH).
"""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import os
import zlib
from collections.abc import Generator, Iterable, Iterator
from pathlib import Path
from typing import Any

from radvqa.model import Reject, Study

Record = Study | Reject

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".dcm", ".dicom")


ROW_STAGE = "source-row"  # Reject.stage of a rejected row that is not a study


class ReadCounts:
    """What one ``iter_records`` pass read and yielded. ``read`` is counted by the adapter where it
    reads (None when an adapter does not count); the rest by the base class from what it yields.
    Contract: ``read == studies + rejects`` -- a record read and neither yielded nor rejected is a
    silent drop."""

    __slots__ = ("read", "studies", "rejects", "row_rejects")

    def __init__(self) -> None:
        self.read: int | None = None
        self.studies = 0
        self.rejects = 0
        self.row_rejects = 0

    def unaccounted(self) -> int:
        """Records read but neither yielded as a study nor rejected (0 when the adapter counts
        nothing)."""
        return 0 if self.read is None else self.read - self.studies - self.rejects

    def as_dict(self) -> dict[str, int | None]:
        return {"records_read": self.read, "studies": self.studies, "rejects": self.rejects,
                "row_rejects": self.row_rejects}


class RecordStream:
    """An iterator of records that also carries the pass's :class:`ReadCounts`."""

    def __init__(self, records: Iterator[Any], counts: ReadCounts) -> None:
        self._records = records
        self.counts = counts

    def __iter__(self) -> Iterator[Any]:
        # the records themselves, not this wrapper: a ``for`` loop then resumes the generator
        # directly instead of calling a Python ``__next__`` per record (#20: the NIH read's 112,120
        # rows paid ~0.2 us each for it)
        return self._records

    def __next__(self) -> Any:
        return next(self._records)

    def close(self) -> None:
        close = getattr(self._records, "close", None)
        if close is not None:
            close()


class SourceError(ValueError):
    """Inputs that cannot be used at all (no table found, unreadable header): raised, not a Reject,
    because there is no record to attach the reason to."""


class UnknownLabel(KeyError):
    def __init__(self, scheme: str, label: str) -> None:
        super().__init__(f"unknown {scheme} label {label!r}")
        self.scheme = scheme
        self.label = label

    def __str__(self) -> str:  # KeyError quotes its argument; we want the plain message
        return str(self.args[0])


class Source:
    """Base class: subclasses set ``name`` and implement ``_records``."""

    name: str = ""
    description: str = ""
    # Where ``note`` sends its lines (the build's progress messages); unset: kept in ``notes``.
    notify: Any = None
    # True where the adapter calls ``count_read`` for every record it reads: its count starts at 0
    # (an input with no records reads 0, not "not counted") and the build checks it
    counts_reads: bool = False

    def note(self, text: str) -> None:
        """A line for the user about how the inputs were read (which layout a table was taken for)."""
        if not hasattr(self, "notes"):
            self.notes: list[str] = []
        self.notes.append(text)
        if self.notify is not None:
            self.notify(text)

    def iter_records(
        self, inputs: Iterable[Path | str], *, ontology: Any = None, limit: int | None = None
    ) -> RecordStream:
        """Yield at most ``limit`` records (studies and study-level rejects both count). The
        returned stream's ``counts`` say how many input records the adapter read, counted where it
        reads them, independently of what it yields (see :class:`ReadCounts`)."""
        paths = [Path(p) for p in inputs]
        for p in paths:
            if not p.exists():
                raise SourceError(f"{self.name}: input not found: {p}")
        onto = ontology if ontology is not None else _default_ontology()
        self.counts = counts = ReadCounts()
        if self.counts_reads:
            counts.read = 0
        return RecordStream(self._guarded(paths, onto, limit, counts), counts)

    def _guarded(self, paths: list[Path], onto: Any, limit: int | None, counts: ReadCounts) -> Iterator[Record]:
        if limit is not None and limit <= 0:
            return
        # one ``for`` over the adapter's generator inside one ``try`` (not a ``next()`` per record
        # in its own ``try``): the same net, a third of the cost per record
        try:
            for rec in self._records(paths, onto, limit):
                if isinstance(rec, Reject):
                    if rec.stage == ROW_STAGE:
                        counts.row_rejects += 1
                    else:
                        counts.rejects += 1
                else:
                    counts.studies += 1
                yield rec
                if limit is not None and counts.studies + counts.rejects >= limit:
                    return
        except SourceError:
            raise
        except Exception as e:  # noqa: BLE001 - the last net: one clear line, never a traceback
            # (adapters turn what they can attribute to a row into a Reject; what reaches here
            # is input that cannot be read at all, e.g. an unreadable file or a disk error)
            raise SourceError(f"{self.name}: cannot read the input: {_one_line(e)}") from e

    def count_read(self, n: int = 1) -> None:
        """Adapters call this where they read a study-level input record (a table row, an XML
        file or archive member, a JSON line), before deciding what becomes of it."""
        try:
            self.counts.read += n  # type: ignore[operator]
        except AttributeError:  # called outside an ``iter_records`` pass: nothing to count into
            pass
        except TypeError:  # an adapter that counts without declaring ``counts_reads``
            self.counts.read = n

    def _records(self, inputs: list[Path], onto: Any, limit: int | None) -> Iterator[Record]:
        raise NotImplementedError

    def reject(self, ref: str | Path, reason: str) -> Reject:
        return Reject(source=self.name, ref=str(ref), reason=reason, stage="source")

    def reject_row(self, ref: str | Path, reason: str) -> Reject:
        """A reject for a row that is not a study (a box, label or image-size row): written to
        rejected.jsonl, counted apart from studies."""
        return Reject(source=self.name, ref=str(ref), reason=reason, stage=ROW_STAGE)

    def table_rows(
        self, rows: Iterable[tuple[int, list[str] | None, str | None]], ncols: int, table: str | Path
    ) -> Iterator[tuple[str, int, list[str]] | Reject]:
        """Data rows of a table streamed by ``read_csv_rows``: ``(ref, line number, cells)`` for each
        usable row,
        a Reject for a line that could not be read or whose cell count differs from the header's.
        Blank lines are not records and are passed over."""
        for lineno, row, err in rows:
            ref = f"{table}:{lineno}"
            if row is None:
                yield self.reject(ref, err or "unreadable line")
            elif not any(x.strip() for x in row):
                continue
            elif len(row) != ncols:
                yield self.reject(ref, f"{len(row)} cells, header has {ncols}")
            else:
                yield ref, lineno, row


def _one_line(e: BaseException) -> str:
    """An exception as one short line: type, message, and the file it names if any."""
    msg = " ".join(str(e).split()) or type(e).__name__
    if not msg.startswith(type(e).__name__):
        msg = f"{type(e).__name__}: {msg}"
    return msg[:300]


def _default_ontology() -> Any:
    from radvqa.ontology import load_ontology  # type: ignore[attr-defined]

    return load_ontology()


# --------------------------------------------------------------------------- labels


class LabelMapper:
    """Maps a scheme's label names to ontology finding ids, cached.

    Tries the exact name first, then a loose form (case, ``_``/``-``/space), because datasets spell
    the same label differently across files (NIH ``Pleural_Thickening``; CheXpert ``Pleural Other``).
    Raises ``UnknownLabel`` when nothing matches: the adapter turns that into a Reject line.
    """

    def __init__(self, ontology: Any, scheme: str) -> None:
        self.onto = ontology
        self.scheme = scheme
        self._cache: dict[str, list[str]] = {}
        self._loose: dict[str, str] | None = None

    def labels(self) -> list[str]:
        """The scheme's label names as the ontology lists them ([] when the scheme is missing)."""
        try:
            return list(self.onto.schemes[self.scheme].labels)
        except (KeyError, AttributeError):
            return []

    def __call__(self, name: str) -> list[str]:
        hit = self._cache.get(name)
        if hit is not None:
            return hit
        try:
            fids = list(self.onto.map_label(self.scheme, name))
        except KeyError:
            if self._loose is None:
                self._loose = {_loose(k): k for k in self.labels()}
            key = self._loose.get(_loose(name))
            if key is None:
                raise UnknownLabel(self.scheme, name) from None
            fids = list(self.onto.map_label(self.scheme, key))
        self._cache[name] = fids
        return fids


def _loose(s: str) -> str:
    return "".join(ch for ch in s.lower() if ch.isalnum())


# --------------------------------------------------------------------------- files and tables


def walk_files(paths: Iterable[Path]) -> Iterator[Path]:
    """Files under the given paths (a file is itself), sorted for a deterministic order."""
    for p in paths:
        if p.is_dir():
            for root, dirs, files in os.walk(p):
                dirs.sort()
                for f in sorted(files):
                    yield Path(root) / f
        else:
            yield p


def open_text(path: Path, encoding: str = "utf-8") -> io.TextIOBase:
    """Text stream of a plain or ``.gz`` file. ``errors="strict"`` so non-UTF-8 bytes surface as
    UnicodeDecodeError where the caller can turn them into a Reject."""
    from radvqa.sources.tables import is_gzip

    # gzip by content, not name; "-sig" drops a byte-order mark before the header
    enc = "utf-8-sig" if encoding.lower().replace("_", "-") == "utf-8" else encoding
    if is_gzip(path):
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding=enc, newline="")  # type: ignore[return-value]
    return open(path, encoding=enc, newline="")  # type: ignore[return-value]


# A report can be a long quoted multi-line field; csv's default 128 KiB cap split such a field into
# thousands of bogus rows. 64 MiB still bounds the memory of one record.
MAX_CSV_FIELD = 64 << 20
csv.field_size_limit(max(csv.field_size_limit(), MAX_CSV_FIELD))


def read_csv_rows(path: Path, lo: int = 0, hi: int | None = None,
                  line0: int = 0) -> Iterator[tuple[int, list[str] | None, str | None]]:
    """Stream a CSV: yields (line number, cells, None), or (line number, None, reason) for a line
    that cannot be decoded or parsed. Line numbers are physical lines of the file (1 = header; a
    record spanning lines gets its last line). The header is the first yielded row.

    Quotes are read strictly: an unclosed quote that would swallow the following rows into one
    field (and hand a later row's cells to this one) is an error, and every physical line the
    broken record consumed gets its own reject line, so no row vanishes.

    ``lo``/``hi``/``line0``: only the lines in bytes [lo, hi), the first being line ``line0 + 1``
    (a part of a table planned by ``tables.plan_line_ranges``; the header is then not yielded
    unless ``lo`` is 0)."""
    with open_text_bytes_tolerant(path, lo, hi, line0) as lines:
        reader = csv.reader(lines, strict=True)
        while True:
            start = lines.n + 1
            try:
                row = next(reader)
            except StopIteration:
                return
            except (UnicodeDecodeError, EOFError, OSError, zlib.error, csv.Error) as e:
                if (yield from _row_errors(path, lines, start, e)):
                    return
                continue
            yield lines.n, row, None


def _row_errors(path: Path, lines: "_TolerantLines", start: int,
                e: Exception) -> Generator[tuple[int, None, str], None, bool]:
    """The reject lines of a table row that could not be read (shared by both CSV readers);
    returns True when the rest of the file is unreadable."""
    if isinstance(e, UnicodeDecodeError):
        yield lines.n, None, f"not UTF-8 text ({e.reason} at byte {e.start})"
        return False
    if isinstance(e, csv.Error):
        end = max(lines.n, start)
        span = f" (a quoted field opened on line {start} runs to line {end})" if end > start else ""
        for n in range(start, end + 1):
            yield n, None, f"malformed CSV: {e}{span}"
        return False
    # a truncated or non-gzip .gz, a disk error
    why = " ".join(f"{type(e).__name__}: {e}".split())[:200]
    if lines.n == 0:
        raise SourceError(f"{path}: cannot read the table ({why})") from None
    # the rows before the damage are kept; the unreadable rest is one reject line
    yield lines.n + 1, None, f"file damaged after line {lines.n}, the rest is unreadable ({why})"
    return True


def read_csv_rows_split(path: Path, lo: int = 0, hi: int | None = None,
                        line0: int = 0) -> Iterator[tuple[int, list[str] | None, str | None]]:
    """``read_csv_rows``, with a line that has no quote, no stray CR and no NUL split on commas
    instead of parsed by the csv module (the same cells: such a line has nothing for csv to
    interpret; about 10x less work a line). Any other line starts a csv record read on from
    there with the same strict rules, so quoted fields, line ends inside quotes and the reject
    lines are read_csv_rows's (tests/test_sources_csv_split.py compares them). ``lo``/``hi``/
    ``line0``: a byte range, as for read_csv_rows."""
    with open_text_bytes_tolerant(path, lo, hi, line0) as lines:
        limit = csv.field_size_limit()
        while True:
            start = lines.n + 1
            try:
                line = next(lines)
                body = line[:-1] if line[-1:] == "\n" else line
                if body[-1:] == "\r":
                    body = body[:-1]
                if '"' not in body and "\r" not in body and "\x00" not in body and len(body) <= limit:
                    yield lines.n, (body.split(",") if body else []), None
                    continue
                # csv reads the record on from this line (a quoted field may run over lines); a
                # fresh reader per record is the same parse: csv's reader keeps no state between records
                row = next(csv.reader(itertools.chain((line,), lines), strict=True))
            except StopIteration:
                return
            except (UnicodeDecodeError, EOFError, OSError, zlib.error, csv.Error) as e:
                if (yield from _row_errors(path, lines, start, e)):
                    return
                continue
            yield lines.n, row, None


class _TolerantLines:
    """Iterates lines of a binary stream, decoding each as UTF-8 on its own, so one bad line
    becomes one Reject instead of aborting the whole table. ``n`` counts the lines read."""

    def __init__(self, raw: Any, n: int = 0) -> None:
        self.raw = raw
        self.n = n

    def __iter__(self) -> "_TolerantLines":
        return self

    def __next__(self) -> str:
        line = self.raw.readline()
        if not line:
            raise StopIteration
        self.n += 1
        if self.n == 1 and line.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark (Excel's CSV export)
            line = line[3:]
        return line.decode("utf-8")

    def __enter__(self) -> "_TolerantLines":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.raw.close()


def open_text_bytes_tolerant(path: Path, lo: int = 0, hi: int | None = None, line0: int = 0) -> _TolerantLines:
    from radvqa.sources.tables import open_binary_range

    # gzip recognised by its magic bytes, not the name; a byte range starts at a line start
    return _TolerantLines(open_binary_range(path, lo, hi), line0)


def header_index(header: list[str], wanted: dict[str, tuple[str, ...]], ref: str) -> dict[str, int]:
    """Column positions by canonical name, accepting several spellings per column. Raises
    SourceError naming the file and the missing columns."""
    norm = [_loose(h) for h in header]
    out: dict[str, int] = {}
    missing = []
    for key, names in wanted.items():
        for n in names:
            ln = _loose(n)
            if ln in norm:
                out[key] = norm.index(ln)
                break
        else:
            missing.append(key)
    if missing:
        raise SourceError(f"{ref}: missing column(s) {', '.join(missing)} (header: {header})")
    return out


# --------------------------------------------------------------------------- images


def image_size(path: Path) -> tuple[int, int]:
    """(width, height) from the file header only (no pixel decode). DICOM via pydicom headers.
    Raises ValueError with a readable reason when the file is not a readable image."""
    suffix = path.suffix.lower()
    if suffix in (".dcm", ".dicom"):
        return dicom_size(path)
    from PIL import Image as PILImage, UnidentifiedImageError

    try:
        with PILImage.open(path) as im:
            w, h = im.size
            fmt = im.format
            # A truncated file still has a header; verify() catches broken structure cheaply
            # (PNG: every chunk's CRC up to IEND).
            im.verify()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise ValueError(f"unreadable image {path.name}: {e}") from None
    if fmt == "JPEG" and not _jpeg_has_end(path):
        # Pillow's JPEG verify() checks nothing past the header: a truncated or header-only file
        # would be accepted and fail only when a model or the viewer decodes it
        raise ValueError(f"unreadable image {path.name}: truncated JPEG (no end-of-image marker)")
    if w <= 0 or h <= 0:
        raise ValueError(f"unreadable image {path.name}: size {w}x{h}")
    return int(w), int(h)


def _jpeg_has_end(path: Path, tail: int = 4096) -> bool:
    """Whether the JPEG's last ``tail`` bytes hold the EOI marker (FF D9); some writers pad after
    it, so the marker need not be the last two bytes."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - tail))
        return b"\xff\xd9" in f.read()


def dicom_size(path: Path) -> tuple[int, int]:
    import pydicom

    try:
        ds = pydicom.dcmread(path, stop_before_pixels=True)
        return int(ds.Columns), int(ds.Rows)
    except Exception as e:  # pydicom raises many types for broken files
        raise ValueError(f"unreadable DICOM {path.name}: {type(e).__name__}: {e}") from None


def index_images(paths: Iterable[Path], suffixes: tuple[str, ...] = IMAGE_SUFFIXES) -> dict[str, Path]:
    """Image files under the given folders, keyed by file name and by stem (first one wins in
    sorted order, so the result is deterministic)."""
    out: dict[str, Path] = {}
    for f in walk_files(p for p in paths if p.is_dir()):
        if f.suffix.lower() in suffixes:
            out.setdefault(f.name, f)
            out.setdefault(f.stem, f)
    return out


def image_index(dirs: list[Path], tables: list[Path], suffixes: tuple[str, ...] = IMAGE_SUFFIXES) -> dict[str, Path] | None:
    """Images under the folder inputs, or None when images are not required: no folder given, or
    the only folders given hold the tables and no image (a dataset root where only the tables were
    downloaded). A folder given next to the tables that holds no image still makes images required
    (``{}``: every lookup misses and becomes a Reject)."""
    if not dirs:
        return None
    idx = index_images(dirs, suffixes)
    if idx:
        return idx
    table_dirs = {d for d in dirs for t in tables if d == t.parent or d in t.parents}
    return {} if any(d not in table_dirs for d in dirs) else None


MAX_PIXELS_PER_SIDE = 1 << 16  # no radiograph is 65,536 pixels wide; a larger cell is a broken one


def pixel_dim(s: str) -> int | None:
    """An image side in pixels from a table cell ("2048", "2048.0"); None when blank. Raises
    ValueError (never OverflowError) for inf, nan, 1e400, negative, zero or absurd sizes."""
    s = s.strip()
    if not s:
        return None
    v = float(s)
    if not (0 < v <= MAX_PIXELS_PER_SIDE):
        raise ValueError(f"not an image side in pixels: {s[:40]!r}")
    return int(v)


def fnum(s: str) -> float:
    """float() that rejects NaN/inf (a box coordinate must be a finite number)."""
    v = float(s)
    if v != v or v in (float("inf"), float("-inf")):
        raise ValueError(f"not a finite number: {s!r}")
    return v


# --------------------------------------------------------------------------- label values and terms

# How label tables write their values. Blank = not mentioned (no Label is made for it).
_VALUES = {"1": 1, "1.0": 1, "0": 0, "0.0": 0, "-1": -1, "-1.0": -1, "": None}


def parse_label_value(s: str) -> int | None:
    """1 / 0 / -1 (CheXpert-style tables also write 1.0 / 0.0 / -1.0); blank -> None (unmentioned).
    Raises ValueError for anything else."""
    try:
        return _VALUES[s.strip()]
    except KeyError:
        raise ValueError(f"label value {s!r} is not 1, 0, -1 or blank") from None


def finding_for_term(onto: Any, term: str) -> list[str]:
    """Finding ids named by a free term (ontology id, name or synonym); [] when unknown/ambiguous."""
    t = term.strip()
    findings = getattr(onto, "findings", {})
    if t in findings:
        return [t]
    by_syn = getattr(onto, "finding_by_synonym", None)
    if by_syn is not None:
        f = by_syn(t)
        if f is not None:
            return [f.id]
    return []


_IMAGENOME_REGIONS: dict[int, dict[str, str]] = {}


def region_for_term(onto: Any, term: str) -> str | None:
    """Region id named by a term: ontology id, Chest ImaGenome bbox_name, name or synonym."""
    t = term.strip()
    regions = getattr(onto, "regions", {})
    if t in regions:
        return t
    idx = _IMAGENOME_REGIONS.get(id(onto))
    if idx is None:
        idx = {r.imagenome_name: r.id for r in regions.values() if getattr(r, "imagenome_name", None)}
        _IMAGENOME_REGIONS[id(onto)] = idx
    if t in idx:
        return idx[t]
    by_syn = getattr(onto, "region_by_synonym", None)
    if by_syn is not None:
        r = by_syn(t)
        if r is not None:
            return r.id
    return None


def find_inputs(inputs: Iterable[Path], match: Any) -> list[Path]:
    """Files among the inputs (folders walked to depth 2 only: tables sit at a dataset's top) for
    which ``match(lowercase file name)`` is true, in sorted order."""
    out: list[Path] = []
    for p in inputs:
        if p.is_file():
            if match(p.name.lower()):
                out.append(p)
            continue
        for f in sorted(p.iterdir()):
            if f.is_file() and match(f.name.lower()):
                out.append(f)
            elif f.is_dir():
                out += [g for g in sorted(f.iterdir()) if g.is_file() and match(g.name.lower())]
    return out


def closed_label_list(scheme: str) -> list[str]:
    """The full label list of a closed multi-label scheme (``data/label_lists.yaml``)."""
    from importlib import resources

    import yaml

    data = yaml.safe_load(resources.files("radvqa.sources").joinpath("data/label_lists.yaml").read_text("utf-8"))
    return list(data[scheme])


class DirCache:
    """Existence checks through cached directory listings (one ``os.listdir`` per folder instead of
    one ``stat`` per file; missing folders are cached too). Keeps at most ``max_dirs`` listings, so
    memory stays bounded on trees of any size."""

    def __init__(self, max_dirs: int = 4096) -> None:
        from collections import OrderedDict

        self.max_dirs = max_dirs
        self._c: OrderedDict[str, frozenset[str] | None] = OrderedDict()

    def listing(self, d: str) -> frozenset[str] | None:
        hit = self._c.get(d, 0)
        if hit != 0:
            self._c.move_to_end(d)
            return hit  # type: ignore[return-value]
        val: frozenset[str] | None = None
        parent, name = os.path.split(d)
        # a folder whose parent does not list it does not exist: no system call for it
        up = self.listing(parent) if parent and parent != d else frozenset([name])
        if up is not None and name in up:
            try:
                val = frozenset(os.listdir(d))
            except (FileNotFoundError, NotADirectoryError, PermissionError):
                val = None
        self._c[d] = val
        if len(self._c) > self.max_dirs:
            self._c.popitem(last=False)
        return val

    def exists(self, path: str) -> bool:
        d, name = os.path.split(path)
        names = self.listing(d)
        return names is not None and name in names

    def is_dir(self, d: str) -> bool:
        return self.listing(d.rstrip("/")) is not None
