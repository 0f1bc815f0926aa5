"""Attributes of mentions: laterality, regions, severity, size (mm), change, temporal.

Words come from the ontology (regions and their synonyms, modifier tables) plus this area's
``data/attributes.yaml`` (extra words the report language uses). One trie regex finds them all
in a sentence; each attribute then attaches to the nearest mention of its sentence (modifiers
usually precede their noun, "small left effusion"; locations often follow, "opacity in the right
base": both are covered by distance, a comma or clause cue in between costs extra)."""

from __future__ import annotations

import re
from bisect import bisect_left
from typing import Any, Callable, Final

from radvqa.extract._structs import Attr, AttrValues, FrozenAttrs
from radvqa.extract._trie import trie_regexes, word_spans

# Made per report, sentence or match: compiled code reads a Final name as a C static, where an
# imported name is looked up in the module's dict at every call (about 170 instructions each)
_Attr: Final = Attr
_AttrValues: Final = AttrValues
_FrozenAttrs: Final = FrozenAttrs
_bisect_left: Final = bisect_left

KINDS: Final = ("region", "laterality", "severity", "change", "temporal")
# the temporal value of an age the report calls uncertain (attributes.yaml ``unknown_age``): it
# wins over the finding's other temporal words and is cleared before any observation holds it
UNKNOWN_AGE: Final = "unknown-age"

# "3.5 cm", "2 x 3 mm", "1.2-cm", "15mm"; the largest dimension is kept.
SIZE_RE: Final = re.compile(
    r"(?<![\w.])(\d{1,3}(?:\.\d+)?)(?:\s*(?:x|by|\u00d7)\s*\d{1,3}(?:\.\d+)?){0,2}\s*-?\s*"
    r"(mm|cm|millimet(?:er|re)s?|centimet(?:er|re)s?)(?!\w)"
)
_UNIT_MM: Final = {"mm": 1.0, "cm": 10.0}
_DIMS_JOINT: Final = re.compile(r"\s*(?:x|by|\u00d7)\s*")


def freeze(v: AttrValues) -> FrozenAttrs:
    return _FrozenAttrs(v.laterality, tuple(v.regions), v.severity, v.size_mm, v.change, v.temporal, tuple(v.dropped))


_PLACE_KINDS: Final = frozenset(("region", "laterality"))


def _open_upper_re(joint: str | None, words: Any) -> re.Pattern[str] | None:
    """A range joint followed by one of ``words`` (degree words of no severity level)."""
    alts = sorted((re.escape(" ".join(str(w).lower().split())) for w in words), key=len, reverse=True)
    if not joint or not alts:
        return None
    return re.compile(f"(?:{joint})(?:{'|'.join(alts)})\\b")


class AttributeMatcher:
    def __init__(self, region_terms: dict[str, tuple[str, ...]], region_side: dict[str, str | None],
                 modifiers: Any, extra: dict[str, Any]):
        table: dict[str, list[tuple[str, str]]] = {}

        def add(phrase: str, kind: str, value: str, replace: bool = False) -> None:
            p = " ".join(str(phrase).lower().split())
            if p and replace:  # our data decides the phrase's value of this kind
                table[p] = [kv for kv in table.get(p, []) if kv[0] != kind]
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
            if kind in ("drop", "version", "ignore", "bilateral_regions", "override", "sided_findings", "per_side",
                        "outside_cavity", "range_joint", "finding_severity", "change_degree", "not_postoperative",
                        "space_range_levels", "range_open_upper", "side_alternative_joint", "term_excludes_places", "not_lesion_size", "unknown_age", "shared_age", "midline_regions",
                        "shared_change"):
                continue
            for value, words in (groups or {}).items():
                for w in words:
                    add(w, kind, value)
        for p in (extra or {}).get("drop", []) or []:
            table.pop(" ".join(str(p).lower().split()), None)
        # override: kind -> value -> words whose value of that kind is ours, not the ontology's
        # (after drop: a dropped word can come back with one kind only, "larger" a change)
        for kind, groups in ((extra or {}).get("override") or {}).items():
            for value, words in (groups or {}).items():
                for w in words:
                    add(w, kind, value, replace=True)
        # an age the report calls uncertain: a temporal value of its own that no finding keeps
        for w in (extra or {}).get("unknown_age") or ():
            add(w, "temporal", UNKNOWN_AGE, replace=True)
        # phrases that contain an attribute word but are none ("left lateral decubitus" names a
        # view, not the side of a finding): matched, longest first, and give nothing
        for p in (extra or {}).get("ignore", []) or []:
            table[" ".join(str(p).lower().split())] = []
        self.table = {p: tuple(v) for p, v in table.items()}
        self.region_side = region_side
        self.pattern, self._fast = trie_regexes(self.table)
        # "moderate to large", "mild-to-moderate": two severity words joined this way are one
        # range, kept as said ("moderate to large"), not the lower level of the ontology's table
        joint = (extra or {}).get("range_joint")
        self.range_joint = re.compile(joint) if joint else None
        self.space_levels = {v: i for i, v in enumerate((extra or {}).get("space_range_levels") or ())}
        # "moderate to marked": a range whose upper end is no level; its lower end is no severity
        self.open_upper = _open_upper_re(joint, (extra or {}).get("range_open_upper") or ())
        # "right middle lobe/lingula", "left or right": alternatives between places of opposite sides
        alt = (extra or {}).get("side_alternative_joint")
        self.side_alt = re.compile(alt) if alt else None
        # change values a severity word right before grades ("slightly improved"): the change's
        # degree, not the finding's severity
        self.change_degree = frozenset((extra or {}).get("change_degree") or ())
        self.not_size_after, self.not_size_before = _not_size_res((extra or {}).get("not_lesion_size") or {})

    def _span_side(self, attrs: list[Attr]) -> str | None:
        """The one side ("left" / "right") the place words of one span name, else None."""
        sides = {a.value if a.kind == "laterality" else self.region_side.get(a.value) for a in attrs}
        return sides.pop() if len(sides) == 1 and sides <= {"left", "right"} else None

    def _drop_side_alternatives(self, out: list[Attr], lower: str, alt: re.Pattern[str]) -> list[Attr]:
        """Places of opposite sides offered as alternatives ("right middle lobe/lingula", "left or
        right") state neither place nor side: both spans' place attributes are dropped (round 25;
        read as two places they made the finding bilateral)."""
        spans: dict[tuple[int, int], list[Attr]] = {}
        for a in out:
            spans.setdefault((a.start, a.end), []).append(a)
        keys = sorted(spans)
        gone: set[tuple[int, int]] = set()
        for k1, k2 in zip(keys, keys[1:]):
            p1, p2 = spans[k1], spans[k2]
            if not all(a.kind in _PLACE_KINDS for a in p1 + p2) or not alt.fullmatch(lower, k1[1], k2[0]):
                continue
            s1, s2 = self._span_side(p1), self._span_side(p2)
            if s1 and s2 and s1 != s2:
                gone.update((k1, k2))
        return [a for a in out if (a.start, a.end) not in gone] if gone else out

    def find(self, lower: str, start: int, end: int) -> list[Attr]:
        out: list[Attr] = []
        get = self.table.get
        for a, b in word_spans(self.pattern, self._fast, lower, start, end):
            g = lower[a:b]
            vals = get(g)
            if vals is None:
                vals = get(" ".join(g.split()), ())
            if vals:
                for kind, value in vals:
                    if kind == "severity" and out and out[-1].kind == "severity" and self.range_joint is not None \
                            and out[-1].value != value and (self.range_joint.fullmatch(lower, out[-1].end, a) or (
                                lower[out[-1].end:a].isspace() and -1 < self.space_levels.get(out[-1].value, -1)
                                < self.space_levels.get(value, -1))):
                        prev = out[-1]
                        out[-1] = _Attr("severity", f"{prev.value} to {value}", prev.start, b)
                        continue
                    if kind == "severity" and self.open_upper is not None and self.open_upper.match(lower, b):
                        continue  # "moderate to marked cardiomegaly": not moderate (round 25)
                    while kind == "change" and value in self.change_degree and out and out[-1].kind == "severity" \
                            and _DEGREE_GAP.fullmatch(lower, out[-1].end, a):
                        # "opacities ..., slightly improved": not minimal opacities (CXR3165)
                        out.pop()
                    out.append(_Attr(kind, value, a, b))
        alt = self.side_alt
        if alt is not None and len(out) > 1:
            out = self._drop_side_alternatives(out, lower, alt)
        if lower.find("mm", start, end) < 0 and lower.find("cm", start, end) < 0 and lower.find("met", start, end) < 0:
            return out  # no unit word, no size: skip the size regex
        after, before = self.not_size_after, self.not_size_before
        for m in SIZE_RE.finditer(lower, start, end):
            if (after is not None and after.match(lower, m.end())) or (
                    before is not None and before.search(lower, max(start, m.start() - 40), m.start())):
                continue  # "5 mm displacement of the distal fragment": no size of the lesion
            unit = m.group(2)
            factor = 10.0 if unit.startswith("c") else 1.0
            dims = [float(x) for x in re.findall(r"\d{1,3}(?:\.\d+)?", m.group(0)[: m.start(2) - m.start()])]
            size = max(dims) * factor
            if out and out[-1].kind == "size" and _DIMS_JOINT.fullmatch(lower, out[-1].end, m.start()):
                # "4.6 cm x 3.7 cm": two dimensions of one lesion, one size (the largest)
                dim = out[-1]
                out[-1] = _Attr("size", repr(max(size, float(dim.value))), dim.start, m.end())
                continue
            out.append(_Attr("size", repr(size), m.start(), m.end()))
        return out


def _not_size_res(data: dict[str, Any]) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
    """The measurements that are no lesion's size (``not_lesion_size`` in attributes.yaml): one
    followed by a word of ``after`` ("5 mm displacement", "6 cm of retraction") or following a
    word of ``before`` ("displaced by 5 mm", "retraction of approximately 6 cm")."""
    def alt(words: list[str]) -> str:
        return "|".join(re.escape(" ".join(str(w).lower().split())).replace(r"\ ", r"\s+")
                        for w in sorted(words, key=len, reverse=True))
    after = data.get("after") or []
    before = data.get("before") or []
    fill = r"(?:approximately|about|roughly|nearly|almost|up\s+to|at\s+least|less\s+than|greater\s+than)\s+"
    a = re.compile(rf"\s*(?:of\s+|in\s+)?(?:{alt(after)})\b") if after else None
    b = re.compile(rf"\b(?:{alt(before)})\s+(?:by\s+|of\s+)?(?:{fill})?$") if before else None
    return a, b


def _adj_end(lower: str, pos: int) -> int:
    """Where the adjective commas after ``pos`` end (``_ADJ_COMMA`` matches everywhere)."""
    m: Any = _ADJ_COMMA.match(lower, pos)
    return m.end()


_DEGREE_GAP: Final = re.compile(r"[\s-]*")
# A modifier right after a negation ("emphysema without acute disease", "no acute fracture")
# belongs to the negated phrase: it can only describe a mention that follows it.
_NEGATED_BEFORE: Final = re.compile(r"(?:^|\W)(?:no|not|without|negative for|free of)\s+$")
# "4 cm above the carina", "2 cm from the hilum": a distance, not the size of anything.
_DISTANCE_AFTER: Final = re.compile(r"\s*(?:above|below|from|beyond|proximal|distal|superior|inferior|short of|into)\b")
# Coordination between two mentions ("scarring or atelectasis", "effusion and atelectasis",
# "X/Y", "X, Y", "airspace disease with blunted costophrenic angle"): up to two modifier words
# before the second one ("or early atelectasis").
_COORD: Final = re.compile(r"\s*(?:,\s*)?(?:(?:and/or|and|or|versus|vs\.?|/|,|with)\s*)(?:[a-z-]+\s+){0,2}")
# A diagnosis offered for a sign ("opacities in the lung bases compatible with scarring or
# atelectasis") is located where the sign is.
_EXPLAINS: Final = re.compile(r"(?:compatible with|consistent with|represents?|representing|may represent|could represent|"
                       r"reflects?|reflecting|may reflect|suggestive of|likely|due to|related to|secondary to|"
                       r"concerning for|suspicious for|worrisome for)"
                       # four words: "could reflect a small focus of atelectasis" (CXR3680, seed 66:
                       # unlocated, the small focus merged into the bibasilar atelectasis)
                       r"\s+(?:[a-z-]+\s+){0,4}$")
_VERB: Final = re.compile(r"\b(?:is|are|was|were|appears?|remains?)\b")
# round 22: only a de-identification mask (blanked to spaces: " XXXX " is six, " ___ " five)
# between a sign and a mention: the masked link word ("or", "likely", "representing") offers the
# mention for the sign, at the sign's place ("left midlung airspace opacity XXXX atelectasis":
# left atelectasis, not atelectasis nowhere)
_MASK_GAP: Final = re.compile(r",?\s{5,}")
_APPOSITION: Final = re.compile(r",\s*(?:[a-z-]+\s+){0,2}$")
_WITH: Final = re.compile(r"\bwith\b")
_SIDE_PAIR: Final = re.compile(r"\s*(?:and|or|,|/|and/or)\s*")
# What ends a noun phrase between an attribute and the next mention: a modifier followed by a
# mention within the same phrase ("demonstrates small amount of right basilar atelectasis") is
# that mention's, not the previous one's.
_PHRASE_BREAK: Final = re.compile(r"[,;:]|\b(?:and|or|but|with|without|is|are|was|were|has|have|appears?|remains?|which|that)\b")
# A hedge verb or a concessive between a modifier and the next mention: the modifier ends the
# clause before it ("interstitial prominence, XXXX chronic though could reflect early pulmonary
# edema" is no chronic edema, CXR343, seed 65)
_VERB_BREAK: Final = re.compile(r"\b(?:though|although|could|may|might|would|can|reflects?|reflecting|represents?|"
                         r"representing|suggests?|suggesting)\b")
_CLAUSE_END: Final = re.compile(r"[,;.]")
# a comma right before an attribute (session 14: or before "on the": "blunting of the bilateral
# costophrenic angles, on the right greater than left, with pleural thickening versus loculated
# pleural fluid along the ... right upper lobe" was a bilateral pleural thickening; outside-pool
# readers of seeds 79, 86, 120, 136, 149)
_SET_OFF_BEFORE: Final = re.compile(r"[a-z]\s*,\s*(?:on\s+(?:the\s+)?)?$")  # (a blanked XXXX before the comma too)
# ", with" / ", and" after it; session 16: "with" needs no comma ("small bilateral pleural
# effusions, left greater than right with left basilar opacities" made the opacities bilateral:
# CXR3256, R2Gen train)
_NEW_PHRASE: Final = re.compile(r"\s*(?:,\s*(?:with|and|or|and/or)|with)\b")
_PRE_KINDS: Final = frozenset(("severity", "size", "change", "temporal"))
_NEG_KINDS: Final = frozenset(("severity", "change", "temporal"))
# between a modifier and a later mention: a word that starts another phrase ("mild bronchovascular
# crowding and right basilar airspace disease": not mild airspace disease, CXR1171; "mild right
# paratracheal soft tissue may be secondary to lymphadenopathy", CXR3096); a comma right after the
# modifier only separates adjectives ("mild, XXXX opacity", CXR297)
_MOD_BREAK: Final = re.compile(r"(?<=.)[,;]|\b(?:with|without|but|and|or|is|are|was|were|be|been|may|might|could|"
                        r"represents?|which|that)\b")
_ADJ_COMMA: Final = re.compile(r"\s*,?")  # "mild, XXXX opacity": a comma between adjectives
# (a verb linking the mention to what follows names that other thing: "low lung volumes causing
# mild bronchovascular crowding" is no mild low lung volume, CXR3368, seed 65)
_COORD_AFTER: Final = re.compile(r"\b(?:and|or|with|causing|producing|resulting\s+in|leading\s+to|accentuating)\b")
_WORD_NEXT: Final = re.compile(r"\s*-?\s*[a-z]")
MAX_GAP: Final = 80  # characters between an attribute and the mention it can describe
MAX_GROUP: Final = 8  # a longer chain of coordinated mentions is a list, not one finding phrase (and bounds the work)


def attach(attrs: list[Attr], starts: list[int], ends: list[int], lower: str,
           share: list[bool] | None = None, signs: list[bool] | None = None,
           fits: Callable[[int, str], bool] | None = None,
           region_side: dict[str, str | None] | None = None,
           devices: list[bool] | None = None,
           shared_change: frozenset[str] = frozenset()) -> list[AttrValues | None]:
    """Give each attribute to the nearest mention of the sentence; returns one AttrValues per
    mention (``starts``, ``ends``: the mentions' offsets, in text order, not overlapping), None
    for a mention that gets none.

    Only mentions within ``MAX_GAP`` characters are candidates (found by bisection), so the work
    per attribute is bounded and a sentence costs time linear in its length. Then:
    - the side stated nearest a mention wins ("right-sided pneumothorax only visible on the left
      lateral decubitus film" is right); two sides coordinated with each other ("right and left")
      are bilateral;
    - a location (side, region) before or after a coordinated group of mentions governs every
      member that has none of its own ("scarring or atelectasis in the left base": both left);
      ``share[i]`` False keeps mention i out (findings without a side); a diagnosis offered for a
      sign ("opacity in the left base compatible with / , scarring or atelectasis"; ``signs[i]``
      marks the signs) is located where the sign is; a device (``devices[i]``) takes no location
      from across a comma;
    - a severity / change / temporal word right after a negation only describes what follows it;
    - a change of ``shared_change`` stated before a coordinated group governs every member with
      none of its own ("Resolving pulmonary interstitial edema and pulmonary venous hypertension":
      both resolving; session 15)."""
    n = len(starts)
    # None for a mention that gets no attribute (most of them: the same as an empty AttrValues
    # to every reader, without making one)
    vals: list[AttrValues | None] = [None] * n
    if not n:
        return vals  # type: ignore[return-value]
    lat_at: list[tuple[int, int, int] | None] = [None] * n  # (distance, start, end) of the side kept
    clash = False  # a mention was given two sizes
    sizes = len({a.value for a in attrs if a.kind == "size"})  # distinct sizes the sentence states
    # each mention's location words; () until it gets one (most mentions get none)
    own_loc: list = [()] * n
    chg_pre: set[int] = set()  # mentions given a shared change by a word before them
    for a in attrs:
        # each field read once (a msgspec Struct: a generic attribute read each time when compiled)
        kind, a_start, a_end = a.kind, a.start, a.end
        negated_mod = None  # worked out when a mention before the attribute is a candidate
        if kind == "size" and _DISTANCE_AFTER.match(lower, a_end):
            continue
        best = -1
        # only a distance within MAX_GAP can win; a candidate whose gap alone is no shorter than
        # the best distance so far is not looked at (its distance only adds penalties to the gap)
        best_d = MAX_GAP + 1
        nxt = -2  # the first mention after the attribute (worked out when an earlier one is a candidate)
        i = _bisect_left(ends, a_start - MAX_GAP)
        while i < n and starts[i] <= a_end + MAX_GAP:
            ms, me = starts[i], ends[i]
            if a_start >= ms and a_end <= me:  # inside the mention ("left lower lobe atelectasis" pattern)
                d = 0
            elif a_end <= ms:  # attribute before the mention
                if ms - a_end >= best_d:
                    break  # the later mentions are further away still
                gap = lower[a_end:ms]
                if kind == "size" and " of " in gap:
                    d = 1 << 30  # "1.9 cm interruption of the catheter": it measures the interruption
                elif (kind == "severity" or kind == "size") and gap.strip() and _MOD_BREAK.search(gap.lstrip()):
                    # a modifier separated from the mention by a clause break or "with" modifies
                    # a word of its own phrase ("stable moderate cardiomediastinal silhouette with
                    # atherosclerotic calcifications": not moderate calcifications, CXR1173)
                    d = 1 << 30
                elif kind in _PRE_KINDS and _VERB_BREAK.search(gap):
                    d = 1 << 30  # "chronic though could reflect early pulmonary edema" (CXR343)
                elif kind == "laterality" and _SET_OFF_BEFORE.search(lower, 0, a_start) and _NEW_PHRASE.match(gap):
                    # round 31: a side set off by commas and followed by a coordinated phrase is
                    # the phrase before it ("Blunting of both costophrenic angles, right greater
                    # than left, with pleural thickening ...": no bilateral thickening); with no
                    # coordination it may open the next one ("Diffuse, right greater than left,
                    # interstitial opacities")
                    d = 1 << 30
                else:
                    # "nodules in the left base are calcified": a verb between the location and
                    # the next mention makes the location the subject's, not the predicate's
                    d = len(gap) + _penalty(gap) + (20 if _VERB.search(gap) else 0)
            elif a_start >= me:  # after
                if negated_mod is None:
                    negated_mod = kind in _NEG_KINDS and _NEGATED_BEFORE.search(
                        lower, max(0, a_start - 16), a_start) is not None
                if negated_mod or a_start - me + 4 >= best_d:
                    i += 1
                    continue
                gap = lower[me:a_start]
                d = len(gap) + 4 + _penalty(gap)
                pre = kind in _PRE_KINDS
                comma = "," in gap or ";" in gap
                if pre or comma:
                    if nxt == -2:
                        nxt = _bisect_left(starts, a_end)
                    # the attribute opens the next mention's phrase: a modifier ("small amount of
                    # right basilar atelectasis", CXR1079), or any attribute after a clause break
                    # ("mild hyperinflation, right apical pleural-parenchymal irregularities
                    # compatible with scarring": the apex is the scarring's, CXR2516)
                    if nxt < n and ((pre and starts[nxt] - a_end <= 40 and not _PHRASE_BREAK.search(
                                        lower, _adj_end(lower, a_end), starts[nxt])
                                     and not _VERB_BREAK.search(lower, a_end, starts[nxt]))
                                    or (comma and not _CLAUSE_END.search(lower, a_end, starts[nxt])
                                        and not (pre and _VERB_BREAK.search(lower, a_end, starts[nxt])))):
                        i += 1
                        continue
                    if kind == "severity" and _COORD_AFTER.search(gap) and _WORD_NEXT.match(lower, a_end):
                        # "aortic tortuosity and mild ectasia": after a coordination, a modifier
                        # followed by a word describes that word (no finding of ours), not the
                        # finding before it (CXR2565); "effusion, small in size" still is the effusion's
                        i += 1
                        continue
            else:
                d = 0
            if d < best_d:
                best, best_d = i, d
            i += 1
        if best < 0:
            continue
        v = vals[best]
        if v is None:
            v = vals[best] = _AttrValues()
        if kind == "region":
            if a.value not in v.regions:
                v.regions.append(a.value)
            ol = own_loc[best]
            if ol:
                ol.append(a)
            else:
                own_loc[best] = [a]
        elif kind == "size":
            size = float(a.value)
            if v.size_mm is None:
                v.size_mm = size
            elif v.size_mm != size:
                # two sizes for one mention ("two nodules measuring 13 mm and 16 mm"): two lesions,
                # and neither size is "the" nodule's (round 19, CXR1329); none is kept
                v.size_mm = size = -1.0
                clash = True
        elif kind == "laterality":
            prev = lat_at[best]
            if prev is None or v.laterality is None:
                v.laterality = a.value
                lat_at[best] = (best_d, a_start, a_end)
            elif v.laterality != a.value:
                lo, hi = (prev[2], a_start) if prev[1] < a_start else (a_end, prev[1])
                if _SIDE_PAIR.fullmatch(lower, lo, hi):  # "right and left lower lobes"
                    v.laterality = "bilateral"
                elif best_d < prev[0]:  # the side stated nearer the finding wins
                    v.laterality = a.value
                    lat_at[best] = (best_d, a_start, a_end)
            ol = own_loc[best]
            if ol:
                ol.append(a)
            else:
                own_loc[best] = [a]
        elif getattr(v, kind) is None or a.value == UNKNOWN_AGE:
            # the first word of a kind wins, but an age called uncertain overrides any other age
            # ("old appearing rib fracture, acuity uncertain": no age; rules.py then clears it)
            setattr(v, kind, a.value)
            if kind == "change" and a_end <= starts[best] and a.value in shared_change:
                chg_pre.add(best)
        v.spans.append((a_start, a_end))
    if clash or sizes > 1:
        _drop_split_sizes(vals, starts, lower, sizes > 1)
    if n > 1 and any(own_loc):  # no location at all: nothing to share
        for k in range(n):
            if vals[k] is None:
                vals[k] = _AttrValues()
        _share_locations(vals, starts, ends, own_loc, lower, share, signs, fits, region_side, devices)  # type: ignore[arg-type]
    if chg_pre and n > 1:
        _share_change(vals, starts, ends, lower, chg_pre)
    return vals  # type: ignore[return-value]


# "and" / "or" / a list comma between two coordinated mentions, not a negated one ("Resolving
# pneumonia and no effusion": the effusion's "no" is no change)
_COORD_CHANGE: Final = re.compile(r"\s*(?:,\s*)?(?:and/or|and|or|,)\s*(?!(?:no|not|without)\b)(?:[a-z-]+\s+){0,2}")


def _share_change(vals: list[AttrValues | None], starts: list[int], ends: list[int], lower: str,
                  chg_pre: set[int]) -> None:
    """Session 15: the change word before a coordinated group ("Resolving pulmonary interstitial
    edema and pulmonary venous hypertension", an outside reader's CXR157: the venous hypertension
    was said as current) is every member's that states none of its own."""
    n = len(vals)
    g0 = 0
    for i in range(1, n + 1):
        if i < n and _COORD_CHANGE.fullmatch(lower, ends[i - 1], starts[i]):
            continue
        if i - g0 > 1 and g0 in chg_pre:
            first = vals[g0]
            for k in range(g0 + 1, i):
                v = vals[k]
                if v is None:
                    v = vals[k] = _AttrValues()
                if v.change is None:
                    v.change = first.change  # type: ignore[union-attr]
        g0 = i


# a mention counted as more than one lesion ("Two nodules are noted ... measuring 13 mm and one
# measuring 16 mm", CXR1329, R2Gen train: "a nodule of 13 mm")
# ("a 3 cm mass": a digit before a unit is a size, no count)
_COUNTED_MANY: Final = re.compile(r"\b(?:two|three|four|five|six|several|multiple|numerous|few|[2-9](?!\s*(?:mm|cm|milli|centi)))"
                                  r"\s+(?:[a-z-]+\s+){0,3}$")


def _drop_split_sizes(vals: list[AttrValues | None], starts: list[int], lower: str, many_sizes: bool) -> None:
    """No size for a mention given two sizes, nor, where the sentence states two sizes, for a
    mention counted as several lesions: each size is one lesion's, none is "the" finding's."""
    for k, v in enumerate(vals):
        if v is None or v.size_mm is None:
            continue
        if v.size_mm < 0 or (many_sizes and _COUNTED_MANY.search(lower, max(0, starts[k] - 40), starts[k])):
            v.size_mm = None


def _share_locations(vals: list[AttrValues], starts: list[int], ends: list[int], own_loc: list,
                     lower: str, share: list[bool] | None, signs: list[bool] | None = None,
                     fits: Callable[[int, str], bool] | None = None,
                     region_side: dict[str, str | None] | None = None,
                     devices: list[bool] | None = None) -> None:
    """A location outside a coordinated group of mentions governs all its members that can lie
    there (``fits(i, region)``): "bilateral calcified granulomas and degenerative change in the
    spine" puts the degenerative change in the spine, not the granulomas (CXR3825, final row read)."""
    n = len(vals)
    g0 = 0
    for i in range(1, n + 1):
        if i < n and _COORD.fullmatch(lower, ends[i - 1], starts[i]):
            continue
        if g0 > 0 and (vals[g0 - 1].laterality or vals[g0 - 1].regions) and starts[g0] - ends[g0 - 1] <= 2 * MAX_GAP \
                and (share is None or share[g0 - 1]) and (
                _EXPLAINS.search(lower, max(ends[g0 - 1], starts[g0] - 64), starts[g0])
                # apposition after a sign: "opacity in the left base, scarring or atelectasis"
                or (signs is not None and signs[g0 - 1] and (_APPOSITION.search(lower, ends[g0 - 1], starts[g0])
                                                             or _MASK_GAP.fullmatch(lower, ends[g0 - 1], starts[g0])))):
            sign = vals[g0 - 1]
            for k in range(g0, i):
                v = vals[k]
                if (share is not None and not share[k]) or v.laterality or v.regions:
                    continue
                v.laterality = sign.laterality
                v.regions.extend(sign.regions)
        elif g0 > 0 and i - g0 <= MAX_GROUP and not (vals[g0 - 1].laterality or vals[g0 - 1].regions) \
                and (share is None or share[g0 - 1]) and starts[g0] - ends[g0 - 1] <= 2 * MAX_GAP \
                and _EXPLAINS.search(lower, max(ends[g0 - 1], starts[g0] - 64), starts[g0]):
            # the location closing the explanation is the sign's too ("nodules consistent with
            # prior granulomatous disease bilaterally": the nodules are bilateral)
            after = [a for k in range(g0, i) for a in own_loc[k] if a.start >= ends[i - 1]]
            sign = vals[g0 - 1]
            for a in after:
                if a.kind == "region":
                    if a.value not in sign.regions:
                        sign.regions.append(a.value)
                elif sign.laterality is None or sign.laterality == a.value:
                    sign.laterality = a.value
                else:
                    sign.laterality = "bilateral"
        if 1 < i - g0 <= MAX_GROUP:  # group g0 .. i-1
            lo, hi = starts[g0], ends[i - 1]
            # outside the group, or opening it inside a lexicon term ("bibasilar atelectasis or
            # scarring": "bibasilar" is part of the first term); a location word that ends the
            # last term is that finding's own ("hyperinflated lungs with flattened diaphragms":
            # the diaphragms are two, the lungs get no side from them)
            outside = [(k, a) for k in range(g0, i) for a in own_loc[k]
                       if a.start <= lo or a.start >= hi]
            # "X with Y in Z": the place after the group is Y's; X is only accompanied by Y
            # ("left pneumothorax, with partial collapse of the left upper and lower lobes": the
            # lobes are the collapse's, CXR3945; "pneumothorax with collapse of the right lower
            # lobe", CXR3369)
            w0 = g0
            for k in range(g0 + 1, i):
                if _WITH.search(lower, ends[k - 1], starts[k]):
                    w0 = k
            for k in range(g0, i):
                if share is not None and not share[k]:
                    continue
                v = vals[k]
                # a sided place of its own ("right infrahilar infiltrate") states the member's side:
                # the group's "bilateral" (the effusions') is not its side (CXR1868)
                own_side = any(a.kind == "laterality" or (region_side is not None and a.kind == "region"
                                                          and region_side.get(a.value) in ("left", "right"))
                               for a in own_loc[k])
                own_region = any(a.kind == "region" for a in own_loc[k])
                # round 31: an alternative ("pleural thickening versus loculated fluid along the
                # right upper lobe") after a member of another side ("Small bilateral pleural
                # effusions and ...") is one thing at the place after it: the side before the
                # group is the earlier member's, not this one's (it was bilateral thickening)
                alt_after = own_region and not own_side and k + 1 < i and region_side is not None \
                    and _ALTERNATIVE.fullmatch(lower, ends[k], starts[k + 1]) is not None \
                    and _sides_conflict(outside, lo, hi, region_side)
                if not own_side and not own_region and region_side is not None and _sides_conflict(
                        outside, lo, hi, region_side):
                    # places of different sides before and after the group ("left lower lobe
                    # pneumonia and minimal scarring or atelectasis in the right lung base"): each
                    # is a neighbour's; which one a member between them shares is not said, and
                    # both together made it bilateral (CXR808)
                    continue
                for _src, a in outside:
                    if k < w0 and a.start >= hi:
                        continue
                    if alt_after and a.start <= lo:
                        continue
                    if devices is not None and devices[k] and _across_clause(lower, a, starts[k], ends[k]):
                        # round 21: a device named in a clause of its own is not where the other
                        # clause's place is ("Osseous demineralization and exaggerated kyphosis, VP
                        # shunt tubing noted": no shunt "in the bony thorax")
                        continue
                    if a.kind == "region":
                        if own_region and not own_side and v.laterality is None and region_side is not None \
                                and region_side.get(a.value) in ("left", "right") \
                                and not any(o.kind == "laterality" and (o.start >= hi or not alt_after)
                                            for _s, o in outside) \
                                and _two_sided(own_loc[k], region_side[a.value], region_side):
                            # round 27: a member whose own term places it unsided in a two-sided
                            # structure ("pleural thickening": the pleura) still takes the side of
                            # the group's sided place ("pleural thickening versus loculated fluid
                            # along the periphery of the right upper lobe" is right, never unsided
                            # or bilateral); a midline one ("mediastinal calcifications and dense
                            # nodule in the lingula", CXR2789) takes none
                            v.laterality = region_side[a.value]
                        if own_region or a.value in v.regions:
                            continue
                        if fits is None or fits(k, a.value):
                            v.regions.append(a.value)
                        elif region_side is not None and not own_side and v.laterality is None \
                                and region_side.get(a.value) and not any(
                                    o.kind == "laterality" for _s, o in outside):
                            # a place the member cannot lie in still gives it its side: "right
                            # pleural effusion and atelectasis" is right atelectasis
                            v.laterality = region_side[a.value]
                    elif own_side:
                        continue
                    elif v.laterality is None or v.laterality == a.value:
                        v.laterality = a.value
                    else:
                        v.laterality = "bilateral"
        g0 = i


def _two_sided(own: list, side: str | None, region_side: dict[str, str | None]) -> bool:
    """Every place a member's own term gives it has a part on ``side`` ("pleura": "left_pleura")."""
    regs = [a.value for a in own if a.kind == "region"]
    return side is not None and bool(regs) and all(region_side.get(f"{side}_{r}") == side for r in regs)


def _across_clause(lower: str, a: Attr, m_start: int, m_end: int) -> bool:
    """A clause break (comma, semicolon) stands between location ``a`` and the mention at
    ``[m_start, m_end)``."""
    lo, hi = (a.end, m_start) if a.end <= m_start else (m_end, a.start)
    return _CLAUSE_BREAK.search(lower, lo, hi) is not None


_CLAUSE_BREAK: Final = re.compile(r"[,;]")
_ALTERNATIVE: Final = re.compile(r"\s*(?:versus|vs\.?|or|and/or)\s*(?:[a-z-]+\s+){0,2}")


def _sides_conflict(outside: list[tuple[int, Attr]], lo: int, hi: int,
                    region_side: dict[str, str | None]) -> bool:
    """The locations before a group and those after it state different sides."""
    before: set[str] = set()
    after: set[str] = set()
    for _k, a in outside:
        side = a.value if a.kind == "laterality" else region_side.get(a.value)
        if side:
            (before if a.start <= lo else after).add(side)
    return bool(before and after and before != after)


def _penalty(gap: str) -> int:
    # Crossing a clause boundary makes the attribute much less likely to belong to that mention.
    p = 0
    if "," in gap or ";" in gap:
        p += 25
    if " and " in gap or " with " in gap or " but " in gap:
        p += 15
    return p
