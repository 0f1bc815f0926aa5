"""Mechanical defect counts of a built dataset (``radvqa audit DIR``).

Each check reads finished QA rows only (question, answer, answer parts, provenance), so it audits
any build, whoever generated it. A defect is something a reader can see is wrong without the image:

- ``contradiction_present_absent``: one answer states a finding present and states it, or a more
  general finding of its family, absent ("Left lung opacity is seen. There is no lung opacity.").
  Sides must agree (a left effusion beside "no right effusion" is not a contradiction).
- ``contradiction_present_uncertain``: one answer states a finding present and the same finding, or
  an ancestor, uncertain ("A nodule is seen. A nodule cannot be excluded.").
- ``contradiction_uncertain_absent``: the same finding both uncertain and absent.
- ``duplicate_statement``: one answer states the same (finding, certainty, side) twice, repeats
  a sentence, or states a finding beside an ancestor (same certainty, overlapping side) that
  nothing places elsewhere ("There is left lung opacity. There is left atelectasis.").
- ``raw_identifier``: a question or answer shows an ontology identifier (``LUNG_FIELD``,
  ``lung_opacity``) or a subcategory rendered from its raw id instead of its display name
  ("the other", "the infections").
- ``modifier_from_negated_phrase``: a stated finding carries a severity or side that the evidence
  sentences only use inside a negated phrase ("No large effusion" -> "A large effusion is seen").
- ``repeated_question``: a study already has a row asking the same words about the same reference
  study, if any (two answers to one question, e.g. a subcategory and a region both called "the
  mediastinum"; a difference question asked against two earlier studies is two questions). Rows of a study are
  consecutive in a build (shards are sorted by study), so only the current study's questions are
  held.
- ``answer_in_question``: the short answer (not yes/no) is spelled out by the question text.

All but the last must be 0 (``MUST_BE_ZERO``); ``radvqa audit`` exits 1 otherwise. The result is
stored in ``manifest.json`` under ``"audit"`` and shown on the dataset card.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from radvqa.quality.criteria import negated_only

CHECKS: tuple[str, ...] = (
    "contradiction_present_absent",
    "contradiction_present_uncertain",
    "contradiction_uncertain_absent",
    "duplicate_statement",
    "raw_identifier",
    "modifier_from_negated_phrase",
    "repeated_question",
    "answer_in_question",
)
MUST_BE_ZERO: frozenset[str] = frozenset(CHECKS[:7])
DESCRIPTIONS = {
    "contradiction_present_absent": "finding (or its family) stated present and absent",
    "contradiction_present_uncertain": "finding stated present and uncertain",
    "contradiction_uncertain_absent": "finding stated uncertain and absent",
    "duplicate_statement": "same statement twice in one answer",
    "raw_identifier": "ontology identifier or raw subcategory id in the text",
    "modifier_from_negated_phrase": "severity/side taken from a negated phrase",
    "repeated_question": "same question asked twice about one study",
    "answer_in_question": "short answer spelled out by the question",
}
EXAMPLES_PER_CHECK = 3
COLUMNS = ("qa_id", "study_id", "reference_study_id", "question_type", "question", "answer", "answer_short", "choices", "answer_parts",
           "provenance")

_ID_UPPER = re.compile(r"\b[A-Z][A-Z0-9]+(?:_[A-Z0-9]+)+\b")
_ID_SNAKE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
_SIDE_WORDS = {"left": ("left",), "right": ("right",), "bilateral": ("bilateral", "both", "bilaterally")}
_RANK = {"present": 2, "uncertain": 1, "absent": 0}


class Family:
    """Ancestor look-ups of the ontology (a finding's family: itself and its ancestors)."""

    def __init__(self, onto: Any = None) -> None:
        if onto is None:
            from radvqa.ontology import load_ontology

            onto = load_ontology()
        # ancestors straight from the ontology (quality sits below generate in the layer order)
        self.ancestors: dict[str, frozenset[str]] = {f: frozenset(onto.ancestors(f)) for f in onto.findings}
        self.raw_names = _raw_subcategory_names(onto)
        mods = getattr(onto, "modifiers", None)
        table = getattr(mods, "severity", None) or {}
        # a severity level and the report words that mean it ("large": large, extensive, marked...)
        self.severity_words: dict[str, tuple[str, ...]] = {lvl: (lvl, *words) for lvl, words in table.items()}

    def covers(self, general: str, specific: str) -> bool:
        """``general`` is ``specific`` or one of its ancestors."""
        return general == specific or general in self.ancestors.get(specific, ())


def _raw_subcategory_names(onto: Any) -> frozenset[str]:
    """Subcategory ids as they read when rendered raw ("the other", "the infections"), and the names
    of subcategories that are groups of findings rather than body parts (asked "Is the appearance
    of the infections normal?" they make no sense). Anatomy display names ("the pleura") are fine."""
    display = (getattr(onto, "display", None) or {}).get("subcategories", {})
    anatomy = {str(rec.get("name")) for rec in display.values() if rec.get("kind") == "anatomy" and rec.get("name")}
    out: set[str] = set()
    for sub, rec in display.items():
        if rec.get("kind") != "anatomy" and rec.get("name"):
            out.add(str(rec["name"]))
    for subs in (getattr(onto, "categories", {}) or {}).values():
        for s in subs:
            raw = s.lower().replace("_", " ")
            for form in (raw, raw + "s"):
                if form not in anatomy:
                    out.add(form)
    # a finding or region that happens to share the words ("surgical material") is not an identifier
    names = {str(getattr(f, "name", "")).lower() for f in (getattr(onto, "findings", {}) or {}).values()}
    names |= {str(getattr(r, "name", "")).lower() for r in (getattr(onto, "regions", {}) or {}).values()}
    return frozenset(out - names)


def _sides_overlap(a: str | None, b: str | None) -> bool:
    # an unsided statement covers either side; "bilateral" overlaps left and right
    return a is None or b is None or a == b or "bilateral" in (a, b)


def _statements(parts: list[dict[str, Any]]) -> list[tuple[str, str, str | None, str, tuple[str, ...]]]:
    """(finding, certainty, side, text, regions) of each stated part (main or related; details
    describe)."""
    out = []
    for p in parts or ():
        c = p.get("certainty")
        if c not in _RANK or p.get("part_type") == "details":
            continue
        for fid in p.get("findings") or ():
            out.append((fid, c, p.get("laterality"), p.get("text") or "", tuple(p.get("regions") or ())))
    return out


def _beside_parent(st: list[tuple[str, str, str | None, str, tuple[str, ...]]], fam: Family) -> bool:
    """A finding stated beside an ancestor with the same certainty, on an overlapping side, that
    nothing places elsewhere (its regions lie within the finding's): "There is left lung opacity.
    There is left atelectasis." from one "left basilar opacity, likely atelectasis"."""
    for a in st:
        if a[1] == "absent":
            continue
        for b in st:
            if b is not a and b[1] == a[1] and b[0] != a[0] and fam.covers(b[0], a[0]) \
                    and _sides_overlap(a[2], b[2]) and set(b[4]) <= set(a[4]):
                return True
    return False


def check_row(row: dict[str, Any], fam: Family) -> list[str]:
    """Names of the checks this row fails."""
    bad: list[str] = []
    st = _statements(row.get("answer_parts") or [])
    pos = [s for s in st if s[1] == "present"]
    unc = [s for s in st if s[1] == "uncertain"]
    neg = [s for s in st if s[1] == "absent"]
    if any(fam.covers(n[0], p[0]) and _sides_overlap(n[2], p[2]) for p in pos for n in neg):
        bad.append("contradiction_present_absent")
    if any(fam.covers(u[0], p[0]) and _sides_overlap(u[2], p[2]) for p in pos for u in unc):
        bad.append("contradiction_present_uncertain")
    if any(fam.covers(n[0], u[0]) and _sides_overlap(n[2], u[2]) for u in unc for n in neg):
        bad.append("contradiction_uncertain_absent")
    keys = [(s[0], s[1], s[2]) for s in st]
    # repeated sentences among the statements ("It is located in the left lower lung zone." after
    # two different findings is two statements about two findings, not a duplicate)
    texts = [p.get("text") for p in row.get("answer_parts") or ()
             if p.get("text") and p.get("part_type") != "details"]
    if len(set(keys)) < len(keys) or len(set(texts)) < len(texts) or (len(st) > 1 and _beside_parent(st, fam)):
        bad.append("duplicate_statement")
    text = f"{row.get('question') or ''} {row.get('answer') or ''}"
    low = text.lower()
    # subcategory names are rendered by the subcategory questions only (elsewhere "the abdomen" is
    # quoted report text or a region name)
    if _ID_UPPER.search(text) or _ID_SNAKE.search(low) or "subcat" in (row.get("question_type") or "") and any(
            re.search(r"\bthe " + re.escape(raw) + r"(?=[?.,;]| is\b| are\b| in this\b| normal\b| abnormal\b|$)", low)
            for raw in _raw_hits(low, fam)):
        bad.append("raw_identifier")
    sents = [p.split(": ", 1)[1] if ": " in p else p for p in row.get("provenance") or ()
             if p[:1] == "S" or p.startswith("indication:")]
    if sents:
        for p in row.get("answer_parts") or ():
            # the modifiers of stated findings (uncertain ones are hedged statements of their own)
            if p.get("certainty") != "present":
                continue
            sev = p.get("severity")
            side = p.get("laterality")
            if (sev and negated_only(fam.severity_words.get(sev) or tuple(
                    w for lv in sev.split(" to ") for w in fam.severity_words.get(lv, (lv,))), sents)) or \
                    (side in _SIDE_WORDS and negated_only(_SIDE_WORDS[side], sents)):
                bad.append("modifier_from_negated_phrase")
                break
    short = (row.get("answer_short") or "").strip().lower()
    if row.get("choices") is None and short and short not in ("yes", "no", "possibly") and len(short) > 3:
        s = short[4:] if short.startswith("the ") else short
        q = " " + re.sub(r"[?,.]", " ", (row.get("question") or "").lower()) + " "
        if f" {s} " in q:
            bad.append("answer_in_question")
    return bad


def _raw_hits(low: str, fam: Family) -> Iterator[str]:
    # cheap prefilter: only raw names whose words occur at all
    for raw in fam.raw_names:
        if raw in low:
            yield raw


def iter_rows(dataset: Path, columns: Iterable[str] = COLUMNS) -> Iterator[dict[str, Any]]:
    import pyarrow.parquet as pq

    files = sorted((dataset / "qa").glob("*.parquet"))
    if not files:
        raise FileNotFoundError(f"{dataset}: no qa/*.parquet (is this a radvqa build folder?)")
    for f in files:
        pf = pq.ParquetFile(f)
        cols = [c for c in columns if c in pf.schema_arrow.names]
        for batch in pf.iter_batches(columns=cols, batch_size=8192):
            yield from batch.to_pylist()


def audit_rows(rows: Iterable[dict[str, Any]], fam: Family | None = None,
               n_examples: int = EXAMPLES_PER_CHECK) -> dict[str, Any]:
    """Counts per check (and per question type), with the first examples of each."""
    fam = fam or Family()
    counts = {c: 0 for c in CHECKS}
    by_type: dict[str, dict[str, int]] = {}
    examples: dict[str, list[dict[str, str]]] = {c: [] for c in CHECKS}
    n = 0
    study: Any = None
    asked: set[tuple[str, Any]] = set()
    for row in rows:
        n += 1
        found = check_row(row, fam)
        sid = row.get("study_id")
        if sid is not None:
            if sid != study:
                study, asked = sid, set()
            q = (row.get("question") or "", row.get("reference_study_id"))
            if q in asked:
                found.append("repeated_question")
            asked.add(q)
        for c in found:
            counts[c] += 1
            qt = row.get("question_type") or "?"
            by_type.setdefault(c, {}).setdefault(qt, 0)
            by_type[c][qt] += 1
            if len(examples[c]) < n_examples:
                examples[c].append({"qa_id": row.get("qa_id") or "", "question": row.get("question") or "",
                                    "answer": row.get("answer") or ""})
    failed = sorted(c for c in MUST_BE_ZERO if counts[c])
    return {"rows": n, "counts": counts, "by_question_type": by_type, "examples": examples,
            "must_be_zero": sorted(MUST_BE_ZERO), "failed": failed, "ok": not failed}


def audit_dataset(dataset: Path, fam: Family | None = None) -> dict[str, Any]:
    return audit_rows(iter_rows(dataset), fam)


def markdown_table(result: dict[str, Any]) -> list[str]:
    """The audit as a markdown table (dataset card)."""
    n = max(1, int(result.get("rows", 0)))
    lines = ["| defect | must be 0 | rows | share | example |", "|---|---|---|---|---|"]
    for c in CHECKS:
        k = int(result["counts"].get(c, 0))
        ex = result.get("examples", {}).get(c) or []
        e = ""
        if ex:
            e = f"{ex[0]['question']} -> {ex[0]['answer']}"
            e = (e[:157] + "...") if len(e) > 160 else e
            e = e.replace("|", "\\|")
        lines.append(f"| {DESCRIPTIONS[c]} (`{c}`) | {'yes' if c in MUST_BE_ZERO else 'no'} | {k} | "
                     f"{100.0 * k / n:.2f}% | {e} |")
    return lines


def store(dataset: Path, result: dict[str, Any]) -> None:
    """Put the audit into manifest.json and re-render the dataset card."""
    import json

    from radvqa.io.card import write_card
    from radvqa.io.atomic import write_atomic

    mp = dataset / "manifest.json"
    if not mp.is_file():
        return
    manifest = json.loads(mp.read_text(encoding="utf-8"))
    manifest["audit"] = {k: result[k] for k in ("rows", "counts", "examples", "failed", "ok")}
    # the card renders the table from the manifest alone (io sits below quality in the layer order)
    manifest["audit"]["table"] = markdown_table(result)
    write_atomic(mp, json.dumps(manifest, indent=1, sort_keys=False) + "\n")
    write_card(dataset, manifest)


__all__ = ["CHECKS", "MUST_BE_ZERO", "Family", "audit_dataset", "audit_rows", "check_row", "markdown_table",
           "store"]
