"""The report's score blocks from statistics that add up: each piece of the scored rows (all of
them in memory, or one hash partition of eval.stream) is summarised into ``Cells`` -- per
reported cell (overall, each answer kind, polarity, each breakdown group, the grounding
denominators, the shortcut audit's question types) a ``Block`` of ``Stat``s -- and pieces are
merged with ``Cells.add``. Both scorers build their report from merged ``Cells``, so the parent
of a partitioned run holds no per-question array: its memory depends on the number of cells,
not of questions.

Numbers do not depend on how the rows were cut: a ``Stat`` sums its values exactly (an integer
count of 2**-_SH, which every float64 is), so a mean is the correctly rounded mean whatever the
order of addition, and the interval is chosen as ``aggregate.mean_ci`` always did:

- 0/1 values: exact binomial (Clopper-Pearson) from the count of ones;
- n > NORMAL_ABOVE: normal approximation from the exact sums of x and x*x, clipped to [min, max];
- MIN_BOOTSTRAP_N <= n <= NORMAL_ABOVE: scipy's percentile bootstrap over the values in row
  order. A Stat that reports an interval keeps (row, value) pairs while it holds at most
  NORMAL_ABOVE values and drops them when a merge passes that count, so a cell keeps at most
  20,000 values whatever the size of the dataset -- the bootstrap is the one it was, on the
  same values in the same order (a merged cell sorts them by row).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

NORMAL_ABOVE = 20_000
MIN_BOOTSTRAP_N = 20  # below it a non-0/1 score gets no interval
_SH = 1130  # exact sums count units of 2**-_SH: every finite float64 is a whole number of them
_CHUNK = 1 << 26  # bincount sums 2**26 values below 2**27 exactly in float64
KINDS = ("yes_no", "choice", "count", "short", "open", "closed")
STATUS = ("parsed", "unparsed", "missing")
BREAKDOWNS = ("strategy", "question_type", "finding", "region", "modality", "split", "kind")
_GROUP_COLUMN = {"finding": "findings", "region": "regions"}


def exact_sum(x: np.ndarray) -> int:
    """sum(x) exactly (finite values), as an integer count of 2**-_SH: each value is an integer
    mantissa M (53 bits) times a power of two; the mantissas are summed per exponent in two
    26-bit halves (exact in float64), and the per-exponent sums shifted into place."""
    total = 0
    for a in range(0, int(x.size), _CHUNK):
        m, e = np.frexp(x[a:a + _CHUNK])
        mant = (m * 9007199254740992.0).astype(np.int64)  # m * 2**53: a whole number
        e = e.astype(np.int64)
        e0 = int(e.min())
        k = e - e0
        hi = np.bincount(k, weights=(mant >> 26).astype(np.float64))
        lo = np.bincount(k, weights=(mant & 0x3FFFFFF).astype(np.float64))
        for j in np.flatnonzero((hi != 0) | (lo != 0)).tolist():
            total += ((int(hi[j]) << 26) + int(lo[j])) << (j + e0 - 53 + _SH)
    return total


class Stat:
    """n, exact sums of x and x*x, min, max, how many values are not 0/1, NaNs left out; and,
    when ``keep``, the (row, value) pairs while n <= NORMAL_ABOVE (for the bootstrap)."""

    __slots__ = ("n", "s", "ss", "lo", "hi", "nonbin", "nan", "keep", "rows", "vals")

    def __init__(self, keep: bool = False) -> None:
        self.n = self.s = self.ss = self.nonbin = self.nan = 0
        self.lo, self.hi = math.inf, -math.inf
        self.keep = keep
        self.rows: np.ndarray | None = np.zeros(0, dtype=np.int64) if keep else None
        self.vals: np.ndarray | None = np.zeros(0) if keep else None

    @classmethod
    def of(cls, values: np.ndarray, rows: np.ndarray | None = None, keep: bool = False) -> "Stat":
        st = cls(keep)
        values = np.asarray(values, dtype=np.float64)
        bad = np.isnan(values)
        st.nan = int(bad.sum())
        v = values[~bad] if st.nan else values
        st.n = int(v.size)
        if st.n:
            st.s = exact_sum(v)
            st.ss = exact_sum(v * v)
            st.lo, st.hi = float(v.min()), float(v.max())
            st.nonbin = int(np.count_nonzero((v != 0.0) & (v != 1.0)))
        if keep:
            if st.n <= NORMAL_ABOVE:
                r = np.arange(len(values), dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
                st.rows, st.vals = (r[~bad] if st.nan else r), v
            else:
                st.rows = st.vals = None
        return st

    @classmethod
    def ones(cls, k: int, n: int) -> "Stat":
        """n values of which k are 1 and the rest 0."""
        st = cls()
        st.n, st.s, st.ss = n, k << _SH, k << _SH
        if n:
            st.lo, st.hi = (0.0 if k < n else 1.0), (1.0 if k else 0.0)
        return st

    def add(self, o: "Stat") -> None:
        self.n += o.n
        self.s += o.s
        self.ss += o.ss
        self.lo, self.hi = min(self.lo, o.lo), max(self.hi, o.hi)
        self.nonbin += o.nonbin
        self.nan += o.nan
        if self.keep:
            if self.vals is not None and o.vals is not None and self.n <= NORMAL_ABOVE:
                self.rows = np.concatenate((self.rows, o.rows))  # type: ignore[arg-type]
                self.vals = np.concatenate((self.vals, o.vals))
            else:
                self.rows = self.vals = None

    def mean(self) -> float | None:
        """Mean of the non-NaN values (None when there are none)."""
        return float(Fraction(self.s, self.n << _SH)) if self.n else None

    def mean_all(self) -> float | None:
        """np.mean over every value: NaN if one is NaN, None when there are none."""
        if self.nan:
            return math.nan
        return self.mean()

    def total(self) -> int:
        return int(Fraction(self.s, 1 << _SH))

    def ci(self, B: int = 1000, seed: int = 0) -> dict[str, Any]:
        """Mean and 95% CI (see the module's docstring); ``B <= 0``: no interval."""
        n = self.n
        if n == 0:
            return {"mean": None, "ci95": None, "n": 0}
        m = self.mean()
        if B <= 0:
            return {"mean": m, "ci95": None, "n": n}
        if not self.nonbin:
            from scipy.stats import binomtest

            ci = binomtest(self.s >> _SH, n).proportion_ci(confidence_level=0.95, method="exact")
            return {"mean": m, "ci95": [float(ci.low), float(ci.high)], "n": n, "ci_method": "exact binomial (Clopper-Pearson)"}
        if n < MIN_BOOTSTRAP_N:
            return {"mean": m, "ci95": None, "n": n, "ci_method": f"none (n < {MIN_BOOTSTRAP_N})"}
        if n > NORMAL_ABOVE:
            var = Fraction(self.ss * n * (1 << _SH) - self.s * self.s, (n * (n - 1)) << (2 * _SH))
            se = math.sqrt(float(var)) / math.sqrt(n)
            assert m is not None
            return {"mean": m, "ci95": [max(m - 1.96 * se, self.lo), min(m + 1.96 * se, self.hi)], "n": n, "ci_method": "normal"}
        assert self.vals is not None and self.rows is not None, "an interval asked of a Stat that kept no values"
        from scipy.stats import bootstrap

        values = self.vals[np.argsort(self.rows, kind="stable")]
        res = bootstrap((values,), np.mean, n_resamples=B, confidence_level=0.95, method="percentile",
                        rng=np.random.default_rng(seed), vectorized=True)
        ci = res.confidence_interval
        return {"mean": m, "ci95": [float(ci.low), float(ci.high)], "n": n, "ci_method": f"bootstrap B={B} seed={seed} (scipy, percentile)"}


def _merge_dict(a: dict[Any, Any], b: dict[Any, Any]) -> None:
    for k, v in b.items():
        if k in a:
            a[k].add(v)
        else:
            a[k] = v


def _tally(a: dict[Any, list[int]], b: dict[Any, list[int]]) -> None:
    """Merge {key: [count, first row]}."""
    for k, (c, f) in b.items():
        hit = a.get(k)
        if hit is None:
            a[k] = [c, f]
        else:
            hit[0] += c
            hit[1] = min(hit[1], f)


def ranked(tally: dict[Any, list[int]]) -> list[tuple[Any, int]]:
    """(key, count), most frequent first, ties in order of first occurrence (what
    Counter.most_common gives over rows in order)."""
    return [(k, v[0]) for k, v in sorted(tally.items(), key=lambda kv: (-kv[1][0], kv[1][1]))]


class Arrays:
    """A piece's per-row scores as numpy columns, ``pos`` the rows' order numbers."""

    def __init__(self, sc: Any, pos: np.ndarray) -> None:
        def f(col: Any) -> np.ndarray:
            return col.numpy() if hasattr(col, "numpy") else np.array([np.nan if v is None else v for v in col], dtype=float)

        self.pos = np.asarray(pos, dtype=np.int64)
        self.correct, self.f1, self.p, self.r = f(sc.correct), f(sc.tok_f1), f(sc.tok_p), f(sc.tok_r)
        self.exact, self.iou, self.script = f(sc.exact), f(sc.iou), f(sc.script_score)
        kc = {k: i for i, k in enumerate(KINDS)}
        sc_ = {k: i for i, k in enumerate(STATUS)}
        self.kind = np.fromiter(map(kc.__getitem__, sc.kind), dtype=np.int8, count=len(sc.kind))
        status = np.fromiter(map(sc_.__getitem__, sc.status), dtype=np.int8, count=len(sc.status))
        self.unparsed, self.missing = status == 1, status == 2


class Block:
    """What Aggregator.block reported for a set of rows: closed accuracy, open token metrics."""

    __slots__ = ("n", "closed", "c_unp", "c_miss", "open", "o_unp", "o_miss", "p", "r", "ex")

    @classmethod
    def of(cls, a: Arrays, idx: np.ndarray, ci: bool = True) -> "Block":
        b = cls()
        b.n = int(idx.size)
        c = a.correct[idx]
        cm = ~np.isnan(c)
        pos = a.pos[idx]
        unp, miss = a.unparsed[idx], a.missing[idx]
        b.closed = Stat.of(c[cm], pos[cm], keep=ci)
        b.c_unp, b.c_miss = int(unp[cm].sum()), int(miss[cm].sum())
        o = a.f1[idx]
        om = ~np.isnan(o) & ~cm  # open answers (short ones are counted as closed)
        b.open = Stat.of(o[om], pos[om], keep=ci)
        b.p, b.r, b.ex = Stat.of(a.p[idx][om]), Stat.of(a.r[idx][om]), Stat.of(a.exact[idx][om])
        b.o_unp, b.o_miss = int(unp[om].sum()), int(miss[om].sum())
        return b

    def add(self, o: "Block") -> None:
        self.n += o.n
        for k in ("closed", "open", "p", "r", "ex"):
            getattr(self, k).add(getattr(o, k))
        self.c_unp += o.c_unp
        self.c_miss += o.c_miss
        self.o_unp += o.o_unp
        self.o_miss += o.o_miss

    def to_dict(self, B: int, seed: int) -> dict[str, Any]:
        out: dict[str, Any] = {"n": self.n}
        if self.closed.n:
            blk = self.closed.ci(B, seed)
            out["closed"] = {"n": self.closed.n, "correct": self.closed.total(), "accuracy": blk["mean"], "ci95": blk["ci95"],
                             "unparsed": self.c_unp, "missing": self.c_miss}
        if self.open.n:
            blk = self.open.ci(B, seed)
            ex = self.ex.mean()
            out["open"] = {"n": self.open.n, "token_f1": blk["mean"], "ci95": blk["ci95"], "token_precision": self.p.mean_all(),
                           "token_recall": self.r.mean_all(), "exact_match": math.nan if ex is None else ex,
                           "missing": self.o_miss, "unparsed": self.o_unp}
        return out


def _groups(col: Any) -> dict[str, Any]:
    """value -> rows (Aggregator.groups' rule: the column's own groups() where it has one)."""
    from collections import defaultdict

    from radvqa.eval.aggregate import norm_category

    if hasattr(col, "groups"):
        return col.groups()  # type: ignore[no-any-return]
    g: dict[str, list[int]] = defaultdict(list)
    for i, v in enumerate(col):
        if isinstance(v, list):
            for x in v:
                g[str(x)].append(i)
        elif v is not None and v != "":
            g[norm_category(str(v))].append(i)
    return g


class Ground:
    """Grounding: the three denominators' IoU Stats and counts, negatives, the histogram."""

    def __init__(self) -> None:
        self.n_g = 0
        self.any_gold = self.any_iou = False
        self.stats = {k: Stat(keep=True) for k in ("all", "pos", "parsed")}
        self.ge = {k: [0, 0] for k in ("all", "pos", "parsed")}
        self.neg = self.neg_nobox = self.ung = self.pos_nopred = 0
        self.hist = np.zeros(10, dtype=np.int64)
        self.errors: dict[str, list[int]] = {}

    @classmethod
    def of(cls, a: Arrays, sc: Any) -> "Ground":
        gr = cls()
        g = np.array(sc.grounding, dtype=bool)
        gold = np.array(sc.gold_boxes, dtype=np.int64)
        predn = np.array([-1 if x is None else x for x in sc.pred_boxes], dtype=np.int64)
        iou = a.iou
        gr.n_g = int(g.sum())
        gr.any_gold = bool((gold > 0).any())
        gr.any_iou = bool((~np.isnan(iou[g])).any())
        pos = g & (gold > 0)
        neg = g & (gold == 0) & ~np.isnan(iou)
        parsed = pos & (predn > 0)
        gm = pos | neg
        for k, m in (("all", gm), ("pos", pos), ("parsed", parsed)):
            v = iou[m]
            gr.stats[k] = Stat.of(v, a.pos[m], keep=True)
            gr.ge[k] = [int((v >= 0.3).sum()), int((v >= 0.5).sum())]
        gr.neg, gr.neg_nobox = int(neg.sum()), int((neg & (predn <= 0)).sum())
        gr.ung = int((g & (gold == 0) & np.isnan(iou)).sum())
        gr.pos_nopred = int((pos & (predn <= 0)).sum())
        gr.hist = np.histogram(iou[pos], bins=10, range=(0.0, 1.0))[0].astype(np.int64)
        for i in np.flatnonzero(gm).tolist():
            e = sc.box_error[i]
            if e:
                hit = gr.errors.get(e)
                if hit is None:
                    gr.errors[e] = [1, int(a.pos[i])]
                else:
                    hit[0] += 1
        return gr

    def add(self, o: "Ground") -> None:
        self.n_g += o.n_g
        self.any_gold |= o.any_gold
        self.any_iou |= o.any_iou
        for k in self.stats:
            self.stats[k].add(o.stats[k])
            self.ge[k] = [x + y for x, y in zip(self.ge[k], o.ge[k])]
        self.neg += o.neg
        self.neg_nobox += o.neg_nobox
        self.ung += o.ung
        self.pos_nopred += o.pos_nopred
        self.hist = self.hist + o.hist
        _tally(self.errors, o.errors)

    def to_dict(self, B: int, seed: int) -> dict[str, Any] | None:
        if not self.n_g:
            return None
        if not self.any_gold and not self.any_iou:
            return {"note": "grounding questions present but none has a gold box or is negative: no IoU", "ungroundable": {"n": self.n_g}}

        def stats(k: str, what: str) -> dict[str, Any]:
            st = self.stats[k]
            n = st.n + st.nan
            if n == 0:
                return {"denominator": what, "n": 0}
            blk = st.ci(B, seed)
            return {"denominator": what, "n": n, "mean_iou": blk["mean"], "ci95": blk["ci95"],
                    "iou_ge_0.3": self.ge[k][0] / n, "iou_ge_0.5": self.ge[k][1] / n,
                    "count_ge_0.3": self.ge[k][0], "count_ge_0.5": self.ge[k][1]}

        edges = np.histogram_bin_edges(np.zeros(0), bins=10, range=(0.0, 1.0))
        return {
            "matching": "Hungarian (max total IoU); question score = sum of matched IoUs / max(#gold, #predicted)",
            "all_questions": stats("all", "all grounding questions; a negative one (no gold box) scores 1 if no box is predicted, else 0"),
            "positive_questions": stats("pos", "questions with >= 1 gold box; no predicted box scores 0"),
            "parsed_answers": stats("parsed", "questions with >= 1 gold box and >= 1 predicted box"),
            "negatives": {"n": self.neg, "no_box_predicted": self.neg_nobox},
            "ungroundable": {"n": self.ung, "note": "positive grounding questions without a gold box (no image or region box in the source): no IoU"},
            "positives_without_predicted_box": self.pos_nopred,
            "box_read_errors": dict(ranked(self.errors)),
            "iou_histogram_positive": {"edges": [float(x) for x in edges], "counts": [int(x) for x in self.hist]},
        }


_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _digest(x: Any) -> tuple[int, int]:
    import hashlib

    h = hashlib.blake2b(repr(x).encode("utf-8", "surrogatepass"), digest_size=16).digest()
    return int.from_bytes(h[:8], "little", signed=True), int.from_bytes(h[8:], "little", signed=True)


def circular_rows(rows: dict[str, Any], sc: Any, a: Arrays) -> np.ndarray:
    """Per choice row: (row, group key hash (2), option order hash (2), answered right): the
    rotations of a question are the choice rows of one study and template with the same option
    set and the same correct option text."""
    out: list[tuple[int, int, int, int, int, int]] = []
    for i, k in enumerate(sc.kind):
        if k != "choice":
            continue
        ch = rows["choices"][i] or []
        gold = rows["answer_short"][i]
        gold_text = ch[_LETTERS.index(gold)] if gold in _LETTERS[: len(ch)] else gold
        x, y = _digest((rows["study_id"][i], rows["template_id"][i], tuple(sorted(ch)), gold_text))
        c, d = _digest(tuple(rows["choices"][i] or []))
        out.append((int(a.pos[i]), x, y, c, d, int(a.correct[i] == 1.0)))
    return np.array(out, dtype=np.int64).reshape(-1, 6)


class Circular:
    """Circular evaluation summed over sets of whole groups (eval.stream buckets choice rows
    by group hash): questions, rotated groups, those answered right in every rotation, and
    group sizes with the first row of a group of that size (the report's key order)."""

    def __init__(self) -> None:
        self.questions = self.rotated = self.right = 0
        self.sizes: dict[int, list[int]] = {}

    @classmethod
    def of(cls, c: np.ndarray) -> "Circular":
        out = cls()
        if not len(c):
            return out
        c = c[np.lexsort((c[:, 0], c[:, 4], c[:, 3], c[:, 2], c[:, 1]))]
        new_g = np.ones(len(c), dtype=bool)
        new_g[1:] = (c[1:, 1] != c[:-1, 1]) | (c[1:, 2] != c[:-1, 2])
        new_s = new_g.copy()
        new_s[1:] |= (c[1:, 3] != c[:-1, 3]) | (c[1:, 4] != c[:-1, 4])
        gid = np.cumsum(new_g) - 1
        starts = np.flatnonzero(new_g)
        orders = np.bincount(gid, weights=new_s)
        size = np.bincount(gid)
        first = np.minimum.reduceat(c[:, 0], starts)
        all_right = np.minimum.reduceat(c[:, 5], starts)
        rot = np.flatnonzero(orders > 1)
        out.questions = int(len(c))
        out.rotated = int(rot.size)
        out.right = int(all_right[rot].sum())
        for s, f in zip(size[rot].tolist(), first[rot].tolist()):
            _tally(out.sizes, {s: [1, f]})
        return out

    def add(self, o: "Circular") -> None:
        self.questions += o.questions
        self.rotated += o.rotated
        self.right += o.right
        _tally(self.sizes, o.sizes)

    def to_dict(self, single: float | None, B: int, seed: int) -> dict[str, Any] | None:
        if not self.questions:
            return None
        out: dict[str, Any] = {"questions": self.questions, "single_pass_accuracy": single}
        if self.rotated:
            blk = Stat.ones(self.right, self.rotated).ci(B, seed)
            out.update({
                "groups_with_rotations": self.rotated,
                "rotations_per_group": {s: v[0] for s, v in sorted(self.sizes.items(), key=lambda kv: kv[1][1])},
                "circular_accuracy": blk["mean"],
                "ci95": blk["ci95"],
            })
        else:
            out["groups_with_rotations"] = 0
            out["note"] = "no rotated copies of any question: circular accuracy not applicable"
        return out


class Cells:
    """Everything the report's score blocks need from a piece of the rows; ``add`` merges."""

    def __init__(self) -> None:
        self.blocks: dict[tuple[str, ...], Block] = {}
        self.kinds: dict[str, list[int]] = {}  # kind -> [rows, unparsed, missing]
        self.reasons: dict[tuple[str, str], list[int]] = {}
        self.yes_no: dict[tuple[str, str], int] = {}
        self.ground: Ground | None = None
        self.chance: dict[Any, Stat] = {}
        self.llava: dict[str, Stat] = {}
        self.circular = Circular()

    @classmethod
    def of(cls, rows: dict[str, Any], sc: Any, pos: np.ndarray, full: bool = True, circular: bool = True) -> "Cells":
        """``full=False``: the overall and per-question-type blocks only, no intervals (the
        shortcut audit's baselines). ``circular=False``: no circular evaluation (a partition's
        rows do not hold whole groups; eval.stream buckets them)."""
        a = Arrays(sc, pos)
        cells = cls()
        cells.a = a  # type: ignore[attr-defined]  # for add_chance; dropped by detach()
        n = len(a.pos)
        bl = cells.blocks
        bl[("all",)] = Block.of(a, np.arange(n), ci=full)
        for qt, ix in _groups(rows["question_type"]).items():
            bl[("bd", "question_type", qt)] = Block.of(a, np.asarray(ix, dtype=np.int64), ci=full)
        if not full:
            return cells
        closed = ~np.isnan(a.correct)
        for code in np.unique(a.kind).tolist():
            m = a.kind == code
            k = KINDS[code]
            bl[("kind", k)] = Block.of(a, np.flatnonzero(m))
            cells.kinds[k] = [int(m.sum()), int(a.unparsed[m].sum()), int(a.missing[m].sum())]
        pol = rows["polarity"]
        if hasattr(pol, "codes"):
            names = np.array([(v or "none") for v in pol.table] + ["none"], dtype=object)
            pv = names[np.asarray(pol.codes, dtype=np.int64)] if n else np.zeros(0, dtype=object)
        else:
            pv = np.array([p or "none" for p in pol], dtype=object)
        for k in ("positive", "negative"):
            idx = np.flatnonzero((pv == k) & closed)
            if idx.size:
                bl[("pol", k)] = Block.of(a, idx)
        for key in BREAKDOWNS:
            if key in ("kind", "question_type"):
                continue  # the kind blocks; question types above
            for name, ix in _groups(rows[_GROUP_COLUMN.get(key, key)]).items():
                bl[("bd", key, name)] = Block.of(a, np.asarray(ix, dtype=np.int64))
        for i in np.flatnonzero(a.unparsed).tolist():
            key = (sc.kind[i], sc.reason[i] or "?")
            hit = cells.reasons.get(key)
            if hit is None:
                cells.reasons[key] = [1, int(a.pos[i])]
            else:
                hit[0] += 1
        ans = rows["answer_short"]
        for i in np.flatnonzero(a.kind == KINDS.index("yes_no")).tolist():
            st = sc.status[i]
            key = ((ans[i] or "").strip().lower(), sc.value[i] if st == "parsed" else st)
            cells.yes_no[key] = cells.yes_no.get(key, 0) + 1
        cells.ground = Ground.of(a, sc)
        if sc.protocol == "llava-med":
            cm, om = a.kind == KINDS.index("closed"), a.kind == KINDS.index("open")
            s = a.script[cm]
            cells.llava = {"closed": Stat.of(a.correct[cm]), "script": Stat.of(s[~np.isnan(s)]), "r": Stat.of(a.r[om]),
                           "p": Stat.of(a.p[om]), "f1": Stat.of(a.f1[om]), "exact": Stat.of(a.exact[om])}
        if circular:
            cells.circular = Circular.of(circular_rows(rows, sc, a))
        return cells

    def add_chance(self, rows: dict[str, Any], chance: np.ndarray) -> None:
        """The shortcut audit's chance level: per question type and overall, the mean over the
        closed rows that have one."""
        a: Arrays = self.a  # type: ignore[attr-defined]
        ok = ~np.isnan(a.correct) & ~np.isnan(chance)
        self.chance["all"] = Stat.of(chance[ok])
        for qt, ix in _groups(rows["question_type"]).items():
            ix = np.asarray(ix, dtype=np.int64)
            self.chance[qt] = Stat.of(chance[ix[ok[ix]]])

    def detach(self) -> "Cells":
        self.__dict__.pop("a", None)
        return self

    def add(self, o: "Cells") -> None:
        _merge_dict(self.blocks, o.blocks)
        for k, v in o.kinds.items():
            self.kinds[k] = [x + y for x, y in zip(self.kinds.get(k, [0, 0, 0]), v)]
        _tally(self.reasons, o.reasons)
        for k, c in o.yes_no.items():
            self.yes_no[k] = self.yes_no.get(k, 0) + c
        if o.ground is not None:
            if self.ground is None:
                self.ground = o.ground
            else:
                self.ground.add(o.ground)
        _merge_dict(self.chance, o.chance)
        _merge_dict(self.llava, o.llava)
        self.circular.add(o.circular)


class CellAggregator:
    """The report's blocks from merged Cells (what both scorers hand to evaluate.aggregate_blocks)."""

    def __init__(self, cells: Cells, B: int = 1000, seed: int = 0) -> None:
        self.c = cells
        self.B = B
        self.seed = seed

    def kinds(self) -> list[str]:
        return sorted(self.c.kinds)

    def block(self, key: tuple[str, ...], with_ci: bool = True) -> dict[str, Any]:
        b = self.c.blocks.get(key)
        return b.to_dict(self.B if with_ci else 0, self.seed) if b is not None else {"n": 0}

    def overall(self) -> dict[str, Any]:
        out = self.block(("all",))
        out["by_kind"] = {k: self.block(("kind", k)) for k in self.kinds()}
        byp = {k: self.block(("pol", k)).get("closed") for k in ("positive", "negative") if ("pol", k) in self.c.blocks}
        if byp:
            out["closed_by_polarity"] = byp
        return out

    def groups(self, key: str) -> dict[str, Block]:
        if key == "kind":
            return {k: self.c.blocks[("kind", k)] for k in self.kinds()}
        return {k[2]: b for k, b in self.c.blocks.items() if k[0] == "bd" and k[1] == key}

    def breakdowns(self, max_groups: int = 200) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in BREAKDOWNS:
            g = self.groups(key)
            if not g or (len(g) == 1 and key not in ("kind",)):
                continue  # a breakdown with one group repeats the overall line
            items = sorted(g.items(), key=lambda kv: (-kv[1].n, kv[0]))[:max_groups]
            out[key] = {name: b.to_dict(self.B, self.seed) for name, b in items}
            if len(g) > max_groups:
                out[key]["_truncated"] = {"groups": len(g), "shown": max_groups}
        return out

    def parse_failures(self) -> dict[str, Any]:
        by: dict[str, dict[str, list[int]]] = {}
        for (k, why), v in self.c.reasons.items():
            by.setdefault(k, {})[why] = v
        return {k: {"n": n, "unparsed": u, "missing": m, "reasons": dict(ranked(by.get(k, {})))}
                for k, (n, u, m) in sorted(self.c.kinds.items())}

    def yes_no_confusion(self) -> dict[str, dict[str, int]] | None:
        if "yes_no" not in self.c.kinds:
            return None
        cols = ("yes", "no", "unparsed", "missing")
        return {g: {c: int(self.c.yes_no.get((g, c), 0)) for c in cols} for g in ("yes", "no")}

    def circular(self) -> dict[str, Any] | None:
        single = self.block(("kind", "choice"), with_ci=False).get("closed", {}).get("accuracy")
        return self.c.circular.to_dict(single, self.B, self.seed)

    def grounding(self) -> dict[str, Any] | None:
        return self.c.ground.to_dict(self.B, self.seed) if self.c.ground is not None else None

    def llava_med(self) -> dict[str, Any]:
        from radvqa.eval.evaluate import LLAVA_NOTE

        L = self.c.llava
        c, s = L["closed"], L["script"]
        closed_n, open_n = c.n + c.nan, L["r"].n + L["r"].nan
        return {
            "closed_accuracy": c.mean_all() if closed_n else None,
            "closed_n": closed_n,
            "closed_correct": c.total(),
            "closed_accuracy_v1_script": s.mean(),
            "closed_n_v1_script": s.n,
            "closed_dropped_by_v1_script": closed_n - s.n,
            "open_recall": L["r"].mean_all() if open_n else None,
            "open_n": open_n,
            "open_precision": L["p"].mean_all() if open_n else None,
            "open_f1": L["f1"].mean_all() if open_n else None,
            "open_exact": L["exact"].mean_all() if open_n else None,
            "note": LLAVA_NOTE,
        }


def _type_metric(agg: CellAggregator, qt: str) -> tuple[str, float | None, int]:
    b = agg.block(("bd", "question_type", qt), with_ci=False)
    if "closed" in b:
        return "accuracy", b["closed"]["accuracy"], b["closed"]["n"]
    if "open" in b:
        return "token_f1", b["open"]["token_f1"], b["open"]["n"]
    return "-", None, 0


def shortcut_audit(model: CellAggregator, base: CellAggregator, name: str, prior: CellAggregator | None = None,
                   prior_name: str | None = None, chance: bool = False) -> dict[str, Any]:
    """Per question type: model metric - text-only baseline metric (closed accuracy, or token F1
    for open-only types), in percentage points; beside them the answer prior's metric and the
    chance level (mean over the type's yes/no and choice rows) when given."""
    out: list[dict[str, Any]] = []
    ch = model.c.chance
    for qt, b in sorted(model.groups("question_type").items(), key=lambda kv: (-kv[1].n, kv[0])):
        metric, m, n = _type_metric(model, qt)
        _, bv, _ = _type_metric(base, qt)
        r: dict[str, Any] = {"question_type": qt, "metric": metric, "n": n, "model": m, "text_only": bv,
                             "gap_pp": None if m is None or bv is None else 100.0 * (m - bv)}
        if prior is not None:
            r["prior"] = _type_metric(prior, qt)[1]
        if chance:
            r["chance"] = ch[qt].mean() if metric == "accuracy" and qt in ch else None
        out.append(r)
    mo, bo = model.block(("all",), with_ci=False), base.block(("all",), with_ci=False)
    res: dict[str, Any] = {
        "baseline": name,
        "overall_closed_gap_pp": (100.0 * (mo["closed"]["accuracy"] - bo["closed"]["accuracy"])) if "closed" in mo and "closed" in bo else None,
        "by_question_type": out,
    }
    if prior is not None or chance:
        po = prior.block(("all",), with_ci=False) if prior is not None else {}
        st = ch.get("all")
        res["overall_closed"] = {
            "model": mo.get("closed", {}).get("accuracy"),
            "text_only": bo.get("closed", {}).get("accuracy"),
            "prior": po.get("closed", {}).get("accuracy"),
            "chance": st.mean() if (chance and st is not None) else None,
            "chance_rows": st.n if (chance and st is not None) else 0,
        }
        res["prior_baseline"] = prior_name
    return res
