"""``radvqa eval``: load, join, score, aggregate, audit, judge; returns the report dict."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Collection, Sequence

import numpy as np

from radvqa.eval.cells import CellAggregator, Cells, shortcut_audit
from radvqa.eval.dataset import ImageSizes, load_qa
from radvqa.eval.predictions import Prediction, join, load_predictions
from radvqa.eval.scoring import PROTOCOL_VERSIONS, Scorer, Scores
from radvqa.eval.vocab import load_vocab


class EvalError(ValueError):
    pass


def _subset(rows: dict[str, Any], idx: list[int]) -> dict[str, Any]:
    if len(idx) == len(rows["qa_id"]):
        return rows  # every row, in order
    return {k: (v.take(idx) if hasattr(v, "take") else [v[i] for i in idx]) for k, v in rows.items()}


def choose_split(rows: dict[str, list[Any]], pred_ids: Collection[str], split: str) -> tuple[list[int], str]:
    """Rows to evaluate. ``auto``: the splits that hold matched predictions, when that is not
    every split (VQA-RAD answer files cover the test split only: the 1,797 train questions
    are not "missing"); else all rows. ``all``: every row. Otherwise the named split."""
    splits = rows["split"]
    n = len(splits)
    if split == "all":
        return list(range(n)), "all rows (--split all)"
    if split != "auto":
        idx = [i for i, s in enumerate(splits) if s == split]
        if not idx:
            raise EvalError(f"no rows of split {split!r} (present: {sorted(set(splits))})")
        return idx, f"split {split} (--split {split})"
    ids = rows["qa_id"]
    hit = [i for i in range(n) if ids[i] in pred_ids]
    if len(hit) < min(n, len(pred_ids)):
        native = [q.split(":", 1)[1] if ":" in q else q for q in ids]
        hit = [i for i in range(n) if ids[i] in pred_ids or native[i] in pred_ids]
    hit_splits = {splits[i] for i in hit}
    if hit_splits and hit_splits != set(splits):
        names = ", ".join(sorted(hit_splits))
        return [i for i in range(n) if splits[i] in hit_splits], f"split {names} (auto: the splits holding the matched predictions)"
    return list(range(n)), "all rows (auto)"


def _audit_agg(rows: dict[str, Any], scores: Scores) -> CellAggregator:
    """A baseline's cells: overall and per question type, no intervals."""
    return CellAggregator(Cells.of(rows, scores, np.arange(len(rows["qa_id"]), dtype=np.int64), full=False), B=0)


def chance_levels(rows: dict[str, list[Any]], scores: Scores) -> np.ndarray:
    """Expected accuracy of a uniform guess per row: 1/2 for yes/no, 1/k for k options; NaN
    where no finite answer set exists (counts, short and open answers)."""
    out = np.full(len(scores.kind), np.nan)
    sc = Scorer("radvqa")
    choices = rows.get("choices") or [None] * len(out)
    for i in range(len(out)):
        kind = sc.kind_of({"answer_short": rows["answer_short"][i], "choices": choices[i],
                           "question_type": rows["question_type"][i]})
        if kind == "yes_no":
            out[i] = 0.5
        elif kind == "choice" and choices[i]:
            out[i] = 1.0 / len(choices[i])
    return out


_BASE_COLUMNS = ("qa_id", "split", "question", "choices", "answer_short", "answer", "question_type", "template_id")


def _training_rows(dataset: str | Path, all_rows: dict[str, Any], rows: dict[str, Any]) -> tuple[dict[str, list[Any]] | None, str]:
    """Rows for the text-only baselines: the train rows (the dataset's own train split when the
    evaluated rows hold none of it; else, for a subset without one, the train split of the parent
    build its manifest names) followed by the evaluated rows, marked split "__eval__"."""
    train_idx = [i for i, s in enumerate(all_rows["split"]) if s == "train"]
    src: dict[str, Any] | None = None
    desc = ""
    if train_idx and all(s != "train" for s in rows["split"]):
        src, desc = all_rows, "train split"
    elif not train_idx:
        import json

        try:
            m = json.loads((Path(dataset) / "manifest.json").read_text("utf-8"))
        except (OSError, ValueError):
            m = {}
        parent = ((m.get("subset") or {}).get("parent") or {}).get("path")
        if parent and (Path(parent) / "qa").is_dir():
            src = load_qa(parent, columns=_BASE_COLUMNS)
            train_idx = [i for i, s in enumerate(src["split"]) if s == "train"]
            desc = f"parent build's train split ({parent})"
    if src is None or not train_idx:
        return None, ""
    out: dict[str, list[Any]] = {}
    for c in _BASE_COLUMNS:
        col_t, col_e = src.get(c), rows.get(c)
        out[c] = ([col_t[i] for i in train_idx] if col_t is not None else [None] * len(train_idx)) + (
            list(col_e) if col_e is not None else [None] * len(rows["qa_id"]))
    out["split"] = ["train"] * len(train_idx) + ["__eval__"] * len(rows["qa_id"])
    out["qa_id"] = [f"t{i}" for i in range(len(train_idx))] + [f"e{i}" for i in range(len(rows["qa_id"]))]
    out["_n_train"] = len(train_idx)  # type: ignore[assignment]
    return out, desc


def _baseline_preds(train_rows: dict[str, Any], rows: dict[str, Any], method: str) -> list[Prediction | None]:
    from radvqa.eval.baselines import run_baseline

    cols = {k: v for k, v in train_rows.items() if not k.startswith("_")}
    ids, texts, _info = run_baseline(cols, method, train_split="train", eval_split="__eval__")
    bm = dict(zip(ids, texts))
    return [Prediction(bm[f"e{i}"]) if f"e{i}" in bm else None for i in range(len(rows["qa_id"]))]


def aggregate_blocks(report: dict[str, Any], agg: Any) -> None:
    """The blocks both scorers (in memory and by partitions) take from their aggregator, in the
    report's key order: yes/no confusion, multiple choice, grounding, breakdowns."""
    yn = agg.yes_no_confusion()
    if yn:
        report["yes_no_confusion"] = yn
    circ = agg.circular()
    if circ:
        report["multiple_choice"] = circ
    grd = agg.grounding()
    if grd:
        report["grounding"] = grd
    report["breakdowns"] = agg.breakdowns()


LLAVA_NOTE = (
    "closed_accuracy: normalised gold found in normalised prediction, over every closed question. "
    "closed_accuracy_v1_script: what llava/eval/run_eval.py printed — a prediction with 'yes'/'no' "
    "(substrings) but not the gold left the denominator; one with neither scored 0 even if it held the gold."
)


def tag_scores(rows: dict[str, list[Any]], texts: list[str | None], scores: Scores) -> dict[str, Any] | None:
    """Tag-level F1 of findings and regions on multi-part answers; VinDr-style F1 on vindr
    rows. None (with a reason) when no row qualifies or the ontology cannot load."""
    return tag_block(tag_counts(rows, texts, scores))


def tag_counts(rows: dict[str, list[Any]], texts: Sequence[str | None], scores: Scores) -> dict[str, Any] | None:
    """The counts behind ``tag_scores`` (they add up over partitions of the rows): "multi":
    [questions, finding tp, fp, fn, region tp, fp, fn], "vindr": [questions, tp, fp, fn]."""
    from radvqa.eval.tags import default_matcher, gold_tags

    multi = [i for i, parts in enumerate(rows["answer_parts"]) if parts and len(parts) > 1]
    vindr = [i for i, s in enumerate(rows["strategy"]) if s == "vindr"]
    if not multi and not vindr:
        return None
    try:
        m = default_matcher()
    except Exception as e:  # the ontology is another area's data: report, do not crash eval
        return {"error": f"ontology unavailable, tag metrics skipped: {str(e).splitlines()[0][:200]}"}
    out: dict[str, Any] = {}
    if multi:
        ft = fp_ = fn = rt = rp = rn = 0
        for i in multi:
            gf, gr = gold_tags(rows["answer_parts"][i])
            pf, pr = m.tags(texts[i])
            ft += len(gf & pf); fp_ += len(pf - gf); fn += len(gf - pf)
            rt += len(gr & pr); rp += len(pr - gr); rn += len(gr - pr)
        out["multi"] = [len(multi), ft, fp_, fn, rt, rp, rn]
    if vindr:
        tp = fp_ = fn = 0
        for i in vindr:
            findings = set(rows["findings"][i] or [])
            if scores.kind[i] == "yes_no":
                gold = findings if (rows["answer_short"][i] or "").lower() == "yes" else set()
                pred = findings if scores.value[i] == "yes" else set()
            else:
                gold = findings if rows["polarity"][i] != "negative" else set()
                pred = m.tags(texts[i])[0]
            tp += len(gold & pred); fp_ += len(pred - gold); fn += len(gold - pred)
        out["vindr"] = [len(vindr), tp, fp_, fn]
    return out


def tag_block(c: dict[str, Any] | None) -> dict[str, Any] | None:
    from radvqa.eval.tags import prf_counts

    if c is None or "error" in c:
        return c
    out: dict[str, Any] = {}
    if "multi" in c:
        q, ft, fp_, fn, rt, rp, rn = c["multi"]
        out["multi_part"] = {"questions": q, "findings": prf_counts(ft, fp_, fn), "regions": prf_counts(rt, rp, rn)}
    if "vindr" in c:
        q, tp, fp_, fn = c["vindr"]
        out["vindr_f1"] = {
            "questions": q,
            "definition": "micro F1 over (question, finding) pairs: gold = the row's findings when the answer is positive; "
            "predicted = findings a yes answer affirms, or findings named (not negated) in the answer text",
            **prf_counts(tp, fp_, fn),
        }
    return out


def evaluate(
    dataset: str | Path,
    predictions: str | Path,
    protocol: str = "radvqa",
    id_field: str | None = None,
    text_field: str | None = None,
    split: str = "auto",
    box_format: str = "auto",
    bootstrap: int = 1000,
    seed: int = 0,
    judge: Any = None,
    baseline: str | Path | None = None,
    audit: bool = True,
    progress: Callable[[int, int], None] | None = None,
    partitions: int | None = None,
    workers: int = 1,
) -> dict[str, Any]:
    """The report of ``predictions`` scored on ``dataset``. ``partitions``: score the rows in
    that many hash partitions (eval.stream: memory bounded by a partition, ``workers``
    processes); None: in memory up to STREAM_ABOVE rows, by partitions of ~PART_ROWS above.
    Both ways give the same numbers."""
    import gc

    from radvqa.eval import stream

    # millions of small lists and tuples: the cyclic GC would rescan them again and again
    # (none of them form cycles), so it is paused for the run
    enabled = gc.isenabled()
    gc.disable()
    try:
        if partitions is None and os.environ.get("RADVQA_EVAL_PARTITIONS"):
            partitions = int(os.environ["RADVQA_EVAL_PARTITIONS"])  # run every evaluation by partitions (tests)
        if partitions is None and stream.dataset_rows(dataset) > stream.STREAM_ABOVE:
            partitions = 0  # auto: ~PART_ROWS rows a partition
        if partitions is not None:
            return stream.evaluate_stream(dataset, predictions, protocol, id_field, text_field, split, box_format, bootstrap, seed,
                                          judge, baseline, audit, progress, partitions, workers)
        return _evaluate(dataset, predictions, protocol, id_field, text_field, split, box_format, bootstrap, seed, judge, baseline, audit, progress)
    finally:
        if enabled:
            gc.enable()


def _evaluate(
    dataset: str | Path,
    predictions: str | Path,
    protocol: str,
    id_field: str | None,
    text_field: str | None,
    split: str,
    box_format: str,
    bootstrap: int,
    seed: int,
    judge: Any,
    baseline: str | Path | None,
    audit: bool,
    progress: Callable[[int, int], None] | None,
) -> dict[str, Any]:
    from radvqa import __version__

    t0 = time.perf_counter()
    all_rows = load_qa(dataset)
    preds = load_predictions(predictions, id_field, text_field)
    idx, split_rule = choose_split(all_rows, preds.by_id, split)  # a mapping: `in` and len() are all it needs
    rows = _subset(all_rows, idx)
    joined = join(rows["qa_id"], preds)
    if joined.matched == 0:
        raise EvalError(
            f"no prediction matches a question: ids like {next(iter(preds.by_id), None)!r} (field {preds.id_field!r}) "
            f"vs qa_id like {rows['qa_id'][0]!r}; use --id-field"
        )
    n_records = len(preds.by_id)
    if hasattr(preds.by_id, "drop_index"):
        # the joined rows point into the store by position: the id -> position table (a
        # million id strings, ~130 MB) is not needed any more
        preds.by_id.drop_index()
    t_load = time.perf_counter()
    scorer = Scorer(protocol, box_format=box_format, sizes=ImageSizes(dataset))
    scores = scorer.score(rows, joined.preds, progress)
    # from here on only the texts are read (tags, judge): let the predicted boxes go
    texts = joined.preds.texts() if hasattr(joined.preds, "texts") else [None if p is None else p.text for p in joined.preds]
    joined.preds = []
    if hasattr(preds.by_id, "extras"):
        preds.by_id.extras.clear()
    t_score = time.perf_counter()
    # the same mergeable cells the partitioned scorer adds up (one piece: every row)
    cells = Cells.of(rows, scores, np.arange(len(rows["qa_id"]), dtype=np.int64))
    agg = CellAggregator(cells, B=bootstrap, seed=seed)
    report: dict[str, Any] = {
        "radvqa_version": __version__,
        "protocol": protocol,
        "protocol_version": PROTOCOL_VERSIONS[protocol],
        "parser_version": scorer.parser.version,
        "parser_vocabulary_version": load_vocab()["version"],
        "dataset": str(dataset),
        "evaluated": {"rows": len(idx), "rule": split_rule, "dataset_rows": len(all_rows["qa_id"])},
        "predictions": {
            "path": str(predictions),
            "id_field": preds.id_field,
            "text_field": preds.text_field,
            "joined_by": joined.key,
            "records": n_records,
            "matched": joined.matched,
            "missing": len(joined.missing_ids),
            "missing_ids": joined.missing_ids[:50],
            "unmatched_records": len(joined.extra_ids),
            "unmatched_ids": joined.extra_ids[:50],
            "note": "questions without a prediction are scored as wrong and counted under 'missing'",
        },
        "bootstrap": {"resamples": bootstrap, "seed": seed, "normal_approximation_above": 20_000, "binary_scores": "binomial form (exact)"},
        "overall": agg.overall(),
        "parse_failures": agg.parse_failures(),
    }
    if protocol == "llava-med":
        report["llava_med"] = agg.llava_med()
    aggregate_blocks(report, agg)
    if protocol == "radvqa":
        tags = tag_scores(rows, texts, scores)
        if tags:
            report["tags"] = tags
        # Medical-Diff-VQA's open answers are scored as its authors scored them (captioning metrics)
        if any(rows["strategy"][i] == "medical-diff-vqa" for i, k in enumerate(scores.kind) if k == "open"):
            from radvqa.eval.caption import caption_block

            report["captioning"] = caption_block(rows, texts, scores.kind)
    # benchmark-specific blocks: probe pair consistency, CXReasonBench's staged scoring
    from radvqa.eval.cxreasonbench import cxreasonbench_block
    from radvqa.eval.pairs import pairs_block

    pb = pairs_block(dataset, rows, scores)
    if pb:
        report["probe_pairs"] = pb
    cb = cxreasonbench_block(dataset, rows, texts, scores, judge)
    if cb:
        report["cxreasonbench"] = cb
    if judge is not None:
        from radvqa.eval.judge import summarize

        open_idx = [i for i, k in enumerate(scores.kind) if k in ("open", "short")]
        verdicts = judge.judge_many([(rows["question"][i], rows["answer"][i], texts[i]) for i in open_idx])
        report["judge"] = summarize(verdicts, judge.version, judge.cfg.model)
        report["judge"]["requests_sent"] = judge.requests
    # shortcut audit: the same protocol applied to the answers of models that never see the
    # image (text-only bag-of-words, answer prior), with the chance level beside them
    if audit:
        base_preds: list[Prediction | None] | None = None
        name = None
        train_rows, train_desc = _training_rows(dataset, all_rows, rows)
        if baseline is not None:
            bp = load_predictions(baseline)
            base_preds = join(rows["qa_id"], bp).preds
            name = str(baseline)
        elif train_rows is not None:
            base_preds = _baseline_preds(train_rows, rows, "bow")
            name = f"text-only bag-of-words (trained on {train_rows['_n_train']} rows of the {train_desc})"
        if base_preds is not None:
            bscores = Scorer(protocol, box_format=box_format).score(rows, base_preds)
            prior_agg = None
            prior_name = None
            if train_rows is not None:
                pscores = Scorer(protocol, box_format=box_format).score(rows, _baseline_preds(train_rows, rows, "prior"))
                prior_agg = _audit_agg(rows, pscores)
                prior_name = f"answer prior: the most frequent answer of each answer kind in the {train_desc}"
            cells.add_chance(rows, chance_levels(rows, scores))
            report["shortcut_audit"] = shortcut_audit(agg, _audit_agg(rows, bscores), name or "baseline",
                                                      prior=prior_agg, prior_name=prior_name, chance=True)
        else:
            report["shortcut_audit"] = {"note": "no --baseline given and no train split outside the evaluated rows "
                                                "(nor a parent build with one)"}
    meta = Path(str(predictions) + ".meta.json")
    if meta.is_file():  # run metadata written by `radvqa predict` / `radvqa baseline`
        try:
            import json

            report["predictions"]["meta"] = json.loads(meta.read_text("utf-8"))
        except ValueError as e:
            report["predictions"]["meta"] = {"error": f"unreadable {meta.name}: {e}"}
    report["timings_s"] = {
        "load_and_join": round(t_load - t0, 3),
        "score": round(t_score - t_load, 3),
        "aggregate_and_extras": round(time.perf_counter() - t_score, 3),
    }
    report["_per_question"] = {"qa_id": rows["qa_id"], "scores": scores, "rows": rows}
    return report
