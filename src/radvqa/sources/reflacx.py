"""REFLACX (Bigolin Lanfredi et al., Scientific Data 2022; PhysioNet reflacx-xray-localization 1.0.0).

Inputs: the ``main_data`` folder (``metadata_phase_{1,2,3}.csv`` and one folder per reading id), or
the metadata files themselves (their reading folders are looked up beside them); optionally the
MIMIC-CXR(-JPG) inputs: a root holding ``files/pXX/pN/sM/<dicom_id>.jpg`` (image paths and sizes)
and ``mimic-cxr-2.0.0-metadata.csv(.gz)`` (view, StudyDate/StudyTime for ``study_time``). Layout,
columns and traps: ``../shared/FORMATS.md`` section 1 (facts marked UNVERIFIED there are noted here).

Study = the MIMIC study of the image: the metadata has no study_id column, so it is taken from the
``image`` path (``.../p<subject>/s<study>/<dicom_id>.dcm``): ``reflacx:<study_id>``, patient
``reflacx:<subject_id>``. Reader = the reading id (``P102R009922``; the release does not say which of
its 5 radiologists made a reading). The readings of one study (phases 1-2: the same image read by 5
radiologists) are grouped, whichever metadata file they come from.

Per reading:
- labels (scheme ``reflacx``; phase 1 and phases 2-3 have different columns, checked against the
  scheme's ``phase1`` / ``phase23`` groups): the metadata's certainty 0-5 per label (0 = not
  selected -> value 0; >= ``present_from`` (default 3, the authors' rule) -> 1; 1 to
  ``present_from`` - 1 -> ``below_threshold``, default 0/absent, or -1/uncertain; both are
  ``ReflacxOptions``, set by ``radvqa build reflacx --reflacx-present-from N
  --reflacx-below-threshold absent|uncertain`` and part of the resume fingerprint), True/False for
  the presence-only columns (Support devices, Quality issue), ``Other`` free text kept in
  ``meta["reflacx_other"]``; an empty cell (the release writes NaN as "") gives no Label. Readers
  are fused by the localize rules (majority per image).
- ellipses (``anomaly_location_ellipses.csv``): one expert Box per ellipse and label, the box being
  the ellipse's bounding box, with ``Box.ellipse = [cx, cy, rx, ry]`` and ``Box.reader_certainty`` =
  its 1-5 certainty. Whether ellipses can cross the image border is UNVERIFIED: a crossing ellipse's
  box is clipped (the ellipse is kept as drawn; noted in ``meta["ellipse_notes"]``); one entirely
  outside, inverted, with no certainty or no label, or labelled only "Other", is a Reject line. An
  ellipse rated below ``present_from`` is no lesion box when ``below_threshold`` is absent (answers
  would count it as a mark): it is listed in ``meta["ellipses_below_threshold"]`` instead.
- ``chest_bounding_box.csv``: a region Box ``label="chest"`` per reading.
- ``transcription.txt``: the dictated report. The study's ``report_text`` is the transcription of
  its first reading (by id) that has one (``meta["report_reader"]``); the others are kept in
  ``meta["transcription:<id>"]`` and extracted by the build too (extract/dictations.py): each
  becomes its reader's ``dictation`` labels, fused with the readers' certainty labels. Where two
  or more readers' votes go against the report reader's dictation, localize makes the finding
  uncertain with both sides in the provenance (graph.py).
  Readings with ``eye_tracking_data_discarded`` True have no transcription (or gaze) by design.
Rejects (one line each, the reading named): a reading folder, ellipse file or chest-box file that
is missing; a transcription missing where eye tracking was kept; an ellipse file whose label
columns are unknown or belong to the other phase's vocabulary; bad cells. Records read (counted):
a study group, or a metadata row that names no study (its reject is the study-level one). A
reading rejected inside an emitted study, and a bad ellipse row, is a row reject (``source-row``);
a study whose readings are all rejected yields no Study: its first reading's reject is the
study's, the others are rows, so read = studies + study rejects. Unused files: fixations.csv,
timestamps_transcription.csv, gaze_data/ (gaze is not used by radvqa).

All CSVs are written with CRLF line ends and without quoting in the numeric files (FORMATS.md);
the metadata is read with ``read_csv_rows_split`` (csv rules; a line without quotes split on commas,
one with a quote -- the free-text Other column -- parsed by csv), the per-reading files with a plain
split (numbers and True/False only), opened relative to their folder's descriptor; an ellipse row
of the released layout with one label is matched by its label cells' text.
Memory, flat in the number of readings: the metadata rows (and the MIMIC metadata rows, for the
join) go through an external sort by (subject, study, reading id) (``external_sort.py``: runs of
``RUN_READINGS`` spilled to temporary files, merged), and each study is emitted when its records
have all come by; the per-reading files are read only then.
"""

from __future__ import annotations

import operator
from math import isfinite
import os
import re
import sys
from collections.abc import Iterator
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import yaml

from radvqa.sources import SOURCES
from radvqa.model import Box, Image, Label, Reject, Study
from radvqa.sources.base import (
    DirCache,
    LabelMapper,
    Record,
    Source,
    SourceError,
    UnknownLabel,
    ROW_STAGE,
    find_inputs,
    header_index,
    image_size,
    read_csv_rows_split,
)
from radvqa.sources.external_sort import ExternalSort

_META_RE = re.compile(r"^metadata_phase_(\d)\.csv(\.gz)?$")
_META_COLS = {
    "id": ("id",),
    "split": ("split",),
    "discarded": ("eye_tracking_data_discarded",),
    "image": ("image",),
    "dicom": ("dicom_id",),
    "subject": ("subject_id",),
    "sx": ("image_size_x",),
    "sy": ("image_size_y",),
}
_TRUE = {"true": 1, "1": 1, "1.0": 1, "false": 0, "0": 0, "0.0": 0}
_CERT = {str(i): i for i in range(6)}
ELLIPSE_FILE = "anomaly_location_ellipses.csv"
CHEST_FILE = "chest_bounding_box.csv"
TRANSCRIPT_FILE = "transcription.txt"
# readings held in memory before a sorted run is spilled to a temporary file (external_sort.py)
RUN_READINGS = 4096

# the sorted records (tuples; see _records): a reading, or a row of the MIMIC metadata table
_READING, _MIMIC = 1, 0
(K_SUBJECT, K_STUDY, K_RID, K_KIND, K_FILE, K_LINE, R_REASON, R_SPLIT, R_DISC, R_DICOM, R_SX, R_SY,
 R_VALUES) = range(13)
M_DICOM, M_VIEW, M_TIME = 6, 7, 8


@lru_cache(maxsize=1)
def reflacx_config() -> dict[str, Any]:
    text = resources.files("radvqa.sources").joinpath("data/reflacx.yaml").read_text("utf-8")
    d = yaml.safe_load(text)
    d["certainty_words"] = {int(k): str(v) for k, v in d["certainty_words"].items()}
    return d


def certainty_words(c: int) -> str:
    """The annotation interface's wording of a 1-5 certainty ("possibly (~50%)")."""
    return reflacx_config()["certainty_words"].get(int(c), str(c))


class ReflacxOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The reflacx source's build options (``radvqa build reflacx --reflacx-present-from N
    --reflacx-below-threshold absent|uncertain``); None: the packaged default (data/reflacx.yaml).
    They are part of the build's fingerprint, so ``--resume`` with other values is refused."""

    # a reading's label counts as present from this certainty up (1-5; the authors' rule is 3)
    present_from: Annotated[int, msgspec.Meta(ge=1, le=5)] | None = None
    # what a selected label rated below present_from becomes
    below_threshold: Literal["absent", "uncertain"] | None = None


class _Reading:
    """One reading of a study being emitted (built from its sorted record). Its folder and
    metadata line are strings built only for a reject line (``folder``, ``ref``)."""

    __slots__ = ("rid", "phase", "split", "discarded", "dicom", "sx", "sy", "names", "values", "dfd", "info", "line")

    def __init__(self, rec: tuple[Any, ...], info: tuple[Any, ...]) -> None:
        self.info = info
        self.phase, self.names, _, _, self.dfd, _ = info
        (_, _, self.rid, _, _, self.line, _, split, self.discarded, self.dicom, self.sx, self.sy, self.values) = rec
        self.split = split or None

    @property
    def folder(self) -> str:
        return self.info[2] + os.sep + self.rid

    @property
    def ref(self) -> str:
        return f"{self.info[3]}:{self.line}"


@SOURCES.register("reflacx")
class ReflacxSource(Source):
    name = "reflacx"
    counts_reads = True  # a study group, or a table row that names/joins no study
    description = "REFLACX: main_data/metadata_phase_<p>.csv + reading folders (ellipses, chest box, transcription); + MIMIC-CXR files/ tree or metadata"
    options_type = ReflacxOptions

    def __init__(self, present_from: int | None = None, below_threshold: str | None = None) -> None:
        try:
            opts = msgspec.convert({"present_from": present_from, "below_threshold": below_threshold}, ReflacxOptions)
        except msgspec.ValidationError as e:
            raise SourceError(f"reflacx: bad option: {e} (present_from: 1-5; below_threshold: absent or uncertain)") from None
        cfg = reflacx_config()
        self.present_from = int(opts.present_from if opts.present_from is not None else cfg["present_from"])
        self.below_threshold = opts.below_threshold or str(cfg["below_threshold"])
        if not 1 <= self.present_from <= 5 or self.below_threshold not in ("absent", "uncertain"):
            raise SourceError(f"reflacx: data/reflacx.yaml: bad defaults ({self.present_from}, {self.below_threshold!r})")
        self._below_value = 0 if self.below_threshold == "absent" else -1
        self._words = {c: certainty_words(c) for c in range(1, 6)}
        self.run_readings = RUN_READINGS
        self.spilled = 0

    # ------------------------------------------------------------------------------------------
    def _records(self, inputs: list[Path], onto: Any, limit: int | None) -> Iterator[Record]:
        metas = _metadata_files(inputs)
        if not metas:
            raise SourceError("reflacx: no metadata_phase_<p>.csv among the inputs (give the main_data folder)")
        meta_dirs = {m.parent for m in metas}
        other = [p for p in inputs if p not in meta_dirs and p / "main_data" not in meta_dirs
                 and not (p.is_file() and _META_RE.match(p.name.lower()))]
        mimic_tables = find_inputs(other, lambda n: n.startswith("mimic-cxr") and "metadata" in n
                                   and (n.endswith(".csv") or n.endswith(".csv.gz")))
        self._roots = [str(r / "files" if (r / "files").is_dir() else r) for r in other if r.is_dir()]
        self._dirs = DirCache()
        self._mapper = LabelMapper(onto, "reflacx")
        scheme = (getattr(onto, "schemes", None) or {}).get("reflacx")
        groups = getattr(scheme, "groups", None) or {}
        if not groups.get("phase1") or not groups.get("phase23"):
            raise SourceError("reflacx: the ontology has no reflacx scheme with phase1/phase23 groups")
        self._phase_labels = {"1": frozenset(groups["phase1"]), "2": frozenset(groups["phase23"]),
                              "3": frozenset(groups["phase23"])}
        self._presence = frozenset(groups.get("presence") or ())
        self._ellipse_headers: dict[tuple[str, str], tuple[tuple[int, list[str]], ...] | str] = {}
        self._ellipse_layouts: dict[tuple[str, str], tuple[Any, ...] | str] = {}
        self._chest_cols: dict[str, list[int] | None] = {}
        # per metadata file: (phase, label columns, folder of its readings, path, that folder's fd,
        # the label columns' value tables)
        self._files: list[tuple[str, Any, str, str, int | None, tuple[Any, ...]]] = []

        # One sorted pass instead of a dict of every reading: the metadata rows (and the MIMIC
        # metadata rows, for the join) go through an external sort by (subject, study, reading
        # id), and each study's consecutive records are emitted as they come. Memory is one run
        # of the sort, whatever the number of readings.
        sorter = ExternalSort(self.run_readings)
        try:
            for m in sorted(metas, key=lambda p: p.name):
                for rej in self._read_metadata(m, sorter):
                    self.count_read()  # a metadata row that names no study: a study-level reject
                    yield rej
            for ti, t in enumerate(mimic_tables):
                self._mimic_rows(t, ti, sorter)
            self.spilled = sorter.spilled
            group: list[tuple[Any, ...]] = []
            key: tuple[int, int] | None = None
            for rec in sorter:
                k = (rec[K_SUBJECT], rec[K_STUDY])
                if k != key:
                    if group:
                        yield from self._group(key, group)  # type: ignore[arg-type]
                    group, key = [], k
                group.append(rec)
            if group:
                yield from self._group(key, group)  # type: ignore[arg-type]
        finally:
            sorter.close()
            for f in self._files:
                if f[4] is not None:
                    os.close(f[4])
            self._files = []

    def _group(self, key: tuple[int, int], recs: list[tuple[Any, ...]]) -> Iterator[Record]:
        """One study's sorted records: its MIMIC rows first (reading id ""), then its readings."""
        readings = [r for r in recs if r[K_KIND] == _READING]
        if not readings:
            return  # MIMIC rows of a study REFLACX did not read
        self.count_read()
        mimic = {r[M_DICOM]: (r[M_VIEW] or None, r[M_TIME] or None) for r in recs if r[K_KIND] == _MIMIC}
        yield from self._study(key, readings, mimic)

    def _read_metadata(self, m: Path, sorter: ExternalSort) -> Iterator[Reject]:
        phase = _META_RE.match(m.name.lower()).group(1)  # type: ignore[union-attr]
        rows = read_csv_rows_split(m)
        first = next(rows, None)
        if first is None or first[1] is None:
            raise SourceError(f"reflacx: {m}: empty or unreadable header")
        header = [h.strip() for h in first[1]]
        c = header_index(header, _META_COLS, str(m))
        label_idx = [i for i in range(len(header)) if i not in c.values()]
        allowed = self._phase_labels.get(phase)
        if allowed is None:
            raise SourceError(f"reflacx: {m}: unknown phase {phase} (REFLACX has phases 1, 2 and 3)")
        for i in label_idx:
            try:
                self._mapper(header[i])
            except UnknownLabel as e:
                raise SourceError(f"reflacx: {m}: {e} (column header)") from None
            if header[i] not in allowed:
                raise SourceError(f"reflacx: {m}: label column {header[i]!r} is not a phase {phase} label "
                                  f"(phase 1 and phases 2-3 have different vocabularies)")
        # per label column: (name, kind, finding ids, value table); kind 0 certainty 0-5, 1
        # True/False, 2 free text; the table maps the common cells to (value, certainty note)
        names = tuple((name, kind, self._mapper(name), self._value_table(name, kind))
                      for name, kind in ((sys.intern(header[i]), 2 if header[i] == "Other" else
                                          (1 if header[i] in self._presence else 0)) for i in label_idx))
        mi = len(self._files)
        try:
            # the reading files are opened relative to their folder: a shorter path to resolve
            # for each of the three files of every reading
            dfd: int | None = os.open(m.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError:
            dfd = None
        # (the value tables apart: a reading's cells are looked up with one map over them)
        self._files.append((phase, names, str(m.parent), str(m), dfd, tuple(n[3] for n in names)))
        values_of = (operator.itemgetter(*label_idx) if len(label_idx) > 1
                     else (lambda row: tuple(row[i] for i in label_idx)))
        ci, cimg, csub, cdic, csx, csy, cdisc, csplit = (c["id"], c["image"], c["subject"], c["dicom"], c["sx"], c["sy"],
                                                         c["discarded"], c["split"])
        add = sorter.add
        ncols, mstr = len(header), str(m)
        for ln, row, err in rows:
            if row is None or len(row) != ncols or not row[ci]:
                # as Source.table_rows, checked only off the common path: an unreadable line, a
                # blank one (skipped), a wrong number of cells
                if row is None:
                    yield self.reject(f"{mstr}:{ln}", err or "unreadable line")
                    continue
                if not any(x.strip() for x in row):
                    continue
                if len(row) != ncols:
                    yield self.reject(f"{mstr}:{ln}", f"{len(row)} cells, header has {ncols}")
                    continue
            ref = f"{mstr}:{ln}"
            rid = row[ci].strip()
            image = row[cimg].strip().replace("\\", "/")
            parts = image.split("/")
            if not rid or len(parts) < 3:
                yield self.reject(ref, f"reading {rid or '(no id)'}: no reading id or no image path ({image!r})")
                continue
            st, subj = parts[-2], parts[-3]
            if not (st[:1] == "s" and st[1:].isdigit() and subj[:1] == "p" and subj[1:].isdigit()):
                yield self.reject(ref, f"reading {rid}: image path {image!r} is not .../p<subject>/s<study>/<dicom>.dcm")
                continue
            subject, study = int(subj[1:]), int(st[1:])
            # from here the row belongs to a study: a bad cell rejects the reading inside its study
            why = ""
            sx = sy = None
            sub = row[csub].strip()
            if sub and sub != subj[1:]:
                why = f"reading {rid}: subject_id {sub} disagrees with the image path ({subj})"
            else:
                try:
                    sxs, sys_ = row[csx], row[csy]
                    sx = int(sxs) if sxs.isdigit() else (int(float(sxs)) if sxs.strip() else None)
                    sy = int(sys_) if sys_.isdigit() else (int(float(sys_)) if sys_.strip() else None)
                except (ValueError, OverflowError):
                    why = f"reading {rid}: non-numeric image size {row[csx]!r} x {row[csy]!r}"
                    sx = sy = None
            disc = row[cdisc]
            if disc != "False" and disc != "True":
                disc = disc.strip().lower()
                if disc not in ("true", "false", "1", "0", "") and not why:
                    why = f"reading {rid}: eye_tracking_data_discarded {disc!r} is not True/False"
                disc = "True" if disc in ("true", "1") else "False"
            if why:
                add((subject, study, rid, _READING, mi, ln, why, "", False, "", None, None, ()))
                continue
            add((subject, study, rid, _READING, mi, ln, "", row[csplit].strip(), disc == "True",
                 row[cdic].strip() or parts[-1].rsplit(".", 1)[0], sx, sy, values_of(row)))

    def _value_table(self, name: str, kind: int) -> dict[str, tuple[int | None, str]]:
        """cell -> (label value, certainty note or "") for a label column's well-formed cells; an
        empty cell (the release writes NaN as "") -> (None, ""): no label."""
        if kind == 1:
            return {"True": (1, ""), "False": (0, ""), "true": (1, ""), "false": (0, ""), "": (None, "")}
        if kind == 2:
            return {"": (None, "")}
        out: dict[str, tuple[int | None, str]] = {"0": (0, ""), "": (None, "")}
        for c in range(1, 6):
            out[str(c)] = (1 if c >= self.present_from else self._below_value, f"{name}: {c} {self._words[c]}")
        return out

    def _mimic_rows(self, t: Path, ti: int, sorter: ExternalSort) -> None:
        """mimic-cxr-2.0.0-metadata rows (view, study time per dicom_id), sorted in with the readings
        so each study meets its own rows; studies REFLACX did not read are dropped at the merge."""
        from radvqa.sources.mimic import _iso, _view

        rows = read_csv_rows_split(t)
        first = next(rows, None)
        if first is None or first[1] is None:
            raise SourceError(f"reflacx: {t}: empty or unreadable header")
        c = header_index([h.strip() for h in first[1]],
                         {"dicom": ("dicom_id",), "subject": ("subject_id",), "study": ("study_id",),
                          "view": ("ViewPosition",), "date": ("StudyDate",), "time": ("StudyTime",)}, str(t))
        n = max(c.values())
        add = sorter.add
        for ln, row, _err in rows:
            if row is None or len(row) <= n:
                continue  # the MIMIC table is only joined; its own bad lines are mimic-cxr's business
            sub, st = row[c["subject"]].strip(), row[c["study"]].strip()
            sub = sub[1:] if sub[:1] == "p" else sub
            st = st[1:] if st[:1] == "s" else st
            if not (sub.isdigit() and st.isdigit()):
                continue
            add((int(sub), int(st), "", _MIMIC, ti, ln, row[c["dicom"]].strip(),
                 _view(row[c["view"]].strip() or None) or "", _iso(row[c["date"]].strip(), row[c["time"]].strip()) or ""))

    # ------------------------------------------------------------------------------------------
    def _study(self, key: tuple[int, int], recs: list[tuple[Any, ...]], mimic: dict[str, Any]) -> Iterator[Record]:
        """One study from its readings' records (sorted by reading id). Reading-level rejects are
        rows of the study (``reject_row``) when the study is emitted; when none of its readings
        is usable the first one's reject stands for the study (read = studies + rejects)."""
        subject, sid = key
        pending: list[Reject] = []
        readings: list[_Reading] = []
        for rec in recs:
            if rec[R_REASON]:
                f = self._files[rec[K_FILE]]
                pending.append(self.reject(f"{f[3]}:{rec[K_LINE]}", rec[R_REASON]))
            else:
                readings.append(_Reading(rec, self._files[rec[K_FILE]]))
        images: dict[str, Image] = {}
        scales: dict[str, tuple[float, float]] = {}
        for r in readings:
            if r.dicom in images:
                continue
            im = Image(id=r.dicom, width=r.sx, height=r.sy, modality="DX")
            view_time = mimic.get(r.dicom)
            if view_time:
                im.view = view_time[0]
            f = self._find_image(subject, sid, r.dicom)
            if f is not None:
                try:
                    w, h = image_size(Path(f))
                except ValueError as e:
                    pending.append(self.reject(r.ref, f"study {sid}: {e}"))
                    pending += [self.reject(r2.ref, f"reading {r2.rid}: its study {sid} has an unreadable image")
                                for r2 in readings if r2 is not r]
                    yield from self._unused(pending)
                    return
                if r.sx and r.sy and (w, h) != (r.sx, r.sy):
                    # a resized copy: REFLACX coordinates are in the DICOM's pixels
                    scales[r.dicom] = (w / r.sx, h / r.sy)
                    im.original_width, im.original_height = r.sx, r.sy
                im.path, im.width, im.height = f, w, h
            images[r.dicom] = im
        labels: list[Label] = []
        boxes: list[Box] = []
        region_boxes: list[Box] = []
        notes: list[str] = []
        other: list[str] = []
        certs: list[str] = []
        low: list[str] = []
        row_rejects: list[Reject] = []
        transcripts: list[tuple[str, str]] = []
        used: list[_Reading] = []
        for r in readings:
            got = self._reading(r, images[r.dicom], scales.get(r.dicom))
            if isinstance(got, Reject):
                pending.append(got)
                continue
            labs, bxs, chest, text, rnotes, rej, rother, rcerts, rlow = got
            low += rlow
            row_rejects += rej
            labels += labs
            boxes += bxs
            region_boxes.append(chest)
            notes += rnotes
            certs += rcerts
            if rother:
                other.append(f"{r.rid}: {rother}")
            if text is not None:
                transcripts.append((r.rid, text))
            used.append(r)
        yield from row_rejects  # ellipse rows: always row rejects
        if not used:
            yield from self._unused(pending)
            return
        for rej in pending:
            yield _as_row(rej)
        meta: dict[str, str] = {
            "readings": ",".join(r.rid for r in used),
            "reflacx_phase": ",".join(sorted({r.phase for r in used})),
            "reflacx_present_from": str(self.present_from),
            "reflacx_below_threshold": self.below_threshold,
        }
        if certs:
            meta["reflacx_certainty"] = "; ".join(certs)
        if other:
            meta["reflacx_other"] = "; ".join(other)
        if notes:
            meta["ellipse_notes"] = "; ".join(notes)
        if low:
            meta["ellipses_below_threshold"] = "; ".join(low)
        report = None
        if transcripts:
            # the report is one reader's dictation: localize weighs it against the other readers'
            # labels as one reader's word (graph.py, "report_reader")
            meta["report_reading"] = meta["report_reader"] = transcripts[0][0]
            report = transcripts[0][1]
            for rid, text in transcripts[1:]:
                meta[f"transcription:{rid}"] = text
        times = [mimic[d][1] for d in images if d in mimic and mimic[d][1]]
        yield Study(
            id=f"{self.name}:{sid}",
            patient_id=f"{self.name}:{subject}",
            source=self.name,
            images=[images[d] for d in sorted(images)],
            report_text=report,
            labels=labels,
            boxes=boxes,
            region_boxes=region_boxes,
            split=used[0].split,
            study_time=min(times) if times else None,
            meta=meta,
        )

    def _unused(self, pending: list[Reject]) -> Iterator[Reject]:
        """A study none of whose readings could be used: its first reading's reject is the study's
        (stage source), the others are rows of it."""
        yield pending[0]
        for rej in pending[1:]:
            yield _as_row(rej)

    def _find_image(self, subject: int, sid: int, dicom: str) -> str | None:
        if not self._roots:
            return None
        s = str(subject)
        for root in self._roots:
            base = f"{root}/p{s[:2]}/p{s}/s{sid}/{dicom}"
            for ext in (".jpg", ".dcm", ".png"):
                if self._dirs.exists(base + ext):
                    return base + ext
        return None

    def _reading(self, r: _Reading, im: Image, scale: tuple[float, float] | None) -> Any:
        """(labels, boxes, chest box, transcription, notes, ellipse rejects, other text, certainty
        notes, ellipses below the threshold) of one reading, or a Reject for the whole reading."""
        rid = r.rid
        dicom = r.dicom
        folder = r.folder
        # the three files first: a reading whose files are missing needs no label work
        dfd = r.dfd
        base = (rid + os.sep) if dfd is not None else (folder + os.sep)
        ell = _read_text(base + ELLIPSE_FILE, dfd)
        if ell is None:
            why = "reading folder missing" if not os.path.isdir(folder) else f"{ELLIPSE_FILE} missing from its folder"
            return self.reject(r.ref, f"reading {rid}: {why}")
        chest_text = _read_text(base + CHEST_FILE, dfd)
        if chest_text is None:
            return self.reject(r.ref, f"reading {rid}: {CHEST_FILE} missing from its folder")
        text = None
        if not r.discarded:
            text = _read_text(base + TRANSCRIPT_FILE, dfd)
            if text is None:
                return self.reject(r.ref, f"reading {rid}: {TRANSCRIPT_FILE} missing (eye-tracking data not discarded)")
            if isinstance(text, Reject):
                return _reading_reject(text, r)
            text = text.strip()
            if not text:
                return self.reject(r.ref, f"reading {rid}: empty {TRANSCRIPT_FILE}")
        if isinstance(ell, Reject) or isinstance(chest_text, Reject):
            return _reading_reject(ell if isinstance(ell, Reject) else chest_text, r)  # type: ignore[arg-type]
        names = r.names
        hits = list(map(dict.get, r.info[5], r.values))
        if None not in hits:
            # every cell is a common one ("0".."5", True/False, empty): decoded by the columns'
            # tables, no per-cell branching
            other = ""
            certs = [f"{rid} {h[1]}" for h in hits if h[1]]
            labels = [Label(scheme="reflacx", name=c[0], value=h[0], findings=c[2], reader=rid, image_id=dicom)
                      for c, h in zip(names, hits) if h[0] is not None]
        else:
            got = self._labels_slow(r)
            if isinstance(got, Reject):
                return got
            labels, certs, other = got
        chest = self._chest(r, chest_text, scale)
        if isinstance(chest, Reject):
            return chest
        got = self._ellipses(r, ell, im, scale)
        if isinstance(got, Reject):
            return got
        boxes, notes, rejects, low = got
        return labels, boxes, chest, text, notes, rejects, other, certs, low

    def _labels_slow(self, r: _Reading) -> tuple[list[Label], list[str], str] | Reject:
        """A reading's labels cell by cell (a cell outside the columns' tables: free text, blanks,
        "3.0", a bad value)."""
        rid, dicom = r.rid, r.dicom
        labels: list[Label] = []
        other = ""
        certs: list[str] = []
        for (name, kind, fids, table), raw in zip(r.names, r.values):
            hit = table.get(raw)
            if hit is not None:
                val, note = hit
                if val is None:
                    continue  # an empty cell (NaN written as ""): not given
                if note:
                    certs.append(f"{rid} {note}")
            else:
                v = raw.strip()
                if not v:
                    continue  # NaN written as "": not given
                if kind == 2:
                    other = v
                    continue
                if kind == 1:
                    val = _TRUE.get(v.lower())  # type: ignore[assignment]
                    if val is None:
                        return self.reject(r.ref, f"reading {rid}: {name} value {v!r} is not True/False")
                else:
                    try:
                        cert = int(float(v))
                    except (ValueError, OverflowError):
                        cert = -1
                    if not 0 <= cert <= 5:
                        return self.reject(r.ref, f"reading {rid}: {name} certainty {v!r} is not 0-5")
                    val, note = table[str(cert)]
                    if note:
                        certs.append(f"{rid} {note}")
            labels.append(Label(scheme="reflacx", name=name, value=val, findings=fids, reader=rid, image_id=dicom))
        return labels, certs, other

    def _chest(self, r: _Reading, text: str, scale: tuple[float, float] | None) -> Box | Reject:
        lines = text.splitlines()
        if len(lines) != 2 or lines[0].isspace() or lines[1].isspace() or not lines[0] or not lines[1]:
            lines = [ln for ln in lines if ln.strip()]
        if len(lines) != 2:
            return self.reject(f"{r.folder}{os.sep}{CHEST_FILE}", f"reading {r.rid}: {CHEST_FILE} has {len(lines) - 1} data rows, expected 1")
        cols = self._chest_cols.get(lines[0], [])
        if cols == []:
            head = [h.strip() for h in lines[0].split(",")]
            cols = self._chest_cols[lines[0]] = ([head.index(k) for k in ("xmin", "ymin", "xmax", "ymax")]
                                                if all(k in head for k in ("xmin", "ymin", "xmax", "ymax")) else None)
        try:
            if cols is None:
                raise ValueError("header")
            cells = lines[1].split(",")
            a, b, c, d = cols
            x1, y1, x2, y2 = float(cells[a]), float(cells[b]), float(cells[c]), float(cells[d])
        except (ValueError, IndexError):
            return self.reject(f"{r.folder}{os.sep}{CHEST_FILE}", f"reading {r.rid}: {CHEST_FILE} is not xmin,ymin,xmax,ymax numbers")
        if not (x1 < x2 and y1 < y2) or not isfinite(x1 + y1 + x2 + y2):
            return self.reject(f"{r.folder}{os.sep}{CHEST_FILE}", f"reading {r.rid}: inverted chest box [{x1}, {y1}, {x2}, {y2}]")
        if scale:
            x1, x2, y1, y2 = x1 * scale[0], x2 * scale[0], y1 * scale[1], y2 * scale[1]
        return Box(image_id=r.dicom, x1=x1, y1=y1, x2=x2, y2=y2, source="region", reader=r.rid, label="chest")

    def _ellipse_header(self, r: _Reading, head_line: str) -> tuple[tuple[int, list[str]], ...] | str:
        """Column positions (xmin, ymin, xmax, ymax, certainty) then (index, finding ids) per label
        column, or the reason the header cannot be used; cached per (phase, header)."""
        key = (r.phase, head_line)
        hit = self._ellipse_headers.get(key)
        if hit is not None:
            return hit
        head = [h.strip() for h in head_line.split(",")]
        out: Any
        try:
            geo = tuple((head.index(k), []) for k in ("xmin", "ymin", "xmax", "ymax", "certainty"))
        except ValueError:
            out = f"{ELLIPSE_FILE} header lacks xmin/ymin/xmax/ymax/certainty ({head_line[:80]!r})"
        else:
            labs = []
            out = None
            for i, h in enumerate(head):
                if h in ("xmin", "ymin", "xmax", "ymax", "certainty"):
                    continue
                try:
                    fids = self._mapper(h)
                except UnknownLabel as e:
                    out = f"{ELLIPSE_FILE}: {e}"
                    break
                if h not in self._phase_labels[r.phase]:
                    out = f"{ELLIPSE_FILE}: label column {h!r} is not a phase {r.phase} label"
                    break
                labs.append((i, fids))
            if out is None:
                out = geo + tuple(labs)
        self._ellipse_headers[key] = out
        return out

    def _ellipse_layout(self, r: _Reading, head_line: str) -> tuple[Any, ...] | str:
        """(xmin, ymin, xmax, ymax, certainty positions, label columns, column names, first label
        column, whether the label columns are one slice to the end) of an ellipse-file header, or
        why it cannot be used; cached per (phase, header line) by the caller."""
        cols = self._ellipse_header(r, head_line)
        if isinstance(cols, str):
            return cols
        labcols = cols[5:]
        names = [h.strip() for h in head_line.split(",")]
        # the released layout: geometry and certainty first, then every label column: a row's
        # labels are then one slice, read with C-level counts instead of a loop over the columns
        first = labcols[0][0] if labcols else len(names)
        contiguous = [i for i, _ in labcols] == list(range(first, len(names)))
        geo = tuple(c[0] for c in cols[:5])
        # the released layout exactly (xmin, ymin, xmax, ymax, certainty, then the labels): a row
        # with one label selected is found by its label cells' text, split off in one piece
        onehot = None
        if geo == (0, 1, 2, 3, 4) and contiguous and first == 5:
            n = len(labcols)
            onehot = {",".join("True" if j == k else "False" for j in range(n)): k for k in range(n)}
        return (*geo, labcols, names, first, contiguous, onehot)

    def _ellipses(self, r: _Reading, text: str, im: Image, scale: tuple[float, float] | None) -> Any:
        lines = text.splitlines()
        if not lines:
            return self.reject(r.folder + os.sep + ELLIPSE_FILE, f"reading {r.rid}: empty {ELLIPSE_FILE} (no header)")
        layout = self._ellipse_layouts.get((r.phase, lines[0]))
        if layout is None:
            layout = self._ellipse_layouts[(r.phase, lines[0])] = self._ellipse_layout(r, lines[0])
        if isinstance(layout, str):
            return self.reject(r.folder + os.sep + ELLIPSE_FILE, f"reading {r.rid}: {layout}")
        ix1, iy1, ix2, iy2, ic, labcols, names, first, contiguous, onehot = layout
        ncols = len(names)
        w, h = r.sx, r.sy
        rid = r.rid
        boxes: list[Box] = []
        notes: list[str] = []
        rejects: list[Reject] = []
        low: list[str] = []
        for ln, line in enumerate(lines[1:], start=2):
            if not line or line.isspace():
                continue
            k = None
            if onehot is not None:
                cells = line.split(",", 5)  # the geometry cells, then the label cells in one piece
                k = onehot.get(cells[5]) if len(cells) == 6 else None
            if k is None:
                cells = line.split(",")
            if k is None and len(cells) != ncols:
                rejects.append(self.reject_row(_ellipse_ref(r, ln), f"reading {rid}: ellipse row has {len(cells)} cells, header has {ncols}"))
                continue
            try:
                x1, y1, x2, y2 = float(cells[ix1]), float(cells[iy1]), float(cells[ix2]), float(cells[iy2])
            except ValueError:
                rejects.append(self.reject_row(_ellipse_ref(r, ln), f"reading {rid}: non-numeric ellipse {[cells[ix1], cells[iy1], cells[ix2], cells[iy2]]}"))
                continue
            cs = cells[ic]
            cert = _CERT.get(cs)  # type: ignore[assignment]
            if cert is None:
                try:
                    cert = int(float(cs))
                except (ValueError, OverflowError):
                    cert = 0
            if not 1 <= cert <= 5:
                rejects.append(self.reject_row(_ellipse_ref(r, ln), f"reading {rid}: ellipse certainty {cs!r} is not 1-5"))
                continue
            fids: list[str] = []
            chosen: list[str] = []
            seg = cells[first:] if contiguous and k is None else None
            if k is not None:
                chosen.append(names[first + k])
                fids = labcols[k][1]
            elif seg is not None and seg.count("True") == 1 and seg.count("False") == len(seg) - 1:
                k = seg.index("True")  # the common row: one label, written exactly True/False
                chosen.append(names[first + k])
                fids = labcols[k][1]
            else:
                bad = False
                for i, lf in labcols:
                    c = cells[i]
                    if c == "False":
                        continue
                    v = 1 if c == "True" else _TRUE.get(c.strip().lower())
                    if v is None:
                        rejects.append(self.reject_row(_ellipse_ref(r, ln), f"reading {rid}: ellipse label {names[i]!r} value {cells[i]!r} is not True/False"))
                        bad = True
                        break
                    if v:
                        chosen.append(names[i])
                        fids = fids + [f for f in lf if f not in fids]
                if bad:
                    continue
            if not chosen:
                rejects.append(self.reject_row(_ellipse_ref(r, ln), f"reading {rid}: ellipse has no label selected"))
                continue
            if not fids:
                rejects.append(self.reject_row(_ellipse_ref(r, ln), f"reading {rid}: ellipse labelled only {', '.join(chosen)} (free text, no finding)"))
                continue
            if not (x1 < x2 and y1 < y2) or not isfinite(x1 + y1 + x2 + y2):
                rejects.append(self.reject_row(_ellipse_ref(r, ln), f"reading {rid}: inverted, empty or infinite ellipse [{x1}, {y1}, {x2}, {y2}]"))
                continue
            ellipse = [(x1 + x2) / 2, (y1 + y2) / 2, (x2 - x1) / 2, (y2 - y1) / 2]
            bx1, by1, bx2, by2 = x1, y1, x2, y2
            if w and h and (x1 < 0 or y1 < 0 or x2 > w or y2 > h):
                bx1, by1, bx2, by2 = max(0.0, x1), max(0.0, y1), min(float(w), x2), min(float(h), y2)
                if bx2 - bx1 < 1 or by2 - by1 < 1:
                    rejects.append(self.reject_row(_ellipse_ref(r, ln), f"reading {rid}: ellipse [{x1:g}, {y1:g}, {x2:g}, {y2:g}] lies outside the {w}x{h} image"))
                    continue
                notes.append(f"{rid} line {ln}: ellipse crosses the image border, box clipped")
            if scale:
                sx, sy = scale
                bx1, bx2, by1, by2 = bx1 * sx, bx2 * sx, by1 * sy, by2 * sy
                ellipse = [ellipse[0] * sx, ellipse[1] * sy, ellipse[2] * sx, ellipse[3] * sy]
            if cert < self.present_from and self._below_value == 0:
                # the reader placed it but rated it unlikely: with below_threshold "absent" it is no
                # lesion box (answers would count it as a mark); kept here so nothing is lost
                low.append(f"{rid} {'/'.join(chosen)} certainty {cert} at [{bx1:g}, {by1:g}, {bx2:g}, {by2:g}]")
                continue
            for k, fid in enumerate(fids):
                boxes.append(Box(image_id=r.dicom, x1=bx1, y1=by1, x2=bx2, y2=by2, source="expert", reader=rid,
                                 label=fid, ellipse=ellipse if k == 0 else list(ellipse), reader_certainty=cert))
        return boxes, notes, rejects, low


def _ellipse_ref(r: _Reading, ln: int) -> str:
    return f"{r.folder}{os.sep}{ELLIPSE_FILE}:{ln}"


def _metadata_files(inputs: list[Path]) -> list[Path]:
    """metadata_phase_<p>.csv among the inputs: given files, files in a given folder, or in its
    ``main_data/`` (no deeper: main_data holds one folder per reading, thousands of them)."""
    out: list[Path] = []
    for p in inputs:
        if p.is_file():
            if _META_RE.match(p.name.lower()):
                out.append(p)
            continue
        for d in (p, p / "main_data"):
            try:
                with os.scandir(d) as it:
                    out += sorted(Path(e.path) for e in it if _META_RE.match(e.name.lower()) and e.is_file())
            except (FileNotFoundError, NotADirectoryError):
                pass
    return out


def _read_text(path: str, dir_fd: int | None = None) -> str | Reject | None:
    """A small file's text (None when missing; ``path`` relative to ``dir_fd`` when given). Read
    as bytes and decoded once: the files are small, and open + one read + close is the whole cost
    of a reading's file."""
    try:
        fd = os.open(path, os.O_RDONLY, dir_fd=dir_fd)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        data = os.read(fd, _CHUNK)
        if len(data) == _CHUNK:  # a short read of a regular file is its end: one syscall for small files
            chunks = [data]
            while True:
                b = os.read(fd, _CHUNK)
                if not b:
                    break
                chunks.append(b)
            data = b"".join(chunks)
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8-sig") if data[:3] == b"\xef\xbb\xbf" else data.decode("utf-8")
    except UnicodeDecodeError as e:
        return Reject(source="reflacx", ref=path, reason=f"not UTF-8 text ({e.reason} at byte {e.start})")


# the first read's size: a reading's files are a few hundred bytes to a few KB; a 64 KiB buffer
# cost more to allocate (and shrink) than the read itself
_CHUNK = 1 << 13


def _as_row(rej: Reject) -> Reject:
    """A reading's reject inside a study: a row of the study, not a study (see Source.reject_row)."""
    return msgspec.structs.replace(rej, stage=ROW_STAGE)


def _reading_reject(rej: Reject, r: _Reading) -> Reject:
    """A file's reject (its ref relative to the metadata folder's descriptor) as the reading's."""
    return msgspec.structs.replace(rej, ref=r.folder + os.sep + os.path.basename(rej.ref),
                                   reason=f"reading {r.rid}: {rej.reason}")


__all__ = ["ReflacxOptions", "ReflacxSource", "certainty_words", "reflacx_config"]
