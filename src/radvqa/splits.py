"""Splits: the dataset's official split where it has one, else a deterministic patient-level split;
and the leakage check the build runs (a patient or an image in two splits fails the build).

``assign_split`` hashes (seed, patient id) with BLAKE2b -- never Python's ``hash()``, which differs
between processes -- so every worker puts a patient in the same split.
"""

from __future__ import annotations

import hashlib
from typing import Iterable

SPLITS = ("train", "validation", "test")
_ALIASES = {
    "train": "train", "training": "train",
    "val": "validation", "valid": "validation", "validate": "validation", "validation": "validation",
    "dev": "validation",
    "test": "test", "testing": "test",
}


class LeakageError(ValueError):
    """A patient or an image appears in more than one split."""


def normalize_split(name: str) -> str:
    """Official split names mapped onto train / validation / test; unknown names kept (lower-case)."""
    key = name.strip().lower()
    return _ALIASES.get(key, key)


def assign_split(patient_id: str, seed: int = 0, ratios: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> str:
    """Deterministic patient-level split from a stable hash of (seed, patient id)."""
    if len(ratios) != 3 or any(r < 0 for r in ratios) or sum(ratios) <= 0:
        raise ValueError(f"split ratios must be three non-negative numbers, got {ratios!r}")
    h = hashlib.blake2b(f"{seed}\x1f{patient_id}".encode(), digest_size=8).digest()
    u = int.from_bytes(h, "big") / 2.0**64
    total = sum(ratios)
    if u < ratios[0] / total:
        return "train"
    if u < (ratios[0] + ratios[1]) / total:
        return "validation"
    return "test"


def check_leakage(rows: Iterable[tuple[str, Iterable[str], str]]) -> None:
    """Raise ``LeakageError`` if a patient or image id occurs in two splits.

    ``rows``: (patient_id, image_ids, split) per QA row or per study."""
    patient_split: dict[str, str] = {}
    image_split: dict[str, str] = {}
    bad_patients: dict[str, set[str]] = {}
    bad_images: dict[str, set[str]] = {}
    for pid, image_ids, split in rows:
        prev = patient_split.setdefault(pid, split)
        if prev != split:
            bad_patients.setdefault(pid, {prev}).add(split)
        for iid in image_ids:
            prev = image_split.setdefault(iid, split)
            if prev != split:
                bad_images.setdefault(iid, {prev}).add(split)
    if bad_patients or bad_images:
        msg = []
        if bad_patients:
            ex = ", ".join(f"{p} in {sorted(s)}" for p, s in sorted(bad_patients.items())[:5])
            msg.append(f"{len(bad_patients)} patient(s) in several splits (e.g. {ex})")
        if bad_images:
            ex = ", ".join(f"{i} in {sorted(s)}" for i, s in sorted(bad_images.items())[:5])
            msg.append(f"{len(bad_images)} image(s) in several splits (e.g. {ex})")
        raise LeakageError("split leakage: " + "; ".join(msg))
