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

Region-level labels: ``LabelsLocalizationsBySentence`` (``[['pleural effusion', 'loc left',
'loc costophrenic angle'], ['cardiomegaly']]``: per sentence, labels then "loc ..." terms, the terms
applying to every label of that sentence) gives each Label its ``regions`` through
``data/padchest_localizations.yaml``: region terms map to region ids, side terms ("loc left") make the
sentence's regions (or, with none, the finding's ``default_regions``) sided with
``Ontology.lateral_region``; a label found in several sentences takes the union. The study's label
set is unchanged (one Label per name, as before). Unknown terms -> ``meta["unmapped_localizations"]``;
a side no region of the finding can take -> ``meta["unapplied_localizations"]``; a cell that is not a
list of lists even after a lenient re-read -> ``meta["labels_by_sentence_note"]`` (labels stay
study-level, the study is kept).

Rows are grouped by StudyID in memory (images of a study are not adjacent in the table): the long
study-level cells once per study, short interned cells per image (roughly 1 KB a study).
"""

from __future__ import annotations

import ast
import re
import sys
from functools import lru_cache
from importlib import resources
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from radvqa.model import Image, Label, Reject, Study
from radvqa.sources.tables import Layout, recognise_tables
from radvqa.sources.base import (
    LabelMapper,
    Record,
    Source,
    SourceError,
    UnknownLabel,
    header_index,
    image_index,
    image_size,
    pixel_dim,
    read_csv_rows,
)
from radvqa.sources import SOURCES

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


_LAYOUTS = [Layout("labels", "PadChest label table", ("ImageID", "ImageDir", "StudyID", "PatientID", "Projection"))]


@SOURCES.register("padchest")
class PadChestSource(Source):
    name = "padchest"
    counts_reads = True
    description = "PadChest: PADCHEST_chest_x_ray_images_labels_160K*.csv(.gz) (+ image folders)"

    def _records(self, inputs: list[Path], onto: Any, limit: int | None) -> Iterator[Record]:
        tables = recognise_tables(self, inputs, _LAYOUTS)["labels"]  # by columns, whatever the name
        if not tables:
            raise SourceError("padchest: no PadChest table (columns ImageID, StudyID, PatientID, Labels, ...) among the inputs")
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
                    self.count_read()
                    yield item
                    continue
                ref, lineno, row = item
                sid = row[c["study"]].strip()
                if not sid:
                    self.count_read()
                    yield self.reject(ref, "empty StudyID")
                    continue
                g = groups.get(sid)
                if g is None:
                    self.count_read()  # a study = a StudyID, counted when its first row is read
                    g = groups[sid] = ({k: row[c[k]].strip() for k in _STUDY_KEYS}, [])
                g[1].append((ti, lineno) + tuple(sys.intern(row[c[k]].strip()) for k in _IMAGE_KEYS))
        self._tables = tables
        for sid in list(groups):
            yield self._study(sid, *groups.pop(sid), mapper, images, ignored, onto)

    def _study(
        self,
        sid: str,
        r0: dict[str, str],
        rows: list[tuple[Any, ...]],
        mapper: LabelMapper,
        images: dict[str, Path] | None,
        ignored: frozenset[str] = frozenset(),
        onto: Any = None,
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
                w = pixel_dim(r["cols"] or "")
                h = pixel_dim(r["rows"] or "")
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
        meta: dict[str, Any] = {"report_es": r0["report"], "report_language": "es (stemmed)"}
        if r0["by_sentence"] and labels and hasattr(onto, "lateral_region"):
            _localize(labels, r0["by_sentence"], onto, meta)
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
    except (ValueError, SyntaxError, MemoryError, RecursionError):  # '-'*100000+'1' nests too deep
        raise ValueError(f"malformed list cell {s[:60]!r}") from None
    if not isinstance(v, list):
        raise ValueError(f"list cell is not a list: {s[:60]!r}")
    return v


_SIDES = ("left", "right")


@lru_cache(maxsize=1)
def _loc_table() -> tuple[dict[str, tuple[tuple[str, ...], str | None]], frozenset[str]]:
    """``data/padchest_localizations.yaml``: folded term -> (region ids, side), descriptive terms."""
    import yaml

    data = yaml.safe_load(resources.files("radvqa.sources").joinpath("data/padchest_localizations.yaml").read_text("utf-8"))
    terms: dict[str, tuple[tuple[str, ...], str | None]] = {}
    for term, spec in (data.get("terms") or {}).items():
        side = (spec or {}).get("side")
        if side not in (None, "left", "right", "bilateral"):
            raise SourceError(f"padchest_localizations.yaml: {term!r}: bad side {side!r}")
        terms[_fold(term)] = (tuple((spec or {}).get("regions") or ()), side)
    return terms, frozenset(_fold(t) for t in data.get("descriptive") or ())


def _fold(s: str) -> str:
    return " ".join(s.lower().split())


def _sentences(cell: str) -> list[list[str]] | None:
    """The cell as a list of string lists; None when it is not one even read leniently.

    ast.literal_eval first; the lenient re-read takes each innermost ``[...]`` and the quoted strings
    in it (a cut-off or badly quoted cell still yields its complete sentences)."""
    s = cell.strip()
    if not s or s.lower() == "nan":
        return []
    try:
        v = ast.literal_eval(s)
        if isinstance(v, list) and all(isinstance(x, list) and all(isinstance(y, str) for y in x) for x in v):
            return v
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    groups = re.findall(r"\[([^\[\]]*)\]", s[1:] if s.startswith("[[") else s)
    out = [[a or b for a, b in re.findall(r"'([^']*)'|\"([^\"]*)\"", g)] for g in groups]
    out = [g for g in out if g]
    return out or None


def _localize(labels: list[Label], cell: str, onto: Any, meta: dict[str, Any]) -> None:
    """Set each Label's ``regions`` from the per-sentence label/localization pairs (in place)."""
    sents = _sentences(cell)
    if sents is None:
        meta["labels_by_sentence_note"] = f"malformed LabelsLocalizationsBySentence {cell.strip()[:60]!r}: labels kept study-level"
        return
    terms, descriptive = _loc_table()
    regions_db = getattr(onto, "regions", {}) or {}
    by_name = {_fold(lab.name): lab for lab in labels}
    found: dict[str, list[str]] = {}
    unmapped: list[str] = []
    unapplied: list[str] = []
    for sent in sents:
        names = [_fold(x) for x in sent if not _fold(x).startswith("loc ")]
        locs = [_fold(x) for x in sent if _fold(x).startswith("loc ")]
        if not locs:
            continue
        regs: list[str] = []
        sides: list[str] = []
        for t in locs:
            if t in descriptive:
                continue
            spec = terms.get(t)
            if spec is None or any(r not in regions_db for r in spec[0]):
                unmapped.append(t)
                continue
            regs.extend(spec[0])
            if spec[1]:
                sides.extend(_SIDES if spec[1] == "bilateral" else (spec[1],))
        for n in names:
            lab = by_name.get(n)
            if lab is None or not lab.findings:  # not in Labels (set unchanged), or "normal"
                continue
            got = _place(lab, regs, sides, onto)
            if got is None:
                unapplied.append(f"{lab.name}: {', '.join(locs)}")
                got = [r for r in dict.fromkeys(regs)]  # the unsided regions, when any
            found.setdefault(n, []).extend(got)
    for n, regs in found.items():
        by_name[n].regions = sorted(set(by_name[n].regions) | set(regs))
    if unmapped:
        meta["unmapped_localizations"] = "; ".join(dict.fromkeys(unmapped))
    if unapplied:
        meta["unapplied_localizations"] = "; ".join(dict.fromkeys(unapplied))


def _place(lab: Label, regs: list[str], sides: list[str], onto: Any) -> list[str] | None:
    """Region ids of one label in one sentence; None when its sides fit none of its regions."""
    if not sides:
        return list(dict.fromkeys(regs))
    base = list(dict.fromkeys(regs))
    if not base:  # side only: the finding's own default regions
        for fid in lab.findings:
            f = onto.findings.get(fid)
            base.extend(r for r in (f.default_regions if f else ()) if r not in base)
    out: list[str] = []
    lateral = False
    for side in dict.fromkeys(sides):
        for r in base:
            # a region that is sided already ("loc left lower lobe") keeps its own side
            own = getattr(onto.regions.get(r), "side", None) in _SIDES
            sided = r if own else onto.lateral_region(r, side)
            lateral = lateral or sided is not None
            # a region the sentence names but that has no sided version stays as named; a default
            # region without one is dropped (the side says where the finding is)
            if sided is None and r in regs:
                sided = r
            if sided is not None and sided not in out:
                out.append(sided)
    return out if lateral else None
