"""The default, offline extractor: report text -> Extraction (sections, sentences, observations
with evidence, indication). Everything it knows is data: the ontology (findings, regions,
modifiers) and ``radvqa/extract/data/*.yaml`` (sections, context cues, patterns, attributes)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

from msgspec.structs import replace  # AttrValues and FrozenAttrs are msgspec Structs

from radvqa.extract._data import load_data
from radvqa.extract._trie import _ASCII_WORD, ASCII_NOT_WORD, trie_regex, trie_regexes
from radvqa.extract.aggregate import Aggregator, regions_side
from radvqa.extract.attributes import UNKNOWN_AGE, AttributeMatcher, AttrValues, FrozenAttrs, attach, freeze
from radvqa.extract.places import FindingPlaces
from radvqa.extract.context import DOM_POST, DOM_PRE, HIST, HYPO, NEG_POST, NEG_PRE, UNC_PRE, ContextRules
from radvqa.extract.mentions import MentionMatcher
from radvqa.extract.sections import body_part_heading, section_role, split_sections
from radvqa.extract.sentences import missing_stops, sentence_spans
from radvqa.extract.text import MAX_CHARS, check_text, lower_same_length
from radvqa.model import Extraction, Indication, Report, Sentence, Span
from radvqa.ontology.core import sided_parts
from radvqa.extract import EXTRACTORS

# Made per report, sentence or match: compiled code reads a Final name as a C static, where an
# imported name is looked up in the module's dict at every call (about 170 instructions each)
_Span: Final = Span
_Sentence: Final = Sentence
_Extraction: Final = Extraction
_Report: Final = Report
_Indication: Final = Indication

VERSION: Final = "rules:2"  # 2: alternatives uncertain, qualified negatives, scope, side propagation (#12)
# sentence ids, made once ("S01", "S02", ...; a longer report formats its own)
_SIDS: Final = tuple(f"S{n:02d}" for n in range(1, 100))
# The records the sentence cache keeps (precise types: the compiled engine unpacks them with
# direct tuple reads instead of Python's iteration protocol; annotations cost pure Python nothing).
# An observation key: (finding, laterality, regions)
Key = tuple[str, "str | None", tuple[str, ...]]
# A location: (laterality, regions)
Loc = tuple["str | None", tuple[str, ...]]
# One mention of an analysed sentence: (start, end, findings, certainty, implicit, attributes,
# qualifier, own location, wants the previous sentence's location, observation keys, for an
# uncertain unqualified mention where a "not a hedge" phrase before it starts (_hedge_at), the
# attributes as the aggregator needs them (_agg_attrs: None when it would read nothing of them),
# and offered (uncertain only because the sentence offers it as one of alternatives: _mentions))
Item = tuple[int, int, tuple[str, ...], "str | None", bool, "FrozenAttrs | None", "str | None", "Loc | None", bool,
             tuple[Key, ...], "tuple[int, int] | None", "FrozenAttrs | None", bool]
# What _mentions finds: (start, end, findings, certainty, implicit, attributes, qualifier,
# offered); the certainty of an indication's mention may be None (asked about, no statement)
Raw = tuple[int, int, tuple[str, ...], "str | None", bool, "AttrValues | None", "str | None", bool]
# A sentence's analysis: (body-part heading, items, anaphoric?, may the next sentence explain a sign away?)
Entry = tuple["tuple[str, bool] | None", tuple[Item, ...], bool, bool]
# A section's sentences: (start, end, analysis or None for a skipped section), offsets in the section
SecHit = tuple[tuple[int, int, "Entry | None"], ...]
# the side a place of this side rules out (a side with a place of the other side is never said)
_OTHER_SIDE: Final = {"left": "right", "right": "left"}

# A sentence longer than this is not report prose (a run without punctuation, a pasted table):
# the report is rejected with this reason rather than analysed (#20; OpenI's longest sentence
# has 414 characters, MIMIC's a few thousand). Work per sentence is linear below it.
MAX_SENTENCE_CHARS: Final = 20_000


# the words between an explanation and a finding offered as its alternative ("overlapping
# shadows or actual pulmonary nodule")
_OR_NEXT: Final = re.compile(r"[^\s;,.]*(?:\s+[^\s;,.]+){0,2}?\s*,?\s+(?:or|versus|vs\.?)\s+(?:[a-z-]+\s+){0,2}")


# an alternative connector between a cause cue and the mention ("related to X or <mention>")
_ALT_BEFORE: Final = re.compile(r"\b(?:or|versus|vs)\b")


# a past disease named as one alternative ("old empyema, hematoma, or prior TB")
_PAST_BEFORE: Final = re.compile(r"\b(?:old|prior|previous|remote)\s+$")


# the words between two members of a plain list ("consolidation, atelectasis or infiltrate")
_LIST_JOIN: Final = re.compile(r"\s*,?\s*(?:(?:and|or|nor|and/or)\s+)?")


# a mention followed by another alternative ("secondary to cardiomegaly or pericardial effusion")
_ALT_NEXT: Final = re.compile(r"\s*,?\s*(?:or|versus|vs\.?)\s")


def _mask_before(stext: str, i0: int) -> bool:
    """Whether a de-identification mask stands in the 40 characters of the sentence before a
    mention at ``i0``, no clause break (";", ":") after it: the mask may have eaten a hedge. (Two
    str calls: it is asked of every present mention of every report.)"""
    k = stext.rfind("XXXX", max(0, i0 - 40), i0)
    return k >= 0 and stext.find(";", k, i0) < 0 and stext.find(":", k, i0) < 0

# between an adjective and the noun it qualifies: a space or hyphen, at most one word ("calcified
# hepatic cyst": "hepatic cyst" is the mention)
_ADJ_GAP: Final = re.compile(r"[\s-]+(?:[a-z]+\s+)?")


# what an uncertain mention does to the same finding stated plainly elsewhere (_hedges)
NO_HEDGE: Final = 0
HEDGES: Final = 1
OFFERED: Final = 2  # offered as one of alternatives: hedges only a statement after a mask


def _agg_attrs(fv: FrozenAttrs, keys: tuple[Key, ...]) -> FrozenAttrs | None:
    """A mention's attributes as the aggregator reads them: None when it would read nothing of them
    (no severity, size, change, temporal or dropped word, and every observation key keeps all the
    mention's regions: its side and places are in the keys already). Most located mentions: the
    aggregator then skips reading six fields of a msgspec Struct per observation (generic
    attribute reads when compiled)."""
    if fv.severity is not None or fv.size_mm is not None or fv.change is not None or fv.temporal is not None \
            or fv.dropped:
        return fv
    n = len(fv.regions)
    for k in keys:
        if len(k[2]) != n:
            return fv  # a place the finding cannot lie in: recorded as dropped
    return None


def _plain_of(ontology: Any, dflt: tuple[str, ...], sided_below: dict[str, list[str]]) -> frozenset[str]:
    """A finding's plain places: its default regions, their ancestors, and the sided regions right
    below a default region."""
    out = {r for d in dflt for r in (d, *ontology.region_ancestors(d))}
    for d in dflt:
        out.update(sided_below.get(d, ()))
    return frozenset(out)


def _fits_fn(ex: Any, mentions: list, seg: str = "") -> Callable[[int, str], bool]:
    """``attach``'s test whether mention ``k`` can lie in a region (a closure at module level:
    the compiled engine has none inside the extractor's methods); round 25: nor where a word of
    its own term excludes it ("airspace opacities" lie in no interstitium, attributes.yaml
    ``term_excludes_places``)."""
    excl = ex._term_not_places

    def fits(k: int, r: str) -> bool:
        m = mentions[k]
        if excl and seg and any(r in rs for w, rs in excl.items() if w in seg[m.start:m.end]):
            return False
        return ex._fits(m.findings, r)
    return fits


class RulesExtractor:
    """Build once (compiles the ontology and rule data), then call ``extract`` per report."""

    version = VERSION

    def __init__(self, ontology: Any = None, *, max_chars: int = MAX_CHARS, cache_size: int = 50_000,
                 max_sentence_chars: int = MAX_SENTENCE_CHARS, hedges: str = "keep"):
        """``hedges``: "keep" (default; alternatives and "likely"/"probable"/"borderline" are
        uncertain: what a scene graph should say) or "commit" (both count as present, as label
        benchmarks built from MeSH indexing do, e.g. the OpenI NIH-14 gold; version "rules:2-commit")."""
        if hedges not in ("keep", "commit"):
            raise ValueError(f"hedges must be 'keep' or 'commit', not {hedges!r}")
        if ontology is None:
            from radvqa.ontology import load_ontology

            ontology = load_ontology()
        self.ontology = ontology
        self.max_chars = max_chars
        self.max_sentence_chars = max_sentence_chars
        # lower-cased sentence -> analysed mentions (one dict per section kind); see _analyse
        self.cache_size = cache_size
        self._cache: dict[str, Entry] = {}
        self._cache_ind: dict[str, Entry] = {}  # the same for sentences of an indication section
        # (role, section text, the 3 characters after it, starts the report?, lower-cased text)
        # -> its sentences' offsets and analyses; see _extract
        self._sec_cache: dict[tuple, SecHit] = {}
        mods = getattr(ontology, "modifiers", None)
        onto_cues = dict(getattr(mods, "certainty", {}) or {}) if mods is not None else {}
        ctx_data = load_data("context")
        # The ontology's cue lists are merged unless our context data says to use ours only.
        self.context = ContextRules(ctx_data, None if ctx_data.get("ours_only", True) else onto_cues)
        # qualified negatives: word -> qualifier value ("grossly" -> "gross")
        qual: dict[str, str] = {}
        for value, words in (ctx_data.get("qualifiers") or {}).items():
            for w in words:
                qual[" ".join(str(w).lower().split())] = str(value)
        self.qualifiers = qual
        # (and the same trie led by one non-word character, for an ASCII sentence: _qualifier)
        self.qualifier_re: re.Pattern[str] | None = None
        self.qualifier_fast: re.Pattern[str] | None = None
        if qual:
            self.qualifier_re, self.qualifier_fast = trie_regexes(qual)
        lq = set(ctx_data.get("list_qualifiers") or [])
        if lq - set(qual.values()):
            raise ValueError(f"context.yaml list_qualifiers: not a qualifier value {sorted(lq - set(qual.values()))}")
        self.list_qualifiers = frozenset(lq)
        self.list_qualifier_words = tuple(w for w, v in qual.items() if v in lq)
        alt = ctx_data.get("alternatives") or {}
        conn = "|".join(re.escape(c) for c in sorted(alt.get("connectors") or [], key=len, reverse=True))
        # the words between two alternatives: a connector (a comma may precede it or chain a
        # list) and up to four modifiers of the second one ("scarring or early atelectasis",
        # "scar or a small amount of loculated pleural fluid", audit #13 r6 CXR2817)
        self.alt_gap = re.compile(rf"\s*(?:,\s*)?(?:(?:{conn})\s*)(?:[a-z-]+\s+){{0,4}}") if conn else None
        self.anaphora = re.compile(
            r"\s*(?:\d{1,2}[.)]\s*)?(?:this|these|they|it|the\s+(?:findings?|opacit(?:y|ies)|densit(?:y|ies)|abnormalit(?:y|ies)))\b"
            r"[^.;]{0,60}?\b(?:represents?|representing|reflects?|reflecting|suggest\w*|concerning|suspicious|compatible|"
            r"consistent|due to|related to|secondary to|likely|may|could|might|possibly|probably)\b")
        # an open alternative: the words after a finding up to "versus", whatever follows it
        # (a few place words between: "effusion in the right base versus thickening")
        oc = [str(c) for c in alt.get("open_connectors") or []]
        self.open_alt = re.compile(
            rf"(?:\s+(?:in|at|of|within|on)\s+(?:the\s+)?(?:[a-z-]+\s+){{0,3}}?[a-z-]+)?\s*,?\s*(?:{'|'.join(re.escape(c) for c in sorted(oc, key=len, reverse=True))})(?=[\s,])"
        ) if oc else None
        self.open_hint = tuple(sorted({c.rstrip('.') for c in oc}))
        # whether a sentence holds one of them: one C search instead of a generator per sentence
        self.open_hint_re = re.compile("|".join(re.escape(h) for h in self.open_hint) or "(?!x)x")
        # round 28: the mirror, an alternative offered after the connector though what comes before
        # it names no finding the extractor reads ("XXXX versus pleural scarring in the right
        # fissure", "vascular crowding versus pleural scarring"): up to four modifiers between
        oa = [str(c) for c in alt.get("open_after_connectors") or []]
        self.open_after = re.compile(
            rf"(?:^|[\s,(])(?:{'|'.join(re.escape(c) for c in sorted(oa, key=len, reverse=True))})\s+(?:[a-z-]+\s+){{0,4}}$"
        ) if oa else None
        self.open_after_hint = re.compile("|".join(re.escape(c.rstrip('.')) for c in oa) or "(?!x)x")
        sc = [str(c) for c in alt.get("sign_connectors") or []]
        self.sign_gap = re.compile(
            rf"\s*(?:,\s*)?(?:{'|'.join(re.escape(c) for c in sorted(sc, key=len, reverse=True))})\s+(?:[a-z-]+\s+){{0,4}}") \
            if sc else None
        # "X over Y": X favoured, Y the less likely alternative (uncertain)
        fo = [str(c) for c in alt.get("favoured_over") or []]
        self.favoured_over = re.compile(
            rf"\s+(?:{'|'.join(re.escape(c) for c in sorted(fo, key=len, reverse=True))})\s+") if fo else None
        self.favoured_hint = tuple(f" {c} " for c in fo)
        pd = ctx_data.get("past_diseases") or {}
        unknown = [f for f in pd.get("findings") or [] if f not in ontology.findings]
        if unknown:
            raise ValueError(f"context.yaml past_diseases: unknown finding id(s) {unknown}")
        self.past_diseases = frozenset(pd.get("findings") or [])
        pw = [str(w) for w in pd.get("words") or []]
        self.past_before = re.compile(rf"\b(?:{'|'.join(re.escape(w) for w in pw)})\s+$") if pw and self.past_diseases else None
        self.past_hint = tuple(f"{w} " for w in pw)
        self.past_reach = max((len(w) for w in pw), default=8) + 4  # (how far back a past word may start)

        # round 13: "no significant change in X or Y" compares a list, it offers no alternatives
        lh = [str(c) for c in alt.get("list_heads") or []]
        self.list_head = re.compile(
            rf"\b(?:{'|'.join(re.escape(c) for c in sorted(lh, key=len, reverse=True))})\s+(?:[a-z-]+\s+){{0,3}}$") \
            if lh else None
        # round 22: a sentence of bare finding names joined by "or" states nothing (context.yaml
        # ``alternatives.bare_lists``): what is left of it without its mentions
        bl = alt.get("bare_lists") or {}
        bl_conn = [str(c) for c in bl.get("connectors") or []]
        bl_words = [str(w) for w in bl.get("words") or []]
        self.bare_conn = re.compile(rf"\b(?:{'|'.join(re.escape(c) for c in bl_conn)})\b") if bl_conn else None
        self.bare_signs = frozenset(str(f) for f in bl.get("signs") or [])
        if self.bare_signs - set(ontology.findings):
            raise ValueError(f"context.yaml alternatives.bare_lists.signs: unknown finding id(s) "
                             f"{sorted(self.bare_signs - set(ontology.findings))}")
        self.bare_rest = re.compile(
            rf"(?:\s|,|\b(?:{'|'.join(re.escape(c) for c in bl_conn + bl_words)})\b)*[.]?\s*") if bl_conn else None
        # round 13: ", <sign> concerning for <diagnosis>" after a negation opens a statement of its
        # own (context.yaml ``negation_breaks``)
        nbk = ctx_data.get("negation_breaks") or {}
        nb_cues = {str(c): "uncertain" for c in nbk.get("hedges") or []}
        nb_cues.update({str(c): "present" for c in nbk.get("commits") or []})
        self.neg_break = re.compile(
            rf"\b(?:{'|'.join(re.escape(c) for c in sorted(nb_cues, key=len, reverse=True))})\b") if nb_cues else None
        self.neg_break_cert = nb_cues
        self.neg_break_words = int(nbk.get("max_words", 5))
        self.neg_break_list = re.compile(r"\b(?:and|or|nor|and/or)\b|/")
        # "X, with adjacent Y or Z": X is no member of the list of alternatives (CXR1704)
        self.list_gap = re.compile(r"\s*,\s*(?:(?!with\b)[a-z-]+\s+){0,2}")
        # a cheap test first: most sentences hold no connector at all
        words = [re.escape(c) for c in alt.get("connectors") or [] if c[:1].isalnum()]
        marks = [re.escape(c) for c in alt.get("connectors") or [] if not c[:1].isalnum()]
        self.alt_hint = re.compile("|".join(([rf"\b(?:{'|'.join(words)})\b"] if words else []) + marks) or "(?!x)x")
        # the same test on an ASCII sentence (_has_alt): the marks as substrings, the words led by
        # one non-word character, so that the regex engine skips to those in C (the leading \b
        # made it try the alternation at every position: 8.5 us for a 130-character sentence)
        self.alt_marks = tuple(str(c) for c in alt.get("connectors") or [] if not c[:1].isalnum())
        self.alt_words_fast = re.compile(rf"{ASCII_NOT_WORD}(?:{'|'.join(words)})\b") if words else None
        unknown = [f for f in alt.get("signs") or [] if f not in ontology.findings]
        if unknown:
            raise ValueError(f"context.yaml alternatives.signs: unknown finding id(s) {unknown}")
        self.alt_signs = frozenset(alt.get("signs") or [])
        partners = [str(f) for f in alt.get("sign_partners") or []]
        unknown = [f for f in partners if f not in ontology.findings]
        if unknown:
            raise ValueError(f"context.yaml alternatives.sign_partners: unknown finding id(s) {unknown}")
        # a partner and everything below it in the ontology (atelectasis, pneumonia: lung opacities)
        self.sign_partners = frozenset(f for f in ontology.findings
                                       if any(f == p or ontology.is_a(f, p) for p in partners))
        same = [frozenset(str(f) for f in pair) for pair in alt.get("same_finding") or []]
        unknown = sorted({f for pair in same for f in pair if f not in ontology.findings})
        if unknown:
            raise ValueError(f"context.yaml alternatives.same_finding: unknown finding id(s) {unknown}")
        self.alt_same = frozenset(same)
        # a sign explained away as no lung opacity ("density ... representing overlying shadows")
        ea = alt.get("explained_away") or {}
        self.explained_away = self.explained_pre = None
        if ea.get("cues") and ea.get("explanations"):
            cues = "|".join(re.escape(" ".join(str(c).split())) for c in sorted(ea["cues"], key=len, reverse=True))
            expl = "|".join(re.escape(" ".join(str(c).split())) for c in sorted(ea["explanations"], key=len, reverse=True))
            # every word of the gap before the cue starts after whitespace: with an optional
            # separator ("\s*[^\s;]+") a word could be cut into pieces in 2^(length-1) ways, and a
            # clause with no cue took seconds to fail (CXR1016: 6 s for one report)
            self.explained_away = re.compile(
                rf"[^\s;]*(?:\s+[^\s;]+){{0,10}}?\s+[^\w\s;]*(?:{cues})\b(?:\s+[^\s;]+){{0,{int(ea.get('max_words', 8))}}}?\s+(?:{expl})\b")
        # "Nodular right lower lobe opacity, XXXX nipple XXXX" (CXR412, seed 70): a comma and a
        # blanked word (four spaces) right before the explanation stand for the cue the
        # de-identification took
        self.explained_masked = re.compile(
            rf",\s{{5,8}}(?:{expl})\b") if ea.get("masked_cue") and self.explained_away is not None else None
        ns = ea.get("next_sentence") or {}
        self.explained_next = None
        self.explained_next_hedge: re.Pattern[str] | None = None
        self.explained_next_findings: frozenset[str] = frozenset()
        if ns.get("anaphors") and ea.get("explanations"):
            unknown = [f for f in ns.get("findings") or [] if f not in ontology.findings]
            if unknown:
                raise ValueError(f"context.yaml alternatives.explained_away.next_sentence: unknown finding id(s) {unknown}")
            ana = "|".join(re.escape(" ".join(str(c).split())) for c in sorted(ns["anaphors"], key=len, reverse=True))
            words = [*ea["explanations"], *(ns.get("next_words") or [])]
            expl = "|".join(re.escape(" ".join(str(c).split())) for c in sorted(words, key=len, reverse=True))
            # a sentence that explains the previous one's sign away (see context.yaml)
            # (round 24: or opens the clause after a leading one, "XXXX correlated with prior CT,
            # XXXX this represents vascular shadows": ``lead_chars``)
            lead = "|".join(re.escape(" ".join(str(c).split())) for c in sorted(ns.get("lead_anaphors") or ["this"], key=len, reverse=True))
            self.explained_next = re.compile(
                rf"\s*(?:(?P<ana>{ana})|[^.;,]{{1,{int(ns.get('lead_chars', 0))}}},\s*(?P<lead>{lead}))\b"
                rf"[^.;]{{0,{int(ns.get('next_chars', 60))}}}?\b(?:{expl})\b(?!\s+on\b)")
            next_hedges = "|".join(re.escape(" ".join(str(c).split())) for c in ns.get("hedges") or [])
            # an explanation stated without a hedge removes the sign, as within its sentence
            # (not named ``hedges``: that is the constructor's "keep" / "commit")
            self.explained_next_hedge = re.compile(rf"\b(?:{next_hedges})\b|\?|\s{{4}}") if next_hedges else None
            self.explained_next_findings = frozenset(ns.get("findings") or [])
        also = [f for f in ea.get("also") or []]
        if set(also) - set(ontology.findings):
            raise ValueError(f"context.yaml alternatives.explained_away.also: unknown finding id(s) {sorted(set(also) - set(ontology.findings))}")
        self.explained_also = frozenset(also)
        if ea.get("pre"):
            pre = "|".join(re.escape(str(c)) for c in ea["pre"])
            self.explained_pre = re.compile(rf"\b(?:{pre})\s+(?:[a-z-]+\s+)?$")
        if hedges == "commit":
            self.version = VERSION + "-commit"
            self.alt_gap = None
            self.open_after = None  # (round 28's one-sided alternatives are committed too)
            for w in ctx_data.get("committing_hedges") or []:
                w = " ".join(str(w).lower().split())
                if w in self.context.roles:
                    self.context.roles[w] = 0  # matched, but no cue
        patterns = load_data("patterns")
        self.mentions = MentionMatcher(ontology.finding_terms(), patterns, set(ontology.findings))
        # words an indication uses for a symptom, not for the finding they name in a report
        self.indication_symptoms = frozenset(" ".join(str(p).lower().split())
                                             for p in patterns.get("indication_symptom_phrases", []) or [])
        # what may stand before a redacted-device phrase that is the subject of its sentence
        self.tip_openers = frozenset(" ".join(str(p).lower().split())
                                     for p in patterns.get("redacted_device_openers", []) or [])
        self.redacted_device = frozenset(" ".join(str(p).lower().split())
                                         for p in patterns.get("redacted_device_phrases", []) or [])
        self.devices = frozenset(fid for fid, f in ontology.findings.items() if f.category == "DEVICE")
        self._is_device: dict[tuple[str, ...], bool] = {}  # mention findings -> names a device?
        side = {rid: r.side for rid, r in ontology.regions.items()}
        attr_data = load_data("attributes")
        for rid in attr_data.get("bilateral_regions") or []:
            if rid not in side:
                raise ValueError(f"attributes.yaml bilateral_regions: unknown region id {rid!r}")
            side[rid] = "bilateral"  # "in the lung bases": both sides
        self.attributes = AttributeMatcher(ontology.region_terms(), side, mods, attr_data)
        # round 25: words of a mention's own term -> places such a mention cannot lie in
        self._term_not_places: dict[str, frozenset[str]] = {
            str(w).lower(): frozenset(rs) for w, rs in (attr_data.get("term_excludes_places") or {}).items()}
        per_side = attr_data.get("per_side")
        self.per_side = re.compile(per_side) if per_side else None
        # severity word -> value, for the per-side statements
        self.severity_words = {p: v for p, kinds in self.attributes.table.items() for k, v in kinds if k == "severity"}
        self.region_side = side
        # findings that can have a side; the others get no laterality at aggregation
        sided = set(attr_data.get("sided_findings") or [])
        if sided - set(ontology.findings):
            raise ValueError(f"attributes.yaml sided_findings: unknown finding id(s) {sorted(sided - set(ontology.findings))}")
        self.lateralised = frozenset(fid for fid, f in ontology.findings.items()
                                     if getattr(f, "lateralised", True) or fid in sided)
        self._props: dict[tuple[str, ...], tuple[bool, bool]] = {}
        self._explainable: dict[tuple[str, ...], bool] = {}  # findings -> may be explained away?
        self._keys_memo: dict[tuple, tuple[Key, ...]] = {}
        self._roles: dict[str, str] = {}  # section name -> role (sections.yaml)
        # the sections whose statement decides a finding the report states both plainly and hedged
        self.concluding = frozenset(str(n) for n in load_data("sections").get("concluding") or [])
        # round 22: the words that make a comparison sentence state a current finding (sections.yaml)
        cs = [str(w) for w in load_data("sections").get("compare_states") or []]
        self.compare_states = re.compile(rf"\b(?:{'|'.join(re.escape(w) for w in sorted(cs, key=len, reverse=True))})\b") \
            if cs else None
        bw = ctx_data.get("stated_both_ways") or {}
        words = [" ".join(str(w).lower().split()) for w in bw.get("not_a_hedge_after") or []]
        # a hedged mention these words open names a cause, another instance or an acuity, not a
        # doubt about the finding stated elsewhere
        self.not_a_hedge = re.compile(
            rf"\b(?:{'|'.join(re.escape(w) for w in sorted(words, key=len, reverse=True))})\s+(?:[a-z-]+\s+){{0,5}}$"
        ) if words else None
        # the same led by one non-word character for an ASCII sentence (_not_a_hedge_at)
        self.not_a_hedge_fast = re.compile(
            rf"{ASCII_NOT_WORD}(?:{'|'.join(re.escape(w) for w in sorted(words, key=len, reverse=True))})\s+(?:[a-z-]+\s+){{0,5}}$"
        ) if words and all(w[:1] in _ASCII_WORD for w in words) else None
        self.sign_words = tuple(str(w).lower() for w in bw.get("sign_words") or [])
        # a hedged adjective that names a finding inside the name of another ("may represent a
        # calcified hepatic cyst"): the hedge is on what the other is, not on the finding
        self.modifier_terms = frozenset(" ".join(str(w).lower().split()) for w in bw.get("modifier_terms") or [])
        # where each finding can lie (its default regions), for locations shared over a
        # coordinated group: a region governs only the members that can lie in it
        outside = set(attr_data.get("outside_cavity") or [])
        if outside - set(ontology.regions):
            raise ValueError(f"attributes.yaml outside_cavity: unknown region id(s) {sorted(outside - set(ontology.regions))}")
        # region -> True (outside the thoracic cavity) / False (inside); None for the chest itself
        self._outside: dict[str, bool | None] = {}
        for r in ontology.regions:
            line = {a in outside or a == r and r in outside for a in (r, *ontology.region_ancestors(r)) if a != "chest"}
            self._outside[r] = (True in line) if line else None
        self._fdefault = {fid: tuple(getattr(f, "default_regions", ()) or ()) for fid, f in ontology.findings.items()}
        # finding -> its default regions, their ancestors and one side of them ("right_pleura" for
        # an effusion, "left_lung" for an opacity): places that add nothing to its name but a side
        # (the aggregator keeps a merged mention's severity only beside such places)
        sided_below: dict[str, list[str]] = {}  # region -> the sided regions right below it
        for r, reg in ontology.regions.items():
            if side.get(r) in ("left", "right"):
                for p in getattr(reg, "parents", ()) or ():
                    sided_below.setdefault(p, []).append(r)
        # (place, side) -> the one place of that side right below it ("pleura", "right" ->
        # "right_pleura"): a sided mention placed only by an unsided word ("Right-sided small
        # pleural effusion", "effusion on the right") lies in that side's place, as "small right
        # pleural effusion" does (session 13: the right pleura's list left such an effusion out)
        self._sided_child = sided_parts(ontology.regions)
        self._plain_places = {fid: _plain_of(ontology, dflt, sided_below)
                              for fid, dflt in self._fdefault.items() if dflt}
        unplaced = attr_data.get("unplaced_beside_normal") or {}
        bad = sorted(set(unplaced) - set(ontology.findings)) + sorted(
            {r for rs in unplaced.values() for r in rs} - set(ontology.regions))
        if bad:
            raise ValueError(f"attributes.yaml unplaced_beside_normal: unknown id(s) {bad}")
        self._unplaced = {str(f): frozenset(map(str, rs)) for f, rs in unplaced.items()}
        self._fits_cache: dict[tuple[tuple[str, ...], str], bool] = {}
        # finding -> regions it can lie in (finding_places.yaml); a place word bound to a finding
        # that cannot lie there described another finding and is dropped for this one
        fp = FindingPlaces(ontology)
        self._places = fp.allowed_regions
        self._placed_becomes = fp.placed_becomes
        fsev = attr_data.get("finding_severity") or {}
        if set(fsev) - set(ontology.findings):
            raise ValueError(f"attributes.yaml finding_severity: unknown finding id(s) {sorted(set(fsev) - set(ontology.findings))}")
        self._finding_severity = {f: frozenset(v) for f, v in fsev.items()}
        npo = set(attr_data.get("not_postoperative") or [])
        if npo - set(ontology.findings):
            raise ValueError(f"attributes.yaml not_postoperative: unknown finding id(s) {sorted(npo - set(ontology.findings))}")
        self._not_postoperative = frozenset(npo)
        mid = set(attr_data.get("midline_regions") or [])
        if mid - set(ontology.regions):
            raise ValueError(f"attributes.yaml midline_regions: unknown region id(s) {sorted(mid - set(ontology.regions))}")
        self._midline = frozenset(mid)
        # session 15: change values a word before a coordinated group gives every member
        self.shared_change = frozenset(attr_data.get("shared_change") or ())
        sa = attr_data.get("shared_age") or {}
        self.shared_age = None if not sa.get("cues") else re.compile(
            r"(?:\s+(?:{}))?\s*,?\s*(?:{})\s+(?:[^\s,;.]+\s+){{0,{}}}".format(
                "|".join(re.escape(" ".join(str(c).lower().split())) for c in sa.get("verbs") or ["is noted"]),
                "|".join(re.escape(" ".join(str(c).lower().split())) for c in sorted(sa["cues"], key=len, reverse=True)),
                int(sa.get("max_words", 3))))

    # ------------------------------------------------------------------------------------------
    def extract(self, text: object, study_id: str = "") -> Extraction:
        clean, error = check_text(text, self.max_chars)
        if error is not None:
            return _Extraction(report=_Report(text=clean), extractor=self.version, error=error)
        try:
            return self._extract(clean)
        except Exception as e:  # never raise on bad text: report the reason instead
            return _Extraction(report=_Report(text=clean), extractor=self.version,
                              error=f"extraction failed: {type(e).__name__}: {e}")

    def extract_many(self, items: Iterable[tuple[str, object]]) -> Iterator[Extraction]:
        for sid, text in items:
            yield self.extract(text, sid)

    # ------------------------------------------------------------------------------------------
    def _extract(self, text: str) -> Extraction:
        lower = lower_same_length(text)
        sections = split_sections(text)
        limit = self.max_sentence_chars
        sentences: list[Sentence] = []
        agg = Aggregator(self.region_side, self.lateralised, self._plain_places, self._unplaced)
        ind_texts: list[str] = []
        ind_findings: list[str] = []
        ind_spans: list[Span] = []
        sec_cache = self._sec_cache
        stops: bool | None = None  # whether the report has a sentence whose period was left out
        sigma = "\u03a3" in text
        prev_loc: tuple[str | None, tuple[str, ...]] | None = None  # location of the last sentence's finding
        prev_found: frozenset[str] = frozenset()  # the findings the last sentence read present (session 15)
        prev_device: tuple[tuple[str, ...], str | None] | None = None  # the last sentence's one device, its side
        roles = self._roles
        concluding = self.concluding
        for sec in sections:
            start, end = sec.start, sec.end
            role = roles.get(sec.name)
            if role is None:
                role = roles[sec.name] = section_role(sec.name)
            indication = role == "indication"
            # what the sentence splitter reads (sentence_spans) and what the rules read: equal
            # keys, equal sentences and analyses (about half of OpenI sections repeat one seen
            # before). The lower-cased text follows from the text and the 3 characters after it
            # (a section starts after a colon or at 0, so no XXXX run reaches into it), except
            # for a capital sigma, whose lower case depends on its neighbours
            key = (role, text[start:end], text[end:end + 3], start == 0) if not sigma \
                else (role, text[start:end], text[end:end + 3], start == 0, lower[start:end])
            hit: SecHit | None = sec_cache.get(key)
            if hit is None:
                if stops is None:  # once per report, at its first uncached section
                    stops = bool(missing_stops(text, 0, len(text)))
                spans = sentence_spans(text, start, end, stops)
                for a, b in spans:
                    if b - a > limit:
                        return _Extraction(report=_Report(text=text), extractor=self.version,
                                          error=f"sentence too long ({b - a:,} characters > {limit:,} at "
                                                f"offset {a:,}): not report prose (no sentence punctuation?)")
                if role == "skip" or (role == "compare" and self.compare_states is None):
                    hit = tuple((a - start, b - start, None) for a, b in spans)
                elif role == "compare":
                    hit = self._compare_entries(lower, start, spans)
                else:
                    # the sentence cache read here (most sentences are in it), _sentence on a miss
                    cache = self._cache_ind if indication else self._cache
                    entries: list[tuple[int, int, Entry | None]] = []
                    for a, b in spans:
                        seg = lower[a:b]
                        entry: Entry | None = cache.get(seg)
                        entries.append((a - start, b - start, entry if entry is not None else self._sentence(seg, indication)))
                    hit = tuple(entries)
                if self.cache_size > 0:
                    if len(sec_cache) >= self.cache_size:
                        sec_cache.clear()  # bounded memory; results do not depend on the cache
                    sec_cache[key] = hit
            # False after a heading of another body part ("Left knee."); a section starts as chest
            chest_part = True
            name = sec.name
            in_conclusion = name in concluding
            n = len(sentences)
            for j, (a, b, entry) in enumerate(hit):
                a += start
                b += start
                sid = _SIDS[n] if n < 99 else f"S{n + 1:02d}"
                n += 1
                stext = text[a:b]
                sentences.append(_Sentence(id=sid, section=name, start=a, end=b, text=stext))
                if entry is None:
                    continue  # a skipped section
                if indication:
                    ind_texts.append(stext)
                part, items, anaphoric, hedges_next = entry
                if part is not None:
                    chest_part = part[0] == "chest"
                    if part[1]:  # the whole sentence is the heading
                        continue
                if not chest_part:
                    continue
                if not items:
                    prev_loc = None
                    prev_found = frozenset()
                    prev_device = None
                    continue
                # "opacity in the left upper lobe. This may represent scarring": a diagnosis offered
                # for the previous sentence's finding is located where that finding is
                loc = prev_loc if anaphoric else None
                before, before_found = prev_loc, prev_found
                prev_loc = None
                prev_found = frozenset(f for it in items if it[3] == "present" for f in it[2]) \
                    if self._placed_becomes else frozenset()
                device_before, prev_device = prev_device, self._one_device(items)
                # "opacity in the right midlung. This may be artifact.": the next sentence explains
                # the sign away; a plain statement of it is uncertain (CXR163)
                nxt = None
                if hedges_next and j + 1 < len(hit):
                    nxt = self.explained_next.match(lower, start + hit[j + 1][0], start + hit[j + 1][1])  # type: ignore[union-attr]
                hedge_next = nxt is not None
                # round 24: "... this represents vascular shadows" (no hedge): no sign at all
                gone_next = hedge_next and self._firm_next(lower, nxt)
                for i0, i1, findings, cert, implicit, v, qualifier, own_loc, wants_loc, keys, hedge_at, av, offered in items:
                    if hedge_next and cert == "present" and not implicit and all(
                            f in self.explained_next_findings for f in findings):
                        if gone_next:
                            continue
                        cert = "uncertain"
                    span = _Span(start=a + i0, end=a + i1, text=text[a + i0:a + i1], sentence_id=sid)
                    if indication:
                        for f in findings:
                            if f not in ind_findings:
                                ind_findings.append(f)
                        ind_spans.append(span)
                        continue
                    if device_before is not None and self._bare_tip(lower, a, i0, i1):
                        # session 16: "PICC line is in XXXX. The tip is in the upper right atrium."
                        # (CXR604, R2Gen train): the tip is the device just named, not a second,
                        # unnamed catheter ("There is a PICC. There is a catheter.")
                        findings, side = device_before
                        if side is not None and (v is None or v.laterality is None):
                            v = replace(v, laterality=side) if v is not None else FrozenAttrs(laterality=side)
                            av = v
                        keys = self._keys(findings, v)
                    if wants_loc and loc is not None:
                        v = replace(v, laterality=loc[0], regions=loc[1]) if v is not None \
                            else FrozenAttrs(laterality=loc[0], regions=loc[1])
                        keys = self._keys(findings, v)
                        av = v
                        own_loc = loc
                    elif own_loc is None and before is not None and before[1] and self._placed_becomes \
                            and self._becomes_at(findings, before[1]):
                        # session 15: "There is lucency involving the lateral aspect of the left
                        # clavicle. Metastatic disease cannot be excluded.": a diagnosis with no
                        # place of its own, right after a sentence placing a finding in a bone, is
                        # that finding's (finding_places.yaml ``placed_becomes``: a bone lesion);
                        # where that sentence states the very finding it becomes, the diagnosis
                        # only interprets it: nothing more is read (a later hedge would weaken it)
                        if self._becomes_stated(findings, before_found):
                            continue
                        v = replace(v, laterality=before[0], regions=before[1]) if v is not None \
                            else FrozenAttrs(laterality=before[0], regions=before[1])
                        keys = self._keys(findings, v)
                        av = v
                    if own_loc is not None:
                        prev_loc = own_loc
                    assert cert is not None  # (only an indication's mention has none)
                    agg.add_keys(keys, cert, span, av, implicit, qualifier)
                    if in_conclusion:
                        agg.concluding.add(sid)
                        if cert == "present" and i0 >= 5 and text.startswith("XXXX ", a + i0 - 5):
                            # a de-identification mask right before the finding may have eaten its
                            # hedge ("Appearance XXXX atelectasis" after "Appearance suggest
                            # atelectasis", CXR2372, R2Gen train): no plain conclusion of it
                            agg.masked.add((sid, span.start))
                    if cert == "uncertain" and qualifier is None:
                        h = self._hedges(lower, a, a + i0, findings, span.text, hedge_at, offered)
                        if h == NO_HEDGE:
                            agg.no_hedge.add((sid, span.start))
                        elif h == OFFERED:
                            agg.offered.add((sid, span.start))
                    elif cert == "present" and not implicit and _mask_before(stext, i0):
                        # "XXXX subsegmental atelectasis and scarring" (CXR822): the mask may be a
                        # hedge ("likely"), so an alternative elsewhere still hedges the finding
                        agg.after_mask.add((sid, span.start))
        ind = None
        if ind_texts:
            ind = _Indication(text=" ".join(ind_texts), evaluate=ind_findings, evidence=ind_spans)
        return _Extraction(report=_Report(text=text, sections=sections, sentences=sentences),
                          observations=agg.observations(), indication=ind, extractor=self.version)

    def _sentence(self, seg: str, indication: bool) -> Entry:
        """(body-part heading, items, anaphoric?, may the next sentence explain a sign away?) of one
        lower-cased sentence, from the sentence cache: a pure function of its text and of the
        section kind. Each item is (start, end,
        findings, certainty, implicit, attributes, qualifier, own location, wants the previous
        sentence's location, the findings' observation keys for the aggregator)."""
        cache = self._cache_ind if indication else self._cache
        entry = cache.get(seg)
        if entry is None:
            part, found = self._analyse(seg, indication)
            if found and self.bare_conn is not None and self._bare_list(seg, found):
                found = ()  # "Effusion or pneumothorax.": a list that lost its "No"
            anaphoric = False
            items: tuple[Item, ...] = ()
            if found and not indication:
                out: list[Item] = []
                wants_any = False
                for k, (a, b, findings, cert, implicit, v, qualifier, offered) in enumerate(found):
                    own_loc: Loc | None = None
                    wants_loc = False
                    keys = self._keys(findings, v)
                    fv = freeze(v) if v is not None else None  # read-only from here on (kept in the cache)
                    if cert != "absent":
                        if fv is not None and (fv.laterality or fv.regions):
                            own_loc = (fv.laterality, fv.regions)
                        else:
                            wants_loc = self._can_side(findings)
                            wants_any = wants_any or wants_loc
                    # the regex work of _hedges, done once per distinct sentence
                    hedge_at = self._hedge_at(seg, a, b) if cert == "uncertain" and qualifier is None else None
                    if hedge_at is not None and self._modifies_next(seg, found, k):
                        hedge_at = (hedge_at[0], a)  # (read by _hedges as a word that opens no hedge)
                    av = _agg_attrs(fv, keys) if fv is not None else None
                    out.append((a, b, findings, cert, implicit, fv, qualifier, own_loc, wants_loc, keys, hedge_at, av,
                                offered))
                items = tuple(out)
                # read only by a mention that wants the previous sentence's location
                anaphoric = wants_any and self.anaphora.match(seg) is not None
            elif found:
                items = tuple((a, b, findings, cert, implicit, None, qualifier, None, False, (), None, None, offered)
                              for a, b, findings, cert, implicit, _v, qualifier, offered in found)
            # a plain statement of a sign that the next sentence may explain away (worked out
            # once per distinct sentence; the next sentence is read per report)
            hedges_next = False
            if self.explained_next is not None:
                nf = self.explained_next_findings
                for it in items:  # (a loop: no generator per new sentence)
                    if it[3] == "present" and it[4] is False and nf.issuperset(it[2]):
                        hedges_next = True
                        break
            entry = (part, items, anaphoric, hedges_next)
            if self.cache_size > 0:
                if len(cache) >= self.cache_size:
                    cache.clear()  # bounded memory; results do not depend on the cache
                cache[seg] = entry
        return entry

    def _modifies_next(self, seg: str, found: tuple[Raw, ...], k: int) -> bool:
        """Mention ``k`` is an adjective of ``modifier_terms`` (context.yaml ``stated_both_ways``)
        standing right before the next mention, another finding: "calcified hepatic cyst" (round
        21: "There is a 6 cm calcification ... within the liver. This may represent a calcified
        hepatic cyst." made the calcification uncertain, the readers' class 4)."""
        if k + 1 >= len(found) or not self.modifier_terms:
            return False
        a, b, findings = found[k][0], found[k][1], found[k][2]
        nxt = found[k + 1]
        return seg[a:b] in self.modifier_terms and nxt[2] != findings and _ADJ_GAP.fullmatch(seg, b, nxt[0]) is not None

    def _compare_entries(self, lower: str, start: int, spans: list[tuple[int, int]]) -> SecHit:
        """Round 22: a comparison section's sentences, read only where one states a finding as
        unchanged (sections.yaml ``compare_states``: "Unchanged dextroscoliosis ..."); the
        rest (the prior studies' names and dates) stay unread."""
        states = self.compare_states
        out: list[tuple[int, int, Entry | None]] = []
        for a, b in spans:
            seg = lower[a:b]
            entry: Entry | None = None
            if states is not None and states.search(seg) is not None:
                entry = self._cache.get(seg)
                if entry is None:
                    entry = self._sentence(seg, False)
            out.append((a - start, b - start, entry))
        return tuple(out)

    def _bare_list(self, seg: str, found: tuple[Raw, ...]) -> bool:
        """Round 22: the sentence is nothing but its mentions joined by a ``bare_lists`` connector
        (with only ``bare_lists`` words beside them): "Effusion or pneumothorax." may have
        lost its "No" as well as be a differential, so it states nothing. A mask (blanked to
        spaces in ``seg``) is a word: the sentence stays as before."""
        conn, words = self.bare_conn, self.bare_rest
        if conn is None or words is None or len(found) < 2 or conn.search(seg) is None or "    " in seg:
            return False
        rest: list[str] = []
        at = 0
        for it in found:
            if it[3] != "uncertain" or not self.bare_signs.isdisjoint(it[2]) or self._placed(it[2], it[5]):
                # a plain statement or a sign among them ("Blunting, pleural fluid or thickening"),
                # or a name with its own place, side, size or severity ("Bibasilar atelectasis or
                # scarring"): a differential
                return False
        for a, b in sorted([(it[0], it[1]) for it in found]):
            if a < at:
                return False  # overlapping mentions: not a plain list
            rest.append(seg[at:a])
            at = b
        rest.append(seg[at:])
        # (a connector between two mentions, not inside one: "Heart size is upper limits normal or
        # mildly enlarged" is one mention, CXR1204)
        return all(words.fullmatch(r) is not None for r in rest) and any(conn.search(r) is not None for r in rest[1:-1])

    def _placed(self, findings: tuple[str, ...], v: AttrValues | None) -> bool:
        """A mention's words say more than its findings' names: a side, a severity, a size, a
        change, an age or a place other than the findings' plain places ("pleural" of an effusion)."""
        if v is None:
            return False
        if v.laterality or v.severity or v.size_mm is not None or v.change or v.temporal:
            return True
        for r in v.regions:
            for f in findings:
                if r not in self._plain_places.get(f, ()):
                    return True
        return False

    def _hedge_at(self, seg: str, i0: int, i1: int) -> tuple[int, int] | None:
        """What ``_hedges`` reads off the sentence for the mention at ``seg[i0:i1]``: (the first
        space in the mention's lower-cased words, where a "not a hedge" phrase before it starts,
        -1 for none); None without such phrases. The same searches on the sentence as on the
        report: a sentence starts the report or follows a non-word character, which is what a
        word start at its first character reads (the caller checks that the report's own
        mention text has its first space at the same place: "XXXX" is blanked only in lower case)."""
        if self.not_a_hedge is None:
            return None
        sp = seg.find(" ", i0, i1)
        sp = sp - i0 if sp >= 0 else -1
        lo = max(0, i0 - 80)
        at = self._not_a_hedge_at(seg, lo, i0)
        if at < 0 and sp > 0:
            at = self._not_a_hedge_at(seg, lo, i0 + sp + 1)
        return sp, at

    def _hedges(self, lower: str, a: int, start: int, findings: tuple[str, ...], text: str,
                hedge_at: tuple[int, int] | None = None, offered: bool = False) -> int:
        """Whether an uncertain mention hedges the same finding stated plainly elsewhere in the
        report (context.yaml ``stated_both_ways``): HEDGES, or NO_HEDGE for "may be secondary to
        low lung volumes", "additional fractures cannot be excluded", and for a sign whose own
        word is not hedged ("may reflect focal airspace disease" is no doubt about the opacity,
        CXR1840). A member of alternatives with no hedge cue of its own (``offered``) is
        OFFERED (it hedges only a statement a de-identification mask may have hedged: the
        aggregator's ``offered``), unless it is a cause offered for what is seen ("Unclear whether
        this is secondary to cardiomegaly or pericardial effusion", CXR1112: HEDGES)."""
        if self.devices.issuperset(findings):
            return NO_HEDGE  # a device seen is seen ("borderline cardiomegaly and cardiac pacemaker", CXR1862)
        if offered and self.sign_words and self.alt_signs.issuperset(findings):
            offered = False  # a sign offered as an alternative: its own words decide, as before
        if self.not_a_hedge is not None:
            sp = text.find(" ")  # the mention's own first word ("acute fracture")
            if hedge_at is not None and hedge_at[0] == sp:  # worked out with the sentence (_hedge_at)
                at = hedge_at[1] + a if hedge_at[1] >= 0 else -1
            else:
                lo = max(a, start - 80)
                at = self._not_a_hedge_at(lower, lo, start)
                if at < 0 and sp > 0:
                    at = self._not_a_hedge_at(lower, lo, start + sp + 1)
            # a cause offered as the last of alternatives hedges too ("could be related to hilar
            # lymph XXXX or enlarged pulmonary arteries", CXR1386, seed 65)
            if at >= 0 and not _ALT_NEXT.match(lower, start + len(text)) \
                    and not _ALT_BEFORE.search(lower, at, start):
                return NO_HEDGE
            if offered and at < 0:
                return OFFERED
        elif offered:
            return OFFERED
        if self.sign_words and self.alt_signs.issuperset(findings):
            t = text.lower()
            return HEDGES if any(w in t for w in self.sign_words) else NO_HEDGE
        return HEDGES

    def _not_a_hedge_at(self, lower: str, lo: int, hi: int) -> int:
        """Where ``self.not_a_hedge.search(lower, lo, hi)`` matches, -1 for nowhere. On ASCII text
        the scan is led by one non-word character at or after lo - 1 (see _trie.word_spans): the
        regex engine skips to those in C instead of trying every position after a \\b."""
        if self.not_a_hedge_fast is not None and lo > 0 and lower.isascii():
            f = self.not_a_hedge_fast.search(lower, lo - 1, hi)
            return -1 if f is None else f.start() + 1
        m = self.not_a_hedge.search(lower, lo, hi)  # type: ignore[union-attr]
        return -1 if m is None else m.start()

    def _has_alt(self, seg: str) -> bool:
        """``self.alt_hint.search(seg) is not None``: whether the sentence holds a connector of
        alternatives ("or", "versus", "/")."""
        for mk in self.alt_marks:
            if mk in seg:
                return True
        if self.alt_words_fast is not None and seg.isascii():
            # a space in front: a word at 0 follows a non-word character too
            return self.alt_words_fast.search(" " + seg) is not None
        return self.alt_hint.search(seg) is not None

    def _can_side(self, findings: tuple[str, ...]) -> bool:
        p = self._props.get(findings)
        if p is None:  # (can take a side, is a sign the alternatives explain)
            p = self._props[findings] = (any(f in self.lateralised for f in findings),
                                         all(f in self.alt_signs for f in findings))
        return p[0]

    def _one_device(self, items: tuple) -> tuple[tuple[str, ...], str | None] | None:
        """(findings, side) of the one device a sentence reads present, else None."""
        found: tuple[tuple[str, ...], str | None] | None = None
        for it in items:
            if it[3] == "present" and self.devices.issuperset(it[2]):
                side = it[5].laterality if it[5] is not None else None
                if found is not None and found[0] != it[2]:
                    return None
                if found is None or found[1] is None:
                    found = (it[2], side)
        return found

    def _bare_tip(self, lower: str, a: int, i0: int, i1: int) -> bool:
        """The mention at ``i0:i1`` of the sentence starting at ``a`` is a redacted-device phrase
        ("tip") that opens the sentence as its subject ("The tip projects over ...", "Tip now ...")."""
        return lower[a + i0:a + i1] in self.redacted_device and lower[a:a + i0].strip() in self.tip_openers

    def _becomes_at(self, findings: tuple[str, ...], regions: tuple[str, ...]) -> bool:
        """Every finding of a mention is another one at ``regions`` (``placed_becomes``)."""
        becomes = self._placed_becomes
        return all(f in becomes and becomes[f][0].issuperset(regions) for f in findings)

    def _becomes_stated(self, findings: tuple[str, ...], stated: frozenset[str]) -> bool:
        """What every finding of a mention becomes (``placed_becomes``) is among ``stated``."""
        becomes = self._placed_becomes
        return all(becomes[f][1] in stated for f in findings)

    def _keys(self, findings: tuple[str, ...], v: Any) -> tuple:  # v: AttrValues, FrozenAttrs or None
        """The observation key (finding, laterality, regions) of each finding of a mention: the
        laterality stated, else from the regions' sides, and none for findings without a side
        (memoised: a corpus names a few hundred combinations)."""
        memo = (findings, None, ()) if v is None else (findings, v.laterality, tuple(v.regions))
        keys = self._keys_memo.get(memo)
        if keys is None:
            findings, lat0, regions0 = memo
            out = []
            places = self._places
            becomes = self._placed_becomes
            for f in findings:
                ok = places.get(f)
                # a region the finding cannot lie in is not its place (the observation records
                # it as dropped: aggregate.py)
                regions = regions0 if ok is None or not regions0 else tuple(r for r in regions0 if r in ok)
                to = becomes.get(f)
                if to is not None and regions and to[0].issuperset(regions):
                    # session 15 (finding_places.yaml ``placed_becomes``): "Lucent lesion in the
                    # right sixth rib, concerning for metastatic disease" is a bone lesion
                    f = to[1]
                    ok = places.get(f)
                    regions = regions if ok is None else tuple(r for r in regions if r in ok)
                lat = lat0
                if lat0 in _OTHER_SIDE and regions:
                    # a side and a place of the other side are never said together: "left upper
                    # and right upper lobe bullous disease" read "a left bulla in the right upper
                    # lobe" (CXR1916, seed 69); the side the words say stays, the place goes
                    other = _OTHER_SIDE[lat0]
                    regions = tuple(r for r in regions if self.region_side.get(r) != other)
                if lat is None and regions0:
                    # the side of a dropped place is still said ("hydropneumothorax within the
                    # left chest": left, though not in the chest wall)
                    lat = regions_side(regions0, self.region_side)
                if lat in _OTHER_SIDE and regions and f in self.lateralised:
                    # only the finding's own default place ("pleura" for an effusion): a place
                    # the words named ("lung bases") keeps its own reading
                    sided, dflt = self._sided_child, self._fdefault.get(f, ())
                    regions = tuple(sided.get((r, lat), r) if r in dflt else r for r in regions)
                out.append((f, lat if lat is not None and f in self.lateralised else None, regions))
            keys = tuple(out)
            if len(self._keys_memo) >= 100_000:
                self._keys_memo.clear()  # bounded memory
            self._keys_memo[memo] = keys
        return keys

    def _analyse(self, seg: str, indication: bool) -> tuple[tuple[str, bool] | None, tuple[Raw, ...]]:
        """(body-part heading, items) of one sentence: the heading is (part, whole sentence?)
        when the sentence opens a body part ("Left knee.", "Chest: ..."), else None."""
        part: tuple[str, bool] | None = None
        if not indication:
            p = body_part_heading(seg) if len(seg) <= 42 else None
            if p is not None:
                return (p, True), ()
            colon = seg.find(":", 0, 42)
            if colon > 0:  # "Chest: ...", "Left knee: ..." open a part inside a sentence
                p = body_part_heading(seg[:colon])
                if p is not None:
                    part = (p, False)
        return part, self._mentions(seg, indication)

    def _drop_device_parts(self, seg: str, mentions: list) -> list:
        """Drop a redacted-device phrase ("tip") that follows a named device in the sentence:
        "tracheostomy tube tip at the clavicles" is one tracheostomy tube, not also a catheter."""
        out = []
        named: Any = False  # (a memoised bool, None before it is worked out)
        is_device = self._is_device
        for m in mentions:
            if named and m.rule is None and seg[m.start:m.end] in self.redacted_device:
                continue
            if not named:
                named = is_device.get(m.findings)  # type: ignore[assignment]
                if named is None:  # memoised: a corpus names a few hundred combinations
                    named = is_device[m.findings] = any(f in self.devices for f in m.findings)
            out.append(m)
        return out

    def _hedge_past_comma(self, seg: str, cue: Any, m: Any, mentions: list, k: int) -> bool:
        """The hedge ``cue`` deciding device mention ``mentions[k]`` stands before it with a comma
        between (a pre cue that is no negation)."""
        if cue is None or cue.end > m.start or not cue.roles & UNC_PRE or cue.roles & (NEG_PRE | DOM_PRE):
            return False
        return "," in seg[cue.end:m.start] and self._device_flags([m])[0]

    def _device_flags(self, mentions: list) -> list[bool]:
        """Whether each mention names a device (memoised per combination of findings)."""
        is_device = self._is_device
        out: list[bool] = []
        for m in mentions:
            named = is_device.get(m.findings)
            if named is None:
                named = is_device[m.findings] = any(f in self.devices for f in m.findings)
            out.append(named)
        return out

    def _fits(self, findings: tuple[str, ...], region: str) -> bool:
        """Some finding of the mention can lie in ``region``: one of its default regions is on the
        same side of the thoracic cavity's wall (a finding without default regions may lie anywhere)."""
        key = (findings, region)
        hit = self._fits_cache.get(key)
        if hit is None:
            side = self._outside.get(region)
            places = self._places
            hit = any(f not in places or region in places[f] for f in findings) and (side is None or any(
                not self._fdefault.get(f) or any(self._outside.get(d) in (None, side) for d in self._fdefault[f])
                for f in findings))
            self._fits_cache[key] = hit
        return hit

    def _mentions(self, seg: str, indication: bool) -> tuple[Raw, ...]:
        """Mentions of one (lower-cased) sentence with their certainty and attributes, offsets
        relative to the sentence. A pure function of the sentence text (context never crosses a
        sentence end), which is why it can be cached: report sentences repeat a lot (61% of
        OpenI sentences occur earlier in the corpus)."""
        n = len(seg)
        mentions = self.mentions.find(seg, 0, n)
        if not mentions:
            return ()
        if self.redacted_device and len(mentions) > 1:
            mentions = self._drop_device_parts(seg, mentions)
        ctx = self.context
        cues = ctx.cues(seg, 0, n)
        starts = [c.start for c in cues]
        out: list[Raw] = []
        if indication:
            for m in mentions:
                if seg[m.start:m.end] in self.indication_symptoms:
                    continue  # a symptom, not the finding of that name (patterns.yaml)
                # what the indication asks about: not what it rules out, not the history
                cert, cue = ctx.certainty(seg, cues, m.start, m.end, starts)
                if cert == "absent" or m.certainty == "absent":
                    continue
                if cert is None and cue is not None and cue.roles & HIST and not cue.roles & HYPO:
                    continue
                out.append((m.start, m.end, m.findings, cert, False, None, None, False))
            return tuple(out)
        attrs = self.attributes.find(seg, 0, n)
        per_side: dict[int, tuple[int, int, tuple[tuple[str, str], ...]]] = {}
        if attrs and self.per_side is not None and ("left" in seg or "right" in seg):
            per_side = self._per_side(seg, mentions)
            if per_side:  # the per-side words describe their finding only
                spans = [(a, b) for a, b, _ in per_side.values()]
                attrs = [t for t in attrs if not any(a <= t.start and t.end <= b for a, b in spans)]
        vals = None
        if attrs:
            props = self._props
            share: list[bool] = []
            signs: list[bool] = []
            mstarts: list[int] = []
            mends: list[int] = []
            for m in mentions:
                p = props.get(m.findings)
                if p is None:  # (can take a side, is a sign the alternatives explain)
                    p = props[m.findings] = (any(f in self.lateralised for f in m.findings),
                                             all(f in self.alt_signs for f in m.findings))
                share.append(p[0])
                signs.append(p[1])
                mstarts.append(m.start)
                mends.append(m.end)
            vals = attach(attrs, mstarts, mends, seg, share, signs,
                          _fits_fn(self, mentions, seg), self.region_side, self._device_flags(mentions),
                          self.shared_change)
        aged: set[int] = set()
        if vals is not None and self.shared_age is not None and len(mentions) > 1:
            aged = self._shared_age(seg, mentions, vals)
        certs: list[str | None] = []
        quals: list[str | None] = []
        prev_end = 0
        lq_here = None
        for k, m in enumerate(mentions):
            q = None
            if m.certainty is not None:
                cert = m.certainty
                if cert == "absent" and m.rule is not None:  # "lungs are grossly clear"
                    q = self._qualifier(seg, m.start, m.end)
            elif not cues:
                cert = "present"  # no cue in the sentence: what certainty() says without one
            else:
                cert, cue = ctx.certainty(seg, cues, m.start, m.end, starts)
                if cert != "present" and cue is not None and cue.start >= m.end and (any(
                        o.certainty is not None and o.start <= cue.start and cue.end <= o.end for o in mentions)
                        or (cue.roles & UNC_PRE and any(0 <= o.start - cue.end <= 2 for o in mentions))):
                    # (a hedge word that opens the next mention is that mention's: "cardiomegaly
                    # with vascular congestion and suspected pulmonary edema", CXR2082)
                    # a post cue that another mention's own pattern consumed decides that mention
                    # only ("stable mild tortuosity of the thoracic aorta, and heart size within
                    # normal limits": the aorta is not normal; hand audit #13, CXR2441)
                    own = [c for c in cues if not (c.start >= m.end and (any(
                        o.certainty is not None and o.start <= c.start and c.end <= o.end for o in mentions)
                        or (c.roles & UNC_PRE and any(0 <= o.start - c.end <= 2 for o in mentions))))]
                    cert, cue = ctx.certainty(seg, own, m.start, m.end, [c.start for c in own])
                if cert is not None and cue is not None and cert != "present" and cue.roles & (NEG_PRE | DOM_PRE | NEG_POST | DOM_POST):
                    # a qualifier inside the cue ("no definite", "no suspicious") limits the first
                    # finding after it, not the rest of a negated list ("no suspicious opacity,
                    # pneumothorax": the pneumothorax is plainly absent); a hedging cue ("no
                    # definite consolidation or effusion") hedges and qualifies the whole list, up to
                    # the next cue ("no definite effusion, no typical findings of edema")
                    q = self._qualifier(seg, cue.start, cue.end) \
                        if cue.end > m.start or cue.start >= prev_end or (
                            cue.roles & DOM_PRE and not any(cue.end <= c.start < m.start for c in cues)) else None
                    if q is None and cue.roles & (NEG_PRE | DOM_PRE) and cue.end <= m.start:
                        # the mention's own phrase: after the cue and after the previous mention
                        # (and its own words: "no displaced rib fractures" is one lexicon term)
                        q = self._qualifier(seg, max(cue.end, prev_end), m.end)
                        if q is None and prev_end > cue.end and cue.roles & NEG_PRE:
                            # a qualifier on the head of a negated list limits every member:
                            # "no gross consolidation, atelectasis or infiltrate" (CXR1462, seed 67)
                            if lq_here is None:  # (one literal test per sentence, when first needed)
                                lq_here = any(map(seg.__contains__, self.list_qualifier_words))
                            if lq_here:
                                q = self._head_qualifier(seg, mentions, k, cue.end)
                    if q is None and m.rule is not None:  # "heart is not significantly enlarged"
                        q = self._qualifier(seg, m.start, m.end)
            if q is not None:
                cert = "uncertain"
            elif cert == "uncertain" and m.certainty is None and self._hedge_past_comma(seg, cue, m, mentions, k):
                # session 14: a hedge set off by a comma doubts its own phrase, not a device named
                # after it ("Heart size borderline enlarged for technique, tracheostomy tube tip
                # approximately 4.7 cm above the carina" read "A tracheostomy tube cannot be
                # excluded", an outside reader's seed 156)
                cert = "present"
            certs.append(cert)
            quals.append(q)
            prev_end = m.end
        # members stated only as one of alternatives ("left-sided scarring/subsegmental
        # atelectasis"): uncertain here, but no doubt about the same finding stated plainly in
        # another sentence ("Left perihilar scarring is noted", CXR534, R2Gen train; the
        # aggregator's _hedge_both_ways leaves that statement plain). A member with a hedge cue of
        # its own ("possible scarring or atelectasis") is no such member.
        before_alt = certs[:] if "present" in certs else None
        if self.alt_gap is not None and len(mentions) > 1 and ("present" in certs or "uncertain" in certs) \
                and self._has_alt(seg):
            self._alternatives(seg, mentions, certs, quals, vals)
        if self.open_alt is not None and self.alt_gap is not None and "present" in certs and \
                self.open_hint_re.search(seg) is not None:
            for i, m in enumerate(mentions):  # "pleural effusion versus thickening"
                if certs[i] == "present" and m.certainty is None and self.open_alt.match(seg, m.end):
                    certs[i] = "uncertain"
        if self.open_after is not None and "present" in certs and self.open_after_hint.search(seg) is not None:
            self._open_after(seg, mentions, certs)
        offered: set[int] = set() if before_alt is None or before_alt == certs else {
            i for i, c in enumerate(before_alt) if c == "present" and certs[i] == "uncertain"}
        if self.favoured_over is not None and len(mentions) > 1 and any(map(seg.__contains__, self.favoured_hint)):
            for i in range(1, len(mentions)):
                # "subsegmental atelectasis over infiltrate" (CXR1166, seed 67): the reader favours
                # the first; the second is only the less likely alternative
                if certs[i] == "present" and mentions[i].certainty is None and \
                        self.favoured_over.fullmatch(seg, mentions[i - 1].end, mentions[i].start):
                    certs[i] = "uncertain"
        if self.neg_break is not None and "absent" in certs and "," in seg:
            self._negation_break(seg, mentions, certs, cues)
        if self.explained_away is not None:
            self._explained_away(seg, mentions, certs)
        if "(" in seg and len(mentions) > 1:
            for i in range(1, len(mentions)):
                # an abbreviation in parentheses restating the finding just named is that mention
                # again, with its certainty: the "(" terminator cut the hedge off ("osteophytes,
                # which could represent changes of diffuse idiopathic skeletal hyperostosis
                # (DISH)", CXR1808, R2Gen train, read "DISH is seen")
                m, prev = mentions[i], mentions[i - 1]
                if m.findings == prev.findings and m.certainty is None and seg.startswith(")", m.end) \
                        and not seg[prev.end:m.start].strip(" ("):
                    certs[i] = certs[i - 1]
                    quals[i] = quals[i - 1]
        pd = self.past_diseases
        past_end = -1
        for i, m in enumerate(mentions):
            cert = certs[i]
            if cert is None:
                continue  # hypothetical or historical: not an observation of this image
            # (each field read once: a generic attribute read per use in the compiled engine)
            findings = m.findings
            implicit = m.certainty is not None
            offer = cert == "uncertain" and i in offered
            v = vals[i] if vals is not None else None
            if findings[0] in pd and cert != "absent" and not implicit and \
                    self._past(seg, m, past_end):
                # "cavity ... related to prior tuberculosis infection" (CXR2818, seed 68): a past
                # disease, old (the cavity it left is what is seen), never a current one
                past_end = m.end
                v = replace(v, temporal="old") if v is not None else AttrValues(temporal="old")
            if v is not None:  # (most mentions get no attribute: one test for them)
                if quals[i] is not None and v.severity is not None:
                    # "no large effusion": "large" limits the negation, it is no severity of an effusion
                    v.severity = None
                if v.severity is not None and any(
                        v.severity in self._finding_severity.get(f, ()) for f in findings):
                    v.severity = None  # "the heart is large": the word is the finding, not its degree
                if v.temporal == "postoperative" and any(f in self._not_postoperative for f in findings):
                    v.temporal = None  # "status post humerus fracture": after a fracture, no surgery
                if v.temporal == UNKNOWN_AGE:
                    v.temporal = None  # "fracture of uncertain acuity, possibly old": no age is said
                if v.laterality == "bilateral" and v.regions and self._midline_only(findings, v.regions):
                    v.laterality = None  # "the spine and both XXXX": the side is the other noun's
                if v.change == "resolved" and cert == "present":
                    # "almost completely resolved pleural air": still there, so it improved
                    v = replace(v, change="improved")
                if implicit and (v.temporal or v.severity) and i not in aged:
                    # "no acute cardiopulmonary disease": the pattern's own words describe the
                    # disease it negates, not each finding it implies
                    v.temporal = v.severity = None
            if implicit and quals[i] is not None:
                # "lungs are grossly clear": a hedge on the lungs (the first finding the pattern
                # names), not a statement about each finding a clear lung implies
                findings = findings[:1]
            if i in per_side and cert != "absent":
                # "bilateral pleural effusions, left small, right moderate": one finding per side,
                # each with the severity stated for it
                base = v if v is not None else AttrValues()
                for side, sev in per_side[i][2]:
                    sv = replace(base, laterality=side, severity=sev, regions=list(base.regions), spans=list(base.spans))
                    out.append((m.start, m.end, findings, cert, implicit, sv, quals[i], offer))
                continue
            out.append((m.start, m.end, findings, cert, implicit, v, quals[i], offer))
        return tuple(out)

    def _per_side(self, seg: str, mentions: list) -> dict[int, tuple[int, int, tuple[tuple[str, str], ...]]]:
        """Mentions followed by a per-side statement (``per_side`` in attributes.yaml: two
        different sides, each with a severity word): index -> (start, end, ((side, severity), ...))."""
        out: dict[int, tuple[int, int, tuple[tuple[str, str], ...]]] = {}
        for i, mm in enumerate(mentions):
            m = self.per_side.match(seg, mm.end)  # type: ignore[union-attr]
            if m is None or m.group("s1") == m.group("s2"):
                continue
            w1 = self.severity_words.get(m.group("w1"))
            w2 = self.severity_words.get(m.group("w2"))
            if w1 is not None and w2 is not None:
                out[i] = (m.start(), m.end(), ((m.group("s1"), w1), (m.group("s2"), w2)))
        return out

    def _past(self, seg: str, m: Any, past_end: int) -> bool:
        """A past-disease mention stands right after a past word ("prior tuberculosis"), or
        right after another past disease ("prior tuberculosis infection")."""
        return self.past_before is not None and all(f in self.past_diseases for f in m.findings) and (
            self.past_before.search(seg, max(0, m.start - self.past_reach), m.start) is not None
            or seg.startswith(self.past_hint, m.start)  # the lexicon's "prior tuberculosis"
            or (past_end >= 0 and seg[past_end:m.start].isspace()))

    def _head_qualifier(self, seg: str, mentions: list, k: int, cue_end: int) -> str | None:
        """The qualifier of the first mention after a negation cue when mention ``k`` is a later
        member of the same plain list (only commas, "and", "or" between the members)."""
        j = k
        while j > 0 and mentions[j - 1].start >= cue_end:
            if not _LIST_JOIN.fullmatch(seg, mentions[j - 1].end, mentions[j].start):
                return None
            j -= 1
        q = self._qualifier(seg, cue_end, mentions[j].end) if j < k else None
        return q if q in self.list_qualifiers else None

    def _qualifier(self, seg: str, a: int, b: int) -> str | None:
        if self.qualifier_re is None or a >= b:
            return None
        if self.qualifier_fast is not None and a > 0 and seg.isascii():
            # a word start at or after a is a non-word character at or after a - 1 (see
            # _trie.word_spans): the engine skips to those in C instead of trying the trie at
            # every position after a \b
            f = self.qualifier_fast.search(seg, a - 1, b)
            if f is None:
                return None
            g = seg[f.start() + 1:f.end()]
        else:
            m = self.qualifier_re.search(seg, a, b)
            if m is None:
                return None
            g = m.group()
        return self.qualifiers.get(g) or self.qualifiers.get(" ".join(g.split()))

    def _midline_only(self, findings: tuple[str, ...], regions: list[str]) -> bool:
        """Round 24: the places of a mention where its finding can lie (``_fits``) are all on the
        midline (attributes.yaml ``midline_regions``; a place it cannot lie in is dropped later)."""
        fit = [r for r in regions if self._fits(findings, r)]
        return bool(fit) and all(r in self._midline for r in fit)

    def _firm_next(self, lower: str, hit: re.Match[str] | None) -> bool:
        """Round 24: whether the next sentence's explanation of a sign (``hit``, the match of
        ``explained_next``) is stated with no hedge of its own (context.yaml
        ``explained_away.next_sentence.hedges``; a blanked word after the anaphor may be one, so it
        counts as one)"""
        if hit is None or self.explained_next_hedge is None:
            return False
        at = hit.start("ana") if hit.group("ana") is not None else hit.start("lead")
        return self.explained_next_hedge.search(lower, at, hit.end()) is None

    def _shared_age(self, seg: str, mentions: list, vals: list) -> set[int]:
        """Round 24: a mention explained by the next one as the same finding of a stated age
        ("rib deformities consistent with old fractures") takes that age (attributes.yaml
        ``shared_age``); ``vals`` (the mentions' attributes) is changed in place. Returns the
        indices of the mentions given an age (a hedging pattern's mention keeps it: "rib
        deformities, possibly old fractures")."""
        is_a = self.ontology.is_a
        out: set[int] = set()
        for j in range(1, len(mentions)):
            vj = vals[j]
            age = vj.temporal if vj is not None else None
            if age is None or age == UNKNOWN_AGE or age == "postoperative":
                continue
            m, n = mentions[j - 1], mentions[j]
            vi = vals[j - 1]
            if (vi is not None and vi.temporal is not None) or m.certainty not in (None, "uncertain") \
                    or n.certainty is not None:
                continue
            if not any(a == b or is_a(a, b) or is_a(b, a) for a in m.findings for b in n.findings):
                continue
            if self.shared_age.fullmatch(seg, m.end, n.start) is None:  # type: ignore[union-attr]
                continue
            vals[j - 1] = replace(vi, temporal=age) if vi is not None else AttrValues(temporal=age)
            out.add(j - 1)
        return out

    def _explained_away(self, seg: str, mentions: list, certs: list) -> None:
        """A sign ("density", "opacity") that its clause explains as something that is no lung
        opacity (context.yaml ``alternatives.explained_away``) is no observation of its own."""
        explainable = self._explainable
        for i, m in enumerate(mentions):
            if certs[i] is None or certs[i] == "absent" or m.certainty is not None:
                continue
            ok = explainable.get(m.findings)
            if ok is None:  # memoised per findings (a generator per mention was most of this loop)
                self._can_side(m.findings)  # fills the memo (can take a side, is a sign)
                ok = explainable[m.findings] = self._props[m.findings][1] or bool(
                    self.explained_also and all(f in self.explained_also for f in m.findings))
            if not ok:
                continue  # not every finding of the mention is a sign
            hit = self.explained_away.match(seg, m.end)  # type: ignore[union-attr]
            if hit is None and self.explained_masked is not None and seg.startswith(", ", m.end):
                hit = self.explained_masked.match(seg, m.end)
            if hit is not None and any(n.start >= hit.end() and _OR_NEXT.fullmatch(seg, hit.end(), n.start)
                                       for n in mentions[i + 1:]):
                # the explanation is one alternative of a finding ("density ... which could
                # represent overlapping shadows or actual pulmonary nodule", hand audit #13,
                # CXR2633): the sign may be a lung opacity, or not
                certs[i] = "uncertain"
            elif hit is not None or (
                    self.explained_pre is not None and self.explained_pre.search(seg, max(0, m.start - 40), m.start)):
                certs[i] = None

    def _negation_break(self, seg: str, mentions: list, certs: list, cues: list) -> None:
        """Round 13: "No focal consolidation, enlarged pulmonary arteries concerning for pulmonary
        arterial hypertension", "No acute cardiopulmonary abnormality, findings compatible with
        emphysema" (R2Gen train): after a comma, a short phrase (no list word in it) and a
        diagnostic cue open a statement of their own; the negation before the comma does not
        reach them. The phrase's findings are stated (the sign), those after the cue take the
        cue's certainty (a hedge: uncertain; "compatible with": present)."""
        for h in self.neg_break.finditer(seg):  # type: ignore[union-attr]
            c = seg.rfind(",", 0, h.start())
            if c < 0:
                continue
            gap = seg[c + 1:h.start()]
            if ";" in gap or len(gap.split()) > self.neg_break_words or self.neg_break_list.search(gap):
                continue
            if not any(q.roles & NEG_PRE and q.end <= c for q in cues):
                continue
            end = seg.find(",", h.end())
            end = len(seg) if end < 0 else end
            after = self.neg_break_cert[" ".join(h.group(0).split())]
            for i, m in enumerate(mentions):
                if m.certainty is not None or certs[i] != "absent":
                    continue
                if c < m.start < h.start():
                    certs[i] = "present"
                elif h.end() <= m.start < end:
                    certs[i] = after

    def _open_after(self, seg: str, mentions: list, certs: list) -> None:
        """Round 28: a present mention right after an open connector ("versus", "and/or": context.yaml
        ``open_after_connectors``) is one side of alternatives even when the other side names no
        finding ("XXXX versus pleural scarring", "crowding versus pleural scarring" read "There is
        pleural scarring", outside-pool readers, session 13). Not a member of a chain of findings
        (``_alternatives`` decided those: "airspace disease and/or atelectasis" keeps its sign), nor
        a mention with a certainty cue of its own."""
        after = self.open_after
        for i, m in enumerate(mentions):
            if certs[i] != "present" or m.certainty is not None:
                continue
            prev = mentions[i - 1].end if i else 0
            if i and self.alt_gap is not None and self.alt_gap.fullmatch(seg, prev, m.start):
                continue
            if after.search(seg, max(prev, m.start - 60), m.start):  # type: ignore[union-attr]
                certs[i] = "uncertain"

    def _age_is_reading(self, findings: Any) -> bool:
        """Whether an offered alternative's age describes a reading of an opacity (a sign or a sign
        partner: "chronic interstitial changes or edema", "chronic scarring or atelectasis"), so is
        dropped with the offer, rather than being part of a named disease offered with its age."""
        return any(f in self.alt_signs or f in self.sign_partners for f in findings)

    def _sign_alone(self, m1: Any, m2: Any) -> bool:
        """Whether a sign and its alternative joined by "and/or" or "/" leave the sign unstated:
        "airspace disease and/or atelectasis" states an opacity either way (atelectasis is one),
        "airspace disease and/or pleural effusion" does not (round 20: "Minimal left lung opacity
        is seen. A left pleural effusion may be present."): the partner is no lung opacity."""
        for s, o in ((m1, m2), (m2, m1)):
            if s.findings and all(f in self.alt_signs for f in s.findings) and o.findings and \
                    not any(f in self.alt_signs or f in self.sign_partners for f in o.findings):
                return True
        return False

    def _alternatives(self, seg: str, mentions: list, certs: list, quals: list, vals: list | None = None) -> None:
        """Alternatives are hedges: a chain of mentions joined by "or", "versus", "/", "and/or"
        (and commas within such a list) makes each present member uncertain, except the signs
        they explain ("opacity ... atelectasis or pneumonia": the opacity stays present). A chain
        of past diseases ("suggestive of old empyema, hematoma, or prior TB", CXR1237, seed 65)
        names the history of what is seen, not findings of this image: no member is observed."""
        n = len(mentions)
        g0 = 0
        alt = False
        direct: set[int] = set()  # members a connector joins to the next or previous one
        for i in range(1, n + 1):
            if i < n:
                a, b = mentions[i - 1].end, mentions[i].start
                if self.alt_gap.fullmatch(seg, a, b):  # type: ignore[union-attr]
                    # "aortic ectasia/tortuosity": one finding named twice, no alternative
                    if not (self.alt_same and any(frozenset((f, g)) in self.alt_same
                                                  for f in mentions[i - 1].findings for g in mentions[i].findings)):
                        alt = True
                        if (self.sign_gap is not None and self.sign_gap.fullmatch(seg, a, b)) or \
                                self._sign_alone(mentions[i - 1], mentions[i]):
                            direct.add(i - 1)
                            direct.add(i)
                    continue
                if self.list_gap.fullmatch(seg, a, b):
                    continue
            if alt and i - g0 > 1 and not (self.list_head is not None and self.list_head.search(
                    seg, max(0, mentions[g0].start - 60), mentions[g0].start)):
                past = any((vals is not None and vals[k] is not None and vals[k].temporal == "old")
                           or _PAST_BEFORE.search(seg, max(0, mentions[k].start - 12), mentions[k].start)
                           for k in range(g0, i))
                for k in range(g0, i):
                    m = mentions[k]
                    if m.certainty is None and k in direct and certs[k] in ("present", "uncertain"):
                        # an alternative is offered, not stated, and so is the age its words give
                        # it ("chronic interstitial changes or edema", "edema versus chronic
                        # interstitial changes": "It is described as chronic", CXR1898, seed 70),
                        # a sign that is itself one of the alternatives included. Round 29: only a
                        # reading of an opacity (a sign or a sign partner) loses it; a named disease
                        # is offered with its age ("previous/chronic pulmonary embolism or pulmonary
                        # arterial hypertension" offers no acute embolism)
                        if vals is not None and vals[k] is not None and vals[k].temporal is not None \
                                and self._age_is_reading(m.findings):
                            vals[k] = replace(vals[k], temporal=None)
                        if all(f in self.alt_signs for f in m.findings):
                            certs[k] = "uncertain"
                            continue
                    if m.certainty is not None or all(f in self.alt_signs for f in m.findings):
                        continue
                    if past and certs[k] in ("present", "uncertain"):
                        certs[k] = None
                    elif certs[k] == "present":
                        certs[k] = "uncertain"
            g0 = i
            alt = False


# registered after its body, not by a decorator: a decorated class stays a plain Python class
# when the engine is compiled with mypyc (benchmarks/extraction_compiled.py)
EXTRACTORS.register("rules")(RulesExtractor)
