"""``manifest.json`` (contract) and ``rejected.jsonl``.

The manifest's counts are sums of the per-shard statistics the workers wrote, plus the records the
sources rejected before sharding. ``studies_in = studies_out + studies_rejected`` is asserted here,
so a build never writes a manifest whose counts do not add up.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
REJECTED = "rejected.jsonl"
MANIFEST_VERSION = 1

_COUNTERS = (
    "qa_by_strategy", "qa_by_question_type", "grades", "qa_by_split", "studies_by_split", "rejects_by_stage",
    "findings_not_stated", "normal_claims_blocked", "rows_withheld",
)
_SUMS = ("studies_in", "studies_out", "studies_rejected", "patients", "qa_rows", "scene_graph_rows", "reject_lines")


def merge_shard_stats(shards: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Sum the per-shard stats (counters added key-wise, timings summed over shards)."""
    total: dict[str, Any] = {k: 0 for k in _SUMS}
    counters: dict[str, Counter[str]] = {k: Counter() for k in _COUNTERS}
    timings: Counter[str] = Counter()
    for s in shards:
        for k in _SUMS:
            total[k] += int(s.get(k, 0))
        for k in _COUNTERS:
            counters[k].update(s.get(k, {}))
        timings.update({k: float(v) for k, v in s.get("timings", {}).items()})
    for k in _COUNTERS:
        total[k] = dict(sorted(counters[k].items()))
    total["timings"] = {k: round(v, 4) for k, v in sorted(timings.items())}
    return total


def build_counts(shard_total: dict[str, Any], source_rejects: int, studies_spilled: int, *,
                 row_rejects: int = 0, records_read: int | None = None) -> dict[str, Any]:
    """The manifest's ``counts`` block. ``row_rejects``: rejected rows that are not studies (box,
    label, image-size rows; stage ``source-row``): in rejected.jsonl, not in ``studies_in``.
    ``records_read``: the source adapter's own count of study records read (None if it keeps none)."""
    rej_stage = Counter(shard_total["rejects_by_stage"])
    rej_stage["source"] += source_rejects
    rej_stage["source-row"] += row_rejects
    counts = {
        "studies_in": studies_spilled + source_rejects,
        "studies_out": shard_total["studies_out"],
        "studies_rejected": shard_total["studies_rejected"] + source_rejects,
        "patients": shard_total["patients"],
        "scene_graphs": shard_total["scene_graph_rows"],
        "qa_rows": shard_total["qa_rows"],
        "qa_by_strategy": shard_total["qa_by_strategy"],
        "qa_by_question_type": shard_total["qa_by_question_type"],
        "grades": shard_total["grades"],
        "qa_by_split": shard_total["qa_by_split"],
        "studies_by_split": shard_total["studies_by_split"],
        "rejected_lines": shard_total["reject_lines"] + source_rejects + row_rejects,
        "records_read": records_read,
        "rejects_by_stage": dict(sorted((k, v) for k, v in rej_stage.items() if v)),
        # positive findings of the scene graphs that no QA row states, by why (label_only,
        # unvouched, never_stated: docs/generation.md); the scene graphs keep them all
        "findings_not_stated": shard_total.get("findings_not_stated", {}),
        # studies whose "normal" answers a sentence the extractor read nothing positive from, or a
        # negated normal, kept away (round 11a, docs/generation.md), by why
        "normal_claims_blocked": shard_total.get("normal_claims_blocked", {}),
        # list answers said and taken back because they would leave out a positive the report
        # states (unsaid_list: rounds 26-30; incomplete_list: --incomplete-lists omit), by why
        "rows_withheld": shard_total.get("rows_withheld", {}),
    }
    if counts["studies_in"] != counts["studies_out"] + counts["studies_rejected"]:
        raise AssertionError(
            f"counts do not add up: studies_in {counts['studies_in']} != out {counts['studies_out']}"
            f" + rejected {counts['studies_rejected']}"
        )
    if records_read is not None and records_read != counts["studies_in"]:
        raise AssertionError(f"the source read {records_read} records but studies_in is {counts['studies_in']}")
    if shard_total["studies_in"] != studies_spilled:
        raise AssertionError(
            f"shards read {shard_total['studies_in']} studies but {studies_spilled} were routed to them"
        )
    return counts


def write_manifest(out: Path, manifest: dict[str, Any]) -> Path:
    from radvqa.io.atomic import write_atomic

    p = out / MANIFEST
    write_atomic(p, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return p


def read_manifest(out: Path | str) -> dict[str, Any]:
    p = Path(out) / MANIFEST
    if not p.exists():
        raise FileNotFoundError(f"{p} not found: is {out} a radvqa build output?")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{p} is not valid JSON: {exc}") from exc


def iter_rejects(out: Path | str) -> Iterable[dict[str, Any]]:
    p = Path(out) / REJECTED
    if not p.exists():
        return
    with open(p, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)
