"""Attributes of mentions: laterality, regions, severity, size (mm), change, temporal.

Words come from the ontology (regions and their synonyms, modifier tables) plus this area's
``data/attributes.yaml`` (extra words the report language uses). One trie regex finds them all
in a sentence; each attribute then attaches to the nearest mention of its sentence (modifiers
usually precede their noun, "small left effusion"; locations often follow, "opacity in the right
base": both are covered by distance, a comma or clause cue in between costs extra)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from radvqa.extract._trie import trie_regex

KINDS = ("region", "laterality", "severity", "change", "temporal")

# "3.5 cm", "2 x 3 mm", "1.2-cm", "15mm"; the largest dimension is kept.
SIZE_RE = re.compile(
    r"(?<![\w.])(\d{1,3}(?:\.\d+)?)(?:\s*(?:x|by|\u00d7)\s*\d{1,3}(?:\.\d+)?){0,2}\s*-?\s*"
    r"(mm|cm|millimet(?:er|re)s?|centimet(?:er|re)s?)(?!\w)"
)
_UNIT_MM = {"mm": 1.0, "cm": 10.0}


@dataclass(slots=True)
class Attr:
    kind: str
    value: str
    start: int
    end: int


@dataclass(slots=True)
class AttrValues:
    laterality: str | None = None
    regions: list[str] = field(default_factory=list)
    severity: str | None = None
    size_mm: float | None = None
    change: str | None = None
    temporal: str | None = None
    spans: list[tuple[int, int]] = field(default_factory=list)


class AttributeMatcher:
    def __init__(self, region_terms: dict[str, tuple[str, ...]], region_side: dict[str, str | None],
                 modifiers: Any, extra: dict[str, Any]):
        table: dict[str, list[tuple[str, str]]] = {}

        def add(phrase: str, kind: str, value: str) -> None:
            p = " ".join(str(phrase).lower().split())
            if p and (kind, value) not in table.get(p, []):
                table.setdefault(p, []).append((kind, value))

        for term, ids in region_terms.items():
            if len(ids) == 1:
                add(term, "region", ids[0])
        for kind in ("laterality", "severity", "change", "temporal"):
            src = getattr(modifiers, kind, None) or {} if modifiers is not None else {}
            for value, words in src.items():
                for w in words:
                    add(w, kind, value)
        for kind, groups in (extra or {}).items():
            if kind in ("drop", "version"):
                continue
            for value, words in (groups or {}).items():
                for w in words:
                    add(w, kind, value)
        for p in (extra or {}).get("drop", []) or []:
            table.pop(" ".join(str(p).lower().split()), None)
        self.table = {p: tuple(v) for p, v in table.items()}
        self.region_side = region_side
        self.pattern = trie_regex(self.table)

    def find(self, lower: str, start: int, end: int) -> list[Attr]:
        out: list[Attr] = []
        get = self.table.get
        for m in self.pattern.finditer(lower, start, end):
            g = m.group()
            vals = get(g)
            if vals is None:
                vals = get(" ".join(g.split()), ())
            for kind, value in vals:
                out.append(Attr(kind, value, m.start(), m.end()))
        if lower.find("mm", start, end) < 0 and lower.find("cm", start, end) < 0 and lower.find("met", start, end) < 0:
            return out  # no unit word, no size: skip the size regex
        for m in SIZE_RE.finditer(lower, start, end):
            unit = m.group(2)
            factor = 10.0 if unit.startswith("c") else 1.0
            dims = [float(x) for x in re.findall(r"\d{1,3}(?:\.\d+)?", m.group(0)[: m.start(2) - m.start()])]
            out.append(Attr("size", repr(max(dims) * factor), m.start(), m.end()))
        return out


def attach(attrs: list[Attr], mention_spans: list[tuple[int, int]], lower: str) -> list[AttrValues]:
    """Give each attribute to the nearest mention of the sentence; returns one AttrValues per
    mention (same order as ``mention_spans``)."""
    vals = [AttrValues() for _ in mention_spans]
    if not mention_spans:
        return vals
    for a in attrs:
        best = -1
        best_d = 1 << 30
        for i, (ms, me) in enumerate(mention_spans):
            if a.start >= ms and a.end <= me:  # inside the mention ("left lower lobe atelectasis" pattern)
                d = 0
            elif a.end <= ms:  # attribute before the mention
                gap = lower[a.end:ms]
                d = len(gap) + _penalty(gap)
            elif a.start >= me:  # after
                gap = lower[me:a.start]
                d = len(gap) + 4 + _penalty(gap)
            else:
                d = 0
            if d < best_d:
                best, best_d = i, d
        if best < 0 or best_d > 80:
            continue
        v = vals[best]
        if a.kind == "region":
            if a.value not in v.regions:
                v.regions.append(a.value)
        elif a.kind == "size":
            size = float(a.value)
            v.size_mm = size if v.size_mm is None else max(v.size_mm, size)
        elif getattr(v, a.kind) is None:
            setattr(v, a.kind, a.value)
        elif a.kind == "laterality" and getattr(v, a.kind) != a.value:
            v.laterality = "bilateral"
        v.spans.append((a.start, a.end))
    return vals


def _penalty(gap: str) -> int:
    # Crossing a clause boundary makes the attribute much less likely to belong to that mention.
    p = 0
    if "," in gap or ";" in gap:
        p += 25
    if " and " in gap or " with " in gap or " but " in gap:
        p += 15
    return p
