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
  ``present_from`` - 1 -> ``below_threshold``, default 0/absent, or -1/uncertain), True/False for
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
  its first reading (by id) that has one; the others are kept in ``meta["transcription:<id>"]``.
  Readings with ``eye_tracking_data_discarded`` True have no transcription (or gaze) by design.
Rejects (one line each, the reading named): a reading folder, ellipse file or chest-box file that
is missing; a transcription missing where eye tracking was kept; an ellipse file whose label
columns are unknown or belong to the other phase's vocabulary; bad cells. A study whose readings are
all rejected yields no Study (its readings' Rejects stand for it). Unused files: fixations.csv,
timestamps_transcription.csv, gaze_data/ (gaze is not used by radvqa).

All CSVs are written with CRLF line ends and without quoting in the numeric files (FORMATS.md);
the metadata is read with the csv module (the Other column is free text), the per-reading files with
a plain split (numbers and True/False only), which is what keeps a reading at tens of microseconds.
Memory: the metadata is grouped per study as compact tuples (a few hundred bytes a reading); the
per-reading files are read only when their study is emitted.
"""

from __future__ import annotations

import operator
import os
import re
import sys
from collections.abc import Iterator
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

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
    find_inputs,
    header_index,
    image_size,
    read_csv_rows,
)

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


@lru_cache(maxsize=1)
def reflacx_config() -> dict[str, Any]:
    text = resources.files("radvqa.sources").joinpath("data/reflacx.yaml").read_text("utf-8")
    d = yaml.safe_load(text)
    d["certainty_words"] = {int(k): str(v) for k, v in d["certainty_words"].items()}
    return d


def certainty_words(c: int) -> str:
    """The annotation interface's wording of a 1-5 certainty ("possibly (~50%)")."""
    return reflacx_config()["certainty_words"].get(int(c), str(c))


class _Reading:
    """One metadata row (slots: kept for every reading until its study is emitted)."""

    __slots__ = ("rid", "phase", "split", "discarded", "dicom", "sx", "sy", "names", "values", "folder", "ref")

    def __init__(self, rid: str, phase: str, split: str | None, discarded: bool, dicom: str, sx: int | None,
                 sy: int | None, names: tuple[tuple[str, int, list[str]], ...], values: tuple[str, ...], folder: str,
                 ref: str) -> None:
        self.rid, self.phase, self.split, self.discarded, self.dicom = rid, phase, split, discarded, dicom
        self.sx, self.sy, self.names, self.values, self.folder, self.ref = sx, sy, names, values, folder, ref


@SOURCES.register("reflacx")
class ReflacxSource(Source):
    name = "reflacx"
    description = "REFLACX: main_data/metadata_phase_<p>.csv + reading folders (ellipses, chest box, transcription); + MIMIC-CXR files/ tree or metadata"

    def __init__(self, present_from: int | None = None, below_threshold: str | None = None) -> None:
        cfg = reflacx_config()
        env_p, env_b = os.environ.get("RADVQA_REFLACX_PRESENT_FROM"), os.environ.get("RADVQA_REFLACX_BELOW")
        self.present_from = int(present_from if present_from is not None else env_p or cfg["present_from"])
        below = below_threshold if below_threshold is not None else env_b or cfg["below_threshold"]
        if not 1 <= self.present_from <= 5:
            raise SourceError(f"reflacx: present_from must be 1-5, not {self.present_from}")
        if below not in ("absent", "uncertain"):
            raise SourceError(f"reflacx: below_threshold must be absent or uncertain, not {below!r}")
        self.below_threshold = below
        self._below_value = 0 if below == "absent" else -1
        self._words = {c: certainty_words(c) for c in range(1, 6)}

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
        self._ellipse_names: dict[str, list[str]] = {}
        self._chest_cols: dict[str, list[int] | None] = {}

        studies: dict[tuple[int, int], list[_Reading]] = {}
        for m in sorted(metas, key=lambda p: p.name):
            yield from self._read_metadata(m, studies)
        mimic = self._mimic_metadata(mimic_tables, {r.dicom for rs in studies.values() for r in rs}) if mimic_tables else {}
        for key in sorted(studies):
            yield from self._study(key, studies.pop(key), mimic)

    def _read_metadata(self, m: Path, studies: dict[tuple[int, int], list[_Reading]]) -> Iterator[Reject]:
        phase = _META_RE.match(m.name.lower()).group(1)  # type: ignore[union-attr]
        rows = read_csv_rows(m)
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
        # per label column: (name, kind, finding ids); kind 0 certainty 0-5, 1 True/False, 2 free text
        names = tuple((sys.intern(header[i]), 2 if header[i] == "Other" else (1 if header[i] in self._presence else 0),
                       self._mapper(header[i])) for i in label_idx)
        folder_root = str(m.parent)
        values_of = (operator.itemgetter(*label_idx) if len(label_idx) > 1
                     else (lambda row: tuple(row[i] for i in label_idx)))
        for item in self.table_rows(rows, len(header), m):
            if isinstance(item, Reject):
                yield item
                continue
            ref, _ln, row = item
            rid = row[c["id"]].strip()
            image = row[c["image"]].strip().replace("\\", "/")
            parts = image.split("/")
            if not rid or len(parts) < 3:
                yield self.reject(ref, f"reading {rid or '(no id)'}: no reading id or no image path ({image!r})")
                continue
            st, subj = parts[-2], parts[-3]
            if not (st[:1] == "s" and st[1:].isdigit() and subj[:1] == "p" and subj[1:].isdigit()):
                yield self.reject(ref, f"reading {rid}: image path {image!r} is not .../p<subject>/s<study>/<dicom>.dcm")
                continue
            subject = row[c["subject"]].strip()
            if subject and subject != subj[1:]:
                yield self.reject(ref, f"reading {rid}: subject_id {subject} disagrees with the image path ({subj})")
                continue
            dicom = row[c["dicom"]].strip() or parts[-1].rsplit(".", 1)[0]
            try:
                sx = int(float(row[c["sx"]])) if row[c["sx"]].strip() else None
                sy = int(float(row[c["sy"]])) if row[c["sy"]].strip() else None
            except ValueError:
                yield self.reject(ref, f"reading {rid}: non-numeric image size {row[c['sx']]!r} x {row[c['sy']]!r}")
                continue
            disc = row[c["discarded"]].strip().lower()
            if disc not in ("true", "false", "1", "0", ""):
                yield self.reject(ref, f"reading {rid}: eye_tracking_data_discarded {disc!r} is not True/False")
                continue
            r = _Reading(rid, phase, row[c["split"]].strip() or None, disc in ("true", "1"), dicom, sx, sy, names,
                         values_of(row), folder_root + os.sep + rid, ref)
            studies.setdefault((int(subj[1:]), int(st[1:])), []).append(r)

    def _mimic_metadata(self, tables: list[Path], wanted: set[str]) -> dict[str, tuple[str | None, str | None]]:
        """dicom_id -> (view, ISO study time) from mimic-cxr-2.0.0-metadata, for REFLACX's images only."""
        from radvqa.sources.mimic import _iso, _view

        out: dict[str, tuple[str | None, str | None]] = {}
        for t in tables:
            rows = read_csv_rows(t)
            first = next(rows, None)
            if first is None or first[1] is None:
                raise SourceError(f"reflacx: {t}: empty or unreadable header")
            c = header_index(first[1], {"dicom": ("dicom_id",), "view": ("ViewPosition",), "date": ("StudyDate",),
                                        "time": ("StudyTime",)}, str(t))
            n = max(c.values())
            for _ln, row, _err in rows:
                if row is None or len(row) <= n:
                    continue  # the MIMIC table is only joined; its own bad lines are mimic-cxr's business
                did = row[c["dicom"]].strip()
                if did in wanted:
                    out[did] = (_view(row[c["view"]].strip() or None), _iso(row[c["date"]].strip(), row[c["time"]].strip()))
        return out

    # ------------------------------------------------------------------------------------------
    def _study(self, key: tuple[int, int], readings: list[_Reading], mimic: dict[str, Any]) -> Iterator[Record]:
        subject, sid = key
        readings.sort(key=lambda r: r.rid)
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
                    yield self.reject(r.ref, f"study {sid}: {e}")
                    for r2 in readings:
                        if r2 is not r:
                            yield self.reject(r2.ref, f"reading {r2.rid}: its study {sid} has an unreadable image")
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
        transcripts: list[tuple[str, str]] = []
        used: list[_Reading] = []
        for r in readings:
            got = self._reading(r, images[r.dicom], scales.get(r.dicom))
            if isinstance(got, Reject):
                yield got
                continue
            labs, bxs, chest, text, rnotes, rej, rother, rcerts, rlow = got
            low += rlow
            yield from rej
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
        if not used:
            return
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
            meta["report_reading"] = transcripts[0][0]
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

    def _find_image(self, subject: int, sid: int, dicom: str) -> str | None:
        s = str(subject)
        for root in self._roots:
            base = f"{root}/p{s[:2]}/p{s}/s{sid}/{dicom}"
            for ext in (".jpg", ".dcm", ".png"):
                if self._dirs.exists(base + ext):
                    return base + ext
        return None

    def _reading(self, r: _Reading, im: Image, scale: tuple[float, float] | None) -> Any:
        """(labels, boxes, chest box, transcription, notes, ellipse rejects, other text, certainty
        notes) of one reading, or a Reject for the whole reading."""
        rid = r.rid
        labels: list[Label] = []
        other = ""
        certs: list[str] = []
        dicom = r.dicom
        for (name, kind, fids), raw in zip(r.names, r.values):
            if kind == 0:
                cert = _CERT.get(raw)  # the common case: one digit, no blanks
                if cert is None:
                    v = raw.strip()
                    if not v:
                        continue  # NaN written as "": not given
                    try:
                        cert = int(float(v))
                    except ValueError:
                        cert = -1
                    if not 0 <= cert <= 5:
                        return self.reject(r.ref, f"reading {rid}: {name} certainty {v!r} is not 0-5")
                if cert:
                    val = 1 if cert >= self.present_from else self._below_value
                    certs.append(f"{rid} {name}: {cert} {self._words[cert]}")
                else:
                    val = 0
            else:
                v = raw.strip()
                if not v:
                    continue
                if kind == 2:
                    other = v
                    continue
                val = _TRUE.get(v.lower())  # type: ignore[assignment]
                if val is None:
                    return self.reject(r.ref, f"reading {rid}: {name} value {v!r} is not True/False")
            labels.append(Label(scheme="reflacx", name=name, value=val, findings=fids, reader=rid, image_id=dicom))
        folder = r.folder
        ell = _read_text(folder + os.sep + ELLIPSE_FILE)
        if ell is None:
            why = "reading folder missing" if not os.path.isdir(folder) else f"{ELLIPSE_FILE} missing from its folder"
            return self.reject(r.ref, f"reading {rid}: {why}")
        chest_text = _read_text(folder + os.sep + CHEST_FILE)
        if chest_text is None:
            return self.reject(r.ref, f"reading {rid}: {CHEST_FILE} missing from its folder")
        text = None
        if not r.discarded:
            text = _read_text(folder + os.sep + TRANSCRIPT_FILE)
            if text is None:
                return self.reject(r.ref, f"reading {rid}: {TRANSCRIPT_FILE} missing (eye-tracking data not discarded)")
            if isinstance(text, Reject):
                return text
            text = text.strip()
            if not text:
                return self.reject(r.ref, f"reading {rid}: empty {TRANSCRIPT_FILE}")
        if isinstance(ell, Reject) or isinstance(chest_text, Reject):
            return ell if isinstance(ell, Reject) else chest_text
        chest = self._chest(r, chest_text, scale)
        if isinstance(chest, Reject):
            return chest
        got = self._ellipses(r, ell, im, scale)
        if isinstance(got, Reject):
            return got
        boxes, notes, rejects, low = got
        return labels, boxes, chest, text, notes, rejects, other, certs, low

    def _chest(self, r: _Reading, text: str, scale: tuple[float, float] | None) -> Box | Reject:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        ref = f"{r.folder}{os.sep}{CHEST_FILE}"
        if len(lines) != 2:
            return self.reject(ref, f"reading {r.rid}: {CHEST_FILE} has {len(lines) - 1} data rows, expected 1")
        cols = self._chest_cols.get(lines[0], [])
        if cols == []:
            head = [h.strip() for h in lines[0].split(",")]
            cols = self._chest_cols[lines[0]] = ([head.index(k) for k in ("xmin", "ymin", "xmax", "ymax")]
                                                if all(k in head for k in ("xmin", "ymin", "xmax", "ymax")) else None)
        try:
            if cols is None:
                raise ValueError("header")
            cells = lines[1].split(",")
            x1, y1, x2, y2 = (float(cells[i]) for i in cols)
        except (ValueError, IndexError):
            return self.reject(ref, f"reading {r.rid}: {CHEST_FILE} is not xmin,ymin,xmax,ymax numbers")
        if not (x1 < x2 and y1 < y2):
            return self.reject(ref, f"reading {r.rid}: inverted chest box [{x1}, {y1}, {x2}, {y2}]")
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

    def _ellipses(self, r: _Reading, text: str, im: Image, scale: tuple[float, float] | None) -> Any:
        lines = text.splitlines()
        path = f"{r.folder}{os.sep}{ELLIPSE_FILE}"
        if not lines:
            return self.reject(path, f"reading {r.rid}: empty {ELLIPSE_FILE} (no header)")
        cols = self._ellipse_header(r, lines[0])
        if isinstance(cols, str):
            return self.reject(path, f"reading {r.rid}: {cols}")
        (ix1, _), (iy1, _), (ix2, _), (iy2, _), (ic, _) = cols[:5]
        labcols = cols[5:]
        names = self._ellipse_names.get(lines[0])
        if names is None:
            names = self._ellipse_names[lines[0]] = [h.strip() for h in lines[0].split(",")]
        w, h = r.sx, r.sy
        boxes: list[Box] = []
        notes: list[str] = []
        rejects: list[Reject] = []
        low: list[str] = []
        ncols = len(names)
        for ln, line in enumerate(lines[1:], start=2):
            if not line or line.isspace():
                continue
            ref = path + ":" + str(ln)
            cells = line.split(",")
            if len(cells) != ncols:
                rejects.append(self.reject(ref, f"reading {r.rid}: ellipse row has {len(cells)} cells, header has {ncols}"))
                continue
            try:
                x1, y1, x2, y2 = float(cells[ix1]), float(cells[iy1]), float(cells[ix2]), float(cells[iy2])
            except ValueError:
                rejects.append(self.reject(ref, f"reading {r.rid}: non-numeric ellipse {[cells[ix1], cells[iy1], cells[ix2], cells[iy2]]}"))
                continue
            cs = cells[ic]
            cert = _CERT.get(cs)  # type: ignore[assignment]
            if cert is None:
                try:
                    cert = int(float(cs))
                except ValueError:
                    cert = 0
            if not 1 <= cert <= 5:
                rejects.append(self.reject(ref, f"reading {r.rid}: ellipse certainty {cs!r} is not 1-5"))
                continue
            fids: list[str] = []
            chosen: list[str] = []
            for i, lf in labcols:
                c = cells[i]
                if c == "False":  # the common case first: most label columns of an ellipse
                    continue
                v = 1 if c == "True" else _TRUE.get(c.strip().lower())
                if v is None:
                    rejects.append(self.reject(ref, f"reading {r.rid}: ellipse label {names[i]!r} value {cells[i]!r} is not True/False"))
                    chosen = ["!"]
                    break
                if v:
                    chosen.append(names[i])
                    fids += [f for f in lf if f not in fids]
            if chosen == ["!"]:
                continue
            if not chosen:
                rejects.append(self.reject(ref, f"reading {r.rid}: ellipse has no label selected"))
                continue
            if not fids:
                rejects.append(self.reject(ref, f"reading {r.rid}: ellipse labelled only {', '.join(chosen)} (free text, no finding)"))
                continue
            if not (x1 < x2 and y1 < y2):
                rejects.append(self.reject(ref, f"reading {r.rid}: inverted or empty ellipse [{x1}, {y1}, {x2}, {y2}]"))
                continue
            ellipse = [(x1 + x2) / 2, (y1 + y2) / 2, (x2 - x1) / 2, (y2 - y1) / 2]
            bx1, by1, bx2, by2 = x1, y1, x2, y2
            if w and h and (x1 < 0 or y1 < 0 or x2 > w or y2 > h):
                bx1, by1, bx2, by2 = max(0.0, x1), max(0.0, y1), min(float(w), x2), min(float(h), y2)
                if bx2 - bx1 < 1 or by2 - by1 < 1:
                    rejects.append(self.reject(ref, f"reading {r.rid}: ellipse [{x1:g}, {y1:g}, {x2:g}, {y2:g}] lies outside the {w}x{h} image"))
                    continue
                notes.append(f"{r.rid} line {ln}: ellipse crosses the image border, box clipped")
            if scale:
                sx, sy = scale
                bx1, bx2, by1, by2 = bx1 * sx, bx2 * sx, by1 * sy, by2 * sy
                ellipse = [ellipse[0] * sx, ellipse[1] * sy, ellipse[2] * sx, ellipse[3] * sy]
            if cert < self.present_from and self._below_value == 0:
                # the reader placed it but rated it unlikely: with below_threshold "absent" it is no
                # lesion box (answers would count it as a mark); kept here so nothing is lost
                low.append(f"{r.rid} {'/'.join(chosen)} certainty {cert} at [{bx1:g}, {by1:g}, {bx2:g}, {by2:g}]")
                continue
            for fid in fids:
                boxes.append(Box(image_id=r.dicom, x1=bx1, y1=by1, x2=bx2, y2=by2, source="expert", reader=r.rid,
                                 label=fid, ellipse=list(ellipse), reader_certainty=cert))
        return boxes, notes, rejects, low


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


def _read_text(path: str) -> str | Reject | None:
    """A small file's text (None when missing). Read as bytes and decoded once: the files are
    small, and one open + read is the whole cost of a reading."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        chunks = []
        while True:
            b = os.read(fd, 1 << 16)
            if not b:
                break
            chunks.append(b)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    try:
        return data.decode("utf-8-sig") if data[:3] == b"\xef\xbb\xbf" else data.decode("utf-8")
    except UnicodeDecodeError as e:
        return Reject(source="reflacx", ref=path, reason=f"not UTF-8 text ({e.reason} at byte {e.start})")


__all__ = ["ReflacxSource", "certainty_words", "reflacx_config"]
