"""Turn per-question scores into the report's numbers: overall, per group, grounding with
its three denominators, parse failures, yes/no confusion, circular MC, tag F1, CIs.

Every rate comes with its numerator and denominator (``n``), so a reader can tell what was
counted. 95% CIs (see ``mean_ci``): 0/1 scores get the exact binomial (Clopper-Pearson)
interval; other scores a scipy percentile bootstrap (``B`` resamples, seeded), none below
``MIN_BOOTSTRAP_N`` items, the normal approximation above ``NORMAL_ABOVE``; each block says which.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any, Iterable

import numpy as np

from radvqa.eval.scoring import CLOSED_KINDS, Scores

NORMAL_ABOVE = 20_000
MIN_BOOTSTRAP_N = 20  # below it a non-0/1 score gets no interval
BREAKDOWNS = ("strategy", "question_type", "finding", "region", "modality", "split", "kind")


def mean_ci(values: np.ndarray, B: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Mean and 95% CI of ``values`` (no NaN).

    0/1 scores (accuracy): the exact binomial (Clopper-Pearson) interval, valid at any n (at
    n = 2 with 2 right it is [15.8, 100], not the bootstrap's degenerate [100, 100]). Other scores
    (F1, IoU): no interval below ``MIN_BOOTSTRAP_N`` items (a resample of a handful of values says
    nothing), ``scipy.stats.bootstrap`` (percentile, B resamples, seeded) up to ``NORMAL_ABOVE``,
    the normal approximation above it. ``B <= 0``: no interval."""
    n = int(values.size)
    if n == 0:
        return {"mean": None, "ci95": None, "n": 0}
    m = float(values.mean())
    if B <= 0:
        return {"mean": m, "ci95": None, "n": n}
    if np.all((values == 0.0) | (values == 1.0)):
        from scipy.stats import binomtest

        k = int(values.sum())
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        return {"mean": m, "ci95": [float(ci.low), float(ci.high)], "n": n, "ci_method": "exact binomial (Clopper-Pearson)"}
    if n < MIN_BOOTSTRAP_N:
        return {"mean": m, "ci95": None, "n": n, "ci_method": f"none (n < {MIN_BOOTSTRAP_N})"}
    if n > NORMAL_ABOVE:
        se = float(values.std(ddof=1)) / math.sqrt(n)
        return {"mean": m, "ci95": [max(m - 1.96 * se, float(values.min())), min(m + 1.96 * se, float(values.max()))], "n": n, "ci_method": "normal"}
    from scipy.stats import bootstrap

    res = bootstrap((values,), np.mean, n_resamples=B, confidence_level=0.95, method="percentile",
                    rng=np.random.default_rng(seed), vectorized=True)
    ci = res.confidence_interval
    return {"mean": m, "ci95": [float(ci.low), float(ci.high)], "n": n, "ci_method": f"bootstrap B={B} seed={seed} (scipy, percentile)"}


def norm_category(v: str) -> str:
    """A multi-valued category in one spelling: "PRES, ATTRIB" and "ATTRIB, PRES" are one group
    (parts stripped, de-duplicated, sorted)."""
    if "," not in v:
        return v.strip()
    return ", ".join(sorted({p.strip() for p in v.split(",") if p.strip()}))


def _arr(xs: Any) -> np.ndarray:
    if hasattr(xs, "numpy"):
        return xs.numpy()
    return np.array([np.nan if x is None else x for x in xs], dtype=float)


class Aggregator:
    def __init__(self, rows: dict[str, list[Any]], scores: Scores, B: int = 1000, seed: int = 0) -> None:
        self.rows = rows
        self.s = scores
        self.B = B
        self.seed = seed
        self.n = len(rows["qa_id"])
        self.correct = _arr(scores.correct)
        self.f1 = _arr(scores.tok_f1)
        self.p = _arr(scores.tok_p)
        self.r = _arr(scores.tok_r)
        self.exact = _arr(scores.exact)
        self.iou = _arr(scores.iou)
        self.kind = np.array(scores.kind, dtype=object)
        status = np.array(scores.status, dtype=object)
        self.unparsed = status == "unparsed"
        self.missing = status == "missing"

    # -- what the blocks read; eval.stream.CompactAggregator gives the same from numpy codes --
    def kinds(self) -> list[str]:
        return sorted(set(self.s.kind))

    def kind_mask(self, k: str) -> np.ndarray:
        return self.kind == k

    def polarity_mask(self, k: str) -> np.ndarray:
        return np.array([p or "none" for p in self.rows["polarity"]], dtype=object) == k

    def grounding_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per row: a grounding question?, gold boxes, predicted boxes (-1: none read)."""
        return (np.array(self.s.grounding, dtype=bool), np.array(self.s.gold_boxes),
                np.array([-1 if x is None else x for x in self.s.pred_boxes]))

    def box_errors(self, mask: np.ndarray) -> Counter[str]:
        return Counter(e for e, m in zip(self.s.box_error, mask) if m and e)

    # -- blocks ----------------------------------------------------------------------------
    def block(self, idx: np.ndarray | None = None, with_ci: bool = True) -> dict[str, Any]:
        """Closed accuracy and open token metrics for the rows ``idx`` (all when None)."""
        # every row: views, not copies (ten million rows are 80 MB a column)
        sel: Any = slice(None) if idx is None else idx
        B = self.B if with_ci else 0
        out: dict[str, Any] = {"n": self.n if idx is None else int(idx.size)}
        c = self.correct[sel]
        cm = ~np.isnan(c)
        unp, miss = self.unparsed[sel], self.missing[sel]
        if cm.any():
            cv = c[cm]
            blk = mean_ci(cv, B, self.seed)
            out["closed"] = {
                "n": int(cv.size),
                "correct": int(cv.sum()),
                "accuracy": blk["mean"],
                "ci95": blk["ci95"],
                "unparsed": int(unp[cm].sum()),
                "missing": int(miss[cm].sum()),
            }
        o = self.f1[sel]
        om = ~np.isnan(o) & np.isnan(c)  # open answers (short ones are counted as closed)
        if om.any():
            blk = mean_ci(o[om], B, self.seed)
            out["open"] = {
                "n": int(om.sum()),
                "token_f1": blk["mean"],
                "ci95": blk["ci95"],
                "token_precision": float(np.mean(self.p[sel][om])),
                "token_recall": float(np.mean(self.r[sel][om])),
                "exact_match": float(np.nanmean(self.exact[sel][om])),
                "missing": int(miss[om].sum()),
                "unparsed": int(unp[om].sum()),
            }
        return out

    def overall(self) -> dict[str, Any]:
        out = self.block()
        out["by_kind"] = {k: self.block(np.flatnonzero(self.kind_mask(k))) for k in self.kinds()}
        closed_mask = ~np.isnan(self.correct)
        byp = {}
        for k in ("positive", "negative"):
            idx = np.flatnonzero(self.polarity_mask(k) & closed_mask)
            if idx.size:
                byp[k] = self.block(idx).get("closed")
        if byp:
            out["closed_by_polarity"] = byp
        return out

    def groups(self, key: str) -> dict[str, list[int]]:
        src = self.rows["findings" if key == "finding" else "regions" if key == "region" else key] if key != "kind" else None
        if hasattr(src, "groups"):
            return src.groups()  # type: ignore[union-attr]
        g: dict[str, list[int]] = defaultdict(list)
        if key == "kind":
            col: Iterable[Any] = self.s.kind
        elif key == "finding":
            col = self.rows["findings"]
        elif key == "region":
            col = self.rows["regions"]
        else:
            col = self.rows[key]
        for i, v in enumerate(col):
            if isinstance(v, list):
                for x in v:
                    g[str(x)].append(i)
            elif v is not None and v != "":
                g[norm_category(str(v))].append(i)
        return g

    def breakdowns(self, max_groups: int = 200) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in BREAKDOWNS:
            g = self.groups(key)
            if not g or (len(g) == 1 and key not in ("kind",)):
                continue  # a breakdown with one group repeats the overall line
            items = sorted(g.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:max_groups]
            out[key] = {name: self.block(np.array(ix)) for name, ix in items}
            if len(g) > max_groups:
                out[key]["_truncated"] = {"groups": len(g), "shown": max_groups}
        return out

    # -- parse failures / confusion --------------------------------------------------------
    def parse_failures(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k in self.kinds():
            reasons: Counter[str] = Counter()
            unp = miss = tot = 0
            for kind, st, why in zip(self.s.kind, self.s.status, self.s.reason):
                if kind != k:
                    continue
                tot += 1
                if st == "unparsed":
                    unp += 1
                    reasons[why or "?"] += 1
                elif st == "missing":
                    miss += 1
            out[k] = {"n": tot, "unparsed": unp, "missing": miss, "reasons": dict(reasons.most_common())}
        return out

    def yes_no_confusion(self) -> dict[str, dict[str, int]] | None:
        conf: dict[str, Counter[str]] = {"yes": Counter(), "no": Counter()}
        any_yn = False
        for i, k in enumerate(self.s.kind):
            if k != "yes_no":
                continue
            any_yn = True
            gold = (self.rows["answer_short"][i] or "").strip().lower()
            st = self.s.status[i]
            pred = self.s.value[i] if st == "parsed" else st
            conf[gold][pred] += 1
        if not any_yn:
            return None
        cols = ("yes", "no", "unparsed", "missing")
        return {g: {c: int(conf[g][c]) for c in cols} for g in ("yes", "no")}

    # -- multiple choice: circular evaluation ------------------------------------------------
    def circular(self) -> dict[str, Any] | None:
        """Rotations = choice rows of one study and template with the same option set and the
        same correct option text in different orders. A group counts as correct only if every
        rotation is answered right."""
        groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
        for i, k in enumerate(self.s.kind):
            if k != "choice":
                continue
            ch = self.rows["choices"][i] or []
            gold = self.rows["answer_short"][i]
            letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
            gold_text = ch[letters.index(gold)] if gold in letters[: len(ch)] else gold
            key = (self.rows["study_id"][i], self.rows["template_id"][i], tuple(sorted(ch)), gold_text)
            groups[key].append(i)
        if not groups:
            return None
        rotated = {k: v for k, v in groups.items() if len({tuple(self.rows["choices"][i]) for i in v}) > 1}
        single = self.block(np.array([i for v in groups.values() for i in v]), with_ci=False).get("closed", {})
        out: dict[str, Any] = {"questions": sum(len(v) for v in groups.values()), "single_pass_accuracy": single.get("accuracy")}
        if rotated:
            vals = np.array([float(all(self.correct[i] == 1.0 for i in v)) for v in rotated.values()])
            blk = mean_ci(vals, self.B, self.seed)
            out.update({
                "groups_with_rotations": len(rotated),
                "rotations_per_group": dict(Counter(len(v) for v in rotated.values())),
                "circular_accuracy": blk["mean"],
                "ci95": blk["ci95"],
            })
        else:
            out["groups_with_rotations"] = 0
            out["note"] = "no rotated copies of any question: circular accuracy not applicable"
        return out

    # -- grounding -------------------------------------------------------------------------
    def grounding(self) -> dict[str, Any] | None:
        g, gold, predn = self.grounding_arrays()
        if not g.any():
            return None
        if not (gold > 0).any() and np.isnan(self.iou[g]).all():
            return {"note": "grounding questions present but none has a gold box or is negative: no IoU", "ungroundable": {"n": int(g.sum())}}
        iou = self.iou
        pos = g & (gold > 0)
        neg = g & (gold == 0) & ~np.isnan(iou)
        ungroundable = g & (gold == 0) & np.isnan(iou)
        parsed = pos & (predn > 0)
        g = pos | neg

        def stats(mask: np.ndarray, what: str) -> dict[str, Any]:
            v = iou[mask]
            if v.size == 0:
                return {"denominator": what, "n": 0}
            blk = mean_ci(v, self.B, self.seed)
            return {
                "denominator": what,
                "n": int(v.size),
                "mean_iou": blk["mean"],
                "ci95": blk["ci95"],
                "iou_ge_0.3": float((v >= 0.3).mean()),
                "iou_ge_0.5": float((v >= 0.5).mean()),
                "count_ge_0.3": int((v >= 0.3).sum()),
                "count_ge_0.5": int((v >= 0.5).sum()),
            }

        errors = self.box_errors(g)
        hist, edges = np.histogram(iou[pos], bins=10, range=(0.0, 1.0))
        return {
            "matching": "Hungarian (max total IoU); question score = sum of matched IoUs / max(#gold, #predicted)",
            "all_questions": stats(g, "all grounding questions; a negative one (no gold box) scores 1 if no box is predicted, else 0"),
            "positive_questions": stats(pos, "questions with >= 1 gold box; no predicted box scores 0"),
            "parsed_answers": stats(parsed, "questions with >= 1 gold box and >= 1 predicted box"),
            "negatives": {"n": int(neg.sum()), "no_box_predicted": int((neg & (predn <= 0)).sum())},
            "ungroundable": {"n": int(ungroundable.sum()), "note": "positive grounding questions without a gold box (no image or region box in the source): no IoU"},
            "positives_without_predicted_box": int((pos & (predn <= 0)).sum()),
            "box_read_errors": dict(errors.most_common()),
            "iou_histogram_positive": {"edges": [float(x) for x in edges], "counts": [int(x) for x in hist]},
        }
