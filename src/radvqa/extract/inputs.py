"""Report inputs of ``radvqa extract`` / ``radvqa label``: a CSV with ``id,text`` columns, a folder
of ``.txt`` files, or the OpenI (IU X-ray) XML reports as the ``NLMCXR_reports.tgz`` archive or an
unpacked folder. Yields ``(id, text)`` or ``Reject`` — a record that cannot be read is a reject
line with its reason, never a silent skip."""

from __future__ import annotations

import csv
import io
import re
import sys
import tarfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

from radvqa.model import Reject

# Sections of an OpenI report in the order the report gives them; written as "NAME: text" lines
# so the section splitter sees the same headers as in MIMIC-CXR.
OPENI_SECTIONS = ("COMPARISON", "INDICATION", "FINDINGS", "IMPRESSION")

Item = tuple[str, str | bytes]


def openi_text(xml_bytes: bytes) -> tuple[str, str]:
    """(report id, report text) of one OpenI XML file. ValueError if it is not one."""
    try:
        root = ET.fromstring(xml_bytes)
    except ET.ParseError as e:
        raise ValueError(f"not well-formed XML: {e}") from None
    uid = root.find("uId")
    if uid is None or not uid.get("id"):
        raise ValueError("no <uId id=...> element: not an OpenI report")
    parts = []
    for el in root.iter("AbstractText"):
        label = (el.get("Label") or "").strip().upper()
        body = " ".join((el.text or "").split())
        if label and body:
            parts.append(f"{label}: {body}")
    return uid.get("id", ""), "\n".join(parts)


_SURROGATE = re.compile("[\udc80-\udcff]")


def _read_csv(path: Path) -> Iterator[Item | Reject]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    # surrogateescape: a row with bytes that are not UTF-8 becomes a reject line of its own
    # instead of stopping the whole file
    with path.open("r", encoding="utf-8-sig", newline="", errors="surrogateescape") as fh:
        reader = csv.DictReader(fh)
        fields = [f.strip().lower() for f in (reader.fieldnames or [])]
        if "id" not in fields or "text" not in fields:
            raise ValueError(f"{path}: a report CSV needs columns 'id' and 'text'; found {reader.fieldnames}")
        id_col = reader.fieldnames[fields.index("id")]  # type: ignore[index]
        text_col = reader.fieldnames[fields.index("text")]  # type: ignore[index]
        for row_no, row in enumerate(reader, start=2):
            rid = (row.get(id_col) or "").strip()
            text = row.get(text_col) or ""
            if _SURROGATE.search(rid) or _SURROGATE.search(text):
                yield Reject(source="csv", ref=f"{path}:row {row_no}" + (f" ({rid.encode('utf-8', 'replace').decode()})" if rid else ""),
                             reason="not UTF-8 text", stage="extract")
                continue
            if not rid:
                yield Reject(source="csv", ref=f"{path}:row {row_no}", reason="empty id", stage="extract")
                continue
            yield rid, text


def _read_txt_folder(path: Path) -> Iterator[Item | Reject]:
    files = sorted(p for p in path.rglob("*.txt") if p.is_file())
    for p in files:
        rid = p.relative_to(path).with_suffix("").as_posix()
        yield rid, p.read_bytes()  # decoded (and checked) by the extractor


def _openi_item(data: bytes, ref: str) -> Item | Reject:
    try:
        rid, text = openi_text(data)
    except ValueError as e:
        return Reject(source="openi", ref=ref, reason=str(e), stage="extract")
    if not text.strip():
        return Reject(source="openi", ref=f"{ref} ({rid})", stage="extract",
                      reason="no report text: every AbstractText of the XML is empty")
    return rid, text


def _read_openi_folder(path: Path) -> Iterator[Item | Reject]:
    for p in sorted(path.rglob("*.xml"), key=lambda q: q.as_posix()):
        yield _openi_item(p.read_bytes(), str(p))


def _read_openi_tgz(path: Path) -> Iterator[Item | Reject]:
    with tarfile.open(path, "r:*") as tf:
        members = sorted((m for m in tf.getmembers() if m.isfile() and m.name.endswith(".xml")), key=lambda m: m.name)
        for m in members:
            fh = tf.extractfile(m)
            if fh is None:
                yield Reject(source="openi", ref=f"{path}:{m.name}", reason="unreadable member", stage="extract")
                continue
            yield _openi_item(fh.read(), f"{path}:{m.name}")


def read_reports(input_path: str | Path) -> Iterator[Item | Reject]:
    """Reports of INPUT, sorted by file / row order (deterministic)."""
    path = Path(input_path)
    if not path.exists():
        raise FileNotFoundError(f"input not found: {path}")
    if path.is_dir():
        if any(path.rglob("*.xml")):
            return _read_openi_folder(path)
        if any(path.rglob("*.txt")):
            return _read_txt_folder(path)
        raise ValueError(f"{path}: folder has neither .txt reports nor OpenI .xml files")
    name = path.name.lower()
    if name.endswith((".tgz", ".tar.gz", ".tar")):
        return _read_openi_tgz(path)
    if name.endswith(".xml"):
        return iter([_openi_item(path.read_bytes(), str(path))])
    if name.endswith(".csv"):
        return _read_csv(path)
    if name.endswith(".txt"):
        return iter([(path.stem, path.read_bytes())])
    raise ValueError(f"{path}: unknown input kind (expected .csv with id,text, a folder of .txt, "
                     "an OpenI .tgz or a folder of OpenI .xml)")


def count_reports(input_path: str | Path) -> int | None:
    """Number of reports for the progress bar, when cheap to know (None otherwise)."""
    path = Path(input_path)
    try:
        if path.is_dir():
            n = sum(1 for _ in path.rglob("*.xml"))
            return n or sum(1 for _ in path.rglob("*.txt"))
        if path.name.lower().endswith((".tgz", ".tar.gz", ".tar")):
            with tarfile.open(path, "r:*") as tf:
                return sum(1 for m in tf.getmembers() if m.isfile() and m.name.endswith(".xml"))
        if path.name.lower().endswith(".csv"):
            with path.open("rb") as fh:
                return max(0, sum(1 for _ in csv.reader(io.TextIOWrapper(fh, "utf-8", errors="replace"))) - 1)
    except (OSError, tarfile.TarError):
        return None
    return None
