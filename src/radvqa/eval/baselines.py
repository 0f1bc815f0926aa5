"""Baselines that never see the image: majority answer per template, a bag-of-words
question-only classifier (multinomial naive Bayes, numpy only), the answer prior, and
random guessing. They write the predictions format, so ``radvqa eval`` scores them like
any model; the eval report's shortcut audit compares a model with the text-only one per
question type (a dataset whose questions give their answers away shows up there).

Training rows are those of ``train_split``; a model is fitted per answer kind (yes/no,
choice, count, short, open) and only predicts answers of the row's own kind.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from radvqa.eval.scoring import Scorer

METHODS = ("majority", "bow", "prior", "random")
_TOK = re.compile(r"[a-z0-9]+")
MAX_CLASSES = 500  # per answer kind: rarer answers are never predicted by the bow model


class BaselineError(ValueError):
    pass


def _target(row: dict[str, Any], kind: str) -> str:
    if kind in ("yes_no", "choice", "count", "short"):
        return str(row["answer_short"]).strip().lower() if kind != "choice" else str(row["answer_short"]).strip()
    return str(row["answer"]).strip()


def _rows(rows: dict[str, list[Any]], i: int) -> dict[str, Any]:
    return {c: rows[c][i] for c in rows}


def split_indices(rows: dict[str, list[Any]], train_split: str, eval_split: str | None) -> tuple[list[int], list[int]]:
    splits = rows["split"]
    train = [i for i, s in enumerate(splits) if s == train_split]
    if eval_split is None and "test" in set(splits) and train_split != "test":
        eval_split = "test"  # the default predicts the test split only (eval then scores only it)
    if eval_split is None:
        ev = [i for i, s in enumerate(splits) if s != train_split]
    else:
        ev = [i for i, s in enumerate(splits) if s == eval_split]
    if not train:
        raise BaselineError(f"no rows of the training split {train_split!r} (splits present: {sorted(set(splits))})")
    if not ev:
        raise BaselineError(f"no rows to predict (split {eval_split or 'not ' + train_split!r})")
    return train, ev


class _NB:
    """Multinomial naive Bayes over question tokens (Laplace smoothing alpha=1)."""

    def __init__(self, docs: list[list[str]], labels: list[str]) -> None:
        keep = [c for c, _ in Counter(labels).most_common(MAX_CLASSES)]
        self.classes = keep
        cidx = {c: k for k, c in enumerate(keep)}
        vocab: dict[str, int] = {}
        for d in docs:
            for t in d:
                vocab.setdefault(t, len(vocab))
        self.vocab = vocab
        counts = np.ones((len(keep), len(vocab) + 1))  # +1: unknown-token column
        prior = np.zeros(len(keep))
        for d, y in zip(docs, labels):
            k = cidx.get(y)
            if k is None:
                continue
            prior[k] += 1
            for t in d:
                counts[k, vocab[t]] += 1
        self.log_prior = np.log(prior / prior.sum())
        self.log_lik = np.log(counts / counts.sum(axis=1, keepdims=True))

    def predict(self, docs: list[list[str]], allowed: list[np.ndarray | None]) -> list[str]:
        out = []
        unk = len(self.vocab)
        for d, mask in zip(docs, allowed):
            ids = [self.vocab.get(t, unk) for t in d]
            s = self.log_prior + (self.log_lik[:, ids].sum(axis=1) if ids else 0.0)
            if mask is not None:
                s = np.where(mask, s, -np.inf)
            out.append(self.classes[int(np.argmax(s))])
        return out


def run_baseline(
    rows: dict[str, list[Any]], method: str, train_split: str = "train", eval_split: str | None = None, seed: int = 0
) -> tuple[list[str], list[str], dict[str, Any]]:
    """Returns (qa_ids, predictions, info) for the rows to predict."""
    if method not in METHODS:
        raise BaselineError(f"unknown baseline {method!r}; expected one of {METHODS}")
    sc = Scorer("radvqa")
    train, ev = split_indices(rows, train_split, eval_split)
    kinds = [sc.kind_of(_rows(rows, i)) for i in range(len(rows["qa_id"]))]
    by_kind_train: dict[str, list[int]] = defaultdict(list)
    for i in train:
        by_kind_train[kinds[i]].append(i)
    priors = {k: Counter(_target(_rows(rows, i), k) for i in ix) for k, ix in by_kind_train.items()}
    fallback = {"yes_no": "no", "choice": "A", "count": "0", "short": "", "open": ""}

    def majority_of(k: str) -> str:
        c = priors.get(k)
        return min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] if c else fallback[k]

    preds: dict[int, str] = {}
    if method == "prior":
        for i in ev:
            preds[i] = majority_of(kinds[i])
    elif method == "random":
        rng = np.random.default_rng(seed)
        for i in ev:
            k = kinds[i]
            if k == "yes_no":
                opts = ["yes", "no"]
            elif k == "choice":
                opts = list("ABCDEFGHIJKLMNOPQRSTUVWXYZ"[: len(rows["choices"][i] or [])]) or ["A"]
            else:
                opts = sorted(priors.get(k, Counter()).keys()) or [fallback[k]]
            preds[i] = opts[int(rng.integers(0, len(opts)))]
    elif method == "majority":
        # most specific key seen in training wins: template, then question type, then kind
        table: dict[tuple[str, ...], Counter[str]] = defaultdict(Counter)
        for i in train:
            t = _target(_rows(rows, i), kinds[i])
            table[(kinds[i], rows["template_id"][i], rows["question_type"][i])][t] += 1
            table[(kinds[i], rows["question_type"][i])][t] += 1
        for i in ev:
            c = table.get((kinds[i], rows["template_id"][i], rows["question_type"][i])) or table.get((kinds[i], rows["question_type"][i]))
            # ties broken by the answer text so the output does not depend on row order
            preds[i] = min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] if c else majority_of(kinds[i])
    else:  # bow
        def doc(i: int) -> list[str]:
            text = rows["question"][i] + " " + " ".join(rows["choices"][i] or [])
            return _TOK.findall(text.lower())

        for k in sorted(set(kinds[i] for i in ev)):
            tr = by_kind_train.get(k, [])
            ev_k = [i for i in ev if kinds[i] == k]
            if not tr:
                for i in ev_k:
                    preds[i] = fallback[k]
                continue
            nb = _NB([doc(i) for i in tr], [_target(_rows(rows, i), k) for i in tr])
            allowed: list[np.ndarray | None] = []
            for i in ev_k:
                if k == "choice":
                    ok = set("ABCDEFGHIJKLMNOPQRSTUVWXYZ"[: len(rows["choices"][i] or [])])
                    allowed.append(np.array([c in ok for c in nb.classes]) if ok & set(nb.classes) else None)
                else:
                    allowed.append(None)
            for i, p in zip(ev_k, nb.predict([doc(i) for i in ev_k], allowed)):
                preds[i] = p
    info = {
        "method": method,
        "train_split": train_split,
        "train_rows": len(train),
        "predicted_rows": len(ev),
        "seed": seed if method == "random" else None,
    }
    ids = [rows["qa_id"][i] for i in ev]
    return ids, [preds[i] for i in ev], info


def write_predictions(path: str | Path, ids: list[str], preds: list[str], info: dict[str, Any]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for q, p in zip(ids, preds):
            fh.write(json.dumps({"qa_id": q, "prediction": p, "baseline": info["method"]}, ensure_ascii=False) + "\n")
    meta = Path(str(path) + ".meta.json")
    meta.write_text(json.dumps({"model": f"baseline:{info['method']}", **info}, indent=2, sort_keys=True) + "\n", "utf-8")
