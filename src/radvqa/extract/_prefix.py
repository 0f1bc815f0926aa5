"""A lookahead that lets an alternation of regular expressions fail fast where none can start.

Python's ``re`` tries every branch of ``(?:p0|p1|...)`` at every position. For the thirty gap
patterns of ``data/patterns.yaml`` that cost three times the whole ontology trie. Every match of
those patterns starts with one of a few short strings ("hea", "car", "no ", "lun"...), which can be
read off the parsed patterns; a trie-shaped lookahead of those strings in front of the
alternation rejects almost every position after a character or two, and cannot change what the
alternation matches (it only states what every match begins with).

The analysis is conservative: whatever it does not understand (a word class, a back reference, a
nullable pattern) means "may start with anything" and no lookahead is built.
"""

from __future__ import annotations

import re
from re import _constants as C  # noqa: N812 - the parser's opcodes
from re import _parser as P  # noqa: N812
from typing import Any

# strings: (s, complete): complete means a whole match is s; otherwise a match starts with s
_Pre = frozenset[tuple[str, bool]]
_MAX_SET = 4000  # more prefixes than this: give up (no lookahead; never wrong, only slower)
_SPACES = "".join(ch for ch in map(chr, range(0x3100)) if re.match(r"\s", ch))


class _Any(Exception):
    """The pattern may start with any character (or the analysis gave up)."""


def _cat(a: _Pre, b: _Pre, k: int) -> _Pre:
    out = set()
    for s, done in a:
        if not done or len(s) >= k:
            out.add((s[:k], False))
            continue
        for t, tdone in b:
            u = s + t
            out.add((u[:k], tdone and len(u) <= k))
    if len(out) > _MAX_SET:
        raise _Any
    return frozenset(out)


def _chars(items: list[tuple[Any, Any]]) -> list[str]:
    out: list[str] = []
    for op, av in items:
        if op is C.LITERAL:
            out.append(chr(av))
        elif op is C.RANGE and av[1] - av[0] < 256:
            out.extend(map(chr, range(av[0], av[1] + 1)))
        elif op is C.CATEGORY and av is C.CATEGORY_SPACE:
            out.extend(_SPACES)
        else:  # NEGATE, word / digit classes, wide ranges
            raise _Any
    return out


def _seq(items: Any, k: int) -> _Pre:
    acc: _Pre = frozenset({("", True)})
    for op, av in items:
        open_ = [len(s) for s, done in acc if done and len(s) < k]
        if not open_:
            break  # every string already decided: what follows cannot change the prefixes
        # what follows needs to be told only as far as the shortest string so far leaves open
        acc = _cat(acc, _node(op, av, k - min(open_)), k)
    return acc


def _node(op: Any, av: Any, k: int) -> _Pre:
    if op is C.LITERAL:
        return frozenset({(chr(av), True)})
    if op is C.IN:
        return frozenset((ch, True) for ch in _chars(av))
    if op is C.SUBPATTERN:
        _group, add_flags, del_flags, p = av
        if (add_flags | del_flags) & (re.IGNORECASE | re.LOCALE):
            raise _Any
        return _seq(p, k)
    if op is C.ATOMIC_GROUP:
        return _seq(av, k)
    if op is C.BRANCH:
        out: set[tuple[str, bool]] = set()
        for p in av[1]:
            out |= _seq(p, k)
        return frozenset(out)
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        lo, hi, p = av
        one = _seq(p, k)
        # n copies start like min(n, k) copies: k non-empty copies decide the first k
        # characters, and a copy that matches nothing adds nothing
        power: _Pre = frozenset({("", True)})
        out: set[tuple[str, bool]] = set()
        for n in range(min(hi, k) + 1):
            if n >= min(lo, k):
                out |= power
            power = _cat(power, one, k)
        return frozenset(out)
    if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
        return frozenset({("", True)})  # zero width
    raise _Any  # ANY, NOT_LITERAL, GROUPREF, CATEGORY outside a class, ...


def prefixes(regex: str, k: int = 3) -> frozenset[str] | None:
    """The strings (at most ``k`` characters) one of which starts every match of ``regex``;
    None when a match may start with anything (or the regex is beyond this analysis)."""
    try:
        parsed = P.parse(regex)
        if parsed.state.flags & (re.IGNORECASE | re.LOCALE):
            return None
        pre = _seq(parsed.data, k)
    except (_Any, re.error, AttributeError, TypeError, ValueError):
        return None
    if any(s == "" for s, _ in pre):
        return None  # may match the empty string
    return frozenset(s for s, _ in pre)


def lookahead(regexes: list[str], k: int = 3) -> str:
    """``(?=...)`` matching where some match of some regex in ``regexes`` can start, as a trie;
    "" when that cannot be told (then nothing is filtered)."""
    pres: set[str] = set()
    for r in regexes:
        p = prefixes(r, k)
        if p is None:
            return ""
        pres |= p
    # a string that extends a shorter one adds nothing
    short = sorted(pres, key=len)
    keep: list[str] = []
    for s in short:
        if not any(s.startswith(t) for t in keep):
            keep.append(s)
    root: dict[str, dict] = {}
    for s in keep:
        node = root
        for ch in s:
            node = node.setdefault(ch, {})
        node[""] = {}
    return f"(?={_trie(root)})"


def _trie(node: dict[str, dict]) -> str:
    if "" in node:
        return ""  # a whole prefix: nothing more to check
    leaves = [re.escape(ch) for ch, sub in sorted(node.items()) if "" in sub]
    branches = [re.escape(ch) + _trie(sub) for ch, sub in sorted(node.items()) if "" not in sub]
    if leaves:  # the characters that end a prefix: one class
        branches.append(leaves[0] if len(leaves) == 1 else "[" + "".join(leaves) + "]")
    return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
