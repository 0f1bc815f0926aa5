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

from radvqa.io.atomic import write_atomic
from radvqa.io.parquet import shard_files

PLOT = "qa_stats.png"


def _size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                        (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M")):
        if n < limit:
            return name
    return "100M<n<1B"


def _table(title: str, counts: dict[str, int], total: int | None = None) -> str:
    if not counts:
        return f"**{title}**: none\n"
    total = total if total is not None else sum(counts.values())
    lines = [f"| {title} | rows | share |", "|---|---:|---:|"]
    for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        share = f"{100.0 * v / total:.1f}%" if total else "-"
        # k comes from the data (a split value, a question type): escaped so HTML in it stays text
        lines.append(f"| {html.escape(str(k), quote=False).replace('|', chr(92) + '|')} | {v:,} | {share} |")
    return "\n".join(lines) + "\n"


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


def render_card(out: Path, manifest: dict[str, Any], plot: Path | None) -> str:
    c = manifest["counts"]
    src = manifest.get("source", "?")
    header = [
        "---",
        f"pretty_name: radvqa {src}",
        "license: other",
        "language:",
        "- en",
        "task_categories:",
        "- visual-question-answering",
        "tags:",
        "- medical",
        "- radiology",
        "- chest-x-ray",
        "- grounding",
        "- radvqa",
        "size_categories:",
        f"- {_size_category(int(c.get('qa_rows', 0)))}",
        "configs:",
        "- config_name: qa",
        "  default: true",
        "  data_files:",
        "  - split: train",
        "    path: qa/part-*.parquet",
        "- config_name: scene_graphs",
        "  data_files:",
        "  - split: train",
        "    path: scene_graphs/part-*.parquet",
        "---",
        "",
    ]
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
    for k in ("studies_in", "studies_out", "studies_rejected", "patients", "scene_graphs", "qa_rows", "rejected_lines"):
        body.append(f"| {k} | {int(c.get(k, 0)):,} |")
    body.append("")
    qa_total = int(c.get("qa_rows", 0))
    body += [_table("strategy", c.get("qa_by_strategy", {}), qa_total), ""]
    body += [_table("question type", c.get("qa_by_question_type", {}), qa_total), ""]
    body += [_table("grade", c.get("grades", {}), qa_total), ""]
    body += [_table("split (QA rows)", c.get("qa_by_split", {}), qa_total), ""]
    body += [_table("split (studies)", c.get("studies_by_split", {})), ""]
    if c.get("rejects_by_stage"):
        body += [_table("rejects by stage", c["rejects_by_stage"]), ""]
    if plot is not None:
        body += [f"![QA rows by question type, strategy and grade]({plot.name})", ""]
    ex = _examples(out)
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
