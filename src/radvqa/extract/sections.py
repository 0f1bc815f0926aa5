"""Split a report into sections (MIMIC-CXR, OpenI and generic headers) keeping character offsets."""

from __future__ import annotations

import re
from typing import Any, Final
from dataclasses import dataclass
from functools import lru_cache

from radvqa.extract._data import load_data
from radvqa.model import Section


@dataclass(frozen=True)
class SectionSpec:
    pattern: re.Pattern[str]
    canonical: dict[str, str]  # upper-case alias -> canonical name
    roles: dict[str, str]  # canonical name -> observe | indication | skip
    default: str


@lru_cache(maxsize=1)
def section_spec() -> SectionSpec:
    data = load_data("sections")
    canonical: dict[str, str] = {}
    roles: dict[str, str] = {}
    for name, spec in data["sections"].items():
        roles[name] = spec["role"]
        for alias in spec.get("aliases", []) + [name]:
            canonical[" ".join(str(alias).upper().split())] = name
    default = data["default"]["name"]
    roles.setdefault(default, data["default"]["role"])
    # Longest alias first so "FINDINGS AND IMPRESSION" wins over "FINDINGS".
    aliases = sorted(canonical, key=len, reverse=True)
    alt = "|".join(re.escape(a).replace(r"\ ", r"[ \t]+") for a in aliases)
    # A header starts a line (or follows a sentence end on the same line, as in flattened
    # reports) and ends with a colon; it must not be the middle of a sentence ("the report:").
    pattern = re.compile(
        rf"(?:^|(?<=[.!?])[ \t]+)[ \t]*(?P<name>{alt})[ \t]*:",
        re.IGNORECASE | re.MULTILINE,
    )
    return SectionSpec(pattern=pattern, canonical=canonical, roles=roles, default=default)


# Made per report, sentence or match: compiled code reads a Final name as a C static, where an
# imported name is looked up in the module's dict at every call (about 170 instructions each)
_Section: Final = Section
_SENT_END: Final = re.compile(r"[.!?][ \t]+")
_HEAD_WINDOW: Final = 80  # longer than any header alias with its spacing


_UNSEEN: Final = object()
# (text before a colon on its line, does that line start inside the window?) -> (offset of the
# header in it, section name), or None: a pure function of its key (the alias table is fixed)
_heads_memo: Final[dict[tuple[str, bool], tuple[int, str] | None]] = {}
_memo_spec: SectionSpec | None = None  # the alias table _heads_memo was filled with


def _header_in(seg: str, whole: bool, canonical: dict[str, str]) -> tuple[int, str] | None:
    """The header that ends at the colon after ``seg`` (the text before the colon on its line,
    ``whole`` when the line starts inside the window): (its offset in ``seg``, section name)."""
    if whole:  # the line starts inside the window: "FINDINGS:" at its start
        name = canonical.get(" ".join(seg.split()).upper())
        if name is not None:
            return len(seg) - len(seg.lstrip()), name
    if seg:
        # after a sentence end on the same line
        last = None
        for last in _SENT_END.finditer(seg):
            pass
        if last is not None:
            name = canonical.get(" ".join(seg[last.end():].split()).upper())
            if name is not None:
                return last.end(), name
    return None


def split_sections(text: str) -> list[Section]:
    """Sections in report order. ``Section.start`` is the offset of the body after the header.

    A header is a known alias followed by a colon, at the start of a line or right after a
    sentence end on the same line ("... normal. IMPRESSION: ..."). Text before the first header
    (or a whole report without headers) is one ``BODY`` section, kept only when it holds
    something other than white space. Colons are found with ``str.find`` and the words before
    each looked up in the alias table: much cheaper than a regex tried at every position."""
    spec = section_spec()
    canonical = spec.canonical
    global _memo_spec
    if _memo_spec is not spec:  # another alias table (the data reloaded): forget the old answers
        _heads_memo.clear()
        _memo_spec = spec
    heads: list[tuple[int, int, str]] = []  # (header start, body start, name)
    i = text.find(":")
    while i >= 0:
        # Only the last _HEAD_WINDOW characters before a colon can hold a header: looking further
        # made a long one-line text with many colons quadratic (#20).
        lo = max(0, i - _HEAD_WINDOW)
        nl = text.rfind("\n", lo, i)
        line_start = nl + 1 if nl >= 0 or lo == 0 else lo
        seg = text[line_start:i]
        whole = nl >= 0 or lo == 0
        # what precedes a colon repeats across reports ("FINDINGS", "IMPRESSION", "Chest"):
        # the header found in it is looked up, not worked out again
        found: Any = _heads_memo.get((seg, whole), _UNSEEN)
        if found is _UNSEEN:
            found = _header_in(seg, whole, canonical)
            if len(_heads_memo) >= 20_000:
                _heads_memo.clear()  # bounded memory
            _heads_memo[(seg, whole)] = found
        if found is not None:
            heads.append((line_start + found[0], i + 1, found[1]))
        i = text.find(":", i + 1)
    out: list[Section] = []
    first = heads[0][0] if heads else len(text)
    if text[:first].strip():
        out.append(_Section(name=spec.default, start=0, end=first))
    for k, (_, body, name) in enumerate(heads):
        end = heads[k + 1][0] if k + 1 < len(heads) else len(text)
        out.append(_Section(name=name, start=body, end=end))
    return out


def section_role(name: str) -> str:
    return section_spec().roles.get(name, "observe")


_LIST_NO: Final = re.compile(r"^\d{1,2}[.)]\s*")
# the list number of the first item, left on the heading by the splitter ("IMPRESSION: Hand 1.
# Minimally displaced fracture through the scaphoid ... Chest 1. No acute cardiopulmonary
# findings", CXR1350, R2Gen train: the hand fracture was read as a chest one)
_TRAIL_NO: Final = re.compile(r"\s+\d{1,2}[.)]?$")
_SIDE_WORDS: Final = ("the ", "left ", "right ", "bilateral ", "both ")  # "2. The knee." is a heading too


@lru_cache(maxsize=1)
def _body_parts() -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    data = load_data("sections").get("body_parts") or {}
    chest, other = frozenset(data.get("chest", [])), frozenset(data.get("other", []))
    # every word a heading can hold: a sentence with any other word is no heading (most short
    # sentences fail on their first word, before the parts are taken apart)
    words = {w for p in chest | other for w in p.replace(",", " ").split()}
    words |= {w.strip() for w in _SIDE_WORDS} | {"and"}
    return chest, other, frozenset(words)


def body_part_heading(sentence_lower: str) -> str | None:
    """"chest" or "other" when a sentence is only a body-part heading ("Left knee.", "Chest:"),
    else None."""
    # most sentences fail on their first word: find it without normalising the whole sentence.
    # The first word of the normalised text is the first run of ``head`` up to white space or a
    # comma, less a tail of ".:;-" when the rest of the sentence is all stripped characters
    head = sentence_lower.lstrip(" .:;-\t\n")
    if head and not head[0].isdigit():
        first = head.split(None, 1)[0].split(",", 1)[0]
        if first:
            words = _body_parts()[2]
            if first not in words and first.rstrip(".:;-") not in words:
                return None
    t = " ".join(sentence_lower.strip(" .:;-\t\n").split())
    if t[:1].isdigit():
        t = _LIST_NO.sub("", t)  # "2. left knee"
    if t[-1:].isdigit():
        t = _TRAIL_NO.sub("", t)  # "hand 1"
    if not t or len(t) > 40:
        return None
    chest, other, words = _body_parts()
    for w in t.replace(",", " ").split():
        if w not in words:
            return None
    for w in _SIDE_WORDS:
        if t.startswith(w):
            t = t[len(w):]
    if t in chest:
        return "chest"
    parts = [p.strip() for p in t.replace(",", " and ").split(" and ") if p.strip()]
    cleaned = []
    for p in parts:
        for w in _SIDE_WORDS:
            if p.startswith(w):
                p = p[len(w):]
        cleaned.append(p)
    if cleaned and all(p in other for p in cleaned):
        return "other"
    return None
