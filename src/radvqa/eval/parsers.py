"""Answer extraction as a declared pipeline (lm-evaluation-harness style filters).

Each answer kind (yes_no, choice, count, short, open) has an ordered list of step names in
``data/parsers.yaml``. A step looks at the (possibly rewritten) text and either decides —
``Parsed(value)`` or ``Unparsed(reason)`` — or passes. Nothing is ever guessed: refusals,
uncertainty and ambiguity end as unparsed, which the metrics count as wrong and report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from radvqa.eval.text import Normalizer
from radvqa.eval.vocab import load_vocab
from radvqa.registry import Registry

KINDS = ("yes_no", "choice", "count", "short", "open")


@dataclass(frozen=True, slots=True)
class ParseResult:
    """``value`` is the extracted answer (``"yes"``, ``"B"``, ``"3"``, normalised text) or
    None; ``status`` is parsed / unparsed / missing; ``reason`` says why when not parsed;
    ``step`` names the pipeline step that decided."""

    value: str | None
    status: str
    reason: str | None = None
    step: str | None = None

    @property
    def parsed(self) -> bool:
        return self.status == "parsed"


MISSING = ParseResult(None, "missing", "no prediction for this question", None)


@dataclass(slots=True)
class _Ctx:
    text: str  # current text (steps may rewrite it)
    low: str  # lower-cased text
    toks: list[str]  # lower-case word tokens
    choices: list[str] | None


_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def _phrase_regex(phrases: list[str]) -> re.Pattern[str]:
    alts = sorted((re.escape(p.lower()) for p in phrases), key=len, reverse=True)
    return re.compile(r"(?<![a-z0-9'])(?:" + "|".join(alts) + r")(?![a-z0-9])")


class Parser:
    """Runs the declared pipelines. One instance per process (regexes compiled once)."""

    def __init__(self) -> None:
        v = load_vocab()
        self.version = int(v["version"])
        self.pipelines: dict[str, list[str]] = {k: list(s) for k, s in v["pipelines"].items()}
        for kind, steps in self.pipelines.items():
            unknown = [s for s in steps if s not in PARSE_STEPS]
            if unknown:
                raise ValueError(f"parsers.yaml pipeline {kind!r} names unknown steps {unknown}")
        # each pipeline's step functions, resolved once (parse runs per answer)
        self._fns: dict[str, list[Step]] = {k: [PARSE_STEPS.get(s) for s in steps]
                                            for k, steps in self.pipelines.items()}
        missing = [k for k in KINDS if k not in self.pipelines]
        if missing:
            raise ValueError(f"parsers.yaml declares no pipeline for {missing}")
        self.yes = frozenset(v["yes_words"])
        self.no = frozenset(v["no_words"])
        self.rx_neg = _phrase_regex(v["negation_cues"])
        self.rx_aff = _phrase_regex(v["affirmative_cues"])
        self.rx_unc = _phrase_regex(v["uncertainty_cues"])
        self.rx_ref = re.compile(
            "|".join(re.escape(p.lower()) for p in sorted(v["refusal_cues"], key=len, reverse=True))
        )
        lead = "|".join(re.escape(w) for w in sorted(v["mc_letter_lead"], key=len, reverse=True))
        # "Answer: B", "option (c)", "The correct answer is [D]" (lead word present: any case)
        self.rx_mc_lead = re.compile(r"(?i)\b(?:" + lead + r")\s*(?:is|:|=|-)?\s*[\(\[]?([a-z])[\)\]]?(?![a-z0-9'])")
        self.num_words = {k: int(n) for k, n in v["number_words"].items()}
        self.prefixes = tuple(p.lower() for p in v["wrapper_prefixes"])
        self.norm = Normalizer()

    def parse(self, kind: str, text: str | None, choices: list[str] | None = None) -> ParseResult:
        if text is None:
            return MISSING
        if kind not in self.pipelines:
            raise ValueError(f"unknown answer kind {kind!r}; expected one of {KINDS}")
        low = text.lower()
        ctx = _Ctx(text=text, low=low, toks=_TOKEN.findall(low), choices=choices)
        for fn in self._fns[kind]:
            res = fn(self, ctx)
            if res is not None:
                return res
        return ParseResult(None, "unparsed", f"no {kind} answer found", None)


Step = Callable[[Parser, _Ctx], "ParseResult | None"]
# @step(name) registers a parser step (defined in this module; plugins register the same way)
PARSE_STEPS: Registry[Step] = Registry("parser step")
step = PARSE_STEPS.register


def _set(ctx: _Ctx, text: str) -> None:
    ctx.text = text
    ctx.low = text.lower()
    ctx.toks = _TOKEN.findall(ctx.low)


_THINK = re.compile(r"(?is)<think>.*?</think>")


@step("strip_wrappers")
def _strip_wrappers(p: Parser, ctx: _Ctx) -> None:
    # Chat residue carries no answer; removing it keeps "Human: No" a "no".
    t = _THINK.sub(" ", ctx.text).strip()
    changed = True
    while changed:
        changed = False
        lt = t.lower()
        for pre in p.prefixes:
            if lt.startswith(pre):
                t = t[len(pre) :].lstrip()
                changed = True
                break
    if t != ctx.text:
        _set(ctx, t)
    return None


@step("empty")
def _empty(p: Parser, ctx: _Ctx) -> ParseResult | None:
    if not ctx.toks:
        return ParseResult(None, "unparsed", "empty answer", "empty")
    return None


@step("refusal")
def _refusal(p: Parser, ctx: _Ctx) -> ParseResult | None:
    if p.rx_ref.search(ctx.low):
        return ParseResult(None, "unparsed", "refusal", "refusal")
    return None


@step("leading_yes_no")
def _leading(p: Parser, ctx: _Ctx) -> ParseResult | None:
    t = ctx.toks
    first = t[0]
    if len(t) >= 3 and t[1] == "or":  # "yes or no" / "no or yes": not an answer
        return None
    if first in p.yes:
        return ParseResult("yes", "parsed", None, "leading_yes_no")
    if first in p.no:
        return ParseResult("no", "parsed", None, "leading_yes_no")
    return None


@step("uncertainty")
def _uncertainty(p: Parser, ctx: _Ctx) -> ParseResult | None:
    # Checked before negation: "cannot be excluded" is uncertain, not "no".
    if p.rx_unc.search(ctx.low):
        return ParseResult(None, "unparsed", "uncertain answer", "uncertainty")
    return None


@step("yes_no_words")
def _yes_no_words(p: Parser, ctx: _Ctx) -> ParseResult | None:
    has_yes = any(w in p.yes for w in ctx.toks)
    has_no = any(w in p.no for w in ctx.toks)
    if has_yes and has_no:
        return ParseResult(None, "unparsed", "ambiguous: both yes and no", "yes_no_words")
    if has_yes:
        if p.rx_neg.search(ctx.low) or any(w.endswith("n't") for w in ctx.toks):
            return ParseResult(None, "unparsed", "ambiguous: yes with negation", "yes_no_words")
        return ParseResult("yes", "parsed", None, "yes_no_words")
    if has_no:
        return ParseResult("no", "parsed", None, "yes_no_words")
    return None


@step("negation")
def _negation(p: Parser, ctx: _Ctx) -> ParseResult | None:
    if p.rx_neg.search(ctx.low) or any(w.endswith("n't") for w in ctx.toks):
        return ParseResult("no", "parsed", None, "negation")
    return None


@step("affirmative")
def _affirmative(p: Parser, ctx: _Ctx) -> ParseResult | None:
    if p.rx_aff.search(ctx.low):
        return ParseResult("yes", "parsed", None, "affirmative")
    return None


_OPT_PREFIX = re.compile(r"^\s*(?:\(?[A-Za-z][\.\):]|\([A-Za-z]\))\s+")
_WHOLE_LETTER = re.compile(r"^\s*[\(\[]?([A-Za-z])[\)\]\.:]?\s*$")
_START_LETTER = re.compile(r"^\s*[\(\[]?([A-Z])(?:[\)\]\.:]|\s*$)")
_PAREN_LETTER = re.compile(r"[\(\[]([A-Z])[\)\]]")


def _letters(n: int) -> str:
    return "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:n]


@step("mc_letter")
def _mc_letter(p: Parser, ctx: _Ctx) -> ParseResult | None:
    """Letters only where the form says it is a letter: the whole answer ("b", "(B)"),
    an upper-case letter opening the answer followed by . ) : ("B. Effusion"), an
    upper-case letter in brackets, or after a lead word ("Option b", "Answer: C").
    "The ..." or "A nodule ..." never count as options T or A."""
    valid = _letters(len(ctx.choices or []))
    if not valid:
        return ParseResult(None, "unparsed", "question has no choices", "mc_letter")
    m = _WHOLE_LETTER.match(ctx.text)
    if m:
        letter = m.group(1).upper()
        if letter in valid:
            return ParseResult(letter, "parsed", None, "mc_letter")
        return ParseResult(None, "unparsed", f"letter {letter} is not an option", "mc_letter")
    found: list[str] = []
    m = _START_LETTER.match(ctx.text)
    if m:
        found.append(m.group(1))
    found += _PAREN_LETTER.findall(ctx.text)
    found += [x.upper() for x in p.rx_mc_lead.findall(ctx.text)]
    found = [x for x in found if x in valid]
    distinct = sorted(set(found))
    if len(distinct) == 1:
        return ParseResult(distinct[0], "parsed", None, "mc_letter")
    if len(distinct) > 1:
        return ParseResult(None, "unparsed", f"ambiguous: options {','.join(distinct)}", "mc_letter")
    return None


@step("mc_option_text")
def _mc_option_text(p: Parser, ctx: _Ctx) -> ParseResult | None:
    choices = ctx.choices or []
    pred = " " + p.norm(ctx.text) + " "
    hits: list[tuple[str, str]] = []
    for letter, opt in zip(_letters(len(choices)), choices):
        o = p.norm(_OPT_PREFIX.sub("", opt))
        if o and (" " + o + " ") in pred:
            hits.append((letter, o))
    # an option named only inside a longer option that also matched is not a hit
    # ("effusion" inside "pleural effusion")
    hits = [(l, o) for l, o in hits if not any(o != o2 and (" " + o + " ") in (" " + o2 + " ") for _, o2 in hits)]
    letters = sorted({l for l, _ in hits})
    if len(letters) == 1:
        return ParseResult(letters[0], "parsed", None, "mc_option_text")
    if len(letters) > 1:
        return ParseResult(None, "unparsed", f"ambiguous: options {','.join(letters)}", "mc_option_text")
    return None


_NUM = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?![\w.]*\d)")


@step("number")
def _number(p: Parser, ctx: _Ctx) -> ParseResult | None:
    for tok in ctx.toks:
        if tok.isdigit():
            return ParseResult(str(int(tok)), "parsed", None, "number")
        if tok in p.num_words:
            return ParseResult(str(p.num_words[tok]), "parsed", None, "number")
    return None


@step("zero_by_negation")
def _zero(p: Parser, ctx: _Ctx) -> ParseResult | None:
    # "There are no nodules" answers "how many" with 0.
    if any(t in ("no", "none") for t in ctx.toks):
        return ParseResult("0", "parsed", None, "zero_by_negation")
    return None


@step("normalise")
def _normalise(p: Parser, ctx: _Ctx) -> ParseResult | None:
    n = p.norm(ctx.text)
    if not n:
        return ParseResult(None, "unparsed", "empty after normalisation", "normalise")
    return ParseResult(n, "parsed", None, "normalise")


def registered_steps() -> list[str]:
    return sorted(PARSE_STEPS.names())
