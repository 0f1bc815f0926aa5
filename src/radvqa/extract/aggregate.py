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
- evidence and attributes come only from the mentions that support the final certainty: the
  first supporting mention that gives severity / change / temporal wins, sizes keep the largest
  ("no large effusion ... small effusion" is a small present effusion, not a large one);
- evidence is the mentions that support the final certainty: a present observation never cites
  the sentence that negated the same finding ("lungs are free of airspace disease" is not evidence
  of an opacity stated elsewhere); the IR has no place for dissenting mentions, so they are dropped;
- a qualified negative ("no large effusion": uncertain, qualifier "large") keeps its qualifier
  only when every mention supporting the final certainty is qualified;
- findings the ontology marks non-lateralised (cardiomegaly, edema, mediastinal shift...) get no
  laterality: "right" near them names a region or a direction, not the side of the finding.
"""

from __future__ import annotations

from radvqa.extract.attributes import AttrValues
from radvqa.model import Observation, Span

_RANK = {"absent": 0, "uncertain": 1, "present": 2}


class _Obs:
    __slots__ = ("finding", "certainty", "laterality", "regions", "mentions", "order", "implicit")

    def __init__(self, finding: str, certainty: str, laterality: str | None, regions: tuple[str, ...],
                 order: int, implicit: bool):
        self.finding = finding
        self.certainty = certainty
        self.laterality = laterality
        self.regions = regions
        # (span, certainty, attributes, own): own is False for a merged region-less mention
        self.mentions: list[tuple[Span, str, AttrValues | None, bool, str | None]] = []
        self.order = order
        self.implicit = implicit


class Aggregator:
    def __init__(self, region_side: dict[str, str | None], lateralised: frozenset[str] | set[str] | None = None):
        """``lateralised``: finding ids that can have a side; None = every finding (no check)."""
        self._by_key: dict[tuple[str, str | None, tuple[str, ...]], _Obs] = {}
        self._side = region_side
        self._lateralised = lateralised

    def add(self, finding: str, certainty: str, span: Span, v: AttrValues | None, implicit: bool = False,
            qualifier: str | None = None) -> None:
        lat = None
        regions: tuple[str, ...] = ()
        if v is not None:
            lat = v.laterality
            regions = tuple(v.regions)
            if lat is None and regions:
                sides = {self._side.get(r) for r in regions} - {None}
                if len(sides) == 1:
                    lat = sides.pop()
                elif len(sides) > 1:
                    lat = "bilateral"
        self.add_located(finding, certainty, span, v, lat, regions, implicit, qualifier)

    def add_located(self, finding: str, certainty: str, span: Span, v: AttrValues | None, lat: str | None,
                    regions: tuple[str, ...], implicit: bool = False, qualifier: str | None = None) -> None:
        """``add`` with the mention's laterality (stated, else from its regions' sides) and
        regions already worked out."""
        if lat is not None and self._lateralised is not None and finding not in self._lateralised:
            lat = None
        self.add_keys(((finding, lat, regions),), certainty, span, v, implicit, qualifier)

    def add_keys(self, keys: tuple[tuple[str, str | None, tuple[str, ...]], ...], certainty: str, span: Span,
                 v: AttrValues | None, implicit: bool = False, qualifier: str | None = None) -> None:
        """One mention of several findings, each given as its observation key (finding,
        laterality, regions), the laterality already dropped for findings without a side (the
        rules extractor caches the keys with the sentence)."""
        by_key = self._by_key
        for key in keys:
            o = by_key.get(key)
            if o is None:
                o = by_key[key] = _Obs(key[0], certainty, key[1], key[2], len(by_key), implicit)
            else:
                if implicit and not o.implicit and o.certainty != certainty:
                    continue  # an implied negative never overrides an explicit statement
                if o.implicit and not implicit:
                    o.implicit = False
                    o.certainty = certainty  # the explicit statement replaces the implied one
                elif _RANK[certainty] > _RANK[o.certainty]:
                    o.certainty = certainty
            o.mentions.append((span, certainty, v, True, qualifier))

    def _merge_regionless(self) -> list[_Obs]:
        # insertion order is creation order (``order`` counts the keys, none is removed)
        obs = list(self._by_key.values())
        with_regions: dict[tuple[str, str | None], list[_Obs]] = {}
        for o in obs:
            if o.regions:
                k = (o.finding, o.laterality)
                same = with_regions.get(k)
                if same is None:
                    with_regions[k] = [o]
                else:
                    same.append(o)
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
            t.mentions.extend((sp, c, v, False, q) for sp, c, v, _own, q in o.mentions)
            t.mentions.sort(key=lambda m: m[0].start)
        return out

    def observations(self) -> list[Observation]:
        out = []
        for n, o in enumerate(self._merge_regionless(), 1):
            cert = o.certainty
            evidence: list[Span] = []
            own = False
            severity = size = change = temporal = None
            quals: list[str | None] = []
            for sp, c, v, mine, q in o.mentions:
                if c != cert:
                    continue  # a dissenting mention is neither evidence nor a source of attributes
                evidence.append(sp)
                quals.append(q)
                own = own or mine
                if v is not None:
                    severity = severity or v.severity
                    change = change or v.change
                    temporal = temporal or v.temporal
                    if v.size_mm is not None and (size is None or v.size_mm > size):
                        size = v.size_mm
            # regions come from the observation's own mentions: when only merged region-less
            # mentions support the final certainty, the regions were named by a dissenting one
            out.append(Observation(
                id=f"O{n:02d}", finding=o.finding, certainty=cert, laterality=o.laterality,
                regions=list(o.regions) if own else [], severity=severity, size_mm=size, change=change,
                temporal=temporal, evidence=evidence, source="report",
                # a qualified negative only when every supporting mention is one: "possible
                # effusion ... no large effusion" is a plain hedge, not "no large effusion"
                qualifier=quals[0] if cert == "uncertain" and quals and all(quals) else None,
            ))
        return out
