"""Validate radvqa's LLM judge against human judgements before its grades are trusted.

- **RadNLI** (Miura et al. 2021; JSONL lines ``pair_id, sentence1, sentence2, gold_label``): each
  pair is put to the grading judge exactly as ``radvqa grade`` asks it (the same prompt file,
  ``data/judge_prompt.yaml``), with the premise as the report and cited sentence and the hypothesis
  as the answer; its ``entailment`` verdict is read as an NLI label: aligned -> entailment,
  contradicting or misleading -> contradiction, not_inferable -> neutral. Reported: accuracy over
  the judged pairs and over all pairs (an unjudged pair counts wrong), per-class recall, the
  confusion matrix, and the failures by reason. The reference: a BERT NLI model with distant
  supervision scored 77.8% on the test split (PhysioNet page).
- **ReXVal** (Yu et al. 2023; ``50_samples_gt_and_candidates.csv`` and
  ``6_valid_raters_per_rater_error_categories.csv``): the judge counts the errors of each of the
  200 candidate reports against its ground-truth report in ReXVal's six categories (prompt
  ``data/rexval_prompt.yaml``); the radiologists' count per (study, candidate) is the sum over
  categories of ``num_errors`` per rater, averaged over the raters (optionally only the clinically
  significant ones), as the dataset's official use describes. Reported: Kendall's tau-b
  (scipy) between the two, with a percentile bootstrap interval over (study, candidate) pairs.

Both run against any OpenAI-compatible server through the judge's own client and cache.
"""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from radvqa.quality.judge import CriteriaJudge, JudgePrompt, load_prompt

NLI_LABELS = ("entailment", "neutral", "contradiction")
ENTAILMENT_TO_NLI = {"aligned": "entailment", "contradicting": "contradiction", "misleading": "contradiction",
                     "not_inferable": "neutral"}
CANDIDATES = ("radgraph", "bertscore", "s_emb", "bleu")


class ValidationError(ValueError):
    """Input files that cannot be used."""


# -- RadNLI ----------------------------------------------------------------------------------------


def read_radnli(path: str | Path) -> list[dict[str, str]]:
    pairs = []
    p = Path(path)
    try:
        lines = p.read_text("utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ValidationError(f"{p}: cannot read ({e})") from e
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValidationError(f"{p}:{n}: not JSON ({e.msg})") from e
        if not isinstance(rec, dict) or rec.get("gold_label") not in NLI_LABELS or not all(
                isinstance(rec.get(k), str) and rec[k].strip() for k in ("sentence1", "sentence2")):
            raise ValidationError(f"{p}:{n}: needs sentence1, sentence2 and gold_label in {NLI_LABELS}")
        pairs.append({"pair_id": str(rec.get("pair_id", n)), "premise": rec["sentence1"], "hypothesis": rec["sentence2"],
                      "gold": rec["gold_label"]})
    if not pairs:
        raise ValidationError(f"{p}: no pairs")
    return pairs


def radnli_user(prompt: JudgePrompt, premise: str, hypothesis: str) -> str:
    return prompt.user.format(report=f"[[{premise}]]", prior="", cited=premise,
                              question="What does the report say?", answer=hypothesis)


def validate_radnli(judge: CriteriaJudge, pairs: list[dict[str, str]]) -> dict[str, Any]:
    from concurrent.futures import ThreadPoolExecutor

    prompt = judge.prompt
    if "entailment" not in prompt.criteria:
        raise ValidationError("the judge prompt has no 'entailment' criterion")
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda p: judge.judge(radnli_user(prompt, p["premise"], p["hypothesis"])), pairs))
    confusion: Counter[tuple[str, str]] = Counter()
    failed: Counter[str] = Counter()
    for p, r in zip(pairs, results):
        if r.verdicts is None:
            failed[(r.error or "failed").split(":")[0]] += 1
            continue
        confusion[(p["gold"], ENTAILMENT_TO_NLI[r.verdicts["entailment"]])] += 1
    judged = sum(confusion.values())
    right = sum(n for (g, pr), n in confusion.items() if g == pr)
    recall = {}
    for lab in NLI_LABELS:
        n = sum(v for (g, _), v in confusion.items() if g == lab)
        recall[lab] = {"n": n, "recall": confusion[(lab, lab)] / n if n else None}
    return {
        "pairs": len(pairs),
        "judged": judged,
        "unjudged": len(pairs) - judged,
        "unjudged_reasons": dict(failed),
        "accuracy_over_judged": right / judged if judged else None,
        "accuracy_over_all": right / len(pairs),
        "per_class_recall": recall,
        "confusion": {f"gold {g} / judge {pr}": n for (g, pr), n in sorted(confusion.items())},
        "mapping": ENTAILMENT_TO_NLI,
        "reference": "BERT NLI with distant supervision: 77.8% on RadNLI test (PhysioNet page)",
    }


# -- ReXVal ----------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def rexval_prompt() -> JudgePrompt:
    data = yaml.safe_load(resources.files("radvqa.quality").joinpath("data/rexval_prompt.yaml").read_text("utf-8"))
    counts = [str(c) for c in data["counts"]]
    # the criteria machinery wants a grade per verdict; counts grade nothing, so every count maps
    # to the top grade and only the verdicts themselves are read
    crit = {c: {v: "A++" for v in counts} for c in data["categories"]}
    return JudgePrompt(str(data["version"]), str(data["system"]), str(data["user"]), crit, dict(data["categories"]))


def _count(v: str) -> int:
    """"4+" -> 4 (verdicts are normalised by the judge: "4+" stays "4+")."""
    return int(v.rstrip("+"))


@dataclass
class RexvalItem:
    study: int
    candidate: str
    gt: str
    text: str
    raters: float  # mean over raters of the summed error counts


def read_rexval(path: str | Path, significant_only: bool = False) -> list[RexvalItem]:
    root = Path(path)
    files = [root] if root.is_file() else sorted(root.glob("*.csv"))
    reports = errors = None
    for f in files:
        with open(f, encoding="utf-8-sig", newline="") as fh:
            head = next(csv.reader(fh), [])
        cols = {c.strip() for c in head}
        if {"study_id", "gt_report"} <= cols and set(CANDIDATES) <= cols:
            reports = f
        elif {"study_number", "candidate_type", "num_errors"} <= cols:
            errors = f
    if reports is None or errors is None:
        raise ValidationError(f"{root}: needs the candidates table (study_id, gt_report, {', '.join(CANDIDATES)}) "
                              "and the error table (study_number, candidate_type, rater_index, error_category, "
                              "clinically_significant, num_errors)")
    with open(reports, encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.DictReader(fh))
    per_rater: dict[tuple[int, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    raters: set[str] = set()
    with open(errors, encoding="utf-8-sig", newline="") as fh:
        for n, r in enumerate(csv.DictReader(fh), 2):
            try:
                key = (int(r["study_number"]), r["candidate_type"].strip())
                k = float(r["num_errors"])
            except (ValueError, TypeError, KeyError) as e:
                raise ValidationError(f"{errors}:{n}: bad row ({e})") from e
            if key[1] not in CANDIDATES or not 0 <= key[0] < len(rows):
                raise ValidationError(f"{errors}:{n}: unknown study_number {key[0]} or candidate_type {key[1]!r}")
            rater = str(r.get("rater_index", "")).strip()
            raters.add(rater)
            sig = str(r.get("clinically_significant", "")).strip().lower() in ("true", "1", "yes")
            if not significant_only or sig:
                per_rater[key][rater] += k
    n_raters = len(raters) or 1
    items = []
    for i, row in enumerate(rows):
        for c in CANDIDATES:
            counts = per_rater.get((i, c), {})
            items.append(RexvalItem(i, c, row["gt_report"], row[c], sum(counts.values()) / n_raters))
    return items


def kendall_with_ci(x: list[float], y: list[float], boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    import numpy as np
    from scipy.stats import kendalltau

    tau = kendalltau(x, y).statistic
    rng = np.random.default_rng(seed)
    xs, ys = np.asarray(x, float), np.asarray(y, float)
    vals = []
    for _ in range(boot):
        idx = rng.integers(0, len(xs), len(xs))
        t = kendalltau(xs[idx], ys[idx]).statistic
        if t == t:  # NaN when a resample is constant
            vals.append(t)
    lo, hi = (float(np.percentile(vals, 2.5)), float(np.percentile(vals, 97.5))) if vals else (None, None)
    return {"tau_b": None if tau != tau else float(tau), "ci95": [lo, hi], "bootstrap": boot, "seed": seed, "n": len(xs)}


def validate_rexval(judge: CriteriaJudge, items: list[RexvalItem], boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    from concurrent.futures import ThreadPoolExecutor

    prompt = judge.prompt
    users = [prompt.user.format(reference=it.gt, candidate=it.text) for it in items]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(judge.judge, users))
    xs, ys = [], []
    failed: Counter[str] = Counter()
    for it, r in zip(items, results):
        if r.verdicts is None:
            failed[(r.error or "failed").split(":")[0]] += 1
            continue
        xs.append(float(sum(_count(v) for v in r.verdicts.values())))
        ys.append(it.raters)
    out = {"pairs": len(items), "judged": len(xs), "unjudged": len(items) - len(xs), "unjudged_reasons": dict(failed),
           "note": "judge total errors vs radiologists' mean total errors per (study, candidate); Kendall tau-b"}
    out.update(kendall_with_ci(xs, ys, boot, seed) if len(xs) >= 2 else {"tau_b": None, "ci95": [None, None], "n": len(xs)})
    return out


def make_judge(base_url: str, model: str, kind: str, cache_dir: str | Path | None = None, **kw: Any) -> CriteriaJudge:
    prompt = load_prompt() if kind == "radnli" else rexval_prompt()
    return CriteriaJudge(base_url, model, cache_dir=cache_dir, prompt=prompt, **kw)
