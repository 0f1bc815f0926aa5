"""MIMIC-CXR (Johnson et al., Scientific Data 2019) and MIMIC-CXR-JPG.

Inputs (the dataset roots as distributed, or the individual files):
- reports tree ``files/p10/p10000032/s50414267.txt`` (``mimic-cxr-reports.zip`` unpacked);
- ``mimic-cxr-2.0.0-split.csv(.gz)``: dicom_id, study_id, subject_id, split;
- ``mimic-cxr-2.0.0-metadata.csv(.gz)``: dicom_id, subject_id, study_id, ViewPosition, Rows,
  Columns, StudyDate, StudyTime, ...;
- ``mimic-cxr-2.0.0-chexpert.csv(.gz)`` / ``-negbio.csv(.gz)``: subject_id, study_id, then the 14
  CheXpert labels with 1.0 / 0.0 / -1.0 / blank (blank = unmentioned: no Label);
- images ``files/p10/p10000032/s50414267/<dicom_id>.jpg`` (or ``.dcm``) under a root that holds
  ``files/``. A study whose image folder ``sM/`` exists must hold every image the tables list
  (else Reject); a study without that folder was simply not downloaded: ``path=None``.

Study = MIMIC study_id: ``mimic-cxr:50414267``; patient ``mimic-cxr:10000032``. ``study_time`` =
StudyDate + StudyTime as ISO 8601 (the shifted dates MIMIC ships); a patient's studies come out in
that order (ties and unknown times by study_id). Images of a study stay together, ordered by
dicom_id. Sizes: Columns x Rows from the metadata (the JPGs keep the DICOM resolution), replaced by
the file header when the file is on disk.

Labels: ``chexpert`` table -> scheme ``chexpert14`` (reader ``chexpert``), ``negbio`` table ->
scheme ``chexpert14`` too (reader ``negbio``): they are two labelers of the same 14 labels. A label
column the scheme does not know is an error at start (it would otherwise reject every row).

Rejects: a study whose report file should exist (a reports tree was given) but does not, is empty
or is not UTF-8; a label value other than 1/0/-1/blank; a listed image missing under a given image
root, or unreadable; malformed table rows (reported with file and line).

Memory: the released tables are sorted by subject_id (checked first with a fast byte-level pass);
then they are merge-joined as they stream, one patient at a time (bounded memory). Tables that are
not sorted are joined in memory instead (about 1 KB a study; ~0.2 GB for the 227,835 studies).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from radvqa.model import Image, Label, Reject, Study
from radvqa.sources.tables import Layout, open_binary, recognise_tables
from radvqa.sources.base import closed_label_list
from radvqa.sources.base import (
    DirCache,
    LabelMapper,
    Record,
    Source,
    SourceError,
    UnknownLabel,
    header_index,
    image_size,
    parse_label_value,
    pixel_dim,
    read_csv_rows,
    walk_files,
)
from radvqa.sources import SOURCES

_REPORT_RE = re.compile(r"^s(\d+)\.txt$")
_LABEL_READERS = (("chexpert", "chexpert"), ("negbio", "negbio"))


_NO_ERRORS: list[str] = []


class _S:
    """One study being assembled (slots: built for every study of a 227k-study release)."""

    __slots__ = ("subject", "split", "date", "time", "images", "labels", "errors", "report_path")

    def __init__(self, subject: str) -> None:
        self.subject = sys.intern(subject)  # a patient has many studies: one string for all
        self.split: str | None = None
        self.date = ""
        self.time = ""
        # (dicom_id, view, width, height); few per study, a list is smaller than a dict
        self.images: list[tuple[str, str | None, int | None, int | None]] = []
        # (reader, label values of the row encoded one byte per column: value + 1, 3 = blank)
        self.labels: list[tuple[str, bytes]] = []
        self.errors: list[str] = _NO_ERRORS  # replaced by a real list on the first error
        self.report_path: str | None = None

    def error(self, msg: str) -> None:
        if self.errors is _NO_ERRORS:
            self.errors = []
        self.errors.append(msg)

    def set_image(self, did: str, view: str | None, w: int | None, h: int | None) -> None:
        for i, im in enumerate(self.images):
            if im[0] == did:
                if view is not None or w is not None:
                    self.images[i] = (did, view, w, h)
                return
        self.images.append((did, view, w, h))


def _layouts() -> list[Layout]:
    return [
        Layout("split", "MIMIC-CXR split table", ("dicom_id", "study_id", "subject_id", "split")),
        Layout("metadata", "MIMIC-CXR metadata table", ("dicom_id", "subject_id", "study_id", "ViewPosition")),
        Layout("labels", "MIMIC-CXR label table (CheXpert / NegBio)", ("subject_id", "study_id"),
               any_of=tuple(closed_label_list("chexpert14"))),
    ]


@SOURCES.register("mimic-cxr")
class MimicSource(Source):
    name = "mimic-cxr"
    counts_reads = True
    description = "MIMIC-CXR: reports tree, split/metadata/chexpert/negbio tables (.csv/.csv.gz), JPG/DICOM files"

    def _records(self, inputs: list[Path], onto: Any, limit: int | None) -> Iterator[Record]:
        yield from self.iter_joined(inputs, onto, extra=None)

    def iter_joined(self, inputs: list[Path], onto: Any, extra: Any) -> Iterator[Record]:
        """The studies; ``extra(study) -> Record`` lets Chest ImaGenome add its annotations."""
        # tables by their columns, whatever their names; the CheXpert and NegBio label tables share
        # one layout, told apart by "negbio" in the name (CheXpert otherwise)
        found = recognise_tables(self, inputs, _layouts())
        kinds = {"split": found["split"], "metadata": found["metadata"],
                 "chexpert": [t for t in found["labels"] if "negbio" not in t.name.lower()],
                 "negbio": [t for t in found["labels"] if "negbio" in t.name.lower()]}
        specs = [(t, k) for k in ("split", "metadata", "chexpert", "negbio") for t in kinds[k]]
        file_roots = [r / "files" if (r / "files").is_dir() else r for r in inputs if r.is_dir()]
        self._mapper = LabelMapper(onto, "chexpert14")
        self._label_names: dict[str, list[str]] = {}
        self._dirs = DirCache()
        self._roots = [str(r) for r in file_roots]
        self._have_reports = any(_has_reports(r) for r in file_roots)
        if not specs:
            yield from self._from_reports_tree(file_roots, extra)
            return
        readers = [self._events(t, k) for t, k in specs]
        # The released tables are sorted by subject_id: then a patient's rows are joined as they
        # stream past (memory: one patient). Otherwise everything is joined in memory first.
        if all(_sorted_by_subject(t) for t, _k in specs):
            yield from self._merge_sorted(readers, extra)
        else:
            studies: dict[str, _S] = {}
            pending: list[Record] = []
            for events in readers:
                for ev in events:
                    if isinstance(ev, Reject):
                        pending.append(ev)
                    elif _apply(studies, ev):
                        self.count_read()
            yield from pending
            yield from self._emit(studies, extra)

    def _merge_sorted(self, readers: list[Iterator[Any]], extra: Any) -> Iterator[Record]:
        heads: list[Any] = []
        for r in readers:
            heads.append(_next_event(r))
        last = -1
        while True:
            for i, h in enumerate(heads):
                while isinstance(h, Reject):
                    yield h
                    h = _next_event(readers[i])
                heads[i] = h
            live = [int(h[0]) for h in heads if h is not None]
            if not live:
                return
            subject = min(live)
            if subject < last:
                raise SourceError("mimic-cxr: a table is not sorted by subject_id after all")
            last = subject
            studies: dict[str, _S] = {}
            for i, r in enumerate(readers):
                h = heads[i]
                while h is not None and (isinstance(h, Reject) or int(h[0]) == subject):
                    if isinstance(h, Reject):
                        yield h
                    elif _apply(studies, h):
                        self.count_read()
                    h = _next_event(r)
                heads[i] = h
            yield from self._emit(studies, extra)

    def _emit(self, studies: dict[str, _S], extra: Any) -> Iterator[Record]:
        for sid, s in studies.items():
            if s.report_path is None and self._roots:
                for r in self._roots:
                    f = f"{r}/p{s.subject[:2]}/p{s.subject}/s{sid}.txt"
                    if self._dirs.exists(f):
                        s.report_path = f
                        break
        order = sorted(studies, key=lambda k: (studies[k].subject, studies[k].date or "~", studies[k].time or "", k))
        for sid in order:
            rec = self._study(sid, studies.pop(sid), self._have_reports, [])
            if extra is not None and isinstance(rec, Study):
                rec = extra(rec)
            yield rec

    def _from_reports_tree(self, file_roots: list[Path], extra: Any) -> Iterator[Record]:
        studies: dict[str, _S] = {}
        for f in walk_files(file_roots):
            m = _REPORT_RE.match(f.name)
            if m and f.parent.name.startswith("p"):
                if _apply(studies, (f.parent.name[1:], m.group(1), str(f), "report", str(f))):
                    self.count_read()
        if not studies:
            raise SourceError("mimic-cxr: no tables (mimic-cxr-2.0.0-*.csv[.gz]) and no reports files/pXX/pN/sM.txt found")
        yield from self._emit(studies, extra)

    # ------------------------------------------------------------------------------------------
    def _events(self, t: Path, kind: str) -> Iterator[Any]:
        """One table as events ``(subject, study, ref, kind, data)``, or Rejects for bad lines."""
        rows = read_csv_rows(t)
        first = next(rows, None)
        if first is None or first[1] is None:
            raise SourceError(f"mimic-cxr: {t}: empty or unreadable header")
        header = first[1]
        want: dict[str, tuple[str, ...]] = {"study": ("study_id",), "subject": ("subject_id",)}
        if kind in ("split", "metadata"):
            want["dicom"] = ("dicom_id",)
        if kind == "split":
            want["split"] = ("split",)
        if kind == "metadata":
            want |= {"view": ("ViewPosition",), "rows": ("Rows",), "cols": ("Columns",), "date": ("StudyDate",),
                     "time": ("StudyTime",)}
        c = header_index(header, want, str(t))
        label_cols: list[tuple[int, str]] = []
        if kind in ("chexpert", "negbio"):
            label_cols = [(i, h.strip()) for i, h in enumerate(header) if i not in c.values()]
            for _i, name in label_cols:
                try:
                    self._mapper(name)
                except UnknownLabel as e:
                    raise SourceError(f"mimic-cxr: {t}: {e} (column header)") from None
            self._label_names[kind] = [name for _i, name in label_cols]
        n = max(c.values()) + 1
        for lineno, row, err in rows:
            ref = f"{t}:{lineno}"
            if row is None:
                self.count_read()
                yield self.reject(ref, err or "unreadable line")
                continue
            if not any(x.strip() for x in row):
                continue
            if len(row) < n or (label_cols and len(row) != len(header)):
                self.count_read()
                yield self.reject(ref, f"{len(row)} cells, header has {len(header)}")
                continue
            study, subject = row[c["study"]].strip(), row[c["subject"]].strip()
            if not study.isdigit() or not subject.isdigit():
                self.count_read()
                yield self.reject(ref, f"non-numeric study_id/subject_id {study!r}/{subject!r}")
                continue
            if kind == "split":
                yield (subject, study, ref, "split", (row[c["dicom"]].strip(), row[c["split"]].strip() or None))
            elif kind == "metadata":
                rs, cs = row[c["rows"]].strip(), row[c["cols"]].strip()
                try:
                    w = pixel_dim(cs)
                    h = pixel_dim(rs)
                except ValueError:
                    yield (subject, study, ref, "error", f"{ref}: non-numeric Rows/Columns {rs!r}/{cs!r}")
                    continue
                view = row[c["view"]].strip()
                yield (subject, study, ref, "metadata",
                       (row[c["dicom"]].strip(), sys.intern(view) if view else None, w, h,
                        sys.intern(row[c["date"]].strip()), row[c["time"]].strip()))
            else:
                codes = bytearray()
                for i, name in label_cols:
                    try:
                        v = parse_label_value(row[i])
                    except ValueError as e:
                        yield (subject, study, ref, "error", f"{ref}: {name}: {e}")
                        break
                    codes.append(3 if v is None else v + 1)
                else:
                    yield (subject, study, ref, "labels", (kind, bytes(codes)))

    def _study(self, sid: str, s: _S, have_reports: bool, file_roots: list[Path]) -> Record:
        ref = f"study_id {sid}"
        if s.errors:
            first_ref = s.errors[0].split(": ", 1)[0]
            return self.reject(first_ref, f"study {sid}: " + "; ".join(e.split(": ", 1)[1] for e in s.errors))
        text = None
        if s.report_path is not None:
            try:
                with open(s.report_path, "rb") as fh:
                    text = fh.read().decode("utf-8")
            except UnicodeDecodeError as e:
                return self.reject(s.report_path, f"report not UTF-8 ({e.reason} at byte {e.start})")
            if not text.strip():
                return self.reject(s.report_path, "empty report")
        elif have_reports:
            return self.reject(ref, f"report file s{sid}.txt not found in the reports tree")
        images: list[Image] = []
        for did, view, w, h in sorted(s.images):
            path = None
            if self._roots:
                base = f"p{s.subject[:2]}/p{s.subject}/s{sid}/{did}"
                f = next((r + "/" + base + ext for r in self._roots for ext in (".jpg", ".dcm") if self._dirs.exists(r + "/" + base + ext)), None)
                if f is not None:
                    try:
                        w, h = image_size(Path(f))
                    except ValueError as e:
                        return self.reject(f, f"study {sid}: {e}")
                    path = f
                elif any(self._dirs.is_dir(f"{r}/p{s.subject[:2]}/p{s.subject}/s{sid}") for r in self._roots):
                    # the study's image folder was downloaded, but this listed image is not in it
                    return self.reject(ref, f"study {sid}: image {did} (.jpg/.dcm) missing from s{sid}/")
            images.append(Image(id=did, path=path, width=w, height=h, view=_view(view), modality="DX"))
        mapper_labels = [
            Label(scheme="chexpert14", name=name, value=code - 1, findings=self._mapper(name), reader=reader)
            for reader, codes in s.labels
            for name, code in zip(self._label_names[reader], codes)
            if code != 3
        ]
        return Study(
            id=f"mimic-cxr:{sid}",
            patient_id=f"mimic-cxr:{s.subject}",
            source=self.name,
            images=images,
            report_text=text,
            labels=mapper_labels,
            split=s.split,
            study_time=_iso(s.date, s.time),
            meta={"report_file": f"files/p{s.subject[:2]}/p{s.subject}/s{sid}.txt"} if text else {},
        )


def _apply(studies: dict[str, _S], ev: tuple[str, str, str, str, Any]) -> bool:
    """Add one table event to its study; True when the event starts a new study (the caller counts
    it as a record read)."""
    subject, study, ref, kind, data = ev
    s = studies.get(study)
    new = s is None
    if s is None:
        s = studies[study] = _S(subject)
    elif s.subject != subject:
        s.error(f"{ref}: subject_id {subject} disagrees with {s.subject}")
        return False
    if kind == "split":
        s.split = data[1]
        s.set_image(data[0], None, None, None)
    elif kind == "metadata":
        s.set_image(data[0], data[1], data[2], data[3])
        s.date, s.time = data[4], data[5]
    elif kind == "labels":
        s.labels.append(data)
    elif kind == "report":
        s.report_path = data
    else:
        s.error(data)
    return new


def _next_event(it: Iterator[Any]) -> Any:
    return next(it, None)


def _sorted_by_subject(t: Path) -> bool:
    """Whether a table's subject_id column never decreases (a fast byte-level pass: the id columns
    come first and are never quoted)."""
    with open_binary(t) as f:  # gzip by content, not name
        header = f.readline().removeprefix(b"\xef\xbb\xbf").rstrip(b"\r\n").split(b",")
        try:
            col = [h.strip().lower() for h in header].index(b"subject_id")
        except ValueError:
            return False
        last = -1
        for line in f:
            cells = line.split(b",", col + 1)
            if len(cells) <= col:
                continue
            try:
                v = int(cells[col])
            except ValueError:
                continue  # a malformed id: the row becomes a Reject later, order is unaffected
            if v < last:
                return False
            last = v
    return True


def _has_reports(root: Path) -> bool:
    """Whether a files/ root holds report .txt files (probe: the first pXX/pN folder)."""
    try:
        for group in sorted(os.scandir(root), key=lambda e: e.name):
            if group.is_dir() and re.fullmatch(r"p\d\d", group.name):
                for patient in sorted(os.scandir(group.path), key=lambda e: e.name):
                    if patient.is_dir():
                        return any(e.name.endswith(".txt") for e in os.scandir(patient.path))
    except OSError:
        return False
    return False


def _view(v: str | None) -> str | None:
    if not v:
        return None
    v = v.strip().upper()
    return {"LATERAL": "LATERAL", "LL": "LL", "PA": "PA", "AP": "AP"}.get(v, v)


def _iso(date: str, time: str) -> str | None:
    if len(date) != 8 or not date.isdigit():
        return None
    out = f"{date[:4]}-{date[4:6]}-{date[6:]}"
    t = time.split(".")[0].zfill(6) if time else ""
    if t.isdigit() and len(t) == 6:
        out += f"T{t[:2]}:{t[2:4]}:{t[4:]}"
    return out
