"""Finding and region tags named in a free-text answer, for tag-level F1 of multi-part
answers and for the VinDr-style F1.

Matching uses the ontology's names and synonyms (longest match wins, whole tokens) and a
clause-local negation check with the parser vocabulary's negation cues: "no pleural
effusion" does not tag pleural_effusion as present. This is deliberately the same small
rule for every model; it is not the report extractor (``radvqa.extract``), whose version
would otherwise change eval scores.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from radvqa.eval.vocab import load_vocab

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[.;:!?]")
_POST_NEG = frozenset(("not", "absent", "excluded", "negative"))
_CLAUSE_END = frozenset((".", ";", ":", "!", "?", "but", "however", "although", "which"))


class TagMatcher:
    """Whole-token phrase lookup (n-grams up to the longest term), longest match first:
    a few dict lookups per token, so it stays fast with thousands of synonyms."""

    def __init__(self, findings: dict[str, list[str]], regions: dict[str, list[str]]) -> None:
        self._terms: dict[tuple[str, ...], tuple[str, str]] = {}
        for kind, table in (("finding", findings), ("region", regions)):
            for tid, names in table.items():
                for n in names:
                    toks = tuple(t for t in _TOKEN.findall(n.lower().replace("_", " ")) if t not in _CLAUSE_END)
                    if toks and toks not in self._terms:
                        self._terms[toks] = (kind, tid)
        self._max = max((len(t) for t in self._terms), default=0)
        v = load_vocab()
        self._neg = {tuple(_TOKEN.findall(c.lower())) for c in v["negation_cues"]} | {("no",)}
        self._neg_max = max(len(c) for c in self._neg)

    def _negated(self, toks: list[str], start: int, end: int) -> bool:
        for i in range(start, end):
            if toks[i].endswith("n't"):
                return True
            for L in range(1, self._neg_max + 1):
                if i + L <= end and tuple(toks[i : i + L]) in self._neg:
                    return True
        return False

    def _post_negated(self, toks: list[str], start: int) -> bool:
        # "pneumothorax isn't seen", "effusion is absent": a cue within 4 tokens after the
        # mention, in the same clause
        for t in toks[start : start + 4]:
            if t in _CLAUSE_END:
                return False
            if t.endswith("n't") or t in _POST_NEG:
                return True
        return False

    def tags(self, text: str | None) -> tuple[set[str], set[str]]:
        """(present findings, regions) named in ``text``."""
        fs: set[str] = set()
        rs: set[str] = set()
        if not text or not self._terms:
            return fs, rs
        toks = _TOKEN.findall(text.lower())
        n = len(toks)
        clause = 0
        i = 0
        while i < n:
            if toks[i] in _CLAUSE_END:
                clause = i + 1
                i += 1
                continue
            for L in range(min(self._max, n - i), 0, -1):
                hit = self._terms.get(tuple(toks[i : i + L]))
                if hit is not None:
                    kind, tid = hit
                    if kind == "region":
                        rs.add(tid)
                    elif not self._negated(toks, clause, i) and not self._post_negated(toks, i + L):
                        fs.add(tid)
                    i += L
                    break
            else:
                i += 1
        return fs, rs


@lru_cache(maxsize=1)
def default_matcher() -> TagMatcher:
    """From radvqa.ontology; raises whatever the ontology raises when it cannot load."""
    from radvqa.ontology import load_ontology

    onto = load_ontology()
    f = {fid: [x.name, fid, *x.synonyms] for fid, x in onto.findings.items()}
    r = {rid: [x.name, rid, *x.synonyms] for rid, x in onto.regions.items()}
    return TagMatcher(f, r)


def gold_tags(answer_parts: list[dict[str, Any]] | None) -> tuple[set[str], set[str]]:
    """Findings stated present (certainty not absent) and regions of those parts."""
    fs: set[str] = set()
    rs: set[str] = set()
    for p in answer_parts or []:
        if (p.get("certainty") or "present") == "absent":
            continue
        fs.update(p.get("findings") or [])
        rs.update(p.get("regions") or [])
    return fs, rs


def prf_counts(tp: int, fp: int, fn: int) -> dict[str, float | int]:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": p, "recall": r, "f1": f, "tp": tp, "fp": fp, "fn": fn}
