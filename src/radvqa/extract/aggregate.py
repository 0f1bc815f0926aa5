"""Report-level aggregation of sentence mentions into scene-graph observations.

Rules (documented contract of the rules backend):
- one observation per (finding, laterality, regions);
- certainty across mentions of one key: present beats uncertain beats absent, whatever the
  section (an IMPRESSION "no acute disease" does not erase a FINDINGS "small left effusion");
  then a finding stated both plainly and hedged is hedged (``_hedge_both_ways``: the conclusion
  decides when it states it only plainly);
- implicit negatives (from normal statements such as "lungs are clear") never override an explicit
  mention of the same key, and are merged into it as evidence only when they agree;
- laterality comes from the words, else from the sides of the regions (both sides: bilateral);
- a mention without regions joins the observation of the same finding and side that has regions
  ("small right pleural effusion ... small right effusion, new": one observation), when there is
  exactly one such observation;
- evidence and attributes come only from the mentions that support the final certainty: the
  first supporting mention that gives severity / change / temporal wins ("no large effusion ...
  small effusion" is a small present effusion, not a large one); round 19: mentions that give two
  sizes give none (two lesions, or one measured two ways: "a nodule of 13 mm" was one of two);
- round 18: supporting mentions that give two severities give none ("moderate levoscoliosis and
  mild dextroscoliosis"), and a severity or size that only a merged region-less mention gives is
  dropped where the observation's places say more than the finding's name ("mild patchy airspace
  opacities ... interstitial opacities" is no mild opacity in the interstitium);
- evidence is the mentions that support the final certainty: a present observation never cites
  the sentence that negated the same finding ("lungs are free of airspace disease" is not evidence
  of an opacity stated elsewhere); the IR has no place for dissenting mentions, so they are dropped;
- a qualified negative ("no large effusion": uncertain, qualifier "large") keeps its qualifier
  only when every mention supporting the final certainty is qualified;
- findings the ontology marks non-lateralised (cardiomegaly, edema, mediastinal shift...) get no
  laterality: "right" near them names a region or a direction, not the side of the finding.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from radvqa.model import Observation, Span

# Made per report, sentence or match: compiled code reads a Final name as a C static, where an
# imported name is looked up in the module's dict at every call (about 170 instructions each)
_Observation: Final = Observation

_RANK: Final = {"absent": 0, "uncertain": 1, "present": 2}
# An observation key (finding, laterality, regions), and one mention of an observation: (span,
# certainty, attributes, own, qualifier). Precise types let the compiled engine read the tuples
# directly instead of through Python's iteration protocol (annotations cost pure Python nothing).
Key = tuple[str, "str | None", tuple[str, ...]]
Ev = tuple[Span, str, Any, bool, "str | None"]
# observation ids, made once ("O01", "O02", ...; a longer report formats its own)
_IDS: Final = tuple(f"O{n:02d}" for n in range(100))


def regions_side(regions: Iterable[str], region_side: dict[str, str | None]) -> str | None:
    """The side the places say when the words give none: the one side of the sided regions, or
    "bilateral" when they name both; None when no region has a side."""
    sides = {region_side.get(r) for r in regions} - {None}
    if len(sides) == 1:
        return sides.pop()
    return "bilateral" if sides else None


class Aggregator:
    """Each observation is kept as a small list ``[certainty, implicit, mentions]`` under its key
    (finding, laterality, regions), in creation order: a report makes a few of them, and a list
    costs a fraction of an object with named fields; each mention is (span, certainty,
    attributes, own, qualifier), own False for a merged region-less mention."""

    def __init__(self, region_side: dict[str, str | None], lateralised: frozenset[str] | set[str] | None = None,
                 plain_places: dict[str, frozenset[str]] | None = None,
                 unplaced: dict[str, frozenset[str]] | None = None):
        """``lateralised``: finding ids that can have a side; None = every finding (no check).
        ``plain_places``: finding id -> its default regions and their ancestors (places that say
        nothing more than the finding's name); None = every place is informative.
        ``unplaced``: finding id -> places whose negative a region-less positive is not merged into
        (attributes.yaml ``unplaced_beside_normal``, round 27)."""
        self._unplaced = unplaced or {}
        self._by_key: dict[Key, list[Any]] = {}
        self._side = region_side
        self._lateralised = lateralised
        self._plain = plain_places
        # findings with a key that has regions, and with one that has none: a region-less mention
        # can be merged only where a finding has both (half of the OpenI reports have none)
        self._placed: set[str] = set()
        self._bare: set[str] = set()
        # sentence ids of the concluding sections (IMPRESSION): their statement decides a finding
        # stated both plainly and hedged
        self.concluding: set[str] = set()
        # (sentence id, start) of uncertain mentions that hedge no statement elsewhere
        self.no_hedge: set[tuple[str, int]] = set()
        # (sentence id, start) of uncertain mentions only offered as one of alternatives, and of
        # present mentions after a de-identification mask: an alternative hedges a finding stated
        # plainly elsewhere only where every plain statement of it follows a mask
        self.offered: set[tuple[str, int]] = set()
        self.after_mask: set[tuple[str, int]] = set()
        # (sentence id, start) of present mentions of the conclusion right after an XXXX mask: no
        # plain conclusion (the mask may have eaten a hedge)
        self.masked: set[tuple[str, int]] = set()
        # some mention was added uncertain (else no finding is stated both ways: most reports)
        self._uncertain = False

    # ``v``: the mention's AttrValues, or the FrozenAttrs the rules extractor's cache keeps (Any:
    # the compiled engine checks annotations at run time; benchmarks/extraction_compiled.py)
    def add(self, finding: str, certainty: str, span: Span, v: Any, implicit: bool = False,
            qualifier: str | None = None) -> None:
        lat = None
        regions: tuple[str, ...] = ()
        if v is not None:
            lat = v.laterality
            regions = tuple(v.regions)
            if lat is None and regions:
                lat = regions_side(regions, self._side)
        self.add_located(finding, certainty, span, v, lat, regions, implicit, qualifier)

    def add_located(self, finding: str, certainty: str, span: Span, v: Any, lat: str | None,
                    regions: tuple[str, ...], implicit: bool = False, qualifier: str | None = None) -> None:
        """``add`` with the mention's laterality (stated, else from its regions' sides) and
        regions already worked out."""
        if lat is not None and self._lateralised is not None and finding not in self._lateralised:
            lat = None
        self.add_keys(((finding, lat, regions),), certainty, span, v, implicit, qualifier)

    def add_keys(self, keys: tuple[tuple[str, str | None, tuple[str, ...]], ...], certainty: str, span: Span,
                 v: Any, implicit: bool = False, qualifier: str | None = None) -> None:
        """One mention of several findings, each given as its observation key (finding,
        laterality, regions), the laterality already dropped for findings without a side (the
        rules extractor caches the keys with the sentence)."""
        by_key = self._by_key
        mention = (span, certainty, v, True, qualifier)
        if certainty == "uncertain":
            self._uncertain = True
        for key in keys:
            o = by_key.get(key)
            if o is None:
                by_key[key] = [certainty, implicit, [mention]]
                if key[2]:
                    self._placed.add(key[0])
                else:
                    self._bare.add(key[0])
                continue
            if implicit and not o[1] and o[0] != certainty:
                continue  # an implied negative never overrides an explicit statement
            if o[1] and not implicit:
                o[1] = False
                o[0] = certainty  # the explicit statement replaces the implied one
            elif _RANK[certainty] > _RANK[o[0]]:
                o[0] = certainty
            o[2].append(mention)

    def _merge_regionless(self) -> list[tuple[Key, list[Any]]]:
        # insertion order is creation order (none is removed)
        obs = list(self._by_key.items())
        if self._placed.isdisjoint(self._bare):
            return obs
        with_regions: dict[tuple[str, str | None], list[list]] = {}
        for key, o in obs:
            if key[2]:
                k = (key[0], key[1])
                same = with_regions.get(k)
                if same is None:
                    with_regions[k] = [o]
                else:
                    same.append(o)
        out = []
        for item in obs:
            key, o = item
            targets = with_regions.get((key[0], key[1])) if not key[2] else None
            if targets is None or len(targets) != 1 or (o[1] and not targets[0][1] and o[0] != targets[0][0]):
                out.append(item)
                continue
            t = targets[0]
            if o[0] == "present" and t[0] == "absent" and self._whole_negative(key[0], t):
                # round 27: "a fractured ... XXXX" beside "osseous structures appear intact": kept
                # apart (merged, the present mention overruled the report's normal bones)
                out.append(item)
                continue
            if _RANK[o[0]] > _RANK[t[0]]:
                t[0] = o[0]
            merged: list[Ev] = t[2]
            for sp, c, v, _own, q in o[2]:  # (a loop: no generator per merge)
                merged.append((sp, c, v, False, q))
            merged.sort(key=_ev_start)
        return out

    def _whole_negative(self, finding: str, target: list[Any]) -> bool:
        """The placed observation ``target`` of ``finding`` is a negative of it over a whole place
        listed in ``unplaced`` (every mention's places among them)."""
        whole = self._unplaced.get(finding)
        if not whole:
            return False
        for key, o in self._by_key.items():
            if o is target:
                return bool(key[2]) and set(key[2]) <= whole
        return False

    def _hedge_both_ways(self, items: list[tuple[Key, list[Any]]]) -> list[tuple[Key, list[Any]]]:
        """A finding the report states both plainly and hedged is hedged (hand audit #13): "perihilar
        opacities, edema ... perihilar opacities, possibly edema" (CXR2752), "sclerotic focus ...
        a sclerotic focus cannot be excluded" (CXR1694). A hedge without a side hedges the
        finding's only present observation; a hedge on one side of a bilateral statement leaves
        the other side stated ("bilateral small pleural effusions ... questionable small right
        pleural effusion", CXR1043). A qualified negative ("no large effusion") is no hedge. When
        the conclusion (IMPRESSION) states the finding only plainly, it decides: "This may be
        artifact. ... IMPRESSION: Nodular density ... represents an artifact" (CXR163). A finding
        only offered as one of alternatives ("Mild left-sided scarring/subsegmental atelectasis")
        hedges no plain statement of it ("Left perihilar scarring is noted", CXR534), unless a
        mask stands before every plain statement ("XXXX subsegmental atelectasis and scarring",
        CXR822: the mask may be "likely")."""
        if not self._uncertain:
            return items  # no uncertain mention, no hedge
        hedges: dict[str, list] = {}
        concluded: dict[str, set] = {}
        concl = self.concluding
        # a sentence that states the finding plainly and offers it as an alternative does not hedge
        # it ("Hyperinflated lungs, air trapping versus inspiratory effort", CXR2151)
        # (made when the first candidate hedge needs it)
        plain: set | None = None
        no_hedge = self.no_hedge
        for (f, lat, regions), o in items:
            if o[1]:
                continue
            for m in o[2]:
                if m[1] == "uncertain" and m[4] is None and (m[0].sentence_id, m[0].start) not in no_hedge:
                    if plain is None:
                        plain = {(f2, lat2, m2[0].sentence_id) for (f2, lat2, _r), o2 in items if not o2[1]
                                 for m2 in o2[2] if m2[1] == "present"}
                    if (f, lat, m[0].sentence_id) not in plain:
                        hedges.setdefault(f, []).append(
                            (lat, _places(regions), (m[0].sentence_id, m[0].start) in self.offered))
                if concl and m[1] != "absent" and m[0].sentence_id in concl and (
                        not self.masked or (m[0].sentence_id, m[0].start) not in self.masked):
                    concluded.setdefault(f, set()).add(m[1] if m[4] is None else "qualified")
        for f, certs in concluded.items():
            if certs == {"present"}:
                hedges.pop(f, None)
        if not hedges:
            return items
        present: dict[str, int] = {}
        for (f, _lat, _r), o in items:
            if o[0] == "present" and not o[1]:
                present[f] = present.get(f, 0) + 1
        out: list[tuple[Key, list[Any]]] = []
        for key, o in items:
            f, lat, regions = key
            hs = hedges.get(f)
            if hs is None or o[0] != "present" or o[1]:
                out.append((key, o))
                continue
            # a hedge elsewhere ("scarring or atelectasis in the left base") is no hedge of the
            # finding stated at another place ("biapical ... scarring", CXR233)
            here = _places(regions)
            if self.offered and any(h[2] for h in hs) and any(
                    m[1] == "present" and (m[0].sentence_id, m[0].start) not in self.after_mask for m in o[2]):
                # stated plainly: the alternatives do not hedge it, and their mention is evidence
                # of it (its words are read: quality/unvouched.py) but gives it no attribute
                hs = [h for h in hs if not h[2]]
                o[2] = [(m[0], "present", None, m[3], None) if m[1] == "uncertain" and
                        (m[0].sentence_id, m[0].start) in self.offered else m for m in o[2]]
            sides = {h_lat for h_lat, h_places, _offered in hs if not here or not h_places or here & h_places}
            if not sides:
                out.append((key, o))
                continue
            if lat in sides or (None in sides and present[f] == 1) or (lat is None and self._all_masked(o[2])):
                o[0] = "uncertain"
                o[2] = [(sp, "uncertain" if c == "present" else c, v, own, q) for sp, c, v, own, q in o[2]]
                out.append((key, o))
                continue
            if lat == "bilateral" and len(sides & {"left", "right"}) == 1:
                other = "left" if "right" in sides else "right"
                if regions and all(self._side.get(r) in (None, "bilateral") or self._side.get(r) != other for r in regions) \
                        and any(self._side.get(r) in ("left", "right") for r in regions):
                    # every sided place is the hedged side ("opacity in the left upper lung ...
                    # both on PA and lateral views ... scarring": "bilateral" came from "both"),
                    # so the hedge is the whole statement's, not a cue to keep the other side
                    o[0] = "uncertain"
                    o[2] = [(sp, "uncertain" if c == "present" else c, v, own, q) for sp, c, v, own, q in o[2]]
                    out.append((key, o))
                    continue
                if any(k[0] == f and k[1] == other and p[0] == "present" for k, p in items):
                    continue  # the other side is stated on its own
                keep = tuple(r for r in regions if self._side.get(r) is None or self._side.get(r) == other)
                out.append(((f, other, keep), o))
                continue
            out.append((key, o))
        return out

    def _all_masked(self, mentions: list[Any]) -> bool:
        """Whether every present mention follows a de-identification mask (the mask may have eaten
        a hedge): a hedge on one side then hedges the unsided statement too (round 20: "opacity
        XXXX atelectasis" beside "Probable left midlung and left basilar atelectasis" was
        "Atelectasis is seen"; the report never states it plainly)."""
        pres = [m for m in mentions if m[1] == "present"]
        return bool(pres) and all((m[0].sentence_id, m[0].start) in self.after_mask for m in pres)

    def observations(self) -> list[Observation]:
        out: list[Observation] = []
        items = self._hedge_both_ways(self._merge_regionless())
        n = 0
        for key, o in items:  # (a counter: enumerate with a start is a generic iterator when compiled)
            n += 1
            finding, lat, regions = key
            cert: str = o[0]
            mentions: list[Ev] = o[2]
            if len(mentions) == 1 and mentions[0][1] == cert:
                # one mention (most observations): it is the evidence and gives the certainty
                sp, _c, v, own, qualifier = mentions[0]
                evidence = [sp]
                dropped = None
                if v is not None:
                    severity, change, temporal, size = v.severity, v.change, v.temporal, v.size_mm
                    if v.dropped or (v.regions and len(v.regions) != len(regions)):
                        dropped = _dropped(v, regions, None)
                else:
                    severity = size = change = temporal = None
                if cert != "uncertain" or not qualifier:
                    qualifier = None
            else:
                evidence = []
                own = False
                severity = size = change = temporal = None
                dropped = None
                quals: list[str | None] = []
                # round 18: whether an own mention (one that names the observation's places) gives
                # the severity / size, and whether the mentions give two severities
                sev_own = size_own = sev_split = size_split = False
                for sp, c, v, mine, q in mentions:
                    if c != cert:
                        continue  # a dissenting mention is neither evidence nor a source of attributes
                    evidence.append(sp)
                    quals.append(q)
                    own = own or mine
                    if v is not None:
                        # a merged region-less mention had only places its finding cannot lie in
                        if v.dropped or (v.regions and (len(v.regions) != len(regions) or not mine)):
                            dropped = _dropped(v, regions, dropped)
                        if v.severity:
                            sev_split = sev_split or (severity is not None and v.severity != severity)
                            severity = severity or v.severity
                            sev_own = sev_own or mine
                        change = change or v.change
                        temporal = temporal or v.temporal
                        if v.size_mm is not None:
                            size_own = size_own or mine
                            size_split = size_split or (size is not None and v.size_mm != size)
                            size = size if size is not None else v.size_mm
                if sev_split:
                    # "mild bibasilar atelectasis ... minimal bibasilar atelectasis", "moderate
                    # levoscoliosis and mild dextroscoliosis": the mentions disagree, and either
                    # severity would be wrong for the other; none is stated (round 18)
                    severity = None
                if size_split:
                    # round 19: two sizes are two lesions (or one measured two ways): neither is
                    # "the" finding's size ("Two nodules ... measuring 13 mm and one measuring 16
                    # mm", CXR1329)
                    size = None
                if (severity is not None and not sev_own) or (size is not None and not size_own):
                    if own and self._informative(finding, regions):
                        # only a merged region-less mention gives it, and the places are another
                        # mention's: "mild patchy airspace opacities ... diffusely increased
                        # interstitial opacities" is no mild opacity in the interstitium (round 18)
                        if not sev_own:
                            severity = None
                        if not size_own:
                            size = None
                # a qualified negative only when every supporting mention is one: "possible
                # effusion ... no large effusion" is a plain hedge, not "no large effusion"
                qualifier = quals[0] if cert == "uncertain" and quals and all(quals) else None
            oid = _IDS[n] if n < 100 else f"O{n:02d}"
            # regions come from the observation's own mentions: when only merged region-less
            # mentions support the final certainty, the regions were named by a dissenting one
            if lat is None and not (own and regions) and severity is None and size is None and change is None \
                    and temporal is None and qualifier is None and not dropped:
                # the common bare observation: the other fields keep their defaults (fewer
                # keyword arguments to match; the same Observation)
                out.append(_Observation(id=oid, finding=finding, certainty=cert, evidence=evidence))
                continue
            out.append(_Observation(
                id=oid, finding=finding, certainty=cert, laterality=lat,
                regions=list(regions) if own else [], severity=severity, size_mm=size, change=change,
                temporal=temporal, evidence=evidence, source="report", qualifier=qualifier, dropped=dropped or [],
            ))
        return out


    def _informative(self, finding: str, regions: tuple[str, ...]) -> bool:
        """Whether some place says more than the finding's name: not one of its plain places
        (default regions, their ancestors, one side of them: "right_pleura" for an effusion)."""
        plain = self._plain
        if plain is None:
            return bool(regions)
        dflt = plain.get(finding)
        if dflt is None:
            return bool(regions)
        for r in regions:
            if r not in dflt:
                return True
        return False


def _ev_start(m: Ev) -> int:
    """Where a mention's evidence starts (the order of merged mentions; a module function: a
    lambda was a closure object per merge in the compiled engine)."""
    return m[0].start


def _places(regions: tuple[str, ...]) -> frozenset[str]:
    """The places of an observation without their side ("right_pleura" -> "pleura"); empty for no
    place or the whole chest (a place that any other place can be)."""
    if not regions or "chest" in regions:
        return frozenset()
    hit = _places_memo.get(regions)  # (a few hundred region tuples in a corpus)
    if hit is not None:
        return hit
    out = frozenset(r.removeprefix("left_").removeprefix("right_") for r in regions)
    if not out.isdisjoint(_ZONE):
        out = frozenset(_ZONE.get(r, r) for r in out)
    if len(_places_memo) >= 20_000:
        _places_memo.clear()  # bounded memory
    _places_memo[regions] = out
    return out


_places_memo: Final[dict[tuple[str, ...], frozenset[str]]] = {}


# a lobe and the zone it fills are one place for a hedge ("streaky opacities in the right upper
# lobe, XXXX scarring ... opacities in the bilateral upper lobes could represent scarring",
# CXR4, seed 70: the upper lung zones' hedge is the right upper lobe's)
_ZONE: Final = {"upper_lobe": "upper_lung_zone", "upper_lung_zones": "upper_lung_zone",
         "lower_lobe": "lower_lung_zone", "lower_lung_zones": "lower_lung_zone", "lung_bases": "lower_lung_zone",
         "middle_lobe": "mid_lung_zone", "mid_lung_zones": "mid_lung_zone"}


def same_zone(a: str, b: str) -> bool:
    """Whether two places are one lung zone without their side: a lobe and the zone it fills
    ("right_middle_lobe", "right_mid_lung_zone"), or two sides of one place."""
    return _places((a,)) == _places((b,))


def _dropped(v: Any, regions: tuple[str, ...], into: list[str] | None) -> list[str]:
    """What the mention's words gave that the observation does not hold: regions its finding
    cannot lie in (left out of its key by the extractor) and words dropped at binding."""
    out = [] if into is None else into
    for r in v.regions:
        if r not in regions and f"place:{r}" not in out:
            out.append(f"place:{r}")
    for d in v.dropped:
        if d not in out:
            out.append(d)
    return out
