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
from typing import Final

_END: Final = ""


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


# One ASCII character that is no word character. In ASCII text, "no word character before
# position p" (``\b`` / ``(?<!\w)`` before a phrase that starts with a word character) is "p == 0,
# or the character at p - 1 is one of these". A pattern led by this class instead of the
# zero-width test gets the regex engine's character-set prefix scan: it skips in C to the
# characters that can stand before a word, instead of starting a full match attempt at every
# position (a fifth fewer instructions per sentence for the term and attribute tries).
ASCII_NOT_WORD: Final = "[^0-9A-Z_a-z]"
_ASCII_WORD: Final = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz")


def starts_with_ascii_word(prefixes: Iterable[str] | None) -> bool:
    """Every string of ``prefixes`` (what every match starts with) starts with an ASCII word
    character: the condition for a word-start scanner."""
    if prefixes is None:
        return False
    pres = list(prefixes)
    return bool(pres) and all(p[:1] in _ASCII_WORD and p[:1] != "" for p in pres)


# ASCII word characters -> "a", the space -> " ", every other byte -> "#" (spaced_word_starts)
_WORD_CLASS: Final = bytes(0x61 if chr(i) in _ASCII_WORD else 0x20 if i == 0x20 else 0x23 for i in range(256))
# the last text spaced_word_starts answered for, and its answer: the scanners of one sentence (term,
# attribute and cue tries, gap patterns) ask about the same string one after another
_last_spaced: Final[list[object]] = ["", True]
# id of a scanner led by ASCII_NOT_WORD -> (it, the same led by a literal space): space_led. Keyed
# by id: a compiled pattern's hash reads all of its code (the term trie's is hundreds of kilobytes)
_SPACE_LED: Final[dict[int, tuple[re.Pattern[str], re.Pattern[str]]]] = {}


def spaced_word_starts(lower: str) -> bool:
    """In the ASCII text ``lower``, every word character that follows a non-word character follows
    a space (no "x-ray", "(left", "\\n1." in it). Then a scanner led by a literal space finds
    what the same one led by ``ASCII_NOT_WORD`` finds (its phrases start with a word character,
    so only a non-word character before a word character can lead a match), and the regex engine
    skips to a space as ``memchr`` does instead of testing a character class at every character
    (about 45 instructions each). About three OpenI sentences in four qualify."""
    last = _last_spaced
    if last[0] is lower:
        return bool(last[1])
    # (find, not "in": bytes.__contains__ first tries its argument as an integer and makes a
    # TypeError to drop, about 2,000 instructions)
    ok = lower.encode("ascii").translate(_WORD_CLASS).find(b"#a") < 0
    last[0] = lower
    last[1] = ok
    return ok


def space_led(fast: re.Pattern[str]) -> re.Pattern[str]:
    """``fast`` (a pattern that starts with ``ASCII_NOT_WORD``) led by a literal space instead,
    compiled once per pattern."""
    hit = _SPACE_LED.get(id(fast))
    if hit is not None and hit[0] is fast:  # (the entry holds the pattern: its id is not reused)
        return hit[1]
    if not fast.pattern.startswith(ASCII_NOT_WORD):
        raise ValueError(f"not led by {ASCII_NOT_WORD}: {fast.pattern[:40]!r}")
    sp = re.compile(" " + fast.pattern[len(ASCII_NOT_WORD):], fast.flags)
    _SPACE_LED[id(fast)] = (fast, sp)
    return sp


def word_spans(pattern: re.Pattern[str], fast: re.Pattern[str] | None, lower: str, start: int,
               end: int) -> list[tuple[int, int]]:
    """The spans of ``pattern.finditer(lower, start, end)``. ``fast``: the same phrases led by
    ``ASCII_NOT_WORD`` instead of a word-start test (``trie_regexes``); used for a whole ASCII
    string, where it finds the same matches: a match at 0 (scanned with a space put in front), every
    later one right after the non-word character ``fast`` consumes (every phrase ends with a word character, so
    the next match cannot start where the previous one ends)."""
    if fast is None or start or end != len(lower) or not lower.isascii():
        return [m.span() for m in pattern.finditer(lower, start, end)]
    # after a space put in front, a match at 0 is one of ``fast`` too (the space is the non-word
    # character it consumes): one scan instead of a match attempt at 0 and a scan after it
    # (map(re.Match.span, ...) was measured: one tuple more per match, slower pure and compiled)
    if spaced_word_starts(lower):  # (most sentences) the same matches, found faster
        fast = space_led(fast)
    if fast.groups != 1:
        return [(x.start(), x.end() - 1) for x in fast.finditer(" " + lower)]
    # ``fast`` captures the phrase after its leading character: split hands back the text between
    # the matches and each phrase, whose lengths give the offsets (no match object and no two
    # method calls per match: about 1,400 instructions a match compiled). A match at s in the
    # spaced copy is the phrase at s in ``lower``; the next match is after the phrase and the
    # text that follows it.
    pieces = fast.split(" " + lower)
    out: list[tuple[int, int]] = []
    s = len(pieces[0])
    k = 1
    n = len(pieces)
    while k < n:
        e = s + len(pieces[k])
        out.append((s, e))
        s = e + 1 + len(pieces[k + 1])
        k += 2
    return out


def split_phrases(clean: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(phrases that start and end with a word character, phrases without one, the others) of
    normalised phrases: the three parts of a word-bounded ``trie_regex``."""
    edged = [p for p in clean if (p[0].isalnum() or p[0] == "_") and (p[-1].isalnum() or p[-1] == "_")]
    punct = [p for p in clean if not any(ch.isalnum() or ch == "_" for ch in p)]
    done = set(edged) | set(punct)  # built once: inside the comprehension it was rebuilt per phrase
    other = [p for p in clean if p not in done]
    return edged, punct, other


def trie_regex(phrases: Iterable[str], *, word_bounded: bool = True) -> re.Pattern[str]:
    """One compiled pattern matching any of ``phrases`` (already lower case), longest first.

    With ``word_bounded`` a match may not start or end inside a word. Phrases that begin and
    end with a word character use plain ``\\b`` guards (the fast path: about twice as fast as
    look-arounds in CPython's engine); the few that begin or end with punctuation ("?", ";")
    get look-around guards in a second branch."""
    return trie_regexes(phrases, word_bounded=word_bounded)[0]


def trie_regexes(phrases: Iterable[str], *, word_bounded: bool = True) -> tuple[re.Pattern[str], re.Pattern[str] | None]:
    """``trie_regex``, and the word-start scanner of ``word_spans`` when every phrase starts and
    ends with a word character (else None)."""
    clean = sorted({" ".join(p.split()) for p in phrases} - {""})
    if not clean:
        return re.compile(r"(?!x)x"), None  # matches nothing
    if not word_bounded:
        return re.compile(_build(clean)), None
    edged, punct, other = split_phrases(clean)
    parts = []
    if edged:
        parts.append(rf"\b(?:{_build(edged)})\b")
    if punct:  # ";", "?": no word edge to respect
        parts.append(_build(punct))
    if other:
        # A phrase that starts (ends) with a word character must start (end) on a word edge.
        parts.append(rf"(?:(?<!\w)(?=\w)|(?=\W))(?:{_build(other)})(?:(?<=\w)(?!\w)|(?<=\W))")
    fast = None
    if edged and not punct and not other and starts_with_ascii_word(edged):
        # (the phrase captured: word_spans reads the matches off re.split)
        fast = re.compile(rf"{ASCII_NOT_WORD}((?:{_build(edged)})\b)")
        space_led(fast)  # compiled with the extractor, not on first use
    return re.compile("|".join(parts)), fast
