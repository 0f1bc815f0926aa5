"""The small records the rules engine makes per sentence (mentions, cues, attribute words and
values). They live apart from the modules that make them: those compile with mypyc
(benchmarks/extraction_compiled.py), which builds a class without its keyword arguments, and a
msgspec Struct needs ``gc=False`` / ``frozen=True`` as class arguments."""

from __future__ import annotations

import msgspec


# Built for every match of every sentence: a msgspec Struct is made in C (a third of a slots
# dataclass's Python __init__) and, holding no containers that could form a cycle, is kept out
# of the cyclic garbage collector (gc=False); nothing mutates them
class Mention(msgspec.Struct, gc=False):
    start: int
    end: int
    findings: tuple[str, ...]
    certainty: str | None = None  # fixed by a pattern (implicit normals); None = from context
    rule: str | None = None  # pattern id for patterns, None for lexicon terms


# Built for every cue of every sentence: a msgspec Struct is made in C (a third of a slots
# dataclass's Python __init__) and, holding only ints, is kept out of the cyclic garbage
# collector (gc=False); nothing mutates them
class Cue(msgspec.Struct, gc=False):
    start: int
    end: int
    roles: int


# Made for every attribute word of every analysed sentence: a msgspec Struct is made in C (a
# third of a slots dataclass's Python __init__) and, holding only strings and ints, is kept out of
# the cyclic garbage collector (gc=False); nothing mutates them
class Attr(msgspec.Struct, gc=False):
    kind: str
    value: str
    start: int
    end: int


# Made for each mention that gets an attribute: a msgspec Struct is made in C (the slots
# dataclass's Python __init__, with a factory per list, was a seventh of attach); each instance
# gets its own empty lists. Copy with msgspec.structs.replace.
class AttrValues(msgspec.Struct):
    laterality: str | None = None
    regions: list[str] = []
    severity: str | None = None
    size_mm: float | None = None
    change: str | None = None
    temporal: str | None = None
    spans: list[tuple[int, int]] = []
    # words of the sentence not attached because their binding was ambiguous ("severity:small")
    dropped: list[str] = []


# What the extractor keeps of a mention's AttrValues once its sentence is analysed (the sentence
# cache holds it for the rest of the run; the aggregator only reads it): tuples and a frozen
# msgspec Struct out of the cyclic garbage collector, where an AttrValues was four tracked
# objects per cached mention for every collection to walk (98k -> 49k tracked objects after an
# OpenI pass). Frozen: a report cannot change what the cache hands the next one.
class FrozenAttrs(msgspec.Struct, frozen=True, gc=False):
    laterality: str | None = None
    regions: tuple[str, ...] = ()
    severity: str | None = None
    size_mm: float | None = None
    change: str | None = None
    temporal: str | None = None
    dropped: tuple[str, ...] = ()
