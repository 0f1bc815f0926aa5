"""Rule-based quality criteria (CXR-QBA's extraction criteria, as they apply to our scene graphs,
plus our own row checks).

Grades are ints on the hot path: 0 = A++, 1 = A+, 2 = A, 3 = B, 4 = C, 5 = D (``GRADES[i]``); a row's
grade is the worst (largest) over its criteria, and every criterion that lowered it below A++ leaves
a named reason ``criterion:value->grade``. Observation-level criteria are computed once per
observation per study (``obs_grade``) and combined per row, so grading costs a ``max`` per row.

Criteria (REFERENCE.md §1; ours marked *):
- regions: explicit region ids all resolved -> A++; some unresolved (not in the ontology) -> A;
  none given (only the finding's default regions) -> B.
- entities: finding id resolved in the ontology -> A++; unresolved -> A.
- change text: an answer part that quotes report text still containing a change word -> B.
- localization: a lesion/expert box or a region box of the observation's own regions -> A++; boxes
  for some images only -> A; only the finding's default-region boxes (fallback) or none -> B.
- issue level: the rules extractor reports no issue levels; an extraction error recorded in
  ``SceneGraph.meta["extract_error"]`` -> C (non-interpretable).
- *implied negative: a negative asserted only because the report is silent -> B (not inferable).
- *boxes valid: every box inside its image with x1 < x2, y1 < y2 -> otherwise D.
- *answer in question: the question names its own answer -> D (generators skip these; the check
  is a safety net for hand-made templates).
- judge criteria (entailment, relevance, completeness, clarity) are an optional later pass:
  see ``radvqa.quality.judge``.
"""

from __future__ import annotations

from typing import Any

from radvqa.model import GRADES, Box, Observation

A_PP, A_P, A, B, C, D = range(6)
GRADE_INDEX = {g: i for i, g in enumerate(GRADES)}

LESION_SOURCES = frozenset({"expert", "expert_fused", "derived", "predicted", "label"})


def reason(criterion: str, value: str, grade: int) -> str:
    return f"{criterion}:{value}->{GRADES[grade]}"


def obs_grade(
    obs: Observation,
    known_findings: dict[str, Any],
    known_regions: dict[str, Any],
    localization: str,
    n_images_boxed: int,
    n_images: int,
) -> tuple[int, tuple[str, ...]]:
    """Grade of the facts one observation contributes (worst criterion) and the reasons.

    ``localization`` is what the generator attached: "box" (lesion box or own-region box),
    "fallback" (default-region boxes), "none"."""
    g = A_PP
    reasons: list[str] = []
    if obs.regions:
        if any(r not in known_regions for r in obs.regions):
            g = max(g, A)
            reasons.append(reason("regions", "unresolved", A))
    elif obs.certainty != "absent" and not obs.boxes:
        g = max(g, B)
        reasons.append(reason("regions", "default_only", B))
    if obs.finding not in known_findings:
        g = max(g, A)
        reasons.append(reason("entities", "unresolved", A))
    if obs.certainty != "absent":
        if localization == "box":
            if n_images and 0 < n_images_boxed < n_images:
                g = max(g, A)
                reasons.append(reason("localization", "incomplete", A))
        elif localization == "fallback":
            g = max(g, B)
            reasons.append(reason("localization", "fallback", B))
        else:
            g = max(g, B)
            reasons.append(reason("localization", "none", B))
    return g, tuple(reasons)


IMPLIED_NEGATIVE = (B, (reason("negative", "implied", B),))
CHANGE_TEXT_LEFT = (B, (reason("change_text", "left", B),))
EXTRACT_ERROR = (C, (reason("issue_level", "non_interpretable", C),))


def box_valid(b: Box, sizes: dict[str, tuple[int | None, int | None]]) -> bool:
    if not (b.x1 < b.x2 and b.y1 < b.y2) or b.x1 < 0 or b.y1 < 0:
        return False
    w, h = sizes.get(b.image_id, (None, None))
    if b.image_id not in sizes:
        return False
    if w is not None and b.x2 > w:
        return False
    if h is not None and b.y2 > h:
        return False
    return True


def combine(parts: list[tuple[int, tuple[str, ...]]]) -> tuple[int, list[str]]:
    """Worst grade over several (grade, reasons) and the union of reasons in order, deduplicated."""
    g = A_PP
    out: list[str] = []
    for pg, pr in parts:
        if pg > g:
            g = pg
        for r in pr:
            if r not in out:
                out.append(r)
    return g, out
