"""PadChest (Bustos et al., Medical Image Analysis 2020).

Input: ``PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv`` (or ``.csv.gz``; an unnamed index
column first in some copies) — one row per image: ImageID, ImageDir, StudyDate_DICOM, StudyID,
PatientID, PatientBirth, PatientSex_DICOM, ViewPosition_DICOM, Projection, Modality_DICOM,
PhotometricInterpretation_DICOM, Rows_DICOM, Columns_DICOM, ..., ReportID, Report, MethodLabel,
Labels, Localizations, LabelsLocalizationsBySentence, labelCUIS, LocalizationsCUIS. List cells are
Python literals (``['pleural effusion', 'cardiomegaly']``). Optional image folder: ``<ImageDir>/<ImageID>``
(or a flat folder of the PNGs).

Study = StudyID (``padchest:<StudyID>``), its images together; patient ``padchest:<PatientID>``;
``study_time`` = StudyDate_DICOM as ISO date. Sizes from Columns_DICOM x Rows_DICOM (the PNGs keep
the DICOM size), replaced by the PNG header when the file is on disk.

Report: the Spanish, stemmed report is kept as text in ``meta["report_es"]`` and NOT given as
``report_text`` (the English extractor must not read it). Labels (scheme ``padchest`` of the
ontology, value 1, per study; matching ignores case and repeated blanks): ``normal`` is a Label with
no finding (``is_normal_label``); the scheme's ``ignored`` group ("unchanged", "exclude", "dai",
"end on vessel": tags that name no finding and do not mean normal) makes no Label and is kept in
``meta["ignored_labels"]``; a label the scheme does not list is kept in ``meta["unmapped_labels"]``
and the study is still used (PadChest's vocabulary is open-ended: a reject would drop the study's
mapped labels with it). Localizations and the per-sentence label/localization pairs
are kept in ``meta`` as shipped.

Rows are grouped by StudyID in memory (images of a study are not adjacent in the table): the long
study-level cells once per study, short interned cells per image (roughly 1 KB a study).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from radvqa.model import Image, Label, Reject, Study
from radvqa.sources.base import (
    LabelMapper,
    Record,
    Source,
    SourceError,
    UnknownLabel,
    find_inputs,
    header_index,
    image_index,
    image_size,
    read_csv_rows,
)

_COLS = {
    "image": ("ImageID",),
    "dir": ("ImageDir",),
    "date": ("StudyDate_DICOM",),
    "study": ("StudyID",),
    "patient": ("PatientID",),
    "sex": ("PatientSex_DICOM",),
    "birth": ("PatientBirth",),
    "view": ("Projection",),
    "modality": ("Modality_DICOM",),
    "photometric": ("PhotometricInterpretation_DICOM",),
    "rows": ("Rows_DICOM",),
    "cols": ("Columns_DICOM",),
    "report": ("Report",),
    "labels": ("Labels",),
    "locs": ("Localizations",),
    "by_sentence": ("LabelsLocalizationsBySentence",),
}


_STUDY_KEYS = ("date", "patient", "sex", "birth", "photometric", "report", "labels", "locs", "by_sentence")
_IMAGE_KEYS = ("image", "dir", "view", "modality", "rows", "cols", "patient")


class PadChestSource(Source):
    name = "padchest"
    description = "PadChest: PADCHEST_chest_x_ray_images_labels_160K*.csv(.gz) (+ image folders)"

    def _records(self, inputs: list[Path], onto: Any, limit: int | None) -> Iterator[Record]:
        tables = find_inputs(inputs, lambda n: n.startswith("padchest") and (n.endswith(".csv") or n.endswith(".csv.gz")))
        if not tables:
            raise SourceError("padchest: no PADCHEST_*.csv(.gz) among the inputs")
        image_dirs = [p for p in inputs if p.is_dir()]
        images = image_index(image_dirs, tables, (".png",))
        mapper = LabelMapper(onto, "padchest")
        ignored = _ignored_labels(onto)
        # StudyID -> (study-level fields of its first row, per-image tuples). Images of a study are
        # not adjacent in the table, so rows are grouped in memory, kept small: the long study-level
        # cells (report, labels) once per study, per image only short (interned) cells.
        groups: dict[str, tuple[dict[str, str], list[tuple[Any, ...]]]] = {}
        for ti, t in enumerate(tables):
            rows = read_csv_rows(t)
            first = next(rows, None)
            if first is None or first[1] is None:
                raise SourceError(f"padchest: {t}: empty or unreadable header")
            header = first[1]
            c = header_index(header, _COLS, str(t))
            for item in self.table_rows(rows, len(header), t):
                if isinstance(item, Reject):
                    yield item
                    continue
                ref, lineno, row = item
                sid = row[c["study"]].strip()
                if not sid:
                    yield self.reject(ref, "empty StudyID")
                    continue
                g = groups.get(sid)
                if g is None:
                    g = groups[sid] = ({k: row[c[k]].strip() for k in _STUDY_KEYS}, [])
                g[1].append((ti, lineno) + tuple(sys.intern(row[c[k]].strip()) for k in _IMAGE_KEYS))
        self._tables = tables
        for sid in list(groups):
            yield self._study(sid, *groups.pop(sid), mapper, images, ignored)

    def _study(
        self,
        sid: str,
        r0: dict[str, str],
        rows: list[tuple[Any, ...]],
        mapper: LabelMapper,
        images: dict[str, Path] | None,
        ignored: frozenset[str] = frozenset(),
    ) -> Record:
        refs = [f"{self._tables[r[0]]}:{r[1]}" for r in rows]
        ref = refs[0]
        per = [dict(zip(_IMAGE_KEYS, r[2:])) for r in rows]
        if len({r["patient"] for r in per}) > 1:
            return self.reject(ref, f"study {sid}: rows disagree on PatientID")
        seen: set[str] = set()
        imgs: list[Image] = []
        for rref, r in zip(refs, per):
            iid = r["image"]
            if iid in seen:
                return self.reject(rref, f"study {sid}: duplicate ImageID {iid}")
            seen.add(iid)
            try:
                w = int(float(r["cols"])) if r["cols"] else None
                h = int(float(r["rows"])) if r["rows"] else None
            except ValueError:
                return self.reject(rref, f"study {sid}: non-numeric Rows_DICOM/Columns_DICOM")
            path = None
            if images is not None:
                f = images.get(iid)
                if f is None:
                    return self.reject(rref, f"study {sid}: image {r['dir']}/{iid} not found")
                try:
                    w, h = image_size(f)
                except ValueError as e:
                    return self.reject(rref, f"study {sid}: {e}")
                path = str(f)
            view = r["view"].upper() or None
            view = {"L": "LATERAL"}.get(view or "", view)
            imgs.append(Image(id=iid, path=path, width=w, height=h, view=view, modality=r["modality"] or "CR"))
        try:
            names = _pylist(r0["labels"])
            locs = _pylist(r0["locs"])
        except ValueError as e:
            return self.reject(ref, f"study {sid}: {e}")
        labels: list[Label] = []
        unmapped: list[str] = []
        tags: list[str] = []
        for name in dict.fromkeys(n.strip() for n in names if isinstance(n, str) and n.strip()):
            if " ".join(name.lower().split()) in ignored:
                # "unchanged", "exclude", ...: no finding named, but not "normal" either; a Label with
                # no finding would read as "no finding" downstream, so they stay in meta
                tags.append(name)
                continue
            try:
                labels.append(Label(scheme="padchest", name=name, value=1, findings=mapper(name)))
            except UnknownLabel:
                unmapped.append(name)
        meta = {"report_es": r0["report"], "report_language": "es (stemmed)"}
        if unmapped:
            meta["unmapped_labels"] = "; ".join(unmapped)
        if tags:
            meta["ignored_labels"] = "; ".join(tags)
        if locs:
            meta["localizations"] = "; ".join(x.strip() for x in locs if isinstance(x, str))
        if r0["by_sentence"]:
            meta["labels_by_sentence"] = r0["by_sentence"]
        for k in ("sex", "birth", "photometric"):
            if r0[k]:
                meta[k] = r0[k]
        if r0["photometric"] == "MONOCHROME1":
            meta["photometric_note"] = "MONOCHROME1: inverted grey scale (white = low values)"
        d = r0["date"]
        return Study(
            id=f"padchest:{sid}",
            patient_id=f"padchest:{r0['patient']}",
            source=self.name,
            images=imgs,
            report_text=None,
            labels=labels,
            study_time=f"{d[:4]}-{d[4:6]}-{d[6:8]}" if len(d) == 8 and d.isdigit() else None,
            meta=meta,
        )


def _ignored_labels(onto: Any) -> frozenset[str]:
    """The scheme's ``ignored`` group (lower case, blanks collapsed: the scheme is case-insensitive)."""
    scheme = getattr(onto, "schemes", {}).get("padchest")
    groups = getattr(scheme, "groups", None) or {}
    return frozenset(" ".join(x.lower().split()) for x in groups.get("ignored", ()))


def _pylist(cell: str) -> list[Any]:
    """PadChest list cells are Python literals; blank/'nan' = empty."""
    s = cell.strip()
    if not s or s.lower() == "nan":
        return []
    try:
        v = ast.literal_eval(s)
    except (ValueError, SyntaxError):
        raise ValueError(f"malformed list cell {s[:60]!r}") from None
    if not isinstance(v, list):
        raise ValueError(f"list cell is not a list: {s[:60]!r}")
    return v
