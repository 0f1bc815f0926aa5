"""A folder of DICOM files (any layout): studies, patients, views and sizes from the headers.

Each file is read with ``pydicom.dcmread(stop_before_pixels=True)`` (headers only). Files are
grouped into studies by StudyInstanceUID: ``dicom:<StudyInstanceUID>``, patient
``dicom:<PatientID>``; ``study_time`` = StudyDate + StudyTime (ISO 8601). Per image
(SOPInstanceUID): Columns x Rows, ViewPosition, Modality. Study meta records PixelSpacing (or
ImagerPixelSpacing), PhotometricInterpretation (MONOCHROME1 — inverted grey scale — is noted, since
a viewer or model must invert it), and the StudyDescription.

Files considered: ``.dcm``, ``.dicom`` and files without a suffix (common in PACS exports);
``DICOMDIR`` is skipped (it is an index, not an image). A file that is not readable DICOM, or lacks
StudyInstanceUID / SOPInstanceUID / Rows / Columns, is a Reject naming the file; a duplicate
SOPInstanceUID is a Reject. Headers are kept per study in memory until the walk ends (small: a few
hundred bytes per image).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from radvqa.model import Image, Study
from radvqa.sources.base import Record, Source, SourceError, walk_files
from radvqa.sources import SOURCES


@SOURCES.register("dicom")
class DicomSource(Source):
    name = "dicom"
    counts_reads = True
    description = "a folder of DICOM files (headers: study, patient, view, size, modality, spacing)"

    def _records(self, inputs: list[Path], onto: Any, limit: int | None) -> Iterator[Record]:
        import pydicom

        studies: dict[str, dict[str, Any]] = {}
        seen: set[str] = set()
        nfiles = 0
        for f in walk_files(inputs):
            if f.name.upper() == "DICOMDIR" or f.suffix.lower() not in (".dcm", ".dicom", ""):
                continue
            nfiles += 1
            try:
                ds = pydicom.dcmread(f, stop_before_pixels=True)
                # pydicom decodes values lazily: touch every one read below now, so a damaged
                # element (an unknown VR, a bad number) is this file's reject, not a crash later
                raw, ds = ds, _Plain({k: ds.get(k) for k in _FIELDS})
                for k in ("PixelSpacing", "ImagerPixelSpacing"):
                    try:
                        ds.values[k] = raw.get(k)
                    except Exception as e:  # noqa: BLE001 - a bad spacing is a note, the image is fine
                        ds.values[k] = f"unreadable ({type(e).__name__})"
                for k in ("Rows", "Columns"):
                    if ds.get(k) is not None:
                        ds.values[k] = int(ds.values[k])
            except Exception as e:  # pydicom raises many kinds for a broken file
                self.count_read()
                yield self.reject(f, f"unreadable DICOM: {type(e).__name__}: {' '.join(str(e).split())[:200]}")
                continue
            uid = str(ds.get("StudyInstanceUID", "") or "")
            sop = str(ds.get("SOPInstanceUID", "") or "")
            rows, cols = ds.get("Rows"), ds.get("Columns")
            missing = [n for n, v in (("StudyInstanceUID", uid), ("SOPInstanceUID", sop), ("Rows", rows), ("Columns", cols)) if not v]
            if missing:
                self.count_read()
                yield self.reject(f, f"DICOM header lacks {', '.join(missing)}")
                continue
            if sop in seen:
                self.count_read()
                yield self.reject(f, f"duplicate SOPInstanceUID {sop}")
                continue
            seen.add(sop)
            if uid not in studies:
                self.count_read()  # a study = a StudyInstanceUID, counted at its first readable file
            st = studies.setdefault(uid, {"images": [], "ref": str(f), "patient": str(ds.get("PatientID", "") or ""),
                                          "date": str(ds.get("StudyDate", "") or ""), "time": str(ds.get("StudyTime", "") or ""),
                                          "meta": {}})
            view = str(ds.get("ViewPosition", "") or "").upper() or None
            st["images"].append(Image(id=sop, path=str(f), width=int(cols), height=int(rows), view=view,
                                      modality=str(ds.get("Modality", "") or "CR")))
            meta = st["meta"]
            pi = str(ds.get("PhotometricInterpretation", "") or "")
            if pi:
                meta.setdefault("photometric", pi)
                if pi == "MONOCHROME1":
                    meta["photometric_note"] = "MONOCHROME1: inverted grey scale (white = low values)"
            sp = ds.get("PixelSpacing") or ds.get("ImagerPixelSpacing")
            if sp:
                try:
                    meta.setdefault("pixel_spacing_mm", ",".join(f"{float(x):g}" for x in sp))
                except (TypeError, ValueError, OverflowError):  # PixelSpacing "abcd\\efgh"
                    meta.setdefault("pixel_spacing_note", f"unreadable PixelSpacing {str(sp)[:40]!r}: not recorded")
            desc = str(ds.get("StudyDescription", "") or "")
            if desc:
                meta.setdefault("study_description", desc)
        if nfiles == 0:
            raise SourceError("dicom: no .dcm/.dicom (or suffix-less) files under the inputs")
        for uid in sorted(studies, key=lambda u: (studies[u]["patient"], studies[u]["date"], studies[u]["time"], u)):
            st = studies.pop(uid)
            pid = st["patient"] or uid
            if not st["patient"]:
                st["meta"]["patient_note"] = "no PatientID: the study stands for its patient"
            st["images"].sort(key=lambda im: im.id)
            yield Study(
                id=f"dicom:{uid}",
                patient_id=f"dicom:{pid}",
                source=self.name,
                images=st["images"],
                study_time=_iso(st["date"], st["time"]),
                meta=st["meta"],
            )


def _iso(date: str, time: str) -> str | None:
    if len(date) != 8 or not date.isdigit():
        return None
    out = f"{date[:4]}-{date[4:6]}-{date[6:]}"
    t = time.split(".")[0]
    if len(t) == 6 and t.isdigit():
        out += f"T{t[:2]}:{t[2:4]}:{t[4:]}"
    return out


_FIELDS = ("StudyInstanceUID", "SOPInstanceUID", "Rows", "Columns", "PatientID", "StudyDate", "StudyTime",
           "ViewPosition", "Modality", "PhotometricInterpretation", "StudyDescription")


class _Plain:
    """The header values this adapter reads, decoded once (``get`` as on a pydicom Dataset)."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def get(self, key: str, default: Any = None) -> Any:
        v = self.values.get(key)
        return default if v is None else v
