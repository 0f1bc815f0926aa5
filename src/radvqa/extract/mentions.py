"""Finding mentions: ontology synonyms compiled once into a trie regex (longest match wins), plus
the extraction patterns of ``data/patterns.yaml``:

- ``phrases``: literal phrases implying a finding that are not true synonyms ("enlarged heart");
- ``exclusions``: literal phrases that must not yield the finding a shorter term inside them
  names ("pericardial effusion" is not pleural effusion) — they win by being longer and map to
  nothing;
- ``patterns``: regular expressions with gaps ("heart ... is enlarged"), optionally with a fixed
  certainty — implicit normal statements ("lungs are clear") yield explicit ``absent``
  observations of the findings they rule out.
"""

from __future__ import annotations

import re
from typing import Any, Final

from radvqa.extract._prefix import lookahead, prefixes
from radvqa.extract._structs import Mention
from radvqa.extract._trie import (ASCII_NOT_WORD, space_led, spaced_word_starts, starts_with_ascii_word,
                                  trie_regexes, word_spans)

# Made per report, sentence or match: compiled code reads a Final name as a C static, where an
# imported name is looked up in the module's dict at every call (about 170 instructions each)
_Mention: Final = Mention


class MentionMatcher:
    def __init__(self, terms: dict[str, tuple[str, ...]], patterns: dict[str, Any], known: set[str]):
        """``terms``: normalised term -> finding ids (the ontology's ``finding_terms()``);
        ``patterns``: parsed ``patterns.yaml``; ``known``: valid finding ids (unknown ids in the
        data are an error, so a renamed ontology id cannot silently switch a rule off)."""
        ids: Any = None  # (one type per variable: see benchmarks/extraction_compiled.py)
        lex: dict[str, tuple[str, ...]] = dict(terms)
        problems: list[str] = []

        def check(ids: list[str], where: str) -> tuple[str, ...]:
            bad = [i for i in ids if i not in known]
            if bad:
                problems.append(f"{where}: unknown finding id(s) {bad}")
            return tuple(i for i in ids if i in known)

        # Ontology terms this extractor ignores on purpose (too vague to be a finding by
        # themselves in report text, e.g. "density" alone); listed in patterns.yaml.
        for t in patterns.get("ignore_terms", []) or []:
            lex.pop(" ".join(str(t).lower().split()), None)
        # A phrase listed under several findings names all of them ("interstitial infiltrates":
        # an interstitial opacity and an infiltrate).
        added: dict[str, list[str]] = {}
        for fid, phrases in (patterns.get("phrases") or {}).items():
            ids = check([fid], f"phrases.{fid}")
            for p in phrases:
                added.setdefault(" ".join(str(p).lower().split()), []).extend(ids)
        for p, ids in added.items():
            lex[p] = tuple(dict.fromkeys(ids))
        for p in patterns.get("exclusions", []) or []:
            lex[" ".join(str(p).lower().split())] = ()
        self.lexicon = lex
        self.term_re, self._term_fast = trie_regexes(lex)
        self.pattern_specs: list[tuple[str, tuple[str, ...], str | None]] = []
        parts = []
        for i, spec in enumerate(patterns.get("patterns", []) or []):
            pid = spec["id"]
            ids = check(list(spec["findings"]), f"patterns.{pid}")
            cert = spec.get("certainty")
            if cert not in (None, "present", "absent", "uncertain"):
                problems.append(f"patterns.{pid}: bad certainty {cert!r}")
            try:
                re.compile(spec["regex"])
            except re.error as e:
                problems.append(f"patterns.{pid}: bad regex: {e}")
                continue
            self.pattern_specs.append((pid, ids, cert))
            parts.append(f"(?P<p{i}>{spec['regex']})")
        if problems:
            raise ValueError("extraction patterns do not match the ontology:\n  " + "\n  ".join(problems))
        self._group_index = {f"p{i}": k for k, i in enumerate(
            i for i, spec in enumerate(patterns.get("patterns", []) or []))}
        # group name -> its pattern's (id, finding ids, certainty): one lookup per match
        self._spec_of_group = {g: self.pattern_specs[k] for g, k in self._group_index.items()}
        # the lookahead (what every pattern's match starts with) lets most positions fail after a
        # character or two instead of trying every pattern there: 3x faster on OpenI sentences
        regexes = [spec["regex"] for spec in patterns.get("patterns", []) or []]
        ahead = lookahead(regexes)
        self.pattern_re = re.compile(r"(?<!\w)" + ahead + "(?:" + "|".join(parts) + r")(?!\w)") if parts else None
        # The same led by one ASCII non-word character, when every match starts with an ASCII
        # word character (see _trie.word_spans): the engine then skips in C to where a word can
        # start. Its patterns are grouped by the first character their matches can start with
        # (in their order: the first that matches wins, as in one alternation): at a word start
        # only the patterns that can start there are tried (a fifth fewer instructions per sentence)
        self._pattern_fast = None
        self._pattern_space: re.Pattern[str] | None = None
        pres = [prefixes(r) for r in regexes]
        if parts and ahead and all(starts_with_ascii_word(p) for p in pres):
            by_first: dict[str, list[int]] = {}
            for i, p in enumerate(pres):
                for c in sorted({s[0] for s in p}):  # type: ignore[union-attr]
                    by_first.setdefault(c, []).append(i)
            alts = []
            for c, idx in sorted(by_first.items()):
                alts.append(f"(?={re.escape(c)})(?:" + "|".join(f"(?P<p{i}_{ord(c)}>{regexes[i]})" for i in idx) + ")")
                for i in idx:
                    self._spec_of_group[f"p{i}_{ord(c)}"] = self._spec_of_group[f"p{i}"]
            try:
                self._pattern_fast = re.compile(ASCII_NOT_WORD + ahead + "(?:" + "|".join(alts) + r")(?!\w)")
                self._pattern_space = space_led(self._pattern_fast)  # (see _trie.spaced_word_starts)
            except re.error:  # a pattern with a named group of its own cannot be repeated: no scanner
                self._pattern_fast = self._pattern_space = None

    def find(self, lower: str, start: int, end: int) -> list[Mention]:
        """Mentions in ``lower[start:end]`` (lower-cased report text), in text order. Pattern
        matches win over lexicon terms they overlap (they are the more specific reading)."""
        m: Any = None  # (one type per variable: see benchmarks/extraction_compiled.py)
        ids: Any = None
        out: list[Mention] = []
        taken: list[tuple[int, int]] = []
        whole = start == 0 and end == len(lower) and lower.isascii()
        if self.pattern_re is not None:
            by_group = self._spec_of_group
            fast = self._pattern_fast
            if fast is None or not whole:
                for m in self.pattern_re.finditer(lower, start, end):
                    pid, ids, cert = by_group[m.lastgroup]  # type: ignore[index]
                    a, b = m.span()
                    out.append(_Mention(a, b, ids, cert, pid))
                    taken.append((a, b))
            else:
                # what finditer finds (see _trie.word_spans): each match right after a non-word
                # character at or after the last match's final character (a pattern may end with
                # one: the next match may start where it ends); a space put in front makes a
                # match at 0 one of them. Offsets in the spaced copy are one more than in lower.
                spaced = " " + lower
                if self._pattern_space is not None and spaced_word_starts(lower):
                    fast = self._pattern_space  # the same matches (see _trie.spaced_word_starts)
                pos = 0
                while (m := fast.search(spaced, pos)) is not None:
                    pid, ids, cert = by_group[m.lastgroup]  # type: ignore[index]
                    a, pos = m.span()
                    pos -= 1  # the match's end in lower, and where the next search starts in spaced
                    out.append(_Mention(a, pos, ids, cert, pid))
                    taken.append((a, pos))
        get = self.lexicon.get
        for a, b in word_spans(self.term_re, self._term_fast, lower, start, end):
            if taken:  # a term inside a pattern match is that match's (a loop: no generator per term)
                for ta, tb in taken:
                    if a < tb and ta < b:
                        break
                else:
                    ta = -1
                if ta >= 0:
                    continue
            g = lower[a:b]
            ids = get(g)
            if ids is None:  # matched across a line break or double space
                ids = get(" ".join(g.split()))
            if ids:
                out.append(_Mention(a, b, ids))
        if taken:
            out.sort(key=lambda x: x.start)
        return out
