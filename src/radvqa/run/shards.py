"""Shard planning: which study goes to which shard, and the on-disk spill between reading sources and
processing shards.

Why a spill: the ``diff`` strategy needs a patient's previous study, so all studies of one patient
must be processed by one worker, in time order. Sources stream records in their own order, so the
driver routes every study to one of ``N_BUCKETS`` bucket files by a stable hash of its patient id
(blake2b, not Python's salted ``hash()``), then a shard = the buckets ``b`` with ``b % n_shards ==
shard``. ``n_shards`` is a power of two (so it divides ``N_BUCKETS``) chosen once the study count is
known; it never depends on the number of workers, so 1 worker, N workers and Ray give the same files.
Memory in the driver is flat: it holds only the open bucket files.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Iterator
from pathlib import Path

import msgspec

from radvqa.model import Study

N_BUCKETS = 256
DEFAULT_SHARD_STUDIES = 2_000

_LEN = struct.Struct("<I")


def patient_hash(patient_id: str) -> int:
    """Stable 64-bit hash of a patient id (same value in every process, run and machine)."""
    return int.from_bytes(hashlib.blake2b(patient_id.encode("utf-8"), digest_size=8).digest(), "big")


def bucket_of(patient_id: str) -> int:
    return patient_hash(patient_id) % N_BUCKETS


def plan_shards(n_studies: int, shard_studies: int = DEFAULT_SHARD_STUDIES) -> int:
    """Number of shards: the smallest power of two giving <= ``shard_studies`` studies per shard
    on average, between 1 and ``N_BUCKETS``."""
    if n_studies <= 0:
        return 1
    want = max(1, math.ceil(n_studies / max(1, shard_studies)))
    n = 1
    while n < want and n < N_BUCKETS:
        n *= 2
    return n


def buckets_of_shard(shard: int, n_shards: int) -> list[int]:
    return [b for b in range(N_BUCKETS) if b % n_shards == shard]


def study_sort_key(s: Study) -> tuple[str, int, str, str]:
    """Patients in id order; a patient's studies in time order (unknown times last), then by id."""
    return (s.patient_id, 0 if s.study_time is not None else 1, s.study_time or "", s.id)


class SpillWriter:
    """Routes studies to bucket files (length-prefixed msgpack).

    At most ``max_open`` bucket files are open at once (least recently used closed first, reopened
    for append), so a laptop's open-file limit (256 on macOS) is never hit."""

    def __init__(self, folder: Path, max_open: int = 64) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._files: dict[int, object] = {}  # insertion order = recency (LRU)
        self._started: set[int] = set()
        self._enc = msgspec.msgpack.Encoder()
        self.counts = [0] * N_BUCKETS
        self.max_open = max_open

    def add(self, study: Study) -> None:
        b = bucket_of(study.patient_id)
        f = self._files.pop(b, None)
        if f is None:
            if len(self._files) >= self.max_open:
                oldest = next(iter(self._files))
                self._files.pop(oldest).close()  # type: ignore[attr-defined]
            mode = "ab" if b in self._started else "wb"
            f = open(self.folder / f"b{b:03d}.bin", mode, buffering=1 << 16)  # noqa: SIM115
            self._started.add(b)
        self._files[b] = f
        data = self._enc.encode(study)
        f.write(_LEN.pack(len(data)))  # type: ignore[attr-defined]
        f.write(data)  # type: ignore[attr-defined]
        self.counts[b] += 1

    def close(self) -> None:
        for f in self._files.values():
            f.close()  # type: ignore[attr-defined]
        self._files.clear()

    def abort(self) -> None:
        for f in self._files.values():
            try:
                f.close()  # type: ignore[attr-defined]
            except OSError:
                pass
        self._files.clear()


def read_bucket(path: Path) -> Iterator[Study]:
    dec = msgspec.msgpack.Decoder(Study)
    with open(path, "rb") as f:
        data = f.read()
    pos, end = 0, len(data)
    while pos < end:
        (n,) = _LEN.unpack_from(data, pos)
        pos += 4
        if pos + n > end:
            raise ValueError(f"{path}: truncated spill record at byte {pos - 4}")
        yield dec.decode(data[pos : pos + n])
        pos += n


def load_shard_studies(spill_dir: Path, shard: int, n_shards: int) -> list[Study]:
    """All studies of one shard, sorted by (patient, time, id)."""
    studies: list[Study] = []
    for b in buckets_of_shard(shard, n_shards):
        p = spill_dir / f"b{b:03d}.bin"
        if p.exists():
            studies.extend(read_bucket(p))
    studies.sort(key=study_sort_key)
    return studies
