"""Compile a phrase list into one regular expression shaped as a trie.

Python's ``re`` tries alternatives in order, so a flat ``a|ab|abc`` is slow (every branch is
tried at every position) and returns the first rather than the longest match. A trie-shaped
pattern shares prefixes (one branch per next character) and tries longer continuations before
ending, so the match at a position is the longest phrase there — what mention and cue lookup
need ("pleural effusion" over "effusion", "no evidence of" over "no").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_END = ""


def _node_pattern(node: dict[str, dict]) -> str:
    ends = _END in node
    branches = []
    for ch in sorted(k for k in node if k != _END):
        branches.append(_escape(ch) + _node_pattern(node[ch]))
    if not branches:
        return ""
    if len(branches) == 1 and not ends:
        return branches[0]
    body = "|".join(branches)
    if ends:
        # Greedy optional group: the longer continuation is tried first.
        return f"(?:{body})?"
    return f"(?:{body})"


def _escape(ch: str) -> str:
    if ch == " ":
        # One space in a phrase matches any run of white space (line wraps, double spaces).
        return r"\s+"
    return re.escape(ch)


def _build(phrases: list[str]) -> str:
    root: dict[str, dict] = {}
    for p in phrases:
        node = root
        for ch in p:
            node = node.setdefault(ch, {})
        node[_END] = {}
    return _node_pattern(root)


def trie_regex(phrases: Iterable[str], *, word_bounded: bool = True) -> re.Pattern[str]:
    """One compiled pattern matching any of ``phrases`` (already lower case), longest first.

    With ``word_bounded`` a match may not start or end inside a word. Phrases that begin and
    end with a word character use plain ``\\b`` guards (the fast path: about twice as fast as
    look-arounds in CPython's engine); the few that begin or end with punctuation ("?", ";")
    get look-around guards in a second branch."""
    clean = sorted({" ".join(p.split()) for p in phrases} - {""})
    if not clean:
        return re.compile(r"(?!x)x")  # matches nothing
    if not word_bounded:
        return re.compile(_build(clean))
    edged = [p for p in clean if (p[0].isalnum() or p[0] == "_") and (p[-1].isalnum() or p[-1] == "_")]
    punct = [p for p in clean if not any(ch.isalnum() or ch == "_" for ch in p)]
    done = set(edged) | set(punct)  # built once: inside the comprehension it was rebuilt per phrase
    other = [p for p in clean if p not in done]
    parts = []
    if edged:
        parts.append(rf"\b(?:{_build(edged)})\b")
    if punct:  # ";", "?": no word edge to respect
        parts.append(_build(punct))
    if other:
        # A phrase that starts (ends) with a word character must start (end) on a word edge.
        parts.append(rf"(?:(?<!\w)(?=\w)|(?=\W))(?:{_build(other)})(?:(?<=\w)(?!\w)|(?<=\W))")
    return re.compile("|".join(parts))
