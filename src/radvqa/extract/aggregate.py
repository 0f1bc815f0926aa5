"""Report-level aggregation of sentence mentions into scene-graph observations.

Rules (documented contract of the rules backend):
- one observation per (finding, laterality, regions);
- certainty across mentions of one key: present beats uncertain beats absent, whatever the
  section (an IMPRESSION "no acute disease" does not erase a FINDINGS "small left effusion");
- implicit negatives (from normal statements such as "lungs are clear") never override an explicit
  mention of the same key, and are merged into it as evidence only when they agree;
- laterality comes from the words, else from the sides of the regions (both sides: bilateral);
- a mention without regions joins the observation of the same finding and side that has regions
  ("small right pleural effusion ... small right effusion, new": one observation), when there is
  exactly one such observation;
- attributes (severity, size, change, temporal): the first mention that gives one wins; sizes keep
  the largest; every mention span is kept as evidence, linking the observation to its sentences.
"""

from __future__ import annotations

from radvqa.extract.attributes import AttrValues
from radvqa.model import Observation, Span

_RANK = {"absent": 0, "uncertain": 1, "present": 2}


class _Obs:
    __slots__ = ("finding", "certainty", "laterality", "regions", "severity", "size_mm", "change",
                 "temporal", "evidence", "order", "implicit")

    def __init__(self, finding: str, certainty: str, laterality: str | None, regions: tuple[str, ...],
                 order: int, implicit: bool):
        self.finding = finding
        self.certainty = certainty
        self.laterality = laterality
        self.regions = regions
        self.severity: str | None = None
        self.size_mm: float | None = None
        self.change: str | None = None
        self.temporal: str | None = None
        self.evidence: list[Span] = []
        self.order = order
        self.implicit = implicit


class Aggregator:
    def __init__(self, region_side: dict[str, str | None]):
        self._by_key: dict[tuple[str, str | None, tuple[str, ...]], _Obs] = {}
        self._side = region_side

    def add(self, finding: str, certainty: str, span: Span, v: AttrValues | None, implicit: bool = False) -> None:
        lat = regions = None
        if v is not None:
            lat = v.laterality
            regions = tuple(v.regions)
            if lat is None and regions:
                sides = {self._side.get(r) for r in regions} - {None}
                if len(sides) == 1:
                    lat = sides.pop()
                elif len(sides) > 1:
                    lat = "bilateral"
        key = (finding, lat, regions or ())
        o = self._by_key.get(key)
        if o is None:
            o = self._by_key[key] = _Obs(finding, certainty, lat, regions or (), len(self._by_key), implicit)
        else:
            if implicit and not o.implicit and o.certainty != certainty:
                return  # an implied negative never overrides an explicit statement
            if o.implicit and not implicit:
                o.implicit = False
                o.certainty = certainty  # the explicit statement replaces the implied one
            elif _RANK[certainty] > _RANK[o.certainty]:
                o.certainty = certainty
        if v is not None:
            if o.severity is None:
                o.severity = v.severity
            if v.size_mm is not None:
                o.size_mm = v.size_mm if o.size_mm is None else max(o.size_mm, v.size_mm)
            if o.change is None:
                o.change = v.change
            if o.temporal is None:
                o.temporal = v.temporal
        o.evidence.append(span)

    def _merge_regionless(self) -> list[_Obs]:
        obs = sorted(self._by_key.values(), key=lambda x: x.order)
        with_regions: dict[tuple[str, str | None], list[_Obs]] = {}
        for o in obs:
            if o.regions:
                with_regions.setdefault((o.finding, o.laterality), []).append(o)
        if not with_regions:
            return obs
        out = []
        for o in obs:
            targets = with_regions.get((o.finding, o.laterality)) if not o.regions else None
            if targets is None or len(targets) != 1 or (o.implicit and not targets[0].implicit and o.certainty != targets[0].certainty):
                out.append(o)
                continue
            t = targets[0]
            if _RANK[o.certainty] > _RANK[t.certainty]:
                t.certainty = o.certainty
            t.severity = t.severity or o.severity
            t.change = t.change or o.change
            t.temporal = t.temporal or o.temporal
            if o.size_mm is not None:
                t.size_mm = o.size_mm if t.size_mm is None else max(t.size_mm, o.size_mm)
            t.evidence.extend(o.evidence)
            t.evidence.sort(key=lambda sp: sp.start)
        return out

    def observations(self) -> list[Observation]:
        out = []
        for n, o in enumerate(self._merge_regionless(), 1):
            out.append(Observation(
                id=f"O{n:02d}", finding=o.finding, certainty=o.certainty, laterality=o.laterality,
                regions=list(o.regions), severity=o.severity, size_mm=o.size_mm, change=o.change,
                temporal=o.temporal, evidence=o.evidence, source="report",
            ))
        return out
