"""Writes tiny but real DICOM files (explicit VR little endian, 8-bit MONOCHROME pixels) with pydicom,
for the vindr-cxr / dicom / mimic adapter tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pydicom
from pydicom.dataset import FileDataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian, SecondaryCaptureImageStorage, generate_uid


def write_dicom(
    path: Path,
    *,
    rows: int = 32,
    cols: int = 24,
    study_uid: str | None = None,
    sop_uid: str | None = None,
    patient_id: str = "P1",
    view: str = "PA",
    modality: str = "DX",
    photometric: str = "MONOCHROME2",
    study_date: str = "20200102",
    study_time: str = "101500",
    spacing: tuple[float, float] = (0.2, 0.2),
) -> Path:
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = SecondaryCaptureImageStorage
    meta.MediaStorageSOPInstanceUID = sop_uid or generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = FileDataset(str(path), {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID = SecondaryCaptureImageStorage
    ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
    ds.StudyInstanceUID = study_uid or generate_uid()
    ds.SeriesInstanceUID = generate_uid()
    ds.PatientID = patient_id
    ds.StudyDate = study_date
    ds.StudyTime = study_time
    ds.Modality = modality
    ds.ViewPosition = view
    ds.Rows, ds.Columns = rows, cols
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = photometric
    ds.BitsAllocated = ds.BitsStored = 8
    ds.HighBit = 7
    ds.PixelRepresentation = 0
    ds.PixelSpacing = list(spacing)
    ds.PixelData = np.zeros((rows, cols), dtype=np.uint8).tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    ds.save_as(path, enforce_file_format=True)
    assert pydicom.dcmread(path).Rows == rows
    return path
