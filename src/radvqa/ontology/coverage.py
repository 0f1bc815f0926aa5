"""How much of a real label source the ontology maps: OpenI MeSH ``major`` codes of the IU X-ray
reports (``NLMCXR_reports.tgz`` or a directory of its XML files)."""

from __future__ import annotations

import re
import tarfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import msgspec

from radvqa.ontology.core import Ontology

_MAJOR = re.compile(r"<major>(.*?)</major>", re.S)
# "No Indexing" says the report was not indexed: neither a finding nor "normal"
NOT_A_CODE = {"no indexing"}


class Coverage(msgspec.Struct, kw_only=True):
    reports: int
    reports_fully_mapped: int
    codes: int
    codes_mapped: int
    unmapped: list[tuple[str, int]]  # "Heading/first qualifier" -> count, most frequent first

    @property
    def code_rate(self) -> float:
        return self.codes_mapped / self.codes if self.codes else 0.0


def _iter_xml(path: Path) -> Iterator[tuple[str, str]]:
    if path.is_dir():
        for p in sorted(path.rglob("*.xml")):
            yield str(p), p.read_text(encoding="utf-8", errors="replace")
        return
    with tarfile.open(path) as tar:
        for m in sorted((m for m in tar.getmembers() if m.isfile() and m.name.endswith(".xml")), key=lambda m: m.name):
            f = tar.extractfile(m)
            if f is not None:
                yield m.name, f.read().decode("utf-8", errors="replace")


def openi_mesh_coverage(onto: Ontology, path: str | Path) -> Coverage:
    """Map every MeSH major code of every report; count what maps."""
    reports = full = codes = mapped = 0
    missing: Counter[str] = Counter()
    for _, text in _iter_xml(Path(path)):
        reports += 1
        ok = True
        for code in _MAJOR.findall(text):
            if " ".join(code.lower().split()) in NOT_A_CODE:
                continue
            codes += 1
            try:
                onto.map_code("openi_mesh", code)
                mapped += 1
            except KeyError:
                ok = False
                parts = [p.strip() for p in code.split("/")]
                missing["/".join(parts[:2])] += 1
        full += ok
    return Coverage(reports=reports, reports_fully_mapped=full, codes=codes, codes_mapped=mapped,
                    unmapped=missing.most_common())
