"""The sample bundled in the package (``radvqa/data/sample``): real OpenI reports and NIH
ChestX-ray14 images with labels and expert boxes. Source ``sample`` = the ``openi`` adapter over
``sample/openi`` followed by the ``nih-cxr14`` adapter over ``sample/nih-cxr14``; each study keeps
its own source name (``openi`` / ``nih-cxr14``). See the folder's PROVENANCE.md and LICENSE.txt.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from radvqa.sources.base import Record, Source
from radvqa.sources.nih import NIHSource
from radvqa.sources.openi import OpenISource
from radvqa.sources import SOURCES


def sample_root() -> Path:
    return Path(str(resources.files("radvqa").joinpath("data/sample")))


def sample_inputs() -> list[Path]:
    root = sample_root()
    return [root / "openi", root / "nih-cxr14"]


@SOURCES.register("sample")
class SampleSource(Source):
    name = "sample"
    counts_reads = True
    description = "the bundled sample: 40 OpenI reports + NIH ChestX-ray14 images, labels and boxes"

    def iter_records(
        self, inputs: Iterable[Path | str] | None = None, *, ontology: Any = None, limit: int | None = None
    ) -> Iterator[Record]:
        paths = [Path(p) for p in inputs] if inputs else sample_inputs()
        return super().iter_records(paths, ontology=ontology, limit=limit)

    def _records(self, inputs: list[Path], onto: Any, limit: int | None) -> Iterator[Record]:
        openi = [p for p in inputs if p.name == "openi"]
        nih = [p for p in inputs if p.name != "openi"]
        for sub, paths in ((OpenISource(), openi), (NIHSource(), nih)):
            if paths:
                sub.counts = self.counts  # the parts count their records into this pass
                yield from sub._records(paths, onto, limit)
