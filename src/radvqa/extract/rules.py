"""The default, offline extractor: report text -> Extraction (sections, sentences, observations
with evidence, indication). Everything it knows is data: the ontology (findings, regions,
modifiers) and ``radvqa/extract/data/*.yaml`` (sections, context cues, patterns, attributes)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from radvqa.extract._data import load_data
from radvqa.extract.aggregate import Aggregator
from radvqa.extract.attributes import AttributeMatcher, attach
from radvqa.extract.context import ContextRules
from radvqa.extract.mentions import MentionMatcher
from radvqa.extract.sections import section_role, split_sections
from radvqa.extract.sentences import split_sentences
from radvqa.extract.text import MAX_CHARS, check_text, lower_same_length
from radvqa.model import Extraction, Indication, Report, Sentence, Span

VERSION = "rules:1"


def _start(x: Any) -> int:
    return x.start


class RulesExtractor:
    """Build once (compiles the ontology and rule data), then call ``extract`` per report."""

    version = VERSION

    def __init__(self, ontology: Any = None, *, max_chars: int = MAX_CHARS):
        if ontology is None:
            from radvqa.ontology import load_ontology

            ontology = load_ontology()
        self.ontology = ontology
        self.max_chars = max_chars
        mods = getattr(ontology, "modifiers", None)
        onto_cues = dict(getattr(mods, "certainty", {}) or {}) if mods is not None else {}
        ctx_data = load_data("context")
        # The ontology's cue lists are merged unless our context data says to use ours only.
        self.context = ContextRules(ctx_data, None if ctx_data.get("ours_only", True) else onto_cues)
        self.mentions = MentionMatcher(ontology.finding_terms(), load_data("patterns"), set(ontology.findings))
        side = {rid: r.side for rid, r in ontology.regions.items()}
        self.attributes = AttributeMatcher(ontology.region_terms(), side, mods, load_data("attributes"))
        self.region_side = side

    # ------------------------------------------------------------------------------------------
    def extract(self, text: object, study_id: str = "") -> Extraction:
        clean, error = check_text(text, self.max_chars)
        if error is not None:
            return Extraction(report=Report(text=clean), extractor=self.version, error=error)
        try:
            return self._extract(clean)
        except Exception as e:  # never raise on bad text: report the reason instead
            return Extraction(report=Report(text=clean), extractor=self.version,
                              error=f"extraction failed: {type(e).__name__}: {e}")

    def extract_many(self, items: Iterable[tuple[str, object]]) -> Iterator[Extraction]:
        for sid, text in items:
            yield self.extract(text, sid)

    # ------------------------------------------------------------------------------------------
    def _extract(self, text: str) -> Extraction:
        lower = lower_same_length(text)
        sections = split_sections(text)
        sentences: list[Sentence] = []
        agg = Aggregator(self.region_side)
        ind_texts: list[str] = []
        ind_findings: list[str] = []
        ind_spans: list[Span] = []
        ctx = self.context
        for sec in sections:
            sents = split_sentences(text, sec.start, sec.end, sec.name, len(sentences) + 1)
            sentences.extend(sents)
            role = section_role(sec.name)
            if role == "skip" or not sents:
                continue
            # One scan of the section per matcher (cheaper than one per sentence); the matches
            # are then dealt to their sentences, and context never crosses a sentence end.
            a, b = sents[0].start, sents[-1].end
            mentions = self.mentions.find(lower, a, b)
            if not mentions:
                if role == "indication":
                    ind_texts.extend(x.text for x in sents)
                continue
            cues = ctx.cues(lower, a, b)
            attrs = self.attributes.find(lower, a, b) if role != "indication" else []
            attrs.sort(key=_start)
            # Deal the (sorted) matches to sentences with moving pointers: linear in the
            # section size, so a huge one-section text stays linear too.
            mi = ci = ai = 0
            for s in sents:
                if role == "indication":
                    ind_texts.append(s.text)
                while mi < len(mentions) and mentions[mi].start < s.start:
                    mi += 1
                mj = mi
                while mj < len(mentions) and mentions[mj].start < s.end:
                    mj += 1
                s_mentions = mentions[mi:mj]
                mi = mj
                while ci < len(cues) and cues[ci].start < s.start:
                    ci += 1
                cj = ci
                while cj < len(cues) and cues[cj].start < s.end:
                    cj += 1
                s_cues = cues[ci:cj]
                ci = cj
                while ai < len(attrs) and attrs[ai].start < s.start:
                    ai += 1
                aj = ai
                while aj < len(attrs) and attrs[aj].start < s.end:
                    aj += 1
                s_attrs = attrs[ai:aj]
                ai = aj
                if not s_mentions:
                    continue
                if role == "indication":
                    for m in s_mentions:
                        cert, _ = ctx.certainty(lower, s_cues, m.start, m.end)
                        if cert == "absent" or m.certainty == "absent":
                            continue
                        for f in m.findings:
                            if f not in ind_findings:
                                ind_findings.append(f)
                        ind_spans.append(Span(start=m.start, end=m.end, text=text[m.start:m.end], sentence_id=s.id))
                    continue
                vals = attach(s_attrs, [(m.start, m.end) for m in s_mentions], lower) if s_attrs else None
                for i, m in enumerate(s_mentions):
                    if m.certainty is not None:
                        cert = m.certainty
                    else:
                        cert, _cue = ctx.certainty(lower, s_cues, m.start, m.end)
                        if cert is None:
                            continue
                    v = vals[i] if vals is not None else None
                    span = Span(start=m.start, end=m.end, text=text[m.start:m.end], sentence_id=s.id)
                    for f in m.findings:
                        agg.add(f, cert, span, v, implicit=m.certainty is not None)
        indication = None
        if ind_texts:
            indication = Indication(text=" ".join(ind_texts), evaluate=ind_findings, evidence=ind_spans)
        return Extraction(report=Report(text=text, sections=sections, sentences=sentences),
                          observations=agg.observations(), indication=indication, extractor=self.version)
