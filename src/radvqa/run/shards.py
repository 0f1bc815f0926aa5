"""Shard planning: which study goes to which shard, and the on-disk spill between reading sources and
processing shards.

Why a spill: the ``diff`` strategy needs a patient's previous study, so all studies of one patient
must be processed by one worker, in time order. Sources stream records in their own order, so the
readers route every study to one of ``N_BUCKETS`` bucket files by a stable hash of its patient id
(blake2b, not Python's salted ``hash()``), then a shard = the buckets ``b`` with ``b % n_shards ==
shard``. ``n_shards`` is a power of two (so it divides ``N_BUCKETS``) chosen once the study count is
known; it never depends on the number of workers, so 1 worker, N workers and Ray give the same files.
Each reader (one part of the sources, see run/reader.py) writes its own bucket files; memory in a
reader is flat (a 64 KiB buffer per bucket).
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
# 1,000 (was 2,000): half the decoded studies a worker holds and half the end-of-phase tail; on the
# 16-core device, 16 workers on synthetic 200k peaked at an RSS sum of 1,877-1,886 MiB against
# 2,058-2,061 and ran 39.9/44.4 s against 43.2/44.2 s (alternating; docs/scale-out.md, session 8)
DEFAULT_SHARD_STUDIES = 1_000

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
    """Routes one reader's studies to its bucket files (length-prefixed msgpack).

    Each reader (a part of the sources) writes its own folder ``spill/pNNNN/`` so readers never
    share a file; a shard later reads its buckets from every part, in part order. Records are
    buffered per bucket and appended in blocks of ``block`` bytes (open, write, close), so no
    bucket file stays open: no open-file limit to hit (256 on macOS), no handle reopened per
    record, and at most ``N_BUCKETS * block`` bytes (16 MiB) buffered."""

    def __init__(self, folder: Path, block: int = 1 << 16) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._bufs: list[bytearray] = [bytearray() for _ in range(N_BUCKETS)]
        self._started = [False] * N_BUCKETS
        self._enc = msgspec.msgpack.Encoder()
        self.counts = [0] * N_BUCKETS
        self.block = block

    def add(self, study: Study) -> None:
        b = bucket_of(study.patient_id)
        buf = self._bufs[b]
        n = len(buf)
        buf += b"\0\0\0\0"
        self._enc.encode_into(study, buf, -1)
        _LEN.pack_into(buf, n, len(buf) - n - 4)
        self.counts[b] += 1
        if len(buf) >= self.block:
            self._flush(b)

    def _flush(self, b: int) -> None:
        buf = self._bufs[b]
        with open(self.folder / f"b{b:03d}.bin", "ab" if self._started[b] else "wb") as f:
            f.write(buf)
        self._started[b] = True
        buf.clear()

    def close(self) -> None:
        for b in range(N_BUCKETS):
            if self._bufs[b]:
                self._flush(b)

    def abort(self) -> None:
        for buf in self._bufs:
            buf.clear()


def part_dir(spill_dir: Path, part: int) -> Path:
    return spill_dir / f"p{part:04d}"


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


def shard_spill_files(spill_dir: Path, shard: int, n_shards: int, n_parts: int = 1) -> Iterator[Path]:
    """The bucket files of one shard, part after part (each bucket file belongs to one shard)."""
    for b in buckets_of_shard(shard, n_shards):
        for part in range(n_parts):
            yield part_dir(spill_dir, part) / f"b{b:03d}.bin"


def load_shard_studies(spill_dir: Path, shard: int, n_shards: int, n_parts: int = 1) -> list[Study]:
    """All studies of one shard, sorted by (patient, time, id). A bucket's records are read part
    after part: parts are consecutive pieces of the sources, so records with equal sort keys keep
    their source order (the first of duplicate ids wins), however many readers there were."""
    studies: list[Study] = []
    for p in shard_spill_files(spill_dir, shard, n_shards, n_parts):
        if p.exists():
            studies.extend(read_bucket(p))
    studies.sort(key=study_sort_key)
    return studies
