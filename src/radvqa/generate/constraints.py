"""Template constraints: named checks a rendered question must pass before its row is emitted.

A template lists them by name (``constraints: [answer_not_in_question]``); loading resolves each
name in ``CONSTRAINTS`` (an unknown name is a load error) and the shared render-and-emit step
(``StudyCtx.render_emit``) runs them on every row of that template, after the question wording is
chosen and before the answer wording is drawn, so a dropped row consumes no answer draw. A check
returns True when the row may be emitted.

A new constraint: one function here taking a ``Candidate``, one entry in ``CONSTRAINTS``, a line in
docs/generation.md, and a test in tests/test_generate_constraints.py.
"""

from __future__ import annotations

from typing import Callable, Sequence

from radvqa.model import AnswerPart

_PUNCT = str.maketrans({c: " " for c in "?,."})


class Candidate:
    """What the checks may look at: the question as asked, the short answer, the options of a
    multiple-choice row, the answer wordings the lead is drawn from, and the answer parts."""

    __slots__ = ("question", "short", "choices", "wordings", "parts")

    def __init__(self, question: str, short: str | None, choices: Sequence[str] | None,
                 wordings: Sequence[str], parts: Sequence[AnswerPart] | None) -> None:
        self.question = question
        self.short = short
        self.choices = choices
        self.wordings = wordings
        self.parts = parts


def answer_not_in_question(c: Candidate) -> bool:
    """The short answer, as whole words (a leading "the" dropped), does not appear in the question
    outside its listed options: "Where is the degenerative change of the spine?" -> "the spine"
    gives itself away; "trachea" does not leak from "endotracheal tube". One-character short
    answers (a multiple-choice letter) name an option, not content, and are not checked."""
    s = c.short
    if not s or len(s) < 2:
        return True
    s = s.lower()
    if s.startswith("the "):
        s = s[4:]
    q = c.question.lower()
    if c.choices:
        for opt in c.choices:  # the options are part of the question by design
            q = q.replace(opt.lower(), " ")
    q = " " + q.translate(_PUNCT) + " "
    return f" {s} " not in q


def non_degenerate(c: Candidate) -> bool:
    """The row answers something: a short answer, where the row has one, is not blank, and the
    answer text cannot come out empty (a lead wording that is "" needs answer parts after it)."""
    if c.short is not None and not c.short.strip():
        return False
    if not c.parts and not any(w.strip() for w in c.wordings):
        return False
    return True


def distinct_options(c: Candidate) -> bool:
    """A multiple-choice row has at least two options, no two the same (case ignored); the short
    answer, when a letter, names one of them."""
    opts = c.choices
    if not opts or len(opts) < 2:
        return False
    if len({o.strip().lower() for o in opts}) != len(opts):
        return False
    s = c.short
    if s and len(s) == 1 and s.isalpha():
        return ord(s.upper()) - ord("A") < len(opts)
    return True


CONSTRAINTS: dict[str, Callable[[Candidate], bool]] = {
    "answer_not_in_question": answer_not_in_question,
    "non_degenerate": non_degenerate,
    "distinct_options": distinct_options,
}
