"""Eye Gaze Data for Chest X-rays (Karargyris et al., Scientific Data 2021; PhysioNet egd-cxr 1.0.0).

Inputs: the dataset folder, or its files: ``master_sheet.csv`` (required), ``bounding_boxes.csv``,
``fixations.csv``, ``audio_segmentation_transcripts/<dicom_id>/transcript.json``; optionally the
MIMIC-CXR(-JPG) image root (``files/pXX/pN/sM/<dicom_id>.jpg``). Layout and traps:
``../shared/FORMATS.md`` section 2 (UNVERIFIED facts there are noted here).

Study = the MIMIC study of the image (master sheet ``study_id``): ``eye-gaze:<study_id>``, patient
``eye-gaze:<patient_id>`` (one row per image; images of one study are grouped). No split is given
(the paper's 80/10/10 split is random, not released): ``split`` stays unset.

- Labels: the condition columns ``Normal``, ``CHF``, ``pneumonia`` (0/1) through the ontology's
  ``eye_gaze`` scheme (Normal -> no finding), reader ``eye-gaze``. Whether the three are mutually
  exclusive is UNVERIFIED, so each is taken as written. The finding flags and CheXpert ``*__chx``
  columns are not read.
- Region boxes: ``bounding_boxes.csv`` rows ``dicom_id, bbox_name, x1, x2, y1, y2`` -- note the
  column order x1, x2, y1, y2 (columns are found by name, so any order works) -- in original DICOM
  pixels, label = the ontology region named by ``bbox_name`` (``region_for_term``). The full list of
  names is UNVERIFIED: a name the ontology does not know, an inverted or non-numeric box, is a
  Reject line; boxes of a dicom_id not in the master sheet are one Reject per dicom_id.
- Report: ``transcript.json`` ``full_text`` (else its ``time_stamped_text`` phrases joined), after an
  ``INDICATION:`` section made of ``cxr_exam_indication`` when the sheet has one (free text that can
  span lines: read with a real CSV parser). The phrase timestamps are counted in
  ``meta["transcript_phrases"]``. When the transcripts folder is given, a missing or unreadable
  transcript rejects its image's study.
- ``fixations.csv``: counted per image (``meta["fixations"]``); rows whose DICOM_ID is not in the
  master sheet are calibration images (validation.py ``calibration_statistics``): skipped, one Reject
  line per calibration DICOM_ID with its row count. ``eye_gaze.csv`` (1.5 M raw samples) and the
  audio/mask files are not read.
Image size: from the image file when a MIMIC root holds it; the sheet has no size (boxes are then
kept unchecked).

Memory: the master sheet and the box table are held, not streamed, by decision: fixations.csv
can only tell calibration rows apart knowing every sheet dicom_id, and an image's box rows need
not be contiguous, so streaming would need an external sort of three tables. Their size is fixed
by the release (1,083 images, 18,405 box rows): at that size the read's traced peak is 4.8 MiB
(1.9 MiB of it the sheet; tests/test_sources_reflacx_eyegaze.py bounds it at 8 MiB), and a study's
rows are released as it is emitted. fixations.csv (the large table) is streamed: one count per image.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from radvqa.sources import SOURCES
from radvqa.model import Box, Image, Label, Reject, Study
from radvqa.sources.base import (
    ROW_STAGE,
    DirCache,
    LabelMapper,
    Record,
    Source,
    SourceError,
    UnknownLabel,
    find_inputs,
    fnum,
    header_index,
    image_size,
    read_csv_rows,
    region_for_term,
)

CONDITIONS = ("Normal", "CHF", "pneumonia")
TRANSCRIPTS = "audio_segmentation_transcripts"
_MASTER = {"dicom": ("dicom_id",), "path": ("path",), "study": ("study_id",), "patient": ("patient_id", "subject_id")}
_BOX = {"dicom": ("dicom_id",), "name": ("bbox_name",), "x1": ("x1",), "x2": ("x2",), "y1": ("y1",), "y2": ("y2",)}


@SOURCES.register("eye-gaze")
class EyeGazeSource(Source):
    name = "eye-gaze"
    counts_reads = True  # a study group, or a table row that names/joins no study
    description = "Eye Gaze Data for CXR (egd-cxr): master_sheet.csv, bounding_boxes.csv, fixations.csv, transcript.json (+ MIMIC-CXR images)"

    def _records(self, inputs: list[Path], onto: Any, limit: int | None) -> Iterator[Record]:
        masters = find_inputs(inputs, lambda n: n in ("master_sheet.csv", "master_sheet.csv.gz"))
        if not masters:
            raise SourceError("eye-gaze: no master_sheet.csv among the inputs (give the egd-cxr folder)")
        if len(masters) > 1:
            raise SourceError(f"eye-gaze: several master_sheet.csv files given: {', '.join(map(str, masters))}")
        master = masters[0]
        box_tables = find_inputs(inputs, lambda n: n in ("bounding_boxes.csv", "bounding_boxes.csv.gz"))
        fix_tables = find_inputs(inputs, lambda n: n in ("fixations.csv", "fixations.csv.gz"))
        tdirs = [p for p in inputs if p.is_dir() and p.name == TRANSCRIPTS]
        tdirs += [p / TRANSCRIPTS for p in inputs if p.is_dir() and (p / TRANSCRIPTS).is_dir()]
        data_dirs = {t.parent for t in [master, *box_tables, *fix_tables]} | {t.parent for t in tdirs} | set(tdirs)
        self._roots = [str(r / "files" if (r / "files").is_dir() else r) for r in inputs if r.is_dir() and r not in data_dirs]
        self._dirs = DirCache()
        mapper = LabelMapper(onto, "eye_gaze")

        # ---- master sheet: one row per image
        rows = read_csv_rows(master)
        first = next(rows, None)
        if first is None or first[1] is None:
            raise SourceError(f"eye-gaze: {master}: empty or unreadable header")
        header = [h.strip() for h in first[1]]
        c = header_index(header, _MASTER, str(master))
        cond = {k: header.index(k) for k in CONDITIONS if k in header}
        if not cond:
            raise SourceError(f"eye-gaze: {master}: none of the condition columns {', '.join(CONDITIONS)}")
        for k in cond:
            try:
                mapper(k)
            except UnknownLabel as e:
                raise SourceError(f"eye-gaze: {e}") from None
        ind_col = header.index("cxr_exam_indication") if "cxr_exam_indication" in header else None
        # study -> patient, [(dicom, path tail, {label: value}, indication, ref)]
        studies: dict[str, tuple[str, list[tuple[str, str, dict[str, int], str, str]]]] = {}
        dicoms: dict[str, str] = {}  # dicom -> study
        for item in self.table_rows(rows, len(header), master):
            if isinstance(item, Reject):
                self.count_read()  # a master row that joins no study: one record, rejected
                yield item
                continue
            ref, _ln, row = item
            did, sid, pid = row[c["dicom"]].strip(), row[c["study"]].strip(), row[c["patient"]].strip()
            sid = sid[1:] if sid[:1] == "s" else sid
            pid = pid[1:] if pid[:1] == "p" else pid
            if not did or not sid.isdigit() or not pid.isdigit():
                self.count_read()
                yield self.reject(ref, f"dicom_id/study_id/patient_id missing or not numeric ({did!r}, {sid!r}, {pid!r})")
                continue
            if did in dicoms:
                self.count_read()
                yield self.reject(ref, f"dicom_id {did} listed twice in the master sheet")
                continue
            vals: dict[str, int] = {}
            bad = ""
            for k, i in cond.items():
                v = row[i].strip()
                if v == "":
                    continue
                try:
                    f = float(v)
                except ValueError:
                    f = -9.0
                if f not in (0.0, 1.0):
                    bad = f"{k} value {v!r} is not 0 or 1"
                    break
                vals[k] = int(f)
            if bad:
                self.count_read()
                yield self.reject(ref, f"dicom_id {did}: {bad}")
                continue
            st = studies.get(sid)
            if st is None:
                st = studies[sid] = (pid, [])
            elif st[0] != pid:
                self.count_read()
                yield self.reject(ref, f"dicom_id {did}: study {sid} listed under patients {st[0]} and {pid}")
                continue
            dicoms[did] = sid
            ind = row[ind_col].strip() if ind_col is not None else ""
            st[1].append((did, row[c["path"]].strip().replace("\\", "/"), vals, ind, ref))

        # ---- anatomical boxes (whole table grouped by image: ~17 rows an image)
        # (region, x1, y1, x2, y2) per image; no per-row ref string: a bad row is rejected here
        boxes: dict[str, list[tuple[str, float, float, float, float]]] = {}
        box_rejects: list[Reject] = []
        orphans: Counter[str] = Counter()
        orphan_ref: dict[str, str] = {}
        for t in box_tables:
            rows = read_csv_rows(t)
            first = next(rows, None)
            if first is None or first[1] is None:
                raise SourceError(f"eye-gaze: {t}: empty or unreadable header")
            bh = [h.strip() for h in first[1]]
            bc = header_index(bh, _BOX, str(t))
            for item in self.table_rows(rows, len(bh), t):
                if isinstance(item, Reject):
                    box_rejects.append(_as_row(item))
                    continue
                ref, _ln, row = item
                did = row[bc["dicom"]].strip()
                if did not in dicoms:
                    orphans[did] += 1
                    orphan_ref.setdefault(did, ref)
                    continue
                name = row[bc["name"]].strip()
                rid = region_for_term(onto, name)
                if rid is None:
                    box_rejects.append(self.reject_row(ref, f"dicom_id {did}: unknown anatomical structure {name!r}"))
                    continue
                try:
                    x1, x2, y1, y2 = (fnum(row[bc[k]]) for k in ("x1", "x2", "y1", "y2"))
                except ValueError:
                    box_rejects.append(self.reject_row(ref, f"dicom_id {did}: non-numeric box for {name!r}"))
                    continue
                if not (x1 < x2 and y1 < y2):
                    box_rejects.append(self.reject_row(ref, f"dicom_id {did}: inverted or empty box for {name!r} "
                                                        f"(x1 {x1:g}, x2 {x2:g}, y1 {y1:g}, y2 {y2:g})"))
                    continue
                boxes.setdefault(did, []).append((rid, x1, y1, x2, y2))
        yield from box_rejects
        for did in sorted(orphans):
            yield self.reject_row(orphan_ref[did], f"{orphans[did]} bounding box rows of dicom_id {did}, which is not in the master sheet")

        # ---- fixations: counted per image; calibration images (not in the sheet) skipped
        fix: Counter[str] = Counter()
        for t in fix_tables:
            yield from self._fixations(t, dicoms, fix)

        # ---- studies
        for sid in sorted(studies, key=lambda s: (int(studies[s][0]), int(s))):
            pid, ims = studies.pop(sid)
            self.count_read()  # a study group of the master sheet: one record, a Study or its Reject
            yield self._study(sid, pid, ims, boxes, fix, tdirs, mapper, fix_tables)

    def _fixations(self, t: Path, dicoms: dict[str, str], fix: Counter[str]) -> Iterator[Reject]:
        rows = read_csv_rows(t)
        first = next(rows, None)
        if first is None or first[1] is None:
            raise SourceError(f"eye-gaze: {t}: empty or unreadable header")
        col = header_index([h.strip() for h in first[1]], {"dicom": ("DICOM_ID",)}, str(t))["dicom"]
        calib: Counter[str] = Counter()
        first_ref: dict[str, str] = {}
        for ln, row, err in rows:
            if row is None:
                yield self.reject_row(f"{t}:{ln}", err or "unreadable line")
                continue
            if len(row) <= col:
                if any(x.strip() for x in row):
                    yield self.reject_row(f"{t}:{ln}", f"fixation row has {len(row)} cells, no DICOM_ID")
                continue
            did = row[col].strip()
            if did in dicoms:
                fix[did] += 1
            else:
                calib[did] += 1
                first_ref.setdefault(did, f"{t}:{ln}")
        for did in sorted(calib):
            yield self.reject_row(first_ref[did], f"{calib[did]} fixation rows of calibration image {did or '(empty DICOM_ID)'} "
                                              "(DICOM_ID not in the master sheet) skipped")

    def _study(self, sid: str, pid: str, ims: list[tuple[str, str, dict[str, int], str, str]],
               boxes: dict[str, list[Any]], fix: Counter[str], tdirs: list[Path], mapper: LabelMapper,
               fix_tables: list[Path]) -> Record:
        images: list[Image] = []
        labels: list[Label] = []
        rboxes: list[Box] = []
        texts: list[str] = []
        inds: list[str] = []
        meta: dict[str, str] = {}
        phrases = 0
        for did, path, vals, ind, ref in sorted(ims):
            im = Image(id=did, modality="DX")
            f = self._find_image(path, did)
            if f is not None:
                try:
                    im.width, im.height = image_size(Path(f))
                except ValueError as e:
                    return self.reject(ref, f"study {sid}: {e}")
                im.path = f
            images.append(im)
            for k, v in vals.items():
                labels.append(Label(scheme="eye_gaze", name=k, value=v, findings=mapper(k), reader="eye-gaze", image_id=did))
            for rid, x1, y1, x2, y2 in boxes.pop(did, ()):
                rboxes.append(Box(image_id=did, x1=x1, y1=y1, x2=x2, y2=y2, source="region", reader="eye-gaze", label=rid))
            if tdirs:
                got = _transcript(tdirs, did)
                if isinstance(got, str):
                    return self.reject(ref, f"study {sid}: dicom_id {did}: {got}")
                text, n = got
                texts.append(text)
                phrases += n
            if ind and ind not in inds:
                inds.append(ind)
            if fix_tables:
                meta[f"fixations:{did}"] = str(fix.get(did, 0))
        report = None
        if texts:
            body = "\n\n".join(texts)
            report = (f"INDICATION: {' '.join(inds)}\n\nFINDINGS: {body}" if inds else body)
            meta["transcript_phrases"] = str(phrases)
        elif inds:
            meta["indication"] = " ".join(inds)
        return Study(
            id=f"{self.name}:{sid}",
            patient_id=f"{self.name}:{pid}",
            source=self.name,
            images=images,
            report_text=report,
            labels=labels,
            region_boxes=rboxes,
            meta=meta,
        )

    def _find_image(self, path: str, did: str) -> str | None:
        if not self._roots:
            return None
        tail = path.split("files/", 1)[-1] if path else ""
        stem = tail.rsplit(".", 1)[0] if tail else ""
        for root in self._roots:
            for ext in (".jpg", ".dcm", ".png"):
                if stem and self._dirs.exists(f"{root}/{stem}{ext}"):
                    return f"{root}/{stem}{ext}"
        return None


def _as_row(rej: Reject) -> Reject:
    """A bad line of a table whose rows are not studies (boxes): a row reject."""
    return Reject(source=rej.source, ref=rej.ref, reason=rej.reason, stage=ROW_STAGE)


def _transcript(tdirs: list[Path], did: str) -> tuple[str, int] | str:
    """(report text, number of timestamped phrases) of one image, or why it cannot be used."""
    for d in tdirs:
        f = d / did / "transcript.json"
        try:
            data = f.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            continue
        try:
            j = json.loads(data.decode("utf-8-sig"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            return f"transcript.json is not JSON text ({type(e).__name__})"
        if not isinstance(j, dict):
            return "transcript.json is not a JSON object"
        phrases = j.get("time_stamped_text")
        phrases = phrases if isinstance(phrases, list) else []
        text = j.get("full_text")
        if not isinstance(text, str) or not text.strip():
            text = " ".join(str(p.get("phrase", "")).strip() for p in phrases if isinstance(p, dict)).strip()
        if not text:
            return "transcript.json has no full_text and no phrases"
        return text.strip(), len(phrases)
    where = ", ".join(str(d) for d in tdirs)
    return f"transcript {TRANSCRIPTS}/{did}/transcript.json missing" + ("" if len(tdirs) == 1 else f" (looked in {where})")


__all__ = ["EyeGazeSource"]
