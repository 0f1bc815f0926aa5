"""The dataset card ``OUT/README.md``: a Hugging Face YAML header (``configs`` / ``data_files`` so
``datasets.load_dataset(OUT)`` finds both tables), statistics from the manifest, example rows, and
a PNG plot beside it.

Note on ``load_dataset("parquet", data_dir=...)``: the generic parquet loader ignores the card and
globs every Parquet file under ``data_dir``; point it at ``OUT/qa`` (or ``OUT/scene_graphs``), since
the two tables have different columns.
"""

from __future__ import annotations

import html

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import yaml

from radvqa.io.atomic import write_atomic
from radvqa.io.parquet import shard_files

PLOT = "qa_stats.png"


def _size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                        (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M")):
        if n < limit:
            return name
    return "100M<n<1B"


def _table(title: str, counts: dict[str, int], total: int | None = None, unit: str = "rows") -> str:
    if not counts:
        return f"**{title}**: none\n"
    total = total if total is not None else sum(counts.values())
    lines = [f"| {title} | {unit} | share |", "|---|---:|---:|"]
    for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        share = f"{100.0 * v / total:.1f}%" if total else "-"
        # k comes from the data (a split value, a question type): escaped so HTML in it stays text
        lines.append(f"| {html.escape(str(k), quote=False).replace('|', chr(92) + '|')} | {v:,} | {share} |")
    return "\n".join(lines) + "\n"


def preload() -> None:
    """Import matplotlib (Agg) and pyplot ahead of ``write_plot``: ~0.5 s on the 16-core device,
    which a many-worker build spends in a thread of its otherwise idle parent while the workers
    build shards, instead of in the serial finish."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401


def write_plot(out: Path, counts: dict[str, Any]) -> Path | None:
    """Bar charts of QA rows by question type, strategy and grade (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_type = counts.get("qa_by_question_type", {})
    if not by_type:
        return None
    fig, axes = plt.subplots(1, 3, figsize=(15, max(4.0, 0.22 * len(by_type) + 1.5)),
                             gridspec_kw={"width_ratios": [3, 1, 1]})
    items = sorted(by_type.items(), key=lambda kv: kv[1])
    axes[0].barh([k for k, _ in items], [v for _, v in items], color="#4c72b0")
    axes[0].set_title("QA rows by question type")
    axes[0].tick_params(axis="y", labelsize=7)
    strat = counts.get("qa_by_strategy", {})
    axes[1].bar(list(strat), list(strat.values()), color="#55a868")
    axes[1].set_title("by strategy")
    grades = counts.get("grades", {})
    order = [g for g in ("A++", "A+", "A", "B", "C", "D", "ungraded") if g in grades] + sorted(
        g for g in grades if g not in ("A++", "A+", "A", "B", "C", "D", "ungraded"))
    axes[2].bar(order, [grades[g] for g in order], color="#c44e52")
    axes[2].set_title("by grade")
    fig.tight_layout()
    path = out / PLOT
    fig.savefig(path, dpi=80, metadata={"Software": None})
    plt.close(fig)
    return path


def _examples(out: Path, n: int = 5) -> list[dict[str, Any]]:
    files = shard_files(out, "qa")
    if not files:
        return []
    pf = pq.ParquetFile(files[0])
    if pf.metadata.num_rows == 0:
        return []
    cols = ["qa_id", "strategy", "question_type", "question", "answer", "grade"]
    batch = next(pf.iter_batches(batch_size=200, columns=cols))
    rows = batch.to_pylist()
    # spread the examples over question types rather than the first study's first rows
    seen: set[str] = set()
    picked = []
    for r in rows:
        if r["question_type"] not in seen:
            picked.append(r)
            seen.add(r["question_type"])
        if len(picked) >= n:
            break
    return picked


def _esc(s: str | None) -> str:
    return (s or "").replace("|", "\\|").replace("\n", " ")


def _tiers_section(grades: dict[str, int]) -> list[str]:
    """CXR-QBA's release tiers (rows of grade at least the tier's, ``quality/data/tiers.yaml``)."""
    if not grades:
        return []
    from radvqa.io.subset import load_tiers, tier_counts

    tiers = load_tiers()
    counts = tier_counts(grades, tiers)
    total = sum(int(v) for v in grades.values()) or 1
    lines = ["## Tiers", "", "Named subsets by grade (`radvqa subset DIR --tier NAME --out DIR2`):", "",
             "| tier | grades | rows | share |", "|---|---|---:|---:|"]
    for name, t in tiers.items():
        lines.append(f"| {name} | {t['min_grade']} or better | {counts[name]:,} | {100.0 * counts[name] / total:.1f}% |")
    return lines + [""]


def _subset_section(sub: dict[str, Any] | None) -> list[str]:
    if not sub:
        return []
    p = sub.get("parent", {})
    lines = ["## Subset", "",
             f"`{sub.get('name')}` subset (seed {sub.get('seed')}, splits {sub.get('splits')}) of the build "
             f"`{p.get('path')}` (source {p.get('source')}, seed {p.get('seed')}, {int(p.get('qa_rows') or 0):,} rows).", ""]
    if sub.get("closed_rows_kept_share") is not None:
        ys = sub.get("yes_share")
        ys_s = "-" if ys is None else f"{100.0 * ys:.1f}%"
        lines += [f"Closed rows kept: {sub['closed_rows_kept']:,} of the parent's {sub['parent_closed_rows_in_splits']:,} "
                  f"in these splits ({100.0 * sub['closed_rows_kept_share']:.1f}%); yes share "
                  f"{ys_s}; question types lost: "
                  f"{', '.join(sub.get('question_types_lost') or []) or 'none'}.", ""]
    if sub.get("cells"):
        lines += ["Cells: " + ", ".join(f"{k} {v:,}" for k, v in sub["cells"].items()) + ".", ""]
    if sub.get("rows_dropped_by_reason"):
        lines += [_table("rows left out, by reason", sub["rows_dropped_by_reason"]), ""]
    return lines


def _shortcut_section(out: Path, max_cells: int = 20) -> list[str]:
    """The shortcut audit (``radvqa audit shortcuts``) when ``shortcuts.json`` is beside the card."""
    import json

    p = out / "shortcuts.json"
    if not p.is_file():
        return []
    try:
        r = json.loads(p.read_text(encoding="utf-8"))
    except ValueError:
        return []

    def pct(x: Any) -> str:
        return "-" if x is None else f"{100.0 * x:.1f}%"

    lines = ["## Shortcut audit", "",
             f"Can a model answer without the image? Closed rows of {r['evaluated']} ({r['evaluated_rows']:,}); the "
             f"majority answers and the text-only bag-of-words model learned on the {r['trained_on']} "
             f"({r['train_rows']:,} rows). Flag: more than {r['flag_above_chance_pp']:.0f} points above chance, "
             f"beyond sampling noise (95% Wilson lower bound above chance; n >= {r['min_n']}).", "",
             "| answer kind | n | majority (template) | majority (exact question) | bag-of-words | chance |",
             "|---|---:|---:|---:|---:|---:|"]
    for k, s in r["by_kind"].items():
        lines.append(f"| {k} | {s['n']:,} | {pct(s['majority'])} | {pct(s.get('majority_by_text'))} | {pct(s['bow'])} | {pct(s['chance'])} |")
    lines += ["", "| question type | template | n | majority | bag-of-words | chance | flag |", "|---|---|---:|---:|---:|---:|---|"]
    for t in r["templates"]:
        lines.append(f"| {_esc(t['question_type'])} | {_esc(t['template_id'])} | {t['n']:,} | {pct(t['majority'])} | "
                     f"{pct(t['bow'])} | {pct(t['chance'])} | {'**flag**' if t['flag'] else ''} |")
    flagged = sorted((c for c in r["cells"] if c["flag"]), key=lambda c: (-c["n"], c["question"]))
    lines += ["", f"Flagged (question type x question) cells: {r['cells_flagged']:,} of {r['cells_with_min_n']:,} "
              f"with n >= {r['min_n']}" + (f"; the {min(max_cells, len(flagged))} largest:" if flagged else "."), ""]
    if flagged:
        lines += ["| question type | question | n | majority | bag-of-words | chance |", "|---|---|---:|---:|---:|---:|"]
        for c in flagged[:max_cells]:
            lines.append(f"| {_esc(c['question_type'])} | {_esc(c['question'])} | {c['n']:,} | {pct(c['majority'])} | "
                         f"{pct(c['bow'])} | {pct(c['chance'])} |")
    return lines + [""]


def render_card(out: Path, manifest: dict[str, Any], plot: Path | None) -> str:
    c = manifest["counts"]
    src = manifest.get("source", "?")
    meta = {
        "pretty_name": f"radvqa {src}",
        "license": "other",
        "language": ["en"],
        "task_categories": ["visual-question-answering"],
        "tags": ["medical", "radiology", "chest-x-ray", "grounding", "radvqa"],
        "size_categories": [_size_category(int(c.get("qa_rows", 0)))],
        "configs": [
            {"config_name": "qa", "default": True, "data_files": [{"split": "train", "path": "qa/part-*.parquet"}]},
            {"config_name": "scene_graphs", "data_files": [{"split": "train", "path": "scene_graphs/part-*.parquet"}]},
        ],
    }
    # through yaml.safe_dump: a source name with ':' or quotes stays valid YAML (#17)
    header = ["---", yaml.safe_dump(meta, sort_keys=False, allow_unicode=True).rstrip("\n"), "---", ""]
    opts = manifest.get("options", {})
    body = [
        f"# radvqa dataset: {src}",
        "",
        f"Built by `radvqa build` {manifest.get('radvqa_version', '')} (seed {manifest.get('seed')}, "
        f"strategies {', '.join(opts.get('strategies', []))}). Grounded radiology VQA rows generated "
        "from scene graphs (report observations, dataset labels, expert and region boxes).",
        "",
        "## Files",
        "",
        "- `qa/part-*.parquet`: one row per question (columns: see `radvqa.io.schema.qa_schema()`),",
        "  boxes in pixels of each image's stored file.",
        "- `scene_graphs/part-*.parquet`: one row per study (the scene graph the questions came from).",
        "- Image paths (`image_paths`, `images[].path`) are relative to the first folder of",
        "  `manifest.json`'s `image_roots` that holds the file (absolute only for a file under none of",
        "  them): resolve one by trying `root / path` for each root in order.",
        "- `manifest.json`: options, counts, timings. `rejected.jsonl`: every input record or stage",
        "  output not used, with the reason.",
        "",
        "Load it:",
        "",
        "```python",
        "import datasets, pandas as pd",
        f"qa = datasets.load_dataset(\"./{out.name}\")  # this card's configs: 'qa' (default), 'scene_graphs'",
        f"qa = datasets.load_dataset(\"parquet\", data_dir=\"{out.name}/qa\")",
        f"df = pd.read_parquet(\"{out.name}/qa\")",
        "```",
        "",
        "The Hugging Face split is named `train` for the whole table; the patient-level split of each",
        "row is the `split` column (no patient appears in two splits; `radvqa validate` checks it).",
        "",
        "## Statistics",
        "",
        "| count | value |",
        "|---|---:|",
    ]
    for k in ("studies_in", "studies_out", "studies_rejected", "patients", "scene_graphs", "qa_rows",
              "qa_rows_with_image", "qa_rows_without_image", "image_files", "images_without_file", "rejected_lines"):
        body.append(f"| {k} | {int(c.get(k, 0)):,} |")
    body.append("")
    from radvqa.io.stats import image_warning

    warn = image_warning(c)
    if warn:
        body += [f"> **Warning:** {warn}.", ""]
    qa_total = int(c.get("qa_rows", 0))
    body += [_table("strategy", c.get("qa_by_strategy", {}), qa_total), ""]
    body += [_table("question type", c.get("qa_by_question_type", {}), qa_total), ""]
    body += [_table("grade", c.get("grades", {}), qa_total), ""]
    body += [_table("split (QA rows)", c.get("qa_by_split", {}), qa_total), ""]
    body += [_table("split (studies)", c.get("studies_by_split", {})), ""]
    if c.get("rejects_by_stage"):
        body += [_table("rejects by stage", c["rejects_by_stage"]), ""]
    if c.get("findings_not_stated"):
        # label_only / unvouched: --label-only / --unvouched omit; never_stated: findings or
        # phrasings no template states (docs/generation.md)
        body += [_table("positive findings not stated (kept in scene_graphs/)", c["findings_not_stated"],
                        unit="findings"), ""]
    if c.get("normal_claims_blocked"):
        # round 11a: a sentence stating what the extractor read nothing positive from keeps
        # "normal" answers away from the study and the regions it names (docs/generation.md)
        body += [_table("studies with normal claims withheld", c["normal_claims_blocked"], unit="studies"), ""]
    if c.get("rows_withheld"):
        # list answers that would leave out a positive the report states (docs/generation.md)
        body += [_table("answers withheld (they would leave out a stated finding)", c["rows_withheld"],
                        unit="rows"), ""]
    body += _tiers_section(c.get("grades", {}))
    body += _subset_section(manifest.get("subset"))
    body += _shortcut_section(out)
    if plot is not None:
        body += [f"![QA rows by question type, strategy and grade]({plot.name})", ""]
    ex = _examples(out)
    audit = manifest.get("audit")
    if audit:
        verdict = "every must-be-0 count is 0" if audit.get("ok") else "FAILED: " + ", ".join(audit.get("failed", []))
        body += ["## Mechanical audit (`radvqa audit`)", "",
                 f"Defects a reader can see without the image, counted over {audit.get('rows', 0):,} rows: "
                 f"{verdict}.", "", *audit.get("table", []), ""]
    if ex:
        body += ["## Examples", "", "| question type | question | answer | grade |", "|---|---|---|---|"]
        for r in ex:
            body.append(f"| {_esc(r['question_type'])} | {_esc(r['question'])} | {_esc(r['answer'])} | {_esc(r['grade'])} |")
        body.append("")
    body += [
        "## Sources and licences",
        "",
        "Rows inherit the licence of the data they came from: OpenI / IU X-ray reports are CC BY-NC-ND",
        "4.0 (derived datasets stay local); NIH ChestX-ray14 has no restriction on use (cite Wang et al.,",
        "CVPR 2017). Check each source's terms before sharing a built dataset.",
        "",
    ]
    return "\n".join(header + body)


def write_card(out: Path, manifest: dict[str, Any]) -> Path:
    plot = write_plot(out, manifest["counts"])
    text = render_card(out, manifest, plot)
    p = out / "README.md"
    write_atomic(p, text)
    return p
