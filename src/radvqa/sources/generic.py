"""Generic tables: a CSV or JSONL of reports, plus optional CSVs of labels and of boxes.

Reports (``.csv`` with a header, or ``.jsonl`` with one object a line):
  ``id`` (or ``study_id``, required: the study id), ``text`` (or ``report``), optional
  ``patient_id`` (default: the id), ``image``/``images``/``image_path`` (several separated by
  ``;`` or ``|``, or a JSON list; relative paths are relative to the table's folder), ``date``
  (or ``study_time``; ISO 8601 or any sortable value), ``split``, ``view``, ``modality``,
  ``labels`` (``|``-separated terms, each ``term`` or ``term=1|0|-1``).
Labels (``.csv``): ``id``, ``label``, ``value`` (1/0/-1), optional ``reader``, ``image``.
Boxes (``.csv``): ``id``, ``image`` (as written in the reports table, or its bare file name when
that is unambiguous), ``label``, ``x1``, ``y1``, ``x2``, ``y2`` (pixels of the image file as
stored), optional ``reader``. ``Image.id`` = the image path as written in the reports table.
A table's role is told by its columns. Label terms are ontology finding ids, names or synonyms
(scheme ``custom``); an unknown term rejects its study.

Study id ``csv:<id>``, patient ``csv:<patient_id>``. Rejects: missing id, duplicate id, empty or
non-UTF-8 text (a study needs text, labels or boxes), missing or unreadable image files, unknown
labels, bad label values, non-numeric or inverted boxes, labels/boxes for an id with no report row.
Labels and boxes are grouped by id in memory; reports are streamed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from radvqa.model import Box, Image, Label, Reject, Study
from radvqa.sources.base import (
    Record,
    Source,
    SourceError,
    finding_for_term,
    fnum,
    image_size,
    parse_label_value,
    read_csv_rows,
)
from radvqa.sources import SOURCES

_ID = ("id", "study_id")
_TEXT = ("text", "report")
_IMAGES = ("images", "image", "image_path", "image_paths", "path")


@SOURCES.register("csv")
class CsvSource(Source):
    name = "csv"
    counts_reads = True
    description = "generic CSV/JSONL reports (id, text, patient_id, images, date, labels) + label and box CSVs"

    def _records(self, inputs: list[Path], onto: Any, limit: int | None) -> Iterator[Record]:
        reports: list[Path] = []
        labels: list[Path] = []
        boxes: list[Path] = []
        for p in inputs:
            if p.is_dir():
                raise SourceError(f"csv: give the table files, not a folder: {p}")
            if p.suffix.lower() == ".jsonl":
                reports.append(p)
                continue
            cols = _header(p)
            if any(c in cols for c in _TEXT):
                reports.append(p)
            elif {"x1", "y1", "x2", "y2"} <= set(cols):
                boxes.append(p)
            elif {"label", "value"} <= set(cols):
                labels.append(p)
            else:
                raise SourceError(f"csv: {p}: cannot tell reports/labels/boxes from columns {cols}")
        if not reports:
            raise SourceError("csv: no reports table (a CSV with a text/report column, or a .jsonl)")

        extra_labels: dict[str, list[tuple[str, dict[str, str]]]] = {}
        extra_boxes: dict[str, list[tuple[str, dict[str, str]]]] = {}
        loose: list[Reject] = []
        for t in labels:
            self._group(t, extra_labels, loose)
        for t in boxes:
            self._group(t, extra_boxes, loose)
        yield from loose
        seen: set[str] = set()
        for t in reports:
            for ref, row, err in _rows(t):
                self.count_read()
                if row is None:
                    yield self.reject(ref, err or "unreadable line")
                    continue
                yield self._study(ref, row, t.parent, onto, extra_labels, extra_boxes, seen)
        for what, d in (("labels", extra_labels), ("boxes", extra_boxes)):
            for sid, rows in d.items():
                if sid not in seen:
                    for ref, _r in rows:
                        yield self.reject_row(ref, f"{what} row for id {sid!r} that no report row has")

    def _group(self, t: Path, into: dict[str, list[tuple[str, dict[str, str]]]], loose: list[Reject]) -> None:
        for ref, row, err in _rows(t):
            if row is None:
                loose.append(self.reject_row(ref, err or "unreadable line"))
                continue
            sid = _get(row, _ID)
            if not sid:
                loose.append(self.reject_row(ref, "missing id"))
                continue
            into.setdefault(str(sid), []).append((ref, row))

    def _study(
        self,
        ref: str,
        row: dict[str, Any],
        base: Path,
        onto: Any,
        extra_labels: dict[str, list[tuple[str, dict[str, str]]]],
        extra_boxes: dict[str, list[tuple[str, dict[str, str]]]],
        seen: set[str],
    ) -> Record:
        sid = _get(row, _ID)
        if not sid:
            return self.reject(ref, "missing id")
        if sid in seen:
            return self.reject(ref, f"duplicate id {sid!r}")
        seen.add(sid)
        sid = str(sid)
        text = _get(row, _TEXT)
        text = (str(text) if text is not None else "").strip() or None
        # images
        raw = row.get(next((k for k in _IMAGES if k in row), ""), None)
        paths = raw if isinstance(raw, list) else [x for x in str(raw or "").replace("|", ";").split(";")]
        images: list[Image] = []
        for pstr in (str(x).strip() for x in paths):
            if not pstr:
                continue
            f = Path(pstr)
            if not f.is_absolute():
                f = base / f
            if not f.is_file():
                return self.reject(ref, f"{sid}: image file not found: {pstr}")
            try:
                w, h = image_size(f)
            except ValueError as e:
                return self.reject(ref, f"{sid}: {e}")
            images.append(
                # the path as written is the id: file names alone repeat (view1_frontal.jpg)
                Image(id=pstr, path=str(f), width=w, height=h, view=(_get(row, ("view",)) or None),
                      modality=_get(row, ("modality",)) or "CR")
            )
        # labels
        labs: list[Label] = []
        for term in (x.strip() for x in str(_get(row, ("labels",)) or "").split("|")):
            if not term:
                continue
            name, _, val = term.partition("=")
            try:
                v = parse_label_value(val) if val else 1
            except ValueError as e:
                return self.reject(ref, f"{sid}: label {name!r}: {e}")
            if v is None:
                continue
            fids = finding_for_term(onto, name)
            if not fids:
                return self.reject(ref, f"{sid}: unknown label {name.strip()!r} (not an ontology finding id, name or synonym)")
            labs.append(Label(scheme="custom", name=name.strip(), value=v, findings=fids))
        for lref, r in extra_labels.get(sid, ()):
            name = (r.get("label") or "").strip()
            try:
                v = parse_label_value(r.get("value") or "")
            except ValueError as e:
                return self.reject(lref, f"{sid}: label {name!r}: {e}")
            if v is None:
                continue
            fids = finding_for_term(onto, name)
            if not fids:
                return self.reject(lref, f"{sid}: unknown label {name!r}")
            labs.append(Label(scheme="custom", name=name, value=v, findings=fids,
                              reader=(r.get("reader") or None), image_id=(r.get("image") or None)))
        image_ids = {im.id for im in images}
        by_name: dict[str, list[str]] = {}
        for im in images:
            by_name.setdefault(Path(im.id).name, []).append(im.id)
        bxs: list[Box] = []
        for bref, r in extra_boxes.get(sid, ()):
            name = (r.get("label") or "").strip()
            fids = finding_for_term(onto, name)
            if not fids:
                return self.reject(bref, f"{sid}: unknown box label {name!r}")
            try:
                x1, y1, x2, y2 = (fnum(r.get(k) or "") for k in ("x1", "y1", "x2", "y2"))
            except ValueError:
                return self.reject(bref, f"{sid}: non-numeric box {[r.get(k) for k in ('x1', 'y1', 'x2', 'y2')]}")
            if x2 <= x1 or y2 <= y1:
                return self.reject(bref, f"{sid}: inverted or empty box [{x1}, {y1}, {x2}, {y2}]")
            iid = (r.get("image") or "").strip()
            if iid not in image_ids:
                # a bare file name is accepted when it names exactly one of the study's images
                named = by_name.get(Path(iid).name, [])
                if len(named) != 1:
                    return self.reject(bref, f"{sid}: box on image {iid!r} that the report row does not list")
                iid = named[0]
            bxs.append(Box(image_id=iid, x1=x1, y1=y1, x2=x2, y2=y2, reader=r.get("reader") or None, label=fids[0]))
        if text is None and not labs and not bxs:
            return self.reject(ref, f"{sid}: empty report and no labels or boxes")
        pid = _get(row, ("patient_id", "patient")) or sid
        return Study(
            id=f"csv:{sid}",
            patient_id=f"csv:{pid}",
            source=self.name,
            images=images,
            report_text=text,
            labels=labs,
            boxes=bxs,
            split=_get(row, ("split",)) or None,
            study_time=_get(row, ("date", "study_time", "study_date")) or None,
        )


def _header(p: Path) -> list[str]:
    rows = read_csv_rows(p)
    first = next(rows, None)
    if first is None or first[1] is None:
        raise SourceError(f"csv: {p}: empty or unreadable header")
    return [h.strip().lower() for h in first[1]]


def _rows(t: Path) -> Iterator[tuple[str, dict[str, Any] | None, str | None]]:
    if t.suffix.lower() == ".jsonl":
        with open(t, "rb") as f:
            for lineno, line in enumerate(f, 1):
                ref = f"{t}:{lineno}"
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line.decode("utf-8"))
                except UnicodeDecodeError as e:
                    yield ref, None, f"not UTF-8 text ({e.reason} at byte {e.start})"
                    continue
                except json.JSONDecodeError as e:
                    yield ref, None, f"malformed JSON: {e.msg}"
                    continue
                if not isinstance(obj, dict):
                    yield ref, None, "JSON line is not an object"
                    continue
                row, err = _jsonl_cells(obj)
                yield ref, row, err
        return
    rows = read_csv_rows(t)
    first = next(rows, None)
    if first is None or first[1] is None:
        raise SourceError(f"csv: {t}: empty or unreadable header")
    header = [h.strip().lower() for h in first[1]]
    for lineno, row, err in rows:
        ref = f"{t}:{lineno}"
        if row is None:
            yield ref, None, err
            continue
        if not any(x.strip() for x in row):
            continue
        if len(row) != len(header):
            yield ref, None, f"{len(row)} cells, header has {len(header)}"
            continue
        yield ref, dict(zip(header, row)), None


def _jsonl_cells(obj: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """A JSONL object as the cells a CSV row would have: numbers and booleans become text
    (``"date": 2020``), image fields may be a list of strings; any other list or object is a
    reject reason, not a crash further down."""
    out: dict[str, Any] = {}
    for k, v in obj.items():
        key = str(k).lower()
        if isinstance(v, (bool, int, float)):
            v = str(v)
        elif isinstance(v, list) and key in _IMAGES and all(isinstance(x, str) for x in v):
            pass
        elif v is not None and not isinstance(v, str):
            return None, f"field {key!r} is a JSON {type(v).__name__}, expected text"
        out[key] = v
    return out, None


def _get(row: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for k in keys:
        v = row.get(k)
        if v not in (None, ""):
            return v.strip() if isinstance(v, str) else v
    return None
