"""eval.cells: statistics that add up across pieces of the rows give the same numbers whatever
the cut and the order (exact sums), the same intervals as computing them on the whole array
(the method of aggregate.mean_ci before cells existed: numpy mean and std, scipy's bootstrap on
the values in row order), and a merged cell keeps at most NORMAL_ABOVE values, so what a
partitioned run's parent holds does not grow with the number of questions."""

from __future__ import annotations

import math
import pickle
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import binomtest, bootstrap

from radvqa.eval.cells import _SH, NORMAL_ABOVE, Stat, exact_sum


def _pieces(x: np.ndarray, rng: np.random.Generator, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """x cut at random places into k pieces (values with their row numbers), shuffled."""
    rows = np.arange(x.size)
    perm = rng.permutation(x.size)  # hash partitions: any subset of rows, in row order within
    cuts = np.sort(rng.choice(np.arange(1, x.size), size=k - 1, replace=False))
    out = [(x[np.sort(p)], rows[np.sort(p)]) for p in np.split(perm, cuts)]
    rng.shuffle(out)  # type: ignore[arg-type]
    return out


def _merged(x: np.ndarray, seed: int, k: int) -> Stat:
    st = Stat(keep=True)
    for v, r in _pieces(x, np.random.default_rng(seed), k):
        st.add(Stat.of(v, r, keep=True))
    return st


def test_exact_sum_is_exact() -> None:
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.random(5000), -rng.random(100) * 1e6, [5e-324, 1e300, -1e300, 0.1, 0.2, 0.0]])
    assert exact_sum(x) == sum(Fraction(v) for v in x.tolist()) * (1 << _SH)
    assert exact_sum(rng.permutation(x)) == exact_sum(x)


@pytest.mark.parametrize("kind", ["binary", "few", "bootstrap", "normal"])
def test_merged_stat_equals_whole_and_old_method(kind: str) -> None:
    rng = np.random.default_rng(7)
    x = {"binary": (rng.random(3000) < 0.3).astype(float), "few": rng.random(12),
         "bootstrap": rng.random(4000) ** 2, "normal": rng.random(60_000) ** 3}[kind]
    whole = Stat.of(x, keep=True).ci(500, 3)
    for seed, k in ((1, 2), (2, 7), (3, 11)):
        assert _merged(x, seed, k).ci(500, 3) == whole  # any cut, any order: identical dicts
    # against the arrays themselves (the method the report used before)
    assert whole["mean"] == pytest.approx(float(x.mean()), rel=1e-15, abs=0)
    assert whole["mean"] == float(sum(Fraction(v) for v in x.tolist()) / x.size)  # correctly rounded
    if kind == "binary":
        ci = binomtest(int(x.sum()), x.size).proportion_ci(confidence_level=0.95, method="exact")
        assert whole["ci95"] == [ci.low, ci.high]
    elif kind == "few":
        assert whole["ci95"] is None
    elif kind == "bootstrap":
        res = bootstrap((x,), np.mean, n_resamples=500, confidence_level=0.95, method="percentile",
                        rng=np.random.default_rng(3), vectorized=True).confidence_interval
        assert whole["ci95"] == [res.low, res.high]  # the same resamples of the same values
    else:
        se = float(x.std(ddof=1)) / math.sqrt(x.size)
        assert whole["ci95"] == pytest.approx([x.mean() - 1.96 * se, x.mean() + 1.96 * se], rel=1e-12)
        assert whole["ci_method"] == "normal"


def test_kept_values_are_bounded() -> None:
    rng = np.random.default_rng(0)
    st = Stat(keep=True)
    sizes = []
    for k in range(40):  # 40 partitions of 1,000 values: the cell passes NORMAL_ABOVE at the 21st
        st.add(Stat.of(rng.random(1000), np.arange(k * 1000, (k + 1) * 1000), keep=True))
        sizes.append(len(pickle.dumps(st)))
    assert st.n == 40_000 > NORMAL_ABOVE and st.vals is None and st.rows is None
    assert max(sizes[25:]) < 2_000 < sizes[15]  # a few integers once past the bound, whatever n
    assert st.ci(100, 0)["ci_method"] == "normal"
