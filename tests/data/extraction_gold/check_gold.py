"""Validate the extraction gold files (dev.jsonl, test.jsonl) against the ontology and the R2Gen split.

Run: python tests/data/extraction_gold/check_gold.py [--split-csv r2gen_split.csv] [FILE ...]
(defaults: dev.jsonl and test.jsonl next to this script). Exits 1 listing every problem.

Checks: key order and types; finding ids known to the ontology; certainty / laterality / change /
temporal / severity in the allowed sets; qualifier only on uncertain observations; evidence an exact
substring of the text; no duplicate report ids within or across files; dev only from R2Gen
train/val and test only from R2Gen test; the split field equal to the split table's (when given).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from radvqa.ontology import load_ontology

HERE = Path(__file__).resolve().parent
REPORT_KEYS = ["report_id", "split", "text", "observations", "notes"]
OBS_KEYS = ["finding", "certainty", "qualifier", "laterality", "severity", "change", "temporal", "evidence"]
CERTAINTY = {"present", "absent", "uncertain"}
LATERALITY = {None, "left", "right", "bilateral"}
CHANGE = {None, "new", "increased", "decreased", "unchanged", "resolved", "improved", "worsened"}
TEMPORAL = {None, "acute", "subacute", "chronic", "old", "healed", "postoperative"}
FILE_SPLITS = {"dev.jsonl": {"train", "val"}, "test.jsonl": {"test"}}


def check_file(path: Path, findings: set[str], severities: set[str | None], table: dict[str, str],
               seen: dict[str, str]) -> list[str]:
    errs: list[str] = []
    allowed_splits = FILE_SPLITS.get(path.name, {"train", "val", "test"})
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        where = f"{path.name}:{n}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            errs.append(f"{where}: not JSON ({e})")
            continue
        if list(rec) != REPORT_KEYS:
            errs.append(f"{where}: keys {list(rec)} != {REPORT_KEYS}")
            continue
        rid, text = rec["report_id"], rec["text"]
        where = f"{where} {rid}"
        if rid in seen:
            errs.append(f"{where}: report id already in {seen[rid]}")
        seen[rid] = where
        if rec["split"] not in allowed_splits:
            errs.append(f"{where}: split {rec['split']!r} not allowed in {path.name}")
        if table and table.get(rid) != rec["split"]:
            errs.append(f"{where}: split {rec['split']!r} but r2gen_split.csv says {table.get(rid)!r}")
        if not isinstance(text, str) or not text.strip():
            errs.append(f"{where}: empty text")
            continue
        if not isinstance(rec["notes"], str):
            errs.append(f"{where}: notes must be a string")
        for i, o in enumerate(rec["observations"]):
            w = f"{where} obs {i}"
            if list(o) != OBS_KEYS:
                errs.append(f"{w}: keys {list(o)} != {OBS_KEYS}")
                continue
            if o["finding"] not in findings:
                errs.append(f"{w}: unknown finding id {o['finding']!r}")
            if o["certainty"] not in CERTAINTY:
                errs.append(f"{w}: certainty {o['certainty']!r}")
            if o["laterality"] not in LATERALITY:
                errs.append(f"{w}: laterality {o['laterality']!r}")
            if o["change"] not in CHANGE:
                errs.append(f"{w}: change {o['change']!r}")
            if o["temporal"] not in TEMPORAL:
                errs.append(f"{w}: temporal {o['temporal']!r}")
            if o["severity"] not in severities:
                errs.append(f"{w}: severity {o['severity']!r} not a level of modifiers.severity_order")
            q = o["qualifier"]
            if q is not None and (not isinstance(q, str) or not q or q != q.lower()):
                errs.append(f"{w}: qualifier must be null or a lower-case word, got {q!r}")
            if q is not None and o["certainty"] != "uncertain":
                errs.append(f"{w}: qualifier {q!r} on a {o['certainty']} observation (qualified negatives are uncertain)")
            if q is not None and q not in o["evidence"].lower():
                errs.append(f"{w}: qualifier {q!r} not in its evidence")
            if o["certainty"] == "absent" and (o["severity"] or o["temporal"]):
                errs.append(f"{w}: severity/temporal set on an absent observation")
            ev = o["evidence"]
            if not isinstance(ev, str) or not ev or ev not in text:
                errs.append(f"{w}: evidence {ev!r} is not a substring of the text")
        keys = [(o.get("finding"), o.get("laterality"), o.get("certainty"), o.get("temporal"))
                for o in rec["observations"]]
        if len(keys) != len(set(keys)):
            errs.append(f"{where}: duplicate observation (same finding, side, certainty, temporal)")
    return errs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--split-csv", type=Path, default=None, help="r2gen_split.csv (report_id,prefix,split)")
    a = ap.parse_args(argv)
    files = a.files or [p for p in (HERE / "dev.jsonl", HERE / "test.jsonl") if p.exists()]
    onto = load_ontology()
    findings = set(onto.findings)
    severities: set[str | None] = {None, *onto.modifiers.severity_order}
    table: dict[str, str] = {}
    if a.split_csv:
        for line in a.split_csv.read_text().splitlines()[1:]:
            rid, _, sp = line.split(",")
            table[rid] = sp
    seen: dict[str, str] = {}
    errs: list[str] = []
    for f in files:
        errs += check_file(f, findings, severities, table, seen)
    for e in errs:
        print(e)
    n = sum(len(f.read_text().splitlines()) for f in files)
    print(f"{len(files)} file(s), {n} reports, {len(errs)} problem(s)", file=sys.stderr)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
