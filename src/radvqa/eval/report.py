"""Write an evaluation report: report.json (everything), metrics.json (headline numbers),
report.md and a self-contained report.html (tables + plots embedded as PNG data URLs; the
PNGs are also written beside them), and per_question.jsonl (one line per question: what was
extracted and how it scored), so any number can be traced to its questions."""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _ci(ci: list[float] | None) -> str:
    return "–" if not ci else f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def headline(rep: dict[str, Any]) -> dict[str, Any]:
    o = rep["overall"]
    h: dict[str, Any] = {
        "protocol": rep["protocol"],
        "protocol_version": rep["protocol_version"],
        "questions": o["n"],
        "missing_predictions": rep["predictions"]["missing"],
    }
    if "closed" in o:
        h.update({
            "closed_n": o["closed"]["n"],
            "closed_accuracy": o["closed"]["accuracy"],
            "closed_accuracy_ci95": o["closed"]["ci95"],
            "closed_unparsed": o["closed"]["unparsed"],
        })
    if "open" in o:
        h.update({"open_n": o["open"]["n"], "open_token_f1": o["open"]["token_f1"], "open_token_recall": o["open"]["token_recall"]})
    for k, v in (o.get("closed_by_polarity") or {}).items():
        h[f"closed_accuracy_{k}"] = v["accuracy"] if v else None
    if "llava_med" in rep:
        lm = rep["llava_med"]
        for k in ("closed_accuracy", "closed_n", "closed_accuracy_v1_script", "closed_n_v1_script", "open_recall", "open_n"):
            h[f"llava_med_{k}"] = lm[k]
    g = rep.get("grounding")
    if g and "all_questions" in g:
        for key in ("all_questions", "positive_questions", "parsed_answers"):
            b = g[key]
            h[f"iou_{key}_n"] = b["n"]
            h[f"mean_iou_{key}"] = b.get("mean_iou")
            h[f"iou_ge_0.5_{key}"] = b.get("iou_ge_0.5")
    if "multiple_choice" in rep:
        h["mc_circular_accuracy"] = rep["multiple_choice"].get("circular_accuracy")
    if "probe_pairs" in rep:
        pp = rep["probe_pairs"]
        h.update({"probe_pairs": pp["pairs"], "probe_consistent_pairs": pp["consistent_pairs"],
                  "probe_pair_consistency": pp["rate"]})
    if "cxreasonbench" in rep and rep["cxreasonbench"].get("total"):
        t = rep["cxreasonbench"]["total"]
        h.update({"cxreasonbench_binary_adjusted_wilson": t["binary_adjusted_wilson"],
                  "cxreasonbench_stage_score": t["stage_score"]})
    if "judge" in rep:
        h["judge_score_over_judged"] = rep["judge"]["score_over_judged"]
        h["judge_unjudged"] = rep["judge"]["unjudged"]
    return h


# --- plots -------------------------------------------------------------------------------

def _plots(rep: dict[str, Any]) -> dict[str, bytes]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs: dict[str, bytes] = {}

    def save(name: str, fig: Any) -> None:
        buf = io.BytesIO()
        fig.tight_layout()
        # fixed metadata: the same report gives the same bytes
        fig.savefig(buf, format="png", dpi=90, metadata={"Software": None})
        plt.close(fig)
        figs[name] = buf.getvalue()

    qt = (rep.get("breakdowns") or {}).get("question_type") or {}
    items = [(k, v["closed"]) for k, v in qt.items() if isinstance(v, dict) and "closed" in v][:30]
    if items:
        fig, ax = plt.subplots(figsize=(8, 0.35 * len(items) + 1.2))
        names = [f"{k} (n={c['n']})" for k, c in items][::-1]
        acc = [100 * (c["accuracy"] or 0) for _, c in items][::-1]
        lo = [a - 100 * c["ci95"][0] if c["ci95"] else 0 for a, (_, c) in zip(acc, items[::-1])]
        hi = [100 * c["ci95"][1] - a if c["ci95"] else 0 for a, (_, c) in zip(acc, items[::-1])]
        ax.barh(names, acc, xerr=[lo, hi], color="#4c78a8", capsize=2)
        ax.set_xlim(0, 100)
        ax.set_xlabel("closed accuracy (%) with 95% CI")
        save("accuracy_by_question_type.png", fig)
    g = rep.get("grounding")
    if g and "iou_histogram_positive" in g:
        h = g["iou_histogram_positive"]
        fig, ax = plt.subplots(figsize=(6, 3))
        ax.bar([(a + b) / 2 for a, b in zip(h["edges"][:-1], h["edges"][1:])], h["counts"], width=0.09, color="#59a14f")
        ax.set_xlabel("IoU (questions with gold boxes)")
        ax.set_ylabel("questions")
        save("iou_histogram.png", fig)
    yn = rep.get("yes_no_confusion")
    if yn:
        cols = ["yes", "no", "unparsed", "missing"]
        fig, ax = plt.subplots(figsize=(5, 2.4))
        mat = [[yn[g][c] for c in cols] for g in ("yes", "no")]
        ax.imshow(mat, cmap="Blues")
        for r in range(2):
            for c in range(4):
                ax.text(c, r, str(mat[r][c]), ha="center", va="center")
        ax.set_xticks(range(4), [f"pred {c}" for c in cols])
        ax.set_yticks(range(2), ["gold yes", "gold no"])
        save("yes_no_confusion.png", fig)
    pf = rep.get("parse_failures") or {}
    if pf:
        fig, ax = plt.subplots(figsize=(6, 2.6))
        ks = list(pf)
        ax.bar(ks, [pf[k]["unparsed"] for k in ks], label="unparsed", color="#e15759")
        ax.bar(ks, [pf[k]["missing"] for k in ks], bottom=[pf[k]["unparsed"] for k in ks], label="missing", color="#bab0ac")
        ax.set_ylabel("questions")
        ax.legend()
        save("parse_failures.png", fig)
    return figs


# --- markdown ----------------------------------------------------------------------------

def _cell(c: Any) -> str:
    """A table cell from data (split names, categories come from the dataset): HTML escaped, so a
    value such as ``<img onerror=...>`` is text wherever the markdown is rendered; ``|`` escaped so
    it cannot open a column."""
    return html.escape(str(c), quote=False).replace("|", "\\|")


def _table(header: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _mc_table(mc: dict[str, Any]) -> str:
    """The circular-evaluation block as a table: single pass over every choice question,
    then circular accuracy over the groups with rotated copies (or why it does not apply)."""
    n = mc.get("questions", 0)
    single = mc.get("single_pass_accuracy")
    rows: list[list[Any]] = [["single pass (every choice question)", n, _pct(single), "-"]]
    groups = mc.get("groups_with_rotations", 0)
    if groups:
        rot = ", ".join(f"{k} rotations: {v}" for k, v in sorted(mc.get("rotations_per_group", {}).items(), key=lambda kv: int(kv[0])))
        rows.append([f"circular (groups with rotations; {rot})", groups, _pct(mc.get("circular_accuracy")), _ci(mc.get("ci95"))])
    else:
        rows.append(["circular", 0, "n/a", "-"])
    table = _table(["metric", "n", "accuracy", "95% CI"], rows)
    if mc.get("note"):
        table += f"\n\n{mc['note']}."
    return table


def caption_table(cap: dict[str, Any]) -> str:
    """BLEU-1..4, METEOR, ROUGE-L (x100) and CIDEr, overall and per question type, with n."""
    keys = ("bleu_1", "bleu_2", "bleu_3", "bleu_4", "meteor", "rouge_l", "cider")

    def row(name: str, c: dict[str, Any]) -> list[Any]:
        if "error" in c:
            return [name, c.get("n", "")] + [c["error"]] + [""] * (len(keys) - 1)
        return [name, c.get("n", 0)] + ["n/a" if c.get(k) is None else (f"{c[k]:.3f}" if k == "cider" else f"{100 * c[k]:.2f}") for k in keys]

    rows = [row("all open", cap["overall"])] + [row(t, c) for t, c in cap["by_question_type"].items()]
    note = cap["overall"].get("meteor_note")
    return cap["metrics"] + ("; " + note if note else "") + ".\n\n" + _table(
        ["questions", "n", "BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr"], rows)


def probe_table(pp: dict[str, Any]) -> str:
    def row(name: str, b: dict[str, Any]) -> list[Any]:
        return [name, b["pairs"], b["consistent_pairs"], _pct(b["rate"]), _ci(b["ci95_wilson"]), _pct(b["question_accuracy"])]

    rows = [row("all pairs", pp)] + [row(k, b) for k, b in pp["by_kind"].items()]
    return (_table(["pairs", "n", "both right", "consistency %", "95% CI (Wilson)", "question accuracy %"], rows)
            + f"\n\nA pair counts only when both questions are answered right. Incomplete pairs (one row not evaluated): "
            f"{pp['incomplete_pairs']}.")


def cxreasonbench_table(cb: dict[str, Any]) -> str:
    stages = ("criteria", "bodypart", "measurement", "final", "binary", "consistency")
    rows = []
    for name, t in cb["tasks"].items():
        st = t.get("stages") or {}
        cells = [(f"{_pct(b['naive'])} / {_pct(b['adjusted_wilson'])} ({b['correct']}/{b['trials']})" if b else "–")
                 for b in (st.get(k) for k in stages)]
        rows.append([name, t["cases"], t["idk_init"], *cells,
                     "–" if t.get("stage_score") is None else f"{t['stage_score']:.2f}"])
    for group in ("total", "perception", "measurement"):
        g = cb.get(group)
        if g:
            rows.append([f"**{group}** (mean of {g['tasks']} task{'s' if g['tasks'] != 1 else ''})", "", "",
                         *[f"{_pct(g[f'{k}_naive'])} / {_pct(g[f'{k}_adjusted_wilson'])}" for k in stages],
                         "–" if g["stage_score"] is None else f"{g['stage_score']:.2f}"])
    note = (f"\n\nEach cell: naive % / Wilson-adjusted % (passed/reached). {cb['definition']}. "
            f"{cb['cases']} cases, {cb['turns']} turns, {cb['open_turns']} judged turns "
            f"({cb['open_turns_unjudged']} without a verdict{': ' + cb['open_note'] if cb['open_note'] else ''}).")
    return _table(["task", "cases", "IDK at init", *stages, "stage score (0-4)"], rows) + note


def markdown(rep: dict[str, Any], plots: list[str]) -> str:
    p = rep["predictions"]
    o = rep["overall"]
    md = [
        f"# radvqa evaluation — protocol `{rep['protocol']}` v{rep['protocol_version']}",
        "",
        f"- dataset: `{rep['dataset']}` — evaluated {rep['evaluated']['rows']} of {rep['evaluated']['dataset_rows']} questions ({_cell(rep['evaluated']['rule'])})",
        f"- predictions: `{p['path']}` (id field `{p['id_field']}`, text field `{p['text_field']}`, joined by {p['joined_by']}): "
        f"{p['matched']} matched, **{p['missing']} missing (scored wrong)**, {p['unmatched_records']} records matching no evaluated question",
        f"- parser vocabulary v{rep['parser_vocabulary_version']}; 95% CIs: bootstrap, {rep['bootstrap']['resamples']} resamples, seed {rep['bootstrap']['seed']}",
        "",
        "## Overall",
        "",
    ]
    rows = []
    # models that never see the image, beside the model's closed accuracy (shortcut audit)
    base = (rep.get("shortcut_audit") or {}).get("overall_closed")
    blank = ["", "", ""] if base else []
    if "closed" in o:
        c = o["closed"]
        bcols = [_pct(base["text_only"]), _pct(base["prior"]), _pct(base["chance"])] if base else []
        rows.append(["closed accuracy", _pct(c["accuracy"]), _ci(c["ci95"]), *bcols, f"{c['correct']} / {c['n']}", f"unparsed {c['unparsed']}, missing {c['missing']}"])
    for k, c in (o.get("closed_by_polarity") or {}).items():
        if c:
            rows.append([f"closed accuracy, {k} phrasing", _pct(c["accuracy"]), _ci(c["ci95"]), *blank, f"{c['correct']} / {c['n']}", ""])
    if "open" in o:
        c = o["open"]
        rows.append(["open token F1", _pct(c["token_f1"]), _ci(c["ci95"]), *blank, f"n = {c['n']}", f"P {_pct(c['token_precision'])}, R {_pct(c['token_recall'])}, exact {_pct(c['exact_match'])}"])
    bhead = ["text-only %", "prior %", "chance %"] if base else []
    md.append(_table(["metric", "%", "95% CI", *bhead, "count", "notes"], rows))
    if base:
        sa = rep["shortcut_audit"]
        md += ["", f"Text-only: {sa['baseline']}. Prior: {sa.get('prior_baseline') or '–'}. Chance: a uniform guess "
               f"(1/2 yes/no, 1/k of k options) over the {base['chance_rows']} closed questions with a finite answer set."]
    if "llava_med" in rep:
        lm = rep["llava_med"]
        md += ["", "## LLaVA-Med v1.0 scoring", "", _table(["figure", "%", "denominator"], [
            ["closed: gold in prediction (all closed questions)", _pct(lm["closed_accuracy"]), lm["closed_n"]],
            ["closed as the v1.0 script printed it", _pct(lm["closed_accuracy_v1_script"]), f"{lm['closed_n_v1_script']} ({lm['closed_dropped_by_v1_script']} dropped)"],
            ["open: token recall", _pct(lm["open_recall"]), lm["open_n"]],
            ["open: token F1", _pct(lm["open_f1"]), lm["open_n"]],
        ]), "", lm["note"]]
    if o.get("by_kind"):
        md += ["", "## By answer kind", ""]
        md.append(_table(["kind", "n", "closed acc", "95% CI", "open F1", "unparsed", "missing"], [
            [k, b["n"], _pct(b.get("closed", {}).get("accuracy")), _ci(b.get("closed", {}).get("ci95")),
             _pct(b.get("open", {}).get("token_f1")),
             b.get("closed", b.get("open", {})).get("unparsed", 0), b.get("closed", b.get("open", {})).get("missing", 0)]
            for k, b in o["by_kind"].items()
        ]))
    if "grounding" in rep and "all_questions" not in rep["grounding"]:
        md += ["", "## Grounding (IoU)", "", rep["grounding"]["note"]]
    elif "grounding" in rep:
        g = rep["grounding"]
        md += ["", "## Grounding (IoU)", "", f"Matching: {g['matching']}.", ""]
        md.append(_table(["denominator", "n", "mean IoU", "95% CI", "IoU ≥ 0.3", "IoU ≥ 0.5"], [
            [g[k]["denominator"], g[k]["n"], _pct(g[k].get("mean_iou")), _ci(g[k].get("ci95")), _pct(g[k].get("iou_ge_0.3")), _pct(g[k].get("iou_ge_0.5"))]
            for k in ("all_questions", "positive_questions", "parsed_answers")
        ]))
        md.append(f"\nNegative grounding questions: {g['negatives']['n']} ({g['negatives']['no_box_predicted']} with no box predicted). "
                  f"Positive questions without any gold box (no IoU): {g['ungroundable']['n']}. "
                  f"Positive questions without a predicted box: {g['positives_without_predicted_box']}. Box read errors: {g['box_read_errors'] or 'none'}.")
    if "multiple_choice" in rep:
        mc = rep["multiple_choice"]
        md += ["", "## Multiple choice", "", _mc_table(mc)]
    if "yes_no_confusion" in rep:
        yn = rep["yes_no_confusion"]
        md += ["", "## Yes/no confusion", "", _table(["gold \\ predicted", "yes", "no", "unparsed", "missing"], [[f"gold {g}"] + [yn[g][c] for c in ("yes", "no", "unparsed", "missing")] for g in ("yes", "no")])]
    md += ["", "## Parse failures", "", _table(["kind", "questions", "unparsed", "missing", "reasons"], [
        [k, v["n"], v["unparsed"], v["missing"], "; ".join(f"{r}: {c}" for r, c in list(v["reasons"].items())[:6])]
        for k, v in rep["parse_failures"].items()
    ])]
    if "tags" in rep:
        t = rep["tags"]
        rows = []
        mp = t.get("multi_part") or {}
        for kind in ("findings", "regions"):
            if kind in mp:
                c = mp[kind]
                rows.append([f"{kind} tags (multi-part answers)", mp.get("questions", ""), _pct(c["precision"]), _pct(c["recall"]), _pct(c["f1"]), f"{c['tp']} / {c['fp']} / {c['fn']}"])
        vf = t.get("vindr_f1")
        if vf:
            rows.append(["VinDr-style F1", vf["questions"], _pct(vf["precision"]), _pct(vf["recall"]), _pct(vf["f1"]), f"{vf['tp']} / {vf['fp']} / {vf['fn']}"])
        md += ["", "## Tags", "", _table(["what", "questions", "P", "R", "F1", "tp / fp / fn"], rows)]
        if vf:
            md += ["", f"VinDr-style F1: {vf['definition']}."]
    if "captioning" in rep:
        md += ["", "## Captioning metrics (open answers)", "", caption_table(rep["captioning"])]
    if "probe_pairs" in rep:
        md += ["", "## Probe pairs (negation / side)", "", probe_table(rep["probe_pairs"])]
    if "cxreasonbench" in rep:
        md += ["", "## CXReasonBench (stage-conditional)", "", cxreasonbench_table(rep["cxreasonbench"])]
    if "judge" in rep:
        j = rep["judge"]
        md += ["", "## Judge", "", f"model `{j['model']}`, prompt v{j['prompt_version']}, temperature 0: {j['judged']} judged, "
               f"**{j['unjudged']} unjudged** ({j['unjudged_reasons'] or 'none'}); score over judged {_pct(j['score_over_judged'])}, "
               f"over all (unjudged = 0) {_pct(j['score_over_all'])}; verdicts {j['verdicts']}"]
    sa = rep.get("shortcut_audit")
    if sa and "by_question_type" in sa:
        md += ["", "## Shortcut audit (model − text-only baseline)", "", f"Baseline: {sa['baseline']}. Overall closed gap: "
               f"{'–' if sa['overall_closed_gap_pp'] is None else format(sa['overall_closed_gap_pp'], '+.1f')} pp.", ""]
        extra = "overall_closed" in sa
        md.append(_table(["question type", "metric", "n", "model %", "text-only %", *(["prior %", "chance %"] if extra else []), "gap (pp)"], [
            [r["question_type"], r["metric"], r["n"], _pct(r["model"]), _pct(r["text_only"]),
             *([_pct(r.get("prior")), _pct(r.get("chance"))] if extra else []),
             "–" if r["gap_pp"] is None else f"{r['gap_pp']:+.1f}"]
            for r in sa["by_question_type"]
        ]))
    for key, groups in (rep.get("breakdowns") or {}).items():
        if key == "kind":
            continue
        md += ["", f"## By {key}", ""]
        md.append(_table([key, "n", "closed n", "closed acc", "95% CI", "open n", "open F1"], [
            [name, b["n"], b.get("closed", {}).get("n", 0), _pct(b.get("closed", {}).get("accuracy")), _ci(b.get("closed", {}).get("ci95")),
             b.get("open", {}).get("n", 0), _pct(b.get("open", {}).get("token_f1"))]
            for name, b in groups.items() if not name.startswith("_")
        ]))
    if plots:
        md += ["", "## Plots", ""] + [f"![{n}]({n})" for n in plots]
    return "\n".join(md) + "\n"


def html_page(md_text: str, figs: dict[str, bytes], title: str) -> str:
    """The Markdown rendered by markdown-it-py (CommonMark + tables; raw HTML off, so text from
    datasets cannot inject markup), plots inlined as data URIs."""
    from markdown_it import MarkdownIt

    for name, data in figs.items():
        md_text = md_text.replace(f"]({name})", f"](data:image/png;base64,{base64.b64encode(data).decode()})")
    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(md_text)
    css = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
           "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
           "th{background:#f0f0f0}pre{background:#f7f7f7;padding:.5em;overflow:auto}code{background:#f3f3f3}")
    return f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>{css}</style></head><body>{body}</body></html>\n"


def write_report(rep: dict[str, Any], out: str | Path, plots: bool = True) -> dict[str, Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    per = rep.pop("_per_question", None)
    # timings change run to run: kept apart so report.json is byte-identical for the same input
    timings = rep.pop("timings_s", None)
    paths: dict[str, Path] = {}
    if timings is not None:
        (out / "timings.json").write_text(json.dumps(timings, indent=1) + "\n", "utf-8")
    (out / "report.json").write_text(json.dumps(rep, indent=1, sort_keys=False) + "\n", "utf-8")
    paths["report.json"] = out / "report.json"
    (out / "metrics.json").write_text(json.dumps(headline(rep), indent=1) + "\n", "utf-8")
    paths["metrics.json"] = out / "metrics.json"
    figs = _plots(rep) if plots else {}
    for name, data in figs.items():
        (out / name).write_bytes(data)
    md_text = markdown(rep, list(figs))
    (out / "report.md").write_text(md_text, "utf-8")
    (out / "report.html").write_text(html_page(md_text, figs, f"radvqa eval — {rep['protocol']}"), "utf-8")
    paths["report.md"] = out / "report.md"
    paths["report.html"] = out / "report.html"
    if per is not None:
        # streamed from the compact columns, a block of lines per write: no per-question
        # dicts are kept, whatever the number of questions
        with open(out / "per_question.jsonl", "w", encoding="utf-8") as fh:
            if hasattr(per, "write_jsonl"):  # a streamed evaluation: its partitions' files, merged in row order
                per.write_jsonl(fh)
            else:
                s = per["scores"]
                cols = (per["qa_id"], s.kind, s.status, s.reason, s.value, s.correct, s.tok_f1, s.iou)
                buf: list[str] = []
                for q, kind, st, why, val, ok, f1, iou in zip(*cols):
                    buf.append(json.dumps({
                        "qa_id": q, "kind": kind, "status": st, "reason": why, "extracted": val,
                        "correct": ok, "token_f1": f1, "iou": iou,
                    }, ensure_ascii=False))
                    if len(buf) >= 8192:
                        fh.write("\n".join(buf) + "\n")
                        buf.clear()
                if buf:
                    fh.write("\n".join(buf) + "\n")
        paths["per_question.jsonl"] = out / "per_question.jsonl"
        rep["_per_question"] = per
    if timings is not None:
        rep["timings_s"] = timings
    return paths
