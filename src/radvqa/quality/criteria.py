"""Rule-based quality criteria (CXR-QBA's extraction criteria, as they apply to our scene graphs,
plus our own row checks).

Grades are ints on the hot path: 0 = A++, 1 = A+, 2 = A, 3 = B, 4 = C, 5 = D (``GRADES[i]``); a row's
grade is the worst (largest) over its criteria, and every criterion that lowered it below A++ leaves
a named reason ``criterion:value->grade``. Observation-level criteria are computed once per
observation per study (``obs_grade``) and combined per row, so grading costs a ``max`` per row.

Criteria (REFERENCE.md §1; ours marked *). Grades promise correctness, not polarity
(docs/generation.md "What a grade promises"):
- regions: explicit region ids not in the ontology -> A.
- entities: finding id not in the ontology, or a vague finding ("other lesion", a bare "line";
  ontology display_names.yaml ``vague_findings``) -> A.
- change text: an answer part that quotes report text still containing a change word -> B.
- localization: boxes for some images only, or only the finding's default-region boxes -> A; a
  positive answer to a question that asks where, without a box of its own -> B
  (``LOCALIZATION_NONE``, added per row by the generator). Missing boxes do not lower other rows:
  a finding stated plainly by one report sentence is A++ without boxes.
- issue level: an extraction error recorded in ``SceneGraph.meta["extract_error"]`` -> C.
- *evidence: hedged (uncertain), qualified negative ("no large effusion", also one the extractor
  left as a plain negative: "no typical findings of edema") or alternatives in the sentence
  ("atelectasis or scarring") -> B; observation merged from several sentences -> A; report states
  the finding present and absent/uncertain -> C (``REPORT_CONFLICT``).
- Why the C's (round 7): in the hand-marked samples (seeds 41, 61-66: 574 rows stating a finding),
  rows with a report-conflict or dropped-place reason were wrong 20 times in 52, rows naming
  several places 10 in 32, every other row below A++ about 1 in 10. So report conflicts and
  dropped places are C (beside label conflicts), several places B.
- *evidence, plain sentence: a stated finding whose sentence also hedges something, or also
  states another finding (attributes may belong to the other one) -> A.
- *answer merged from several sentences: a positive row whose findings come from more than one
  report sentence -> A (``answer_merged``; each extra claim is another chance to be wrong).
- *normal in sentence: a stated finding whose sentence also calls something clear or normal
  ("Lungs are clear airspace disease.", "hyperexpanded but clear") -> A.
- *change: a stated finding whose sentence says something was removed or resolved ("catheter has
  been removed", "clearing of") -> A; a negative from a partial resolution ("almost completely
  resolved", "residual") -> B.
- *side inferred: a side that no evidence sentence states -> A.
- *human-annotated observations (``annotated``: RadGraph, Lunguage sources) skip the two
  extractor-attribution checks (hedge in sentence, shared sentence); every other criterion holds.
- *location: a stated finding whose answer names several places that do not contain one another
  -> B (the extractor's region attachment is the commonest content error of the hand audit; a
  sentence placing the finding relative to a structure, "above the carina", gets no location said
  at all: ``relative_place``, used by the generator).
- *dropped place: a stated finding that the sentence put in a place it cannot lie in (the
  extractor dropped the place: ``Observation.dropped``, extract/data/finding_places.yaml) -> C
  (``location:dropped_place``).
- *labels: label-only finding in a study with a report -> C (stated only with ``--label-only
  state-as-label``; by default the generator states nothing from it: ``label_only``); without a
  report -> B (A with an expert box); a label that disagrees with the report (localize
  ``label_conflicts``) -> C.
- *implied negative: a negative asserted only because the report is silent -> B (not inferable).
- *boxes valid: every box inside its image with x1 < x2, y1 < y2 -> otherwise D.
- *answer in question: the question names its own answer -> D (generators skip these; the check
  is a safety net for hand-made templates).
- *unvouched (round 10, ``quality/unvouched.py``, data ``quality/data/unvouched.yaml``): a positive
  report observation whose sentence the extractor read only in part (unread words, a cause cue,
  mixed sides, another body part, a detached severity, slash alternatives) -> C with
  ``--unvouched keep``; by default (``omit``) the generator states nothing from it.
- judge criteria (entailment, relevance, completeness, clarity) are an optional later pass:
  see ``radvqa.quality.judge``.
"""

from __future__ import annotations

import re
from typing import Any

from radvqa.model import GRADES, Box, Observation

A_PP, A_P, A, B, C, D = range(6)
GRADE_INDEX = {g: i for i, g in enumerate(GRADES)}

LESION_SOURCES = frozenset({"expert", "expert_fused", "derived", "predicted", "label"})


EXPERT_BOX_SOURCES = frozenset({"expert", "expert_fused"})


def label_only(obs: Observation, has_report: bool) -> bool:
    """A label observation of a study with a report that no report observation matched (localize
    merges the others into the report's) and no expert drew a box for: the report is silent about
    what a coder's label asserts. The generator states nothing from it by default
    (``GenerateOptions.label_only``); stated as a label, it grades C (``label:only_report_silent``)."""
    return has_report and obs.source == "label" and not any(b.source in EXPERT_BOX_SOURCES for b in obs.boxes)


def reason(criterion: str, value: str, grade: int) -> str:
    return f"{criterion}:{value}->{GRADES[grade]}"


_NEG_CUE = re.compile(r"\b(?:no|not|without|negative for|free of)\b")
_QUALIFIED_NEG = re.compile(r"\bno (?:definite|definitive|typical|overt|convincing|significant|gross|frank|"
                            r"large|obvious|discrete|appreciable|substantial|visible)\b|\bwithout (?:definite|"
                            r"typical|overt|convincing|significant|gross|frank|obvious)\b|"
                            # "heart is not significantly enlarged" says less than "no cardiomegaly"
                            r"\bnot (?:significantly|definitely|clearly|markedly|substantially|grossly)\b")
# a place named relative to a structure, not inside it: "tip 5 cm above the carina", "leads
# overlying the heart", "density projecting over the ribs", "at the level of the clavicle"; the
# extractor attaches that structure as the finding's region ("in the carina"), so the generator
# says no location of its own for a finding stated in such a sentence (``relative_place``)
_RELATIVE_PLACE = re.compile(r"\b(?:above|below|beneath|overlying|overlies|overlie|projecting|projects|"
                             r"projected|superimposed|level of|adjacent|near|anterior to|posterior to|"
                             r"lateral to|medial to|superior to|inferior to|overlap|overlapping)\b")
_RELATIVE_CACHE: dict[str, bool] = {}
# round 14: a place offered with a hedge ("Patchy airspace disease ... probably within the right
# lower lobe", CXR2111, R2Gen train): the place (and a side said only there) is not stated
_HEDGED_PLACE = re.compile(r"\b(?:probably|possibly|likely|perhaps|presumably|questionably|maybe)\s+"
                           r"(?:located\s+|situated\s+)?(?:in|within|at|involving|along)\b")
_HEDGED_CACHE: dict[str, int] = {}
# change words that say a finding was there before: "catheter has been removed", "clearing of the
# opacities", "almost completely resolved"; the extractor's reading of such a sentence (present,
# or absent) is a change claim, not a plain statement (hand audit: "has been removed" -> a line is
# seen; "almost completely resolved pleural air" -> no pneumothorax)
_RESOLUTION = re.compile(r"\b(?:removed|removal|resolv\w*|resolution|clear(?:ed|ing)|no longer|withdrawn|"
                         r"explanted|extubated)\b")
# a stated finding in a sentence that also calls something normal or clear ("Lungs are clear
# airspace disease." read as airspace disease; "hyperexpanded but clear"): the sentence speaks both
# ways and the extractor's reading of which part is normal is not vouched for (hand audit)
_NORMAL_WORD = re.compile(r"\b(?:clear|normal|unremarkable|negative|within normal limits)\b")
_PARTIAL = re.compile(r"\b(?:almost|nearly|near|partial\w*|incomplete\w*|residual|mostly|largely|"
                      r"decreas\w*|improv\w*|smaller)\b")
# a sentence that names another examination ("opacity ... seen on prior CT", "small nodules on the
# chest CT scan"): what it states may be that examination's finding, not this film's (hand audit
# #13, CXR2163); the extractor drops the plain "X on the CT" forms (context.yaml), the rest is
# graded down (``evidence:other_exam``)
_OTHER_EXAM = re.compile(r"\b(?:ct|cta|mri|mr|pet|pet-ct|ultrasound|sonogram|sonography|cat scan|ct scan|"
                         r"cross-sectional imaging|fluoroscopy|mammogram|mammography)\b")


def hedged_place(text: str) -> int:
    """Where a hedged place begins in a sentence ("probably within the ..."), -1 for nowhere
    (cached per sentence text)."""
    hit = _HEDGED_CACHE.get(text)
    if hit is None:
        if len(_HEDGED_CACHE) > 200_000:
            _HEDGED_CACHE.clear()
        low = text.lower()
        m = _HEDGED_PLACE.search(low) if "ly " in low or "perhaps" in low or "maybe" in low else None
        hit = _HEDGED_CACHE[text] = m.start() if m is not None else -1
    return hit


def relative_place(texts: list[str]) -> bool:
    """Some sentence places something relative to a structure ("above the carina") rather than
    in it (cached per sentence text: report sentences repeat across a corpus)."""
    cache = _RELATIVE_CACHE
    for t in texts:
        hit = cache.get(t)
        if hit is None:
            if len(cache) > 200_000:
                cache.clear()
            low = t.lower()
            hit = cache[t] = _has(low, _RELATIVE_PLACE_LITS) and _RELATIVE_PLACE.search(low) is not None
        if hit:
            return True
    return False
_ALT_CUE = re.compile(r"\b(?:or|versus|vs)\b")
_CLAUSE = re.compile(r"[,;:]|\bbut\b|\bhowever\b")
_SIDE_CUE = {"left": re.compile(r"\bleft\b"), "right": re.compile(r"\bright\b"),
             "bilateral": re.compile(r"\b(?:bilateral|bilaterally|both|biapical|bibasilar|bibasal)\b")}


# "no change in the small granuloma" negates a change, not the finding (pseudo-negation)
_PSEUDO_NEG = re.compile(r"\b(?:no|not|without)\s+(?:\w+\s+){0,2}(?:change|changes|changed|increase|decrease|progression)\b")
_NEG_ONLY_CUE = re.compile(r"\b(?:no|not|without|negative for|free of|nor)\b")
_NEG_CLAUSE = re.compile(r"[,;:]|\bbut\b|\bhowever\b|\balthough\b|\bwhile\b|\band\b")


def negated_only(words: tuple[str, ...] | list[str], sentences: list[str]) -> bool:
    """Some of ``words`` occurs in the sentences, and every occurrence lies in a clause after a
    negation cue ("no large effusion": "large" is negated; "no change in the large hernia" is not)."""
    seen = False
    for s in sentences:
        low = s.lower()
        if not _has(low, words):
            # blanking pseudo-negations only removes text: a word absent from the sentence stays
            # absent (most sentences of a study hold none of the words)
            continue
        low = _PSEUDO_NEG.sub(lambda m: " " * len(m.group(0)), low)
        for w in words:
            for m in re.finditer(r"\b" + re.escape(w) + r"\b", low):
                seen = True
                start = 0
                for c in _NEG_CLAUSE.finditer(low, 0, m.start()):
                    start = c.end()
                if not _NEG_ONLY_CUE.search(low, start, m.start()):
                    return False
    return seen


def _alternative(sentence: str) -> bool:
    """Some clause of the sentence offers alternatives ("atelectasis or scarring", "versus") outside
    a negated list ("no effusion or pneumothorax" is not an alternative)."""
    return _alternative_low(sentence.lower())


def _alternative_low(low: str) -> bool:
    """``_alternative`` of a lowered sentence."""
    if _ALT_CUE.search(low) is None:
        # the clause split never cuts a cue word (it splits at punctuation and whole words), so
        # a sentence without a cue has no clause with one
        return False
    for clause in _CLAUSE.split(low):
        if _ALT_CUE.search(clause) and not _NEG_CUE.search(clause):
            return True
    return False


def obs_grade(
    obs: Observation,
    known_findings: dict[str, Any],
    known_regions: dict[str, Any],
    localization: str,
    n_images_boxed: int,
    n_images: int,
    *,
    sentences: dict[str, str] | None = None,
    has_report: bool = True,
    label_conflict: bool = False,
    hedge_re: Any = None,
    shared_sentences: frozenset[str] = frozenset(),
    vague: frozenset[str] = frozenset(),
    annotated: bool = False,
    places: int = 0,
) -> tuple[int, tuple[str, ...]]:
    """Grade of the facts one observation contributes (worst criterion) and the reasons.

    ``localization`` is what the generator attached: "box" (lesion box or own-region box),
    "fallback" (default-region boxes), "none". ``sentences`` maps sentence ids to report sentences
    (evidence checks); ``label_conflict``: a dataset label disagrees with this report observation;
    ``annotated``: people annotated the observation on the report (RadGraph, Lunguage: scene graph
    extractor ``gold:...``), so the two checks that guard against the extractor attaching a hedge or
    an attribute to the wrong finding (``hedge_in_sentence``, ``shared_sentence``) do not apply: the
    annotators gave each entity its certainty and linked its modifiers and anatomy themselves;
    ``places``: how many distinct places (regions not containing one another) the answer names
    for a stated finding (0: no location of its own is said)."""
    # every criterion that lowers the grade appends its (grade, reason) in check order; the grade
    # is the worst of them (one per-sentence flag lookup and no per-call strings: this runs for
    # every observation of a build whose grade is not cached yet)
    low: list[tuple[int, str]] = []
    if obs.regions and any(r not in known_regions for r in obs.regions):
        low.append(_R_REGIONS)
    if obs.finding not in known_findings:
        low.append(_R_ENTITY_UNRESOLVED)
    elif str(known_findings[obs.finding]).startswith("other ") or obs.finding in vague:
        # a catch-all ("other lesion") or a bare device word ("line": often "B lines", "lung
        # lines remain low"): the answer does not say what was seen
        low.append(_R_ENTITY_VAGUE)
    certainty = obs.certainty
    stated = certainty != "absent"
    if obs.source == "report":
        if obs.qualifier or (not stated and obs.severity):
            low.append(_R_QUALIFIED)
        elif certainty == "uncertain":
            low.append(_R_HEDGED)
        evidence = obs.evidence
        if len(evidence) == 1:
            sid = evidence[0].sentence_id
            sids = [sid] if sid else []
        else:
            sids = list(dict.fromkeys(ev.sentence_id for ev in evidence if ev.sentence_id))
        texts = [sentences[sid] for sid in sids if sid in sentences] if sentences else []
        if not texts:
            texts = [ev.text for ev in evidence]
        # per sentence: (hedge, alternative, qualified negative, resolution, partial, normal,
        # another examination)
        flags = [_sentence_flags(t, hedge_re) for t in texts]
        if not stated and not obs.severity and any(f[2] for f in flags):
            # "no typical findings of edema", "no definite effusion": a qualified negative the
            # extractor left unmarked reads as a plain "no" (Observation.qualifier marks it)
            low.append(_R_QUALIFIED_UNMARKED)
        if stated and any(f[1] for f in flags):
            low.append(_R_ALTERNATIVE)
        if stated and any(f[6] for f in flags):
            low.append(_R_OTHER_EXAM)
        if len(sids) > 1:
            low.append(_R_MERGED)
        if any(f[3] for f in flags):
            # "resolved" read as absent is right unless the change is partial ("almost completely
            # resolved", "residual"); read as present (the extractor missed the change) it is wrong
            if not stated and any(f[3] and f[4] for f in flags):
                low.append(_R_PARTIAL_RESOLUTION)
            elif stated:
                low.append(_R_RESOLUTION)
        if stated and any(f[5] for f in flags):
            low.append(_R_NORMAL)
        if certainty == "present" and not annotated:
            # the extractor read the finding as certain, but its sentence hedges something: the
            # hedge may be this finding's ("interstitial changes and possibly fibrosis")
            if any(f[0] for f in flags):
                low.append(_R_HEDGE_IN_SENTENCE)
            # a sentence stating several findings is where sides, sizes and regions get attached to
            # the wrong one ("mediastinal clips, left base scarring" -> "left surgical clips")
            if shared_sentences and not shared_sentences.isdisjoint(sids):
                low.append(_R_SHARED)
        if stated and places > 1:
            # the location said is the extractor's attachment of regions named in the sentence:
            # several places that do not contain one another often belong to different things
            # ("cardiomegaly ... in the cardiac silhouette and the lungs"); hand audit
            low.append(_R_PLACES)
        if stated and obs.dropped:
            # the sentence put a place near this finding that the finding cannot lie in
            # (extract/data/finding_places.yaml): the sentence's places belong to several findings,
            # so what was kept may be misattributed too
            low.append(_R_DROPPED)
        side = obs.laterality
        if stated and side in _SIDE_CUE and texts and not any(_side_said(t, side) for t in texts):
            low.append(_R_SIDE)
    elif obs.source == "label":
        if has_report:
            # the report is silent about what a coder's label asserts (or denies)
            low.append(_R_LABEL_SILENT)
        elif certainty == "uncertain":
            low.append(_R_LABEL_UNCERTAIN)
        elif stated and any(b.source in LESION_SOURCES and b.source != "label" for b in obs.boxes):
            low.append(_R_LABEL_EXPERT_BOX)
        else:
            low.append(_R_LABEL_ONLY)
    if label_conflict:
        low.append(_R_LABEL_CONFLICT)
    if stated:
        # missing boxes lower only the rows whose question asks where (``LOCALIZATION_NONE``,
        # added by the generator); boxes that exist but are partial or only default regions are
        # weaker evidence of where the finding is
        if localization == "box":
            if n_images and 0 < n_images_boxed < n_images:
                low.append(_R_LOC_INCOMPLETE)
        elif localization == "fallback":
            low.append(_R_LOC_FALLBACK)
    if not low:
        return _GRADE_NONE
    return max(g for g, _ in low), tuple(r for _, r in low)


def _lowered(criterion: str, value: str, grade: int) -> tuple[int, str]:
    return grade, reason(criterion, value, grade)


_GRADE_NONE: tuple[int, tuple[str, ...]] = (A_PP, ())
_R_REGIONS = _lowered("regions", "unresolved", A)
_R_ENTITY_UNRESOLVED = _lowered("entities", "unresolved", A)
_R_ENTITY_VAGUE = _lowered("entities", "vague", A)
_R_QUALIFIED = _lowered("evidence", "qualified", B)
_R_HEDGED = _lowered("evidence", "hedged", B)
_R_QUALIFIED_UNMARKED = _lowered("evidence", "qualified_unmarked", B)
_R_ALTERNATIVE = _lowered("evidence", "alternative", B)
_R_MERGED = _lowered("evidence", "merged", A)
_R_PARTIAL_RESOLUTION = _lowered("evidence", "partial_resolution", B)
_R_OTHER_EXAM = _lowered("evidence", "other_exam", B)
_R_RESOLUTION = _lowered("evidence", "resolution_in_sentence", A)
_R_NORMAL = _lowered("evidence", "normal_in_sentence", A)
_R_HEDGE_IN_SENTENCE = _lowered("evidence", "hedge_in_sentence", A)
_R_SHARED = _lowered("evidence", "shared_sentence", A)
_R_PLACES = _lowered("location", "several_places", B)
_R_DROPPED = _lowered("location", "dropped_place", C)
_R_SIDE = _lowered("side", "inferred", A)
_R_LABEL_SILENT = _lowered("label", "only_report_silent", C)
_R_LABEL_UNCERTAIN = _lowered("label", "uncertain", B)
_R_LABEL_EXPERT_BOX = _lowered("label", "with_expert_box", A)
_R_LABEL_ONLY = _lowered("label", "only", B)
_R_LABEL_CONFLICT = _lowered("label", "conflict", C)
_R_LOC_INCOMPLETE = _lowered("localization", "incomplete", A)
_R_LOC_FALLBACK = _lowered("localization", "fallback", A)
_SENTENCE_FLAGS: dict[tuple[int, str], tuple[bool, bool, bool, bool, bool, bool, bool]] = {}
_SIDE_SAID: dict[tuple[str, str], bool] = {}


def _sentence_flags(text: str, hedge_re: Any) -> tuple[bool, bool, bool, bool, bool, bool, bool]:
    """(hedges something, offers alternatives (``_alternative``), qualified negative, a resolution
    word, a partial-change word, a normal word, names another examination) of one sentence, in one
    tuple cached per sentence text: report sentences repeat across a corpus ("No pneumothorax.")
    and across a study's facts."""
    key = (id(hedge_re), text)
    hit = _SENTENCE_FLAGS.get(key)
    if hit is None:
        if len(_SENTENCE_FLAGS) > 200_000:
            _SENTENCE_FLAGS.clear()
        # one lowering per sentence, and a regex runs only where one of its literals occurs (a
        # substring test is far cheaper than a word-bounded alternation, and most sentences hold
        # none of a pattern's words): the first sight of each sentence in a build pays these
        low = text.lower()
        hit = _SENTENCE_FLAGS[key] = (
            hedge_re is not None and hedge_re.search(low) is not None,
            _has(low, _ALT_LITS) and _alternative_low(low),
            _has(low, _QUALIFIED_NEG_LITS) and _QUALIFIED_NEG.search(low) is not None,
            _has(low, _RESOLUTION_LITS) and _RESOLUTION.search(low) is not None,
            _has(low, _PARTIAL_LITS) and _PARTIAL.search(low) is not None,
            _has(low, _NORMAL_WORD_LITS) and _NORMAL_WORD.search(low) is not None,
            _has(low, _OTHER_EXAM_LITS) and _OTHER_EXAM.search(low) is not None)
    return hit


# literals of which every match of the pattern contains one (``_sentence_flags``' pre-filters;
# tests/test_quality_criteria_prefilter.py checks each pattern's alternatives against them)
_ALT_LITS = ("or", "vs", "versus")
_RELATIVE_PLACE_LITS = ("above", "below", "beneath", "overl", "project", "superimposed", "level of", "adjacent",
                        "near", "rior to", "lateral to", "medial to")
_QUALIFIED_NEG_LITS = ("no ", "not ", "without ")
_RESOLUTION_LITS = ("remov", "resol", "clear", "no longer", "withdrawn", "explanted", "extubated")
_PARTIAL_LITS = ("almost", "near", "partial", "incomplete", "residual", "mostly", "largely", "decreas",
                 "improv", "smaller")
_NORMAL_WORD_LITS = ("clear", "normal", "unremarkable", "negative")
_OTHER_EXAM_LITS = ("ct", "mr", "pet", "ultrasound", "sono", "cat scan", "cross-sectional", "fluoroscopy",
                    "mammo")


def _has(low: str, lits: tuple[str, ...] | list[str]) -> bool:
    for lit in lits:
        if lit in low:
            return True
    return False


def _side_said(text: str, side: str) -> bool:
    """The sentence names the side (``_SIDE_CUE``), cached per (sentence, side)."""
    key = (text, side)
    hit = _SIDE_SAID.get(key)
    if hit is None:
        if len(_SIDE_SAID) > 200_000:
            _SIDE_SAID.clear()
        hit = _SIDE_SAID[key] = _SIDE_CUE[side].search(text.lower()) is not None
    return hit


IMPLIED_NEGATIVE = (B, (reason("negative", "implied", B),))
def answer_merged(n_sentences: int) -> tuple[int, tuple[str, ...]] | None:
    """Row criterion: the stated findings of a positive answer rest on ``n_sentences`` sentences."""
    return (A, (reason("answer", "merged_sentences", A),)) if n_sentences > 1 else None


# a positive answer to a question that asks where, with no box of the finding's own
LOCALIZATION_NONE = (B, (reason("localization", "none_where_asked", B),))
# the report states the finding both present and absent/uncertain: the answer keeps the positive
REPORT_CONFLICT = (C, (reason("evidence", "report_conflict", C),))
CHANGE_TEXT_LEFT = (B, (reason("change_text", "left", B),))
# an answer that lists the positives of a scope (the study, a region, a subcategory) while the report
# states something positive there that no row states (a reading left unstated by --unvouched or
# --label-only, a sentence the extractor read nothing from, a finding the ontology does not name):
# each sentence is true, the list is not all there is (session 11: the test readers' "main finding
# left out" rows, seeds 96 + 97)
INCOMPLETE = (B, (reason("completeness", "finding_not_stated", B),))
EXTRACT_ERROR = (C, (reason("issue_level", "non_interpretable", C),))


def box_valid(b: Box, sizes: dict[str, tuple[int | None, int | None]]) -> bool:
    if not (b.x1 < b.x2 and b.y1 < b.y2) or b.x1 < 0 or b.y1 < 0:
        return False
    w, h = sizes.get(b.image_id, (None, None))
    if b.image_id not in sizes:
        return False
    if w is not None and b.x2 > w:
        return False
    if h is not None and b.y2 > h:
        return False
    return True


def combine(parts: list[tuple[int, tuple[str, ...]]]) -> tuple[int, list[str]]:
    """Worst grade over several (grade, reasons) and the union of reasons in order, deduplicated."""
    g = A_PP
    out: list[str] = []
    for pg, pr in parts:
        if pg > g:
            g = pg
        for r in pr:
            if r not in out:
                out.append(r)
    return g, out
