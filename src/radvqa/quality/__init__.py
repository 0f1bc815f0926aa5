"""radvqa.quality: rule-based grades A++..D with named reasons, ``min_grade`` filtering, and the
hook for an optional judge pass."""

from __future__ import annotations

from radvqa.quality.criteria import GRADE_INDEX, box_valid, combine, obs_grade, reason
from radvqa.quality.grade import grade_at_least, regrade

__all__ = ["GRADE_INDEX", "box_valid", "combine", "obs_grade", "reason", "grade_at_least", "regrade"]
