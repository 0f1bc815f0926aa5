"""Sentence splitting with character offsets.

Robust to what real reports contain: abbreviations ("Dr.", "e.g."), decimals ("3.5 cm"),
de-identification tokens (``___``, ``XXXX``), numbered lists ("1. ... 2. ..."), and missing
punctuation between lines that are separate statements (blank lines, list items)."""

from __future__ import annotations

import re
from typing import Any, Final

from radvqa.model import Sentence

# Words after which a period does not end a sentence.
_ABBREV: Final = frozenset("dr mr mrs ms prof vs approx appt e.g i.e cf fig incl esp resp st".split())
# ... and after which it does, when the next word is capitalised ("at 10 a.m. No effusion").
_ABBREV_SOFT: Final = frozenset("a.m p.m etc min max hx sx dx tx fx rt lt vol pts pt".split())
# The last two characters of every abbreviation above: a period after any other pair ends a
# sentence without looking at the word (a cheap test first; _is_abbrev_word decides).
_ABBREV_ENDS: Final = frozenset(w[-2:] for w in _ABBREV | _ABBREV_SOFT)
_DIGITS: Final = frozenset("0123456789")
# Candidate boundaries: terminal punctuation followed by white space or end; a blank line;
# a line break before a list item or bullet; a list number after a sentence ("... 2. Next").
# The specification of a boundary: sentence_spans finds its matches without the regex (the next
# candidate character by str.find, then _boundary_end), which tests/test_extract_speed_paths.py
# checks against this pattern.
_BOUNDARY: Final = re.compile(
    r"[.!?\n](?:(?<=[.!?])[.!?]*(?=\s|$)"
    r"|(?<=\n)[ \t]*\n"
    r"|(?<=\n)(?=[ \t]*(?:\d{1,2}[.)]|[-*\u2022])[ \t]))"
)
_LIST_NUMBER: Final = re.compile(r"(?:^|\s)\d{1,2}$")
_MARKER: Final = re.compile(r"(?:\d{1,2}[.)]|[-*\u2022])[ \t]+")
_MARKER_START: Final = frozenset("0123456789-*\u2022")
_HAS_ALNUM: Final = re.compile(r"[^\W_]")
_BULLETS: Final = "-*\u2022"
# Words that open a sentence and rarely stand capitalised inside one: after a lower-case letter and
# one space, with no punctuation between, they start a sentence whose period was left out ("Left
# axillary surgical clips unchanged Visualized XXXX of the chest XXXX are within normal limits",
# CXR82, R2Gen train: "within normal limits" denied the clips; "Right upper lobe granuloma, stable
# The lungs are normally inflated and clear", CXR3398: "stable" described the clear lungs).
# Train+val has 5 such sentences, every cut right. "No" and "Please" open 5 more ("Normal chest No
# evidence of tuberculosis", "consolidation Please correlate clinically for pneumonia"), which read
# the same uncut: left out, each opener costs a search of every report; "In", "Left", "Lung" stand
# inside sentences ("within normal limits of size In appearance", "the Left hip").
_OPENERS: Final = (" The ", " There ", " Visualized ")
# Round 17: the same openers right after a period with no space ("Surgical clips again seen
# overlying the superior mediastinum.There is an retrocardiac density compatible hiatal hernia",
# CXR3564, R2Gen train: the clips shared the sentence of a density explained away as a hernia).
# Train+val has 6 such joins ("bilaterally.There", "limits.The"), every cut right.
_JOINED: Final = (".The ", ".There ")
# this module runs compiled (mypyc: an extension module), not as Python source
_COMPILED: Final = not __file__.endswith(".py")


def _next_mark(text: str, start: int, end: int) -> int:
    """The offset of the first "!" or "?" in ``text[start:end]``, -1 when there is none."""
    a = text.find("!", start, end)
    b = text.find("?", start, end)
    if a < 0 or 0 <= b < a:
        return b
    return a


def _is_abbrev_word(word: str, text: str, dot: int) -> bool:
    word = word.lower().rstrip(".")
    if word in _ABBREV:
        return True
    nxt = text[dot + 1 : dot + 4].lstrip()[:1]
    if word in _ABBREV_SOFT:
        return not nxt.isupper()
    return False


def split_sentences(text: str, start: int = 0, end: int | None = None, section: str = "BODY",
                    first_id: int = 1) -> list[Sentence]:
    """Split ``text[start:end]`` into sentences; offsets index ``text``. Ids S01, S02, ...
    continue from ``first_id`` so ids stay unique across the sections of one report."""
    return [Sentence(id=f"S{n:02d}", section=section, start=a, end=b, text=text[a:b])
            for n, (a, b) in enumerate(sentence_spans(text, start, end), first_id)]


def _boundary_end(text: str, p: int, end: int) -> int:
    """Where a match of ``_BOUNDARY`` at ``p`` ends (``text[p]`` is one of ".!?\n"; nothing
    after ``end`` is read), or -1 when none starts there: the same test, spelled out."""
    if text[p] != "\n":
        # terminal punctuation: a run of ".!?" followed by white space or the end
        q = p + 1
        while q < end and text[q] in ".!?":
            q += 1
        return q if q == end or text[q].isspace() else -1
    r = p + 1
    while r < end and text[r] in " \t":
        r += 1
    if r == end:
        return -1
    c = text[r]
    if c == "\n":  # a blank line: the break, blanks, a second break
        return r + 1
    # a line break before a list item ("1. ", "2) ", "- ", "* ", a bullet): the break alone
    if c.isdecimal():
        r += 1
        if r < end and text[r].isdecimal():
            r += 1
        if r == end or text[r] not in ".)":
            return -1
    elif c not in _BULLETS:
        return -1
    r += 1
    return p + 1 if r < end and text[r] in " \t" else -1


def scan_boundaries(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The spans of ``_BOUNDARY.finditer(text, start, end)``, found without the regex: the next
    ".", line break and "!"/"?" come from str.find (memchr in C) and _boundary_end tests each in
    a few character reads; the next search starts where a match ends, as finditer's does."""
    out: list[tuple[int, int]] = []
    i = start
    nd = text.find(".", start, end)
    nn = text.find("\n", start, end)
    nx = _next_mark(text, start, end)
    while True:
        if 0 <= nd < i:
            nd = text.find(".", i, end)
        if 0 <= nn < i:
            nn = text.find("\n", i, end)
        if 0 <= nx < i:
            nx = _next_mark(text, i, end)
        dot = nd
        if nn >= 0 and (dot < 0 or nn < dot):
            dot = nn
        if nx >= 0 and (dot < 0 or nx < dot):
            dot = nx
        if dot < 0:
            return out
        cut = _boundary_end(text, dot, end)
        if cut < 0:
            i = dot + 1
        else:
            out.append((dot, cut))
            i = cut


def _boundaries(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The matches of ``_BOUNDARY`` in ``text[start:end]``. Compiled (mypyc), by scan_boundaries:
    the regex tested its leading character class at every character of the section (about 45
    instructions each) and made two method calls per match, a tenth of a cached OpenI report's
    instructions. Pure Python keeps the regex, for which that scan is the cheap part (the
    Python loop of scan_boundaries cost it 1% of a report without the caches)."""
    if _COMPILED:
        return scan_boundaries(text, start, end)
    return [m.span() for m in _BOUNDARY.finditer(text, start, end)]


# Words that need what follows them: a period after one, before a lower-case word, ends no
# sentence ("No cavitary lesion to suggest. active tuberculosis", CXR650, R2Gen train: the second
# "sentence" stated tuberculosis; train+val has no other period after these words before a
# lower-case one)
_DANGLING: Final = frozenset("to of for with suggest suggesting suggestive the a an and or".split())


def dangling(text: str, seg: int, dot: int) -> bool:
    """Whether the word before the period at ``dot`` (in the sentence starting at ``seg``) is one
    of ``_DANGLING``."""
    piece = text[max(seg, dot - 12):dot].rsplit(None, 1)
    return bool(piece) and piece[-1].lower() in _DANGLING


def missing_stops(text: str, start: int, end: int) -> list[int]:
    """Offsets in ``text[start:end]`` where a sentence starts without the previous one's period
    (a lower-case letter, one space, one of ``_OPENERS``: the space's offset) or without the space
    after it (a lower-case letter, a period, one of ``_JOINED``: the offset after the period). A few
    str.find calls per section (most find nothing)."""
    out: list[int] = []
    for w in _OPENERS:
        i = text.find(w, start, end)
        while i >= 0:
            if i > start and text[i - 1].islower():
                out.append(i)
            i = text.find(w, i + 1, end)
    for w in _JOINED:  # (the cut is right after the period)
        i = text.find(w, start, end)
        while i >= 0:
            if i > start and text[i - 1].islower():
                out.append(i + 1)
            i = text.find(w, i + 1, end)
    if len(out) > 1:
        out.sort()
    return out


def split_missing_stops(text: str, spans: list[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    """``spans`` (untrimmed, in order, covering ``text[start:end]``) cut again at ``missing_stops``."""
    stops = missing_stops(text, start, end)
    if not stops:
        return spans
    out: list[tuple[int, int]] = []
    for a, b in spans:
        for p in stops:
            if a < p < b:
                out.append((a, p))
                a = p
        out.append((a, b))
    return out


def sentence_spans(text: str, start: int = 0, end: int | None = None, stops: bool = True) -> list[tuple[int, int]]:
    """The (start, end) offsets of the sentences of ``text[start:end]``, trimmed of white space
    and list markers. They depend only on ``text[start:end + 3]`` and on whether ``start`` is 0
    (what a cache of them must key on). ``stops=False`` skips the search for missing periods: for
    a caller that knows the text has none (``missing_stops`` of the whole report found none; its
    few str.find calls per section were 2% of an uncached report's instructions)."""
    end = len(text) if end is None else end
    spans: list[tuple[int, int]] = []
    seg = start
    for dot, cut in _boundaries(text, start, end):
        if (c := text[dot]) != "\n":  # terminal punctuation (one or more of ".!?")
            if c == "." and cut == dot + 1:
                last = text[dot - 1] if dot > seg else ""
                # the word before the dot (abbreviations are short: look back 6 characters); an
                # abbreviation ends in one of a few letter pairs, which most sentence ends do not
                if last.isalpha() and text[dot - 2:dot].lower() in _ABBREV_ENDS and dot - 2 >= seg:
                    word = text[max(seg, dot - 6):dot].rsplit(None, 1)[-1]
                    if len(word) <= 5 and _is_abbrev_word(word, text, dot):
                        continue
                # "1." as a list number opening a sentence is not a sentence of its own (the
                # digit test first: the search scans the whole sentence so far)
                elif last in _DIGITS and _LIST_NUMBER.search(text, seg, dot) \
                        and not text[seg:dot].strip(" \t\n0123456789"):
                    continue
                if cut + 1 < end and text[cut + 1].islower() and text[cut] == " " and dangling(text, seg, dot):
                    continue
        elif cut == dot + 1:
            # before a list item we cut at the line break (the boundary is the break alone); a
            # blank line (the break, blanks, a second break) ends at its second line break
            cut = dot
        spans.append((seg, cut))
        seg = cut
    spans.append((seg, end))
    if stops:
        spans = split_missing_stops(text, spans, start, end)
    out: list[tuple[int, int]] = []
    m: Any = None
    for a, b in spans:
        # Trim white space and a leading list marker ("1.", "-") but keep exact offsets.
        piece = text[a:b]
        stripped = piece.strip()
        if not stripped:
            continue
        first = stripped[0]
        if first != piece[0]:  # leading white space: the first non-space character is the first of its kind
            a += piece.find(first)
        b = a + len(stripped)
        if first in _MARKER_START:
            m = _MARKER.match(stripped)
            if m and m.end() < len(stripped):
                a += m.end()
                stripped = stripped[m.end():]
                first = stripped[0]
        # a letter or digit first (most sentences) needs no search for one
        if not first.isalnum() and _HAS_ALNUM.search(stripped) is None:
            continue
        out.append((a, b))
    return out
