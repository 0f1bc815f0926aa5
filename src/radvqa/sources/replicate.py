"""A real dataset replicated to N positions with new study and patient ids: scale tests and
benchmarks of the whole chain on real report text (``benchmarks/scale.py openi``). Not a dataset
for training: the same reports repeat.

    build(BuildOptions(source="radvqa.sources.replicate:ReplicatedOpenI", inputs=[tgz], studies=N))

Base-major order: the base source's M records (studies and rejects, in its own order) share the N
positions, record ``r`` taking ``N // M`` of them (one more for the first ``N % M``), its copies
side by side; copy 0 keeps the original ids, copy ``k`` appends ``~rk`` to the study and patient ids.
A rejected record is rejected once (its copy 0) and its other positions are empty, so a base with
rejects gives a few fewer than N studies.

Why base-major: a consecutive range of positions (one read part, ``plan_parts``) then needs only
a consecutive range of base records, which the reader asks of the base source's own parts
(``iter_part``). With copies interleaved (position ``j`` = record ``j % M``), every reader parsed the
whole base: 1.8-1.9 s per reader on the 16-core device (session 11), each of 32 readers repeating
the parse one reader does once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from radvqa.model import Reject, Study
from radvqa.sources.base import SourceError


def span(r: int, m: int, n: int) -> tuple[int, int]:
    """Positions [start, end) of base record ``r`` of ``m`` among ``n`` positions."""
    q, extra = divmod(n, m)
    start = r * q + min(r, extra)
    return start, start + q + (1 if r < extra else 0)


def record_at(j: int, m: int, n: int) -> int:
    """The base record at position ``j`` (inverse of ``span``)."""
    q, extra = divmod(n, m)
    cut = extra * (q + 1)  # the first ``extra`` records take q + 1 positions each
    return j // (q + 1) if j < cut else extra + (j - cut) // q


class Replicated:
    name = "replicated"
    base = ""
    description = "a source's records replicated with new ids up to --studies N positions (benchmarks)"

    def __init__(self, studies: int = 1000, seed: int = 0) -> None:
        self.studies = studies
        self.seed = seed

    def _base_source(self) -> Any:
        from radvqa.sources import get_source

        src = get_source(self.base)
        if not hasattr(src, "count_records") or not hasattr(src, "iter_part"):
            raise SourceError(f"{self.base}: cannot be replicated (needs count_records and iter_part)")
        return src

    def _count(self, inputs: list[Path]) -> int:
        m = self._base_source().count_records(inputs)
        if not m:
            raise SourceError(f"{self.base}: no records in {', '.join(map(str, inputs))}")
        return int(m)

    def iter_records(self, inputs: Iterable[Path | str], *, ontology: Any = None,
                     limit: int | None = None) -> Iterator[Study | Reject]:
        paths = [Path(p) for p in inputs]
        n = self.studies if limit is None else min(self.studies, limit)
        yield from self.iter_part(paths, {"lo": 0, "hi": n, "n": n, "m": self._count(paths)}, ontology=ontology)

    def plan_parts(self, inputs: Iterable[Path | str], n_parts: int, *, ontology: Any = None,
                   limit: int | None = None) -> list[dict[str, int]]:
        paths = [Path(p) for p in inputs]
        n = self.studies if limit is None else min(self.studies, limit)
        m = self._count(paths)  # listing the base (decompressed, not parsed): the driver never parses it
        k = max(1, min(n_parts, n))
        return [{"lo": n * i // k, "hi": n * (i + 1) // k, "n": n, "m": m} for i in range(k)]

    def iter_part(self, inputs: Iterable[Path | str], part: dict[str, int], *,
                  ontology: Any = None) -> Iterator[Study | Reject]:
        lo, hi, n, m = (int(part[k]) for k in ("lo", "hi", "n", "m"))
        if hi <= lo or m <= 0:
            return
        r_lo, r_hi = record_at(lo, m, n), record_at(hi - 1, m, n)
        # the last record's part is open-ended: it also carries a damaged archive's closing reject
        spec = {"lo": r_lo, "hi": r_hi + 1 if r_hi + 1 < m else None}
        base = self._base_source()
        r = r_lo
        for rec in base.iter_part([Path(p) for p in inputs], spec, ontology=ontology):
            if r >= m:  # past the records counted (a damaged archive's closing reject): once
                if isinstance(rec, Reject):
                    yield rec
                r += 1
                continue
            start, end = span(r, m, n)
            r += 1
            if isinstance(rec, Reject):
                if lo <= start < hi:
                    yield rec
                continue
            for j in range(max(lo, start), min(hi, end)):
                k = j - start
                yield rec if k == 0 else msgspec.structs.replace(
                    rec, id=f"{rec.id}~r{k}", patient_id=f"{rec.patient_id}~r{k}")


class ReplicatedOpenI(Replicated):
    name = "openi-replicated"
    base = "openi"
