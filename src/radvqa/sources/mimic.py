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

Memory: the tables are joined by study in a dict of compact tuples (about 250 bytes a study; the
227,835 studies of the full release take ~60 MB); rows are streamed.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from radvqa.model import Image, Label, Reject, Study
from radvqa.sources.base import (
    DirCache,
    LabelMapper,
    Record,
    Source,
    SourceError,
    UnknownLabel,
    find_inputs,
    header_index,
    image_size,
    parse_label_value,
    read_csv_rows,
    walk_files,
)

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


class MimicSource(Source):
    name = "mimic-cxr"
    description = "MIMIC-CXR: reports tree, split/metadata/chexpert/negbio tables (.csv/.csv.gz), JPG/DICOM files"

    def _records(self, inputs: list[Path], onto: Any, limit: int | None) -> Iterator[Record]:
        yield from self.iter_joined(inputs, onto, extra=None)

    def iter_joined(self, inputs: list[Path], onto: Any, extra: Any) -> Iterator[Record]:
        """The studies; ``extra(study) -> Record`` lets Chest ImaGenome add its annotations."""
        tables = find_inputs(inputs, lambda n: n.startswith("mimic-cxr") and (n.endswith(".csv") or n.endswith(".csv.gz")))
        kinds = {k: [t for t in tables if k in t.name.lower()] for k in ("split", "metadata", "chexpert", "negbio")}
        roots = [p for p in inputs if p.is_dir()]
        file_roots = [r / "files" if (r / "files").is_dir() else r for r in roots]
        studies: dict[str, _S] = {}
        loose: list[Reject] = []

        def get(study: str, subject: str, ref: str) -> _S | None:
            s = studies.get(study)
            if s is None:
                s = studies[study] = _S(subject)
            elif s.subject != subject:
                s.error(f"{ref}: subject_id {subject} disagrees with {s.subject}")
                return None
            return s

        for t in kinds["split"]:
            for ref, r in self._rows(t, {"dicom": ("dicom_id",), "study": ("study_id",), "subject": ("subject_id",), "split": ("split",)}, loose):
                s = get(r["study"], r["subject"], ref)
                if s is not None:
                    s.split = r["split"] or None
                    s.set_image(r["dicom"], None, None, None)
        for t in kinds["metadata"]:
            want = {"dicom": ("dicom_id",), "study": ("study_id",), "subject": ("subject_id",), "view": ("ViewPosition",),
                    "rows": ("Rows",), "cols": ("Columns",), "date": ("StudyDate",), "time": ("StudyTime",)}
            for ref, r in self._rows(t, want, loose):
                s = get(r["study"], r["subject"], ref)
                if s is None:
                    continue
                try:
                    w = int(float(r["cols"])) if r["cols"] else None
                    h = int(float(r["rows"])) if r["rows"] else None
                except ValueError:
                    s.error(f"{ref}: non-numeric Rows/Columns {r['rows']!r}/{r['cols']!r}")
                    continue
                s.set_image(r["dicom"], sys.intern(r["view"]) if r["view"] else None, w, h)
                s.date, s.time = sys.intern(r["date"]), r["time"]
        self._mapper = LabelMapper(onto, "chexpert14")
        self._label_names: dict[str, list[str]] = {}
        for kind, reader in _LABEL_READERS:
            for t in kinds[kind]:
                self._labels(t, reader, self._mapper, get, loose)

        # reports: by path when tables exist, else by walking the tree
        dirs = DirCache()
        roots = [str(r) for r in file_roots]
        if not studies:
            for f in walk_files(file_roots):
                m = _REPORT_RE.match(f.name)
                if m and f.parent.name.startswith("p"):
                    s = get(m.group(1), f.parent.name[1:], str(f))
                    if s is not None:
                        s.report_path = str(f)
            if not studies:
                raise SourceError("mimic-cxr: no tables (mimic-cxr-2.0.0-*.csv[.gz]) and no reports files/pXX/pN/sM.txt found")
        elif roots:
            for sid, s in studies.items():
                for r in roots:
                    f = f"{r}/p{s.subject[:2]}/p{s.subject}/s{sid}.txt"
                    if dirs.exists(f):
                        s.report_path = f
                        break
        self._dirs, self._roots = dirs, roots

        yield from loose
        have_reports = any(s.report_path for s in studies.values())
        order = sorted(studies, key=lambda k: (studies[k].subject, studies[k].date or "~", studies[k].time or "", k))
        for sid in order:
            s = studies.pop(sid)
            rec = self._study(sid, s, have_reports, file_roots)
            if extra is not None and isinstance(rec, Study):
                rec = extra(rec)
            yield rec

    # ------------------------------------------------------------------------------------------
    def _rows(self, t: Path, want: dict[str, tuple[str, ...]], loose: list[Reject]) -> Iterator[tuple[str, dict[str, str]]]:
        rows = read_csv_rows(t)
        first = next(rows, None)
        if first is None or first[1] is None:
            raise SourceError(f"mimic-cxr: {t}: empty or unreadable header")
        c = header_index(first[1], want, str(t))
        n = max(c.values()) + 1
        for lineno, row, err in rows:
            ref = f"{t}:{lineno}"
            if row is None:
                loose.append(self.reject(ref, err or "unreadable line"))
                continue
            if not any(x.strip() for x in row):
                continue
            if len(row) < n:
                loose.append(self.reject(ref, f"too few columns ({len(row)} < {n})"))
                continue
            r = {k: row[i].strip() for k, i in c.items()}
            if "study" in r and not r["study"].isdigit() or "subject" in r and not r["subject"].isdigit():
                loose.append(self.reject(ref, f"non-numeric study_id/subject_id {r.get('study')!r}/{r.get('subject')!r}"))
                continue
            yield ref, r

    def _labels(self, t: Path, reader: str, mapper: LabelMapper, get: Any, loose: list[Reject]) -> None:
        rows = read_csv_rows(t)
        first = next(rows, None)
        if first is None or first[1] is None:
            raise SourceError(f"mimic-cxr: {t}: empty or unreadable header")
        header = first[1]
        c = header_index(header, {"study": ("study_id",), "subject": ("subject_id",)}, str(t))
        label_cols = [(i, h.strip()) for i, h in enumerate(header) if i not in c.values()]
        for _i, name in label_cols:
            try:
                mapper(name)
            except UnknownLabel as e:
                raise SourceError(f"mimic-cxr: {t}: {e} (column header)") from None
        for lineno, row, err in rows:
            ref = f"{t}:{lineno}"
            if row is None:
                loose.append(self.reject(ref, err or "unreadable line"))
                continue
            if not any(x.strip() for x in row):
                continue
            if len(row) != len(header):
                loose.append(self.reject(ref, f"{len(row)} cells, header has {len(header)}"))
                continue
            s = get(row[c["study"]].strip(), row[c["subject"]].strip(), ref)
            if s is None:
                continue
            codes = bytearray()
            for i, name in label_cols:
                try:
                    v = parse_label_value(row[i])
                except ValueError as e:
                    s.error(f"{ref}: {name}: {e}")
                    break
                codes.append(3 if v is None else v + 1)
            else:
                s.labels.append((reader, bytes(codes)))
        self._label_names[reader] = [name for _i, name in label_cols]

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
