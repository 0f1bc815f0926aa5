"""A real dataset replicated to N studies with new study and patient ids: scale tests and
benchmarks of the whole chain on real report text (``benchmarks/scale.py openi``). Not a dataset
for training: the same reports repeat.

    build(BuildOptions(source="radvqa.sources.replicate:ReplicatedOpenI", inputs=[tgz], studies=N))

Position ``j`` of the output is base study ``j % B`` in replica ``j // B`` (replica 0 keeps the
original ids; replica ``k`` appends ``~rk`` to the study and patient ids). The base source's own
rejects come first, once. The source splits into position ranges (``plan_parts``) without reading
the base, and each reader parses the base once per process.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from radvqa.model import Reject, Study
from radvqa.sources.base import SourceError

_BASE: dict[tuple[str, tuple[str, ...]], tuple[list[Study], list[Reject]]] = {}


def release() -> None:
    """Forget the parsed base (the read phase is over in this process)."""
    _BASE.clear()


class Replicated:
    name = "replicated"
    base = ""
    description = "a source's studies replicated with new ids up to --studies N (benchmarks)"

    def __init__(self, studies: int = 1000, seed: int = 0) -> None:
        self.studies = studies
        self.seed = seed

    def _base(self, inputs: list[Path], ontology: Any) -> tuple[list[Study], list[Reject]]:
        key = (self.base, tuple(str(p) for p in inputs))
        got = _BASE.get(key)
        if got is None:
            from radvqa.sources import get_source

            studies: list[Study] = []
            rejects: list[Reject] = []
            for r in get_source(self.base).iter_records(inputs, ontology=ontology):
                (studies if isinstance(r, Study) else rejects).append(r)
            if not studies:
                raise SourceError(f"{self.base}: no studies read from {', '.join(map(str, inputs))}")
            _BASE.clear()  # one base per process
            got = _BASE[key] = (studies, rejects)
        return got

    def iter_records(self, inputs: Iterable[Path | str], *, ontology: Any = None,
                     limit: int | None = None) -> Iterator[Study | Reject]:
        n = self.studies if limit is None else min(self.studies, limit)
        yield from self.iter_part(inputs, {"lo": 0, "hi": n}, ontology=ontology)

    def plan_parts(self, inputs: Iterable[Path | str], n_parts: int, *, ontology: Any = None,
                   limit: int | None = None) -> list[dict[str, int]]:
        n = self.studies if limit is None else min(self.studies, limit)
        k = max(1, min(n_parts, n))
        return [{"lo": n * i // k, "hi": n * (i + 1) // k} for i in range(k)]

    def iter_part(self, inputs: Iterable[Path | str], part: dict[str, int], *,
                  ontology: Any = None) -> Iterator[Study | Reject]:
        base, rejects = self._base([Path(p) for p in inputs], ontology)
        lo, hi = int(part["lo"]), int(part["hi"])
        if lo == 0:
            yield from rejects
        b = len(base)
        for j in range(lo, hi):
            k, s = divmod(j, b)
            s = base[s]
            if k == 0:
                yield s
            else:
                yield msgspec.structs.replace(s, id=f"{s.id}~r{k}", patient_id=f"{s.patient_id}~r{k}")


class ReplicatedOpenI(Replicated):
    name = "openi-replicated"
    base = "openi"
