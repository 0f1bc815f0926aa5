"""Observations people annotated (``Study.annotations``: RadGraph, Lunguage) -> the study's
``Extraction``, in place of what the extractor reads.

The report's structure (sections, sentences, indication) is the rules extractor's reading of the
text; its observations are set aside. Each annotation is named by the **term matcher**: the rules
extractor run on the annotated phrase alone ("left pleural effusion" -> pleural_effusion, with
the regions it names), else on the entity's own words; the most specific finding it reads is
taken (for a normal statement, "lungs clear", the most general negative, and the certainty becomes
absent: RadGraph annotates "clear" as a present observation). Certainty, side and change are the
annotation's; severity is the annotation's, else what the matcher reads in the phrase. A phrase the
matcher names nothing in is *unmapped*: not stated, listed in ``Study.meta["annotations_unmapped"]``
with its count (never dropped silently); when the annotation is present or uncertain it is still
stated, as the catch-all finding ``other_lesion`` (else "is this study normal?" would answer yes
about a report that states an abnormality). One observation per (finding, side): the strongest
certainty (present > uncertain > absent), the first change, the evidence of all. Evidence spans get
the id of the sentence they lie in.

The term matcher is always the rules extractor, whatever ``--extractor`` the build uses: the
annotation has already decided what the report says; only the naming is radvqa's.
``Extraction.extractor`` is ``gold:<source>`` (the scene graph's ``extractor``), which the grade
criteria read (docs/generation.md, "Human-annotated sources").
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from radvqa.model import Annotation, Extraction, Observation, Span, Study

_RANK = {"absent": 0, "uncertain": 1, "present": 2}
GOLD_PREFIX = "gold:"
UNNAMED = "other_lesion"  # what an annotated present/uncertain finding no term names is stated as


class TermMapper:
    """Gold phrase -> the observation radvqa's rules extractor reads in it (cached), and whether the
    phrase itself states a normal. RadGraph marks normal statements as present observations
    ("clear" located_at "lungs" is OBS-DP); the extractor reads "lungs clear" as lung opacity
    absent, and that polarity is carried over."""

    def __init__(self, extractor: Any, ontology: Any) -> None:
        self.ex, self.onto = extractor, ontology
        self.cache: dict[str, tuple[Observation, bool] | None] = {}

    def observation(self, phrase: str) -> tuple[Observation, bool] | None:
        if phrase in self.cache:
            return self.cache[phrase]
        found = [o for o in self.ex.extract(phrase, "gold").observations if o.from_report and o.source == "report"]
        ids = [o.finding for o in found]
        if found and all(o.certainty == "absent" for o in found):
            # a normal statement ("lungs clear") implies several negatives: the most general one
            # names what the statement says
            pick = [o for o in found if not any(g in self.onto.ancestors(o.finding) for g in ids if g != o.finding)]
        else:
            # the most specific of what was found: drop any finding that is an ancestor of another
            pick = [o for o in found if not any(o.finding in self.onto.ancestors(g) for g in ids if g != o.finding)]
        res = (pick[0], pick[0].certainty == "absent") if pick else None
        if len(self.cache) > 100_000:
            self.cache.clear()
        self.cache[phrase] = res
        return res

    def __call__(self, phrase: str) -> tuple[str, bool] | None:
        """(finding id, states a normal) or None."""
        hit = self.observation(phrase)
        return (hit[0].finding, hit[1]) if hit else None


_MAPPERS: dict[int, tuple[Any, TermMapper]] = {}


def term_mapper(ontology: Any) -> TermMapper:
    """One rules extractor and term matcher per ontology object (per process)."""
    hit = _MAPPERS.get(id(ontology))
    if hit is None or hit[0] is not ontology:
        from radvqa.extract import get_extractor

        hit = _MAPPERS[id(ontology)] = (ontology, TermMapper(get_extractor("rules", ontology=ontology), ontology))
    return hit[1]


def extract_annotated(study: Study, ontology: Any) -> Extraction:
    """The study's extraction from its annotations (module docstring); unmapped phrases are listed in
    ``study.meta``."""
    mapper = term_mapper(ontology)
    base = mapper.ex.extract(study.report_text or "", study.id)
    sentences = base.report.sentences if base.report is not None else []

    def sentence_of(a: int, b: int) -> str | None:
        return next((s.id for s in sentences if s.start <= a < s.end), None)

    unmapped: Counter[str] = Counter()
    best: dict[tuple[str, str | None], Observation] = {}
    findings = getattr(ontology, "findings", {})
    for ann in study.annotations or []:
        hit = mapper.observation(ann.phrase) or mapper.observation(ann.term)
        if hit is None:
            unmapped[ann.term or ann.phrase] += 1
            if ann.certainty == "absent" or UNNAMED not in findings:
                continue
            # the annotators state something abnormal that no ontology term names: stating nothing
            # would let "is this study normal?" answer yes; it is stated as the catch-all finding
            # (a vague finding: its rows are graded down, entities:vague)
            hit = (Observation(id="", finding=UNNAMED), False)
        seen, states_normal = hit
        cert = "absent" if states_normal and ann.certainty == "present" else ann.certainty
        ev = [Span(start=s.start, end=s.end, text=s.text, sentence_id=sentence_of(s.start, s.end)) for s in ann.evidence]
        key = (seen.finding, ann.laterality)
        prev = best.get(key)
        if prev is None:
            best[key] = Observation(
                id="", finding=seen.finding, certainty=cert, laterality=ann.laterality, regions=list(seen.regions),
                severity=_severity(ann, seen, cert), change=ann.change, evidence=ev)
            continue
        if _RANK[cert] > _RANK[prev.certainty]:
            prev.certainty = cert
            prev.severity = _severity(ann, seen, cert) or prev.severity
        prev.change = prev.change or ann.change
        prev.regions = list(dict.fromkeys(prev.regions + list(seen.regions)))
        have = {(s.start, s.end) for s in prev.evidence}
        prev.evidence = prev.evidence + [s for s in ev if (s.start, s.end) not in have]
    obs = list(best.values())
    for i, o in enumerate(obs, 1):
        o.id = f"O{i:02d}"
        # a region and its ancestor (right_pleura, pleura) from two annotations: the narrower says it
        o.regions = [r for r in o.regions if not any(r in _region_ancestors(ontology, q) for q in o.regions if q != r)]
        o.evidence = sorted(o.evidence, key=lambda s: (s.start, s.end))
    if unmapped:
        study.meta = dict(study.meta) | {"annotations_unmapped": "; ".join(f"{k} x{v}" for k, v in sorted(unmapped.items()))}
    study.meta = dict(study.meta) | {"annotations_stated": f"{len(obs)} observations from {len(study.annotations or [])} annotations"}
    return Extraction(report=base.report, observations=obs, indication=base.indication,
                      extractor=f"{GOLD_PREFIX}{study.source}", error=base.error)


def _region_ancestors(ontology: Any, rid: str) -> set[str]:
    try:
        return set(ontology.region_ancestors(rid))
    except (KeyError, AttributeError):
        return set()


def _severity(ann: Annotation, seen: Observation, cert: str) -> str | None:
    # a severity describes something seen: a negative keeps none ("no large effusion" is a
    # qualified negative, which the annotation's certainty already decided)
    if cert == "absent":
        return None
    return ann.severity or seen.severity


__all__ = ["TermMapper", "extract_annotated", "term_mapper", "GOLD_PREFIX"]
