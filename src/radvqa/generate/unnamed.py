"""Findings the ontology does not name ("irregularity of the right fifth and sixth ribs", "stable
postsurgical change of the left clavicle"): the extractor states nothing from them, yet the region
they lie in is not normal. ``UnnamedFindings.scan`` reads a report's observed sentences once per
study and returns the regions (with the subcategories those regions make up) that no "normal" /
"no abnormality" answer may speak for. Words and the region -> subcategory table are data
(``data/unnamed_findings.yaml``); region words are the ontology's region names and synonyms."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

_DATA = Path(__file__).with_name("data") / "unnamed_findings.yaml"


def _alt(words: list[str]) -> str:
    return "|".join(re.escape(" ".join(w.lower().split())) for w in sorted(set(words), key=len, reverse=True))


class UnnamedFindings:
    """Built once per generator from the vocabulary; ``scan`` is a pure function of the report."""

    def __init__(self, vocab: Any, path: Path = _DATA) -> None:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        words = [str(w) for w in doc.get("words") or []]
        # a past operation or a device's traces: a device may be on the film though none is stated
        ops = [str(w) for w in [*(doc.get("past_operations") or []), *(doc.get("device_traces") or [])]]
        self.operation = re.compile(rf"\b(?:{_alt(ops)})\b") if ops else None
        neg = [str(w) for w in doc.get("negations") or []]
        self.sections = frozenset(str(s).upper() for s in doc.get("sections") or [])
        self.word = re.compile(rf"\b(?:{_alt(words)})\b") if words else None
        self.neg = re.compile(rf"\b(?:{_alt(neg)})\b") if neg else None
        onto = vocab.onto
        terms = getattr(onto, "region_terms", None)
        index: dict[str, tuple[str, ...]] = terms() if callable(terms) else {}
        # one region per term: an ambiguous term names no region
        self.region_of = {t: ids[0] for t, ids in index.items() if len(ids) == 1 and ids[0] in vocab.rname}
        self.region = re.compile(rf"\b(?:{_alt(list(self.region_of))})\b") if self.region_of else None
        # (regions a reduced ontology lacks are not an error: no sentence can name them)
        self.sub_of: dict[str, str] = {str(r): str(s) for r, s in (doc.get("subcategories") or {}).items()
                                       if r in vocab.rname}
        self.ranc = vocab.rancestors
        self._cache: dict[str, tuple[frozenset[str], frozenset[str], bool]] = {}
        self._named: dict[str, tuple[frozenset[str], frozenset[str]]] = {}

    def scan(self, report: Any, skip: set[str] | frozenset[str] = frozenset()) -> tuple[set[str], set[str], bool]:
        """One pass over the report's observed sentences: (subcategories, regions, names a past
        operation).

        The regions (with the subcategories they make up) hold a finding the report states but the
        ontology does not name: a sentence counts when it has one of ``words`` with no negation
        before it ("no rib irregularity") and names a region; no "normal" answer may speak for
        them. A past operation ("Prior cholecystectomy") or a device's trace ("terminating at the caval
        atrial junction") named without a device means clips or
        sutures may be on the film: no answer may say the study has no device. ``skip``: ids of
        sentences whose unnamed findings are not wanted (a stated positive rests on them)."""
        subs: set[str] = set()
        regions: set[str] = set()
        op = False
        if report is None or (self.operation is None and (self.word is None or self.region is None)):
            return subs, regions, op
        find = self.word is not None and self.region is not None
        sections = self.sections
        cache = self._cache
        for s in report.sentences:
            if sections and s.section.upper() not in sections:
                continue
            hit = cache.get(s.text)
            if hit is None:
                hit = self._sentence(s.text)
            if hit[2]:
                op = True
            if find and hit[1] and s.id not in skip:
                subs.update(hit[0])
                regions.update(hit[1])
        return subs, regions, op and self.operation is not None

    def regions_named(self, text: str) -> tuple[frozenset[str], frozenset[str]]:
        """(subcategories, regions) a sentence names (the ontology's region names and synonyms),
        cached by text: for round 11a's blocking sentences (quality/unvouched.py ``normal_blocks``)."""
        hit = self._named.get(text)
        if hit is None:
            regions: set[str] = set()
            subs: set[str] = set()
            if self.region is not None:
                self._regions_in(text.lower(), regions, subs)
            if len(self._named) >= 100_000:
                self._named.clear()
            hit = self._named[text] = (frozenset(subs), frozenset(regions))
        return hit

    def _regions_in(self, low: str, regions: set[str], subs: set[str]) -> None:
        """Add the regions a lowered sentence names, and the subcategory of each (its own or its
        nearest ancestor's), to ``regions`` and ``subs``."""
        assert self.region is not None
        for r in self.region.finditer(low):
            rid = self.region_of[" ".join(r.group().split())]
            regions.add(rid)
            for a in (rid, *self.ranc.get(rid, ())):
                sub = self.sub_of.get(a)
                if sub is not None:
                    subs.add(sub)
                    break

    def _sentence(self, text: str) -> tuple[frozenset[str], frozenset[str], bool]:
        """(subcategories, regions, names a past operation) of one sentence, cached: report
        sentences repeat across a corpus ("No pneumothorax." in most OpenI reports)."""
        hit = self._cache.get(text)
        if hit is not None:
            return hit
        low = text.lower()
        subs: set[str] = set()
        regions: set[str] = set()
        m = self.word.search(low) if self.word is not None else None
        if m is not None and self.region is not None and (self.neg is None or self.neg.search(low, 0, m.start()) is None):
            self._regions_in(low, regions, subs)
        op = False
        if self.operation is not None:
            o = self.operation.search(low)
            op = o is not None and (self.neg is None or self.neg.search(low, 0, o.start()) is None)
        if len(self._cache) >= 100_000:
            self._cache.clear()  # bounded memory; results do not depend on the cache
        hit = self._cache[text] = (frozenset(subs) if regions else frozenset(), frozenset(regions), op)
        return hit
