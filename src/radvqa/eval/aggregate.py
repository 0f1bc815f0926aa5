"""Turn per-question scores into the report's numbers: overall, per group, grounding with
its three denominators, parse failures, yes/no confusion, circular MC, tag F1, CIs
(computed from mergeable statistics in eval.cells).

Every rate comes with its numerator and denominator (``n``), so a reader can tell what was
counted. 95% CIs (see ``mean_ci``): 0/1 scores get the exact binomial (Clopper-Pearson)
interval; other scores a scipy percentile bootstrap (``B`` resamples, seeded), none below
``MIN_BOOTSTRAP_N`` items, the normal approximation above ``NORMAL_ABOVE``; each block says which.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from radvqa.eval.cells import BREAKDOWNS, MIN_BOOTSTRAP_N, NORMAL_ABOVE  # noqa: F401  (re-exported)

__all__ = ["BREAKDOWNS", "MIN_BOOTSTRAP_N", "NORMAL_ABOVE", "mean_ci", "norm_category"]


def mean_ci(values: np.ndarray, B: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Mean and 95% CI of ``values`` (no NaN); ``B <= 0``: no interval.

    0/1 scores (accuracy): the exact binomial (Clopper-Pearson) interval, valid at any n (at
    n = 2 with 2 right it is [15.8, 100], not the bootstrap's degenerate [100, 100]). Other scores
    (F1, IoU): no interval below ``MIN_BOOTSTRAP_N`` items (a resample of a handful of values says
    nothing), ``scipy.stats.bootstrap`` (percentile, B resamples, seeded) up to ``NORMAL_ABOVE``,
    the normal approximation above it. The mean is the exact mean, correctly rounded: the same
    code (eval.cells.Stat) gives every interval of the report from sums merged over pieces."""
    from radvqa.eval.cells import Stat

    return Stat.of(values, keep=True).ci(B, seed)


def norm_category(v: str) -> str:
    """A multi-valued category in one spelling: "PRES, ATTRIB" and "ATTRIB, PRES" are one group
    (parts stripped, de-duplicated, sorted)."""
    if "," not in v:
        return v.strip()
    return ", ".join(sorted({p.strip() for p in v.split(",") if p.strip()}))
