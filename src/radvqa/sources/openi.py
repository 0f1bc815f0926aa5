"""OpenI / Indiana University chest X-ray reports (IU X-ray).

Input: the ``NLMCXR_reports.tgz`` archive, a folder of its XML files (``ecgen-radiology/*.xml``) or
single XML files; optionally a folder of the PNG/JPG images (``NLMCXR_png``) and the R2Gen split
table (``r2gen_split.csv``: report_id, study_image_prefix, split).

One XML = one report = one study = one patient (OpenI has no patient ids, so the report id stands
in for the patient). Study id ``openi:CXR123``.

Report text: the ``AbstractText`` sections in file order, each as ``LABEL: text`` on its own line
(COMPARISON, INDICATION, FINDINGS, IMPRESSION), so the extractor's section splitter sees the headers.
Empty sections are left out. A report with neither FINDINGS nor IMPRESSION text is rejected (there
is nothing to ask questions about). The ``XXXX`` de-identification marks are kept as shipped.

Images: ``parentImage`` ids (``CXR1_1_IM-0001-3001``). When an image folder is given, each id must
resolve to a file there (the OpenI image set is complete, so a miss is an error: Reject); without an
image folder the images are listed with ``path=None`` and unknown size.

MeSH: ``major`` and ``automatic`` codes are kept in ``meta`` (``mesh_major``, ``mesh_automatic``;
``"; "``-joined, as shipped). Each distinct ``major`` code also becomes a Label (scheme
``openi_mesh``, value 1, study level, ``name`` = the code as shipped, ``findings`` =
``Ontology.map_code("openi_mesh", code)``: the most specific "Heading/qualifier" the scheme knows,
else the heading; ``normal`` -> no finding). These label observations sit alongside the report
extraction's. A code that maps to nothing ("No Indexing", anatomy-only codes such as
"Heart/left/obscured") is listed in ``meta["mesh_unmapped"]``; the report is still used.
``automatic`` codes (machine-assigned) make no labels.
"""

from __future__ import annotations

import re
import tarfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from radvqa.model import Image, Label, Study
from radvqa.sources.tables import Layout, recognise_tables
from radvqa.sources.base import Record, Source, SourceError, image_size, index_images, read_csv_rows, walk_files
from radvqa.sources import SOURCES

_SECTION_ORDER = ("COMPARISON", "INDICATION", "FINDINGS", "IMPRESSION")


MIN_PART_REPORTS = 1000
_LAYOUTS = [Layout("splits", "report split table (report_id, split)", ("report_id", "split"))]


def _is_tar(p: Path) -> bool:
    try:
        return tarfile.is_tarfile(p)
    except OSError:
        return False


@SOURCES.register("openi")
class OpenISource(Source):
    name = "openi"
    counts_reads = True
    description = "OpenI / IU X-ray report XMLs (folder or NLMCXR_reports.tgz), optional image folder"

    # the part iter_part reads: (first record, end or None); None: every record
    _range: tuple[int, int | None] | None = None

    def plan_parts(self, inputs: Any, n_parts: int, *, ontology: Any = None, limit: int | None = None) -> list[dict[str, Any]] | None:
        """Consecutive ranges of the report sequence (the XML files in the order they are read,
        archive members counted by listing the archive: decompressed, not parsed). The last
        part is open-ended, so it also carries a damaged archive's closing reject."""
        total = self.count_records(inputs)
        if total is None:
            return None  # read whole: the reader reports what is wrong, in order
        # each part reads the ids of the reports before it (duplicates) and a process start: below
        # ~1,000 reports a part, splitting costs more than the parse it spreads (3,955 reports in
        # 32 parts read in 4.4 s on 16 cores, in one part in 1.0 s)
        k = min(n_parts, total // MIN_PART_REPORTS)
        if k <= 1:
            return None
        return [{"lo": total * i // k, "hi": total * (i + 1) // k if i < k - 1 else None} for i in range(k)]

    def count_records(self, inputs: Any) -> int | None:
        """Records (XML files, archive members) the inputs hold, counted without parsing any;
        None when an input cannot be listed (the reader then says what is wrong)."""
        try:
            xml_inputs = self._inputs([Path(p) for p in inputs])[0]
            return sum(_count_xml(p) for p in xml_inputs)
        except (SourceError, OSError, tarfile.TarError, EOFError, ValueError):
            return None

    def iter_part(self, inputs: Any, part: dict[str, Any], *, ontology: Any = None) -> Any:
        self._range = (int(part["lo"]), part["hi"])
        return self.iter_records(inputs, ontology=ontology)

    def _inputs(self, inputs: list[Path]) -> tuple[list[Path], list[Path], list[Path]]:
        xml_inputs: list[Path] = []
        image_dirs: list[Path] = []
        split_tables: list[Path] = []
        for p in inputs:
            if p.is_dir():
                if _has_xml(p):
                    xml_inputs.append(p)
                else:
                    image_dirs.append(p)
            # an archive under any name; one named as an archive is read as one even when damaged,
            # so the reader can say what is wrong with it
            elif p.suffix.lower() == ".xml" or p.name.lower().endswith((".tgz", ".tar", ".tar.gz")) or _is_tar(p):
                xml_inputs.append(p)
            elif recognise_tables(self, [p], _LAYOUTS)["splits"]:  # by columns, any name; raises if not a split table
                split_tables.append(p)
            else:
                raise SourceError(f"openi: cannot use input {p} (expected XML folder/file, .tgz, image folder or r2gen split .csv)")
        if not xml_inputs:
            raise SourceError("openi: no XML reports found in the inputs")
        return xml_inputs, image_dirs, split_tables

    def _records(self, inputs: list[Path], onto: Any, limit: int | None) -> Iterator[Record]:
        xml_inputs, image_dirs, split_tables = self._inputs(inputs)
        lo, hi = self._range or (0, None)
        images = index_images(image_dirs) if image_dirs else None
        splits = _read_splits(split_tables)
        seen: set[str] = set()
        for i, (ref, data) in enumerate(_iter_xml_blobs(xml_inputs)):
            if hi is not None and i >= hi:
                return
            if i < lo:
                # an earlier part's report: only its id, so a later copy is rejected here as it
                # is when one reader reads everything
                uid = _uid(data)
                if uid:
                    seen.add(uid)
                continue
            self.count_read()  # one XML file or archive member (a link member too) = one record
            yield self._parse(ref, data, images, splits, seen, onto)

    def _parse(
        self,
        ref: str,
        data: bytes,
        images: dict[str, Path] | None,
        splits: dict[str, str],
        seen: set[str],
        onto: Any = None,
    ) -> Record:
        if isinstance(data, str):  # the member or file could not be read: the reason
            return self.reject(ref, data)
        root = _xml(data)
        if isinstance(root, str):
            return self.reject(ref, root)
        uid_el = root.find("uId")
        uid = uid_el.get("id") if uid_el is not None else None
        if not uid:
            return self.reject(ref, "missing uId")
        if uid in seen:
            return self.reject(ref, f"duplicate report id {uid}")
        seen.add(uid)

        parts: list[str] = []
        have: set[str] = set()
        for el in root.iter("AbstractText"):
            label = (el.get("Label") or "").strip().upper()
            text = " ".join((el.text or "").split())
            if not label or not text:
                continue
            have.add(label)
            parts.append(f"{label}: {text}")
        if not ({"FINDINGS", "IMPRESSION"} & have):
            return self.reject(ref, f"{uid}: empty report (no FINDINGS or IMPRESSION text)")

        imgs: list[Image] = []
        for pi in root.iter("parentImage"):
            iid = pi.get("id")
            if not iid:
                continue
            path: str | None = None
            w = h = None
            if images is not None:
                f = images.get(iid)
                if f is None:
                    return self.reject(ref, f"{uid}: image file not found for parentImage {iid}")
                try:
                    w, h = image_size(f)
                except ValueError as e:
                    return self.reject(ref, f"{uid}: {e}")
                path = str(f)
            imgs.append(Image(id=iid, path=path, width=w, height=h, view=None, modality="CR"))

        meta: dict[str, str] = {"file": ref.rsplit("/", 1)[-1].split("!")[-1]}
        major = [(" ".join((m.text or "").split())) for m in root.iterfind("MeSH/major")]
        auto = [(" ".join((m.text or "").split())) for m in root.iterfind("MeSH/automatic")]
        if major:
            meta["mesh_major"] = "; ".join(m for m in major if m)
        labels, unmapped = _mesh_labels(onto, major)
        if unmapped:
            meta["mesh_unmapped"] = "; ".join(unmapped)
        if auto:
            meta["mesh_automatic"] = "; ".join(m for m in auto if m)
        date = root.findtext("articleDate")
        if uid in splits:
            meta["r2gen_split"] = splits[uid]
        return Study(
            id=f"openi:{uid}",
            patient_id=f"openi:{uid}",
            source=self.name,
            images=imgs,
            report_text="\n".join(parts),
            labels=labels,
            # articleDate is the collection's publication date, the same for every report: not a
            # study time, so it is kept in meta only.
            meta=meta | ({"article_date": date} if date else {}),
        )


def _mesh_labels(onto: Any, codes: list[str]) -> tuple[list[Label], list[str]]:
    """Labels (scheme ``openi_mesh``, value 1) of the ``major`` codes that map, and the codes that
    do not. ``name`` keeps the code as shipped; "normal" gives a Label with no finding."""
    map_code = getattr(onto, "map_code", None)
    labels: list[Label] = []
    unmapped: list[str] = []
    for code in dict.fromkeys(c for c in codes if c):
        if map_code is None:  # an ontology copy without composite codes (test stubs)
            unmapped.append(code)
            continue
        try:
            fids = list(map_code("openi_mesh", code))
        except KeyError:
            unmapped.append(code)  # "No Indexing", anatomy-only codes ("Heart/left/obscured")
            continue
        is_normal = getattr(onto, "is_normal_label", None)
        if not fids and is_normal is not None and not is_normal("openi_mesh", code):
            unmapped.append(code)  # a code the scheme ignores (groups.ignored): no finding, not "normal"
            continue
        labels.append(Label(scheme="openi_mesh", name=code, value=1, findings=fids))
    return labels, unmapped


def _xml(data: bytes) -> Any:
    """The parsed root, or why the bytes are not XML."""
    try:
        return ET.fromstring(data)
    except ET.ParseError as e:
        return f"malformed XML: {e}"
    except (LookupError, ValueError) as e:  # encoding="x-bogus-enc" and other bad declarations
        return f"malformed XML: {e}"


def _uid(data: bytes | str) -> str | None:
    """The report id ``_parse`` would mark as seen (None where it rejects before that)."""
    if isinstance(data, str):
        return None
    root = _xml(data)
    if isinstance(root, str):
        return None
    el = root.find("uId")
    return (el.get("id") if el is not None else None) or None


def _count_xml(p: Path) -> int:
    """Reports ``_iter_xml_blobs`` yields for one input (a damaged archive's closing reject not counted)."""
    if p.is_dir():
        return sum(1 for f in walk_files([p]) if f.suffix.lower() == ".xml")
    if p.suffix.lower() == ".xml":
        return 1
    with tarfile.open(p, "r:*") as tf:
        return sum(1 for m in tf if m.name.lower().endswith(".xml"))


def _has_xml(d: Path) -> bool:
    for f in walk_files([d]):
        if f.suffix.lower() == ".xml":
            return True
    return False


def _natural_key(p: Path) -> tuple[Any, ...]:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p.as_posix()))


def _read_file(f: Path) -> bytes | str:
    """The file's bytes, or the reason it cannot be read (a symlink loop, a vanished file)."""
    try:
        return f.read_bytes()
    except OSError as e:
        return f"cannot read {f.name}: {e.strerror or e}"


def _iter_xml_blobs(inputs: list[Path]) -> Iterator[tuple[str, bytes | str]]:
    """(ref, XML bytes) per report, or (ref, reason) for one that cannot be read."""
    for p in inputs:
        if p.is_dir():
            for f in sorted((f for f in walk_files([p]) if f.suffix.lower() == ".xml"), key=_natural_key):
                yield str(f), _read_file(f)
        elif p.suffix.lower() == ".xml":
            yield str(p), _read_file(p)
        else:
            yield from _iter_tar(p)


def _iter_tar(p: Path) -> Iterator[tuple[str, bytes | str]]:
    """Members of a (compressed) tar in archive order, streamed (no listing first, no extraction to
    disk). Link members are reasons, never followed. A damaged archive: an error when nothing could
    be read from it, else one reason for the unreadable rest, so the members before the damage are
    kept."""
    import zlib

    n = 0
    broken = (tarfile.TarError, EOFError, OSError, zlib.error, ValueError)
    try:
        with tarfile.open(p, "r:*") as tf:
            for m in tf:
                if not m.name.lower().endswith(".xml"):
                    continue
                ref = f"{p}!{m.name}"
                if m.issym() or m.islnk():
                    yield ref, f"archive member is a {'symbolic' if m.issym() else 'hard'} link to {m.linkname!r}: not read"
                    n += 1
                elif not m.isfile():
                    yield ref, "archive member is not a regular file: not read"
                    n += 1
                else:
                    fh = tf.extractfile(m)
                    yield ref, fh.read() if fh is not None else "archive member has no data"
                n += 1
            # tarfile ends the iteration quietly at an invalid header past the first one: a damaged
            # archive would lose every later member without a word. A sound archive has only zero
            # blocks after its last member, and its compressed stream must end cleanly (CRC).
            left = _nonzero_tail(tf.fileobj)
            if left:
                raise tarfile.ReadError(f"{left:,} bytes of unreadable data after the last member read")
    except broken as e:
        lines = [x.strip() for x in str(e).splitlines() if x.strip()]
        # tarfile's "r:*" lists every method it tried; the gzip one is the telling one for a .tgz
        gz = [x for x in lines[1:] if x.startswith("- method gz")]
        why = " ".join([f"{type(e).__name__}: {lines[0] if lines else ''}".rstrip(": "), *gz])[:300]
        if n == 0:
            raise SourceError(f"openi: {p}: not a readable tar/tgz archive ({why})") from None
        yield f"{p}!<after member {n}>", f"archive damaged after {n} member(s), the rest is unreadable ({why})"


def _nonzero_tail(fileobj: Any) -> int:
    """Bytes left in the (decompressed) archive stream that are not zero padding."""
    left = 0
    while True:
        chunk = fileobj.read(1 << 20)
        if not chunk:
            return left
        left += len(chunk) - chunk.count(0)


def _read_splits(tables: list[Path]) -> dict[str, str]:
    out: dict[str, str] = {}
    for t in tables:
        rows = read_csv_rows(t)
        first = next(rows, None)
        if first is None or first[1] is None:
            raise SourceError(f"openi: {t}: empty or unreadable split table")
        header = [h.strip().lower() for h in first[1]]
        if "report_id" not in header or "split" not in header:
            raise SourceError(f"openi: {t}: split table needs columns report_id, split (has {first[1]})")
        ri, si = header.index("report_id"), header.index("split")
        for _line, row, err in rows:
            if row is None or err or len(row) <= max(ri, si):
                continue  # a split hint only; the report itself is not affected
            out[row[ri]] = row[si]
    return out
