"""Row-level grade helpers: ``min_grade`` filtering and a full re-check of a finished row (used by
tests and by ``radvqa validate``-style audits; the generator grades rows on the fly)."""

from __future__ import annotations

from radvqa.model import GRADES, QA
from radvqa.quality.criteria import D, GRADE_INDEX, box_valid, reason


def grade_at_least(grade: str | None, min_grade: str) -> bool:
    """True if ``grade`` is ``min_grade`` or better (A++ best). Ungraded rows never pass."""
    if grade is None or grade not in GRADE_INDEX:
        return False
    return GRADE_INDEX[grade] <= GRADE_INDEX[min_grade]


def regrade(qa: QA, sizes: dict[str, tuple[int | None, int | None]]) -> tuple[str, list[str]]:
    """Apply the row checks to a finished row: boxes valid for the row's images, the answer (short
    form longer than yes/no/letter) not named in the question. Returns (grade, reasons)."""
    g = GRADE_INDEX.get(qa.grade or "A++", 0)
    reasons = list(qa.grade_reasons)
    if any(not box_valid(b, sizes) for p in qa.answer_parts for b in p.boxes) or \
            any(not box_valid(b, sizes) for b in qa.boxes):
        g = max(g, D)
        reasons.append(reason("boxes", "invalid", D))
    short = (qa.answer_short or "").strip().lower()
    if qa.choices is None and len(short) > 3 and short not in ("yes", "no", "possibly") and \
            short in qa.question.lower():
        g = max(g, D)
        reasons.append(reason("question", "names_answer", D))
    return GRADES[g], reasons
