"""Certainty of a mention from the cues around it in its sentence (NegEx / ConText family, checked
in the CheXpert order: dominant uncertainty, then negation, then uncertainty).

Cue phrases and scope limits are data (``data/context.yaml``); this module only compiles them into
one trie regex and applies the scope rules. See that file for the rules in words."""

from __future__ import annotations

import re
from bisect import bisect_left
from typing import Any, Final

from radvqa.extract._structs import Cue
from radvqa.extract._trie import _build, split_phrases, trie_regex, trie_regexes, word_spans

# Made per report, sentence or match: compiled code reads a Final name as a C static, where an
# imported name is looked up in the module's dict at every call (about 170 instructions each)
_Cue: Final = Cue
_bisect_left: Final = bisect_left

# Roles a cue phrase can play (bit flags: one phrase may be a pre and a post cue).
DOM_PRE: Final = 1 << 0
DOM_POST: Final = 1 << 1
NEG_PRE: Final = 1 << 2
NEG_POST: Final = 1 << 3
UNC_PRE: Final = 1 << 4
UNC_POST: Final = 1 << 5
HYPO: Final = 1 << 6
HIST: Final = 1 << 7
PSEUDO: Final = 1 << 8
TERM: Final = 1 << 9
HYPO_POST: Final = 1 << 10
NEG_TERM: Final = 1 << 11
PRE_MASK: Final = DOM_PRE | NEG_PRE | UNC_PRE | HYPO | HIST
POST_MASK: Final = DOM_POST | NEG_POST | UNC_POST | HYPO_POST

_KEYS: Final[tuple[tuple[str, str | None, int], ...]] = (
    ("uncertain_dominant", "pre", DOM_PRE),
    ("uncertain_dominant", "post", DOM_POST),
    ("negation_pre", None, NEG_PRE),
    ("negation_post", None, NEG_POST),
    ("uncertainty_pre", None, UNC_PRE),
    ("uncertainty_post", None, UNC_POST),
    ("hypothetical", None, HYPO),
    ("hypothetical_post", None, HYPO_POST),
    ("historical", None, HIST),
    ("pseudo", None, PSEUDO),
    ("terminators", None, TERM),
    ("negation_terminators", None, NEG_TERM),
)


class ContextRules:
    """Compiled cue lexicon. ``cues(lower, a, b)`` finds the cues of one sentence;
    ``certainty(...)`` decides one mention."""

    def __init__(self, data: dict[str, Any], extra: dict[str, tuple[str, ...]] | None = None):
        roles: dict[str, int] = {}
        block: Any = None  # (one type per variable: see benchmarks/extraction_compiled.py)
        flag: Any = None
        for key, sub, flag in _KEYS:
            block = data.get(key) or ([] if sub is None else {})
            phrases = block.get(sub, []) if sub is not None else block
            for p in phrases:
                p = " ".join(str(p).lower().split())
                roles[p] = roles.get(p, 0) | flag
        # Cues the ontology's modifiers add (same kind names); ours take precedence for a phrase.
        for key, phrases in (extra or {}).items():
            flag = {k: f for k, s, f in _KEYS if s is None}.get(key)
            if flag is None:
                continue
            for p in phrases:
                p = " ".join(p.lower().split())
                roles.setdefault(p, flag)
        # A pseudo cue neutralises the words inside it; it has no other role.
        for p, r in roles.items():
            if r & PSEUDO:
                roles[p] = PSEUDO
        self.roles = roles
        self.pattern = trie_regex(roles)
        # the same matches in faster scans of an ASCII sentence (see cues): the word-edged phrases
        # by a word-start scanner, the punctuation ones ("(", ";", "?") and those led by
        # punctuation (", healed") by tries of their own that the regex engine can skip to
        edged, punct, other = split_phrases(sorted({" ".join(p.split()) for p in roles} - {""}))
        self._edged = self._edged_fast = None
        self._marks: list[re.Pattern[str]] = []
        if edged and all(not (p[0].isalnum() or p[0] == "_") for p in other):
            self._edged, self._edged_fast = trie_regexes(edged)
            if punct:
                self._marks.append(trie_regex(punct, word_bounded=False))
            if other:
                # the start guard of trie_regex's third part holds at any phrase that starts with
                # punctuation; the end guard stays
                self._marks.append(re.compile(rf"(?:{trie_regex(other, word_bounded=False).pattern})(?:(?<=\w)(?!\w)|(?<=\W))"))
        # whether a sentence holds any of them (57 of 8,603 distinct OpenI sentences do): one
        # search instead of a scan per trie, led by the class of the phrases' first characters so
        # that the regex engine skips to those in C (the alternation of the tries was tried at
        # every position: 5.6 -> about 1 us for a 130-character sentence)
        self._marks_any = _first_char_led([*punct, *other]) if self._marks else re.compile("(?!x)x")
        # ... and before it, whether the sentence holds one of those first characters at all
        # (a C substring test each; most sentences hold none but a comma)
        self._mark_firsts = tuple(sorted({p[0] for p in (*punct, *other)})) if self._marks else ()
        self.max_pre = int(data.get("max_words_pre", 14))
        self.max_post = int(data.get("max_words_post", 8))
        self.max_hypo = int(data.get("max_words_hypothetical", 6))
        # Scope windows in characters as well as words: the work per mention stays bounded
        # whatever the sentence (a 100k-character run without punctuation is linear, #20).
        self.max_chars_pre = int(data.get("max_chars_pre", 400))
        self.max_chars_post = int(data.get("max_chars_post", 300))

    def cues(self, lower: str, start: int, end: int) -> list[Cue]:
        get = self.roles.get
        out = []
        spans = None
        if self._edged_fast is not None and not start and end == len(lower) and lower.isascii():
            spans = word_spans(self._edged, self._edged_fast, lower, 0, end)  # type: ignore[arg-type]
            hit = False
            for ch in self._mark_firsts:
                if ch in lower:
                    hit = self._marks_any.search(lower) is not None
                    break
            for rx in self._marks if hit else ():
                marks = [m.span() for m in rx.finditer(lower)]
                if marks:
                    spans = sorted(spans + marks)
                    # one alternation finds the union of the scans when their matches do not
                    # overlap (each scan then tries every position the alternation reaches);
                    # otherwise it is asked itself
                    if any(spans[k][1] > spans[k + 1][0] for k in range(len(spans) - 1)):
                        spans = None
                        break
        if spans is None:
            spans = [m.span() for m in self.pattern.finditer(lower, start, end)]
        for a, b in spans:
            g = lower[a:b]
            r = get(g)
            if r is None:
                r = get(" ".join(g.split()), 0)
            if r and r != PSEUDO:
                out.append(_Cue(a, b, r))
        return out

    def certainty(self, lower: str, cues: list[Cue], m_start: int, m_end: int,
                  starts: list[int] | None = None) -> tuple[str | None, Cue | None]:
        """(certainty, deciding cue) for a mention at ``[m_start, m_end)``. Certainty is
        ``present``/``absent``/``uncertain``, or None for hypothetical / historical mentions
        (not an observation of this image). ``starts``: the cues' start offsets (pass them when
        deciding many mentions of one sentence: the cues near the mention are then found by
        bisection, so each mention costs a bounded amount of work)."""
        pre = 0
        post = 0
        keep = ~0  # the roles a cue beyond a negation-only terminator still has (all, until one)
        pre_cue: dict[int, Cue] = {}
        post_cue: dict[int, Cue] = {}
        if starts is None:
            starts = [c.start for c in cues]
        first_post = _bisect_left(starts, m_end)
        low_pre = m_start - self.max_chars_pre
        # Backwards from the mention: pre cues until a terminator or the word limit. Cues inside
        # the mention span (regex patterns such as "heart is not enlarged") count as pre cues.
        for k in range(first_post - 1, -1, -1):
            c = cues[k]
            if c.end < low_pre:
                break
            if c.start >= m_start:  # inside the mention ("heart is not enlarged")
                if c.end <= m_end and c.roles & PRE_MASK:
                    pre |= c.roles & PRE_MASK
                    for f in _BITS[c.roles & PRE_MASK]:
                        pre_cue.setdefault(f, c)
                continue
            if c.roles & TERM:
                break
            if c.roles & NEG_TERM:
                # "no cardiomegaly with bilateral small pleural effusions": a negation before this
                # does not reach the mention; a hedge still does (round 11b). A post cue is not
                # stopped: "cardiomegaly with small effusions is not seen" negates both, as before
                keep = ~NEG_PRE
                continue
            dist = len(lower[c.end:m_start].split())  # words between (blanked XXXX are not words)
            if dist > self.max_pre:
                break
            roles = c.roles & PRE_MASK & keep
            if roles & DOM_PRE and pre & NEG_PRE and "," in lower[c.end:pre_cue[NEG_PRE].start]:
                # a list item with a negation of its own: "no definite focal consolidation, no
                # pleural effusion XXXX demonstrated" (CXR273, seed 69): the effusion is absent
                roles &= ~DOM_PRE
            if dist > self.max_hypo or pre:
                # "history of X" reaches only the next few words, and not past a closer cue
                # ("history of CHF, now dyspnea, ?pna": the "?" decides for pna)
                roles &= ~(HYPO | HIST)
            if roles:
                pre |= roles
                for f in _BITS[roles]:
                    pre_cue.setdefault(f, c)
        high_post = m_end + self.max_chars_post
        skip_to = -1  # end of a closed parenthetical the scan steps over
        aside = 0  # words inside it: they are not between the mention and its cue
        for k in range(first_post, len(cues)):
            c = cues[k]
            if c.start < skip_to:
                continue
            if c.roles & TERM and lower[c.start:c.end] == "(":
                # a closed parenthetical after the mention is an aside of its own; the sentence
                # goes on past it: "pneumonia seen on CT (not seen on prior chest x-ray) is not
                # seen either on today's chest x-ray" (audit #13 r6 CXR3103). Its cues are its own.
                close = lower.find(")", c.end, high_post)
                if close >= 0 and "(" not in lower[c.end:close]:
                    skip_to = close + 1
                    aside += len(lower[c.start:skip_to].split())
                    continue
            if c.roles & TERM or c.start > high_post:
                break
            if len(lower[m_end:c.start].split()) - aside > self.max_post:
                break
            if c.roles & POST_MASK:
                post |= c.roles & POST_MASK
                for f in _BITS[c.roles & POST_MASK]:
                    post_cue.setdefault(f, c)
        if pre & (HYPO | HIST) and not pre & (NEG_PRE | DOM_PRE):
            return None, pre_cue.get(HYPO) or pre_cue.get(HIST)
        # "tuberculosis should be excluded": asked about, not seen (without this the mention
        # read as present, and present beats a later "no X" at aggregation)
        if post & HYPO_POST and not pre & (NEG_PRE | DOM_PRE):
            return None, post_cue[HYPO_POST]
        if pre & DOM_PRE:
            return "uncertain", pre_cue[DOM_PRE]
        if post & DOM_POST:
            return "uncertain", post_cue[DOM_POST]
        if pre & NEG_PRE:
            return "absent", pre_cue[NEG_PRE]
        if post & NEG_POST:
            return "absent", post_cue[NEG_POST]
        if pre & UNC_PRE:
            return "uncertain", pre_cue[UNC_PRE]
        if post & UNC_POST:
            return "uncertain", post_cue[UNC_POST]
        return "present", None


def _first_char_led(phrases: list[str]) -> re.Pattern[str]:
    """A pattern that finds a match wherever one of ``phrases`` (normalised, each starting with
    punctuation) occurs, with the end guard of ``trie_regex``'s third part: a character class of
    their first characters, then, for each first character, the trie of the rest."""
    by_first: dict[str, list[str]] = {}
    for p in phrases:
        by_first.setdefault(p[0], []).append(p[1:])
    alts = [f"(?<={re.escape(c)}){_build(rests)}" for c, rests in sorted(by_first.items())]
    firsts = "".join(re.escape(c) for c in sorted(by_first))
    return re.compile(rf"[{firsts}](?:{'|'.join(alts)})(?:(?<=\w)(?!\w)|(?<=\W))")


_FLAGS: Final = (DOM_PRE, DOM_POST, NEG_PRE, NEG_POST, UNC_PRE, UNC_POST, HYPO, HIST, HYPO_POST)
# roles -> the flags of _FLAGS it holds, in that order (one index instead of nine tests per cue)
_BITS: Final = tuple(tuple(f for f in _FLAGS if r & f) for r in range(1 << 11))
