"""Observation-level scoring of an extractor against a hand-annotated gold set
(``tests/data/extraction_gold/*.jsonl``; format and conventions in that folder's GUIDE.md).

A predicted observation and a gold one *match* when their findings are the same id or one is an
ontology ancestor of the other ("atelectasis" matches gold "linear_atelectasis"). Each gold
observation is paired with its best-matching prediction in the same report (same id first, then
same side, then same certainty); each prediction is judged against every gold observation it
matches. Figures:

- recall: gold observations with at least one matching prediction (any certainty);
- positive precision: predictions that are not ``absent`` and match a gold observation that is not
  ``absent`` either (a spurious finding, or a finding the report negates, counts against it);
- certainty accuracy: paired gold observations whose prediction has the same certainty;
- overclaim rate: paired gold observations that are ``uncertain`` or ``absent`` and predicted
  ``present``, over all paired gold observations that are ``uncertain`` or ``absent``;
- side accuracy: paired observations where the gold or the prediction has a side, with the
  same side (a side the gold does not give counts as wrong);
- qualifier agreement: paired gold qualified negatives predicted ``uncertain`` with the same
  qualifier (qualifiers compared through the extractor's own word -> value table when given).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CERTAINTIES = ("present", "absent", "uncertain")


@dataclass
class GoldScores:
    reports: int = 0
    gold: int = 0
    matched: int = 0
    pred_pos: int = 0
    pred_pos_ok: int = 0
    pred_pos_any: int = 0  # non-absent predictions matching any gold observation (whatever its certainty)
    cert_ok: int = 0
    not_present: int = 0
    overclaim: int = 0
    side_n: int = 0
    side_ok: int = 0
    qual_n: int = 0
    qual_ok: int = 0
    confusion: dict[str, dict[str, int]] = field(default_factory=lambda: {g: {p: 0 for p in CERTAINTIES} for g in CERTAINTIES})
    errors: list[dict[str, Any]] = field(default_factory=list)

    @staticmethod
    def _r(a: int, b: int) -> float:
        return a / b if b else 0.0

    @property
    def recall(self) -> float:
        return self._r(self.matched, self.gold)

    @property
    def positive_precision(self) -> float:
        return self._r(self.pred_pos_ok, self.pred_pos)

    @property
    def certainty_accuracy(self) -> float:
        return self._r(self.cert_ok, self.matched)

    @property
    def overclaim_rate(self) -> float:
        return self._r(self.overclaim, self.not_present)

    @property
    def side_accuracy(self) -> float:
        return self._r(self.side_ok, self.side_n)

    @property
    def qualifier_agreement(self) -> float:
        return self._r(self.qual_ok, self.qual_n)

    def summary(self) -> dict[str, Any]:
        return {"reports": self.reports, "gold_observations": self.gold, "recall": self.recall,
                "positive_precision": self.positive_precision,
                "positive_precision_any_certainty": self._r(self.pred_pos_any, self.pred_pos),
                "certainty_accuracy": self.certainty_accuracy, "overclaim_rate": self.overclaim_rate,
                "side_accuracy": self.side_accuracy, "qualifier_agreement": self.qualifier_agreement,
                "counts": {"matched": self.matched, "predicted_non_absent": self.pred_pos,
                           "predicted_non_absent_ok": self.pred_pos_ok, "certainty_ok": self.cert_ok,
                           "gold_not_present": self.not_present, "overclaims": self.overclaim,
                           "side_pairs": self.side_n, "side_ok": self.side_ok,
                           "gold_qualified": self.qual_n, "qualifier_ok": self.qual_ok},
                "certainty_confusion_gold_by_pred": self.confusion}


def load_gold(path: str | Path) -> list[dict[str, Any]]:
    out = []
    with Path(path).open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError as e:
                    raise ValueError(f"{path}:{n}: not JSON: {e}") from None
    return out


def score_gold(records: list[dict[str, Any]], extract: Any, ontology: Any,
               qualifier_words: dict[str, str] | None = None) -> GoldScores:
    """``extract(text, report_id) -> Extraction`` is called once per gold report."""
    related_cache: dict[tuple[str, str], bool] = {}

    def related(a: str, b: str) -> bool:
        key = (a, b)
        r = related_cache.get(key)
        if r is None:
            r = a == b or (a in ontology.findings and b in ontology.findings
                           and (ontology.is_a(a, b) or ontology.is_a(b, a)))
            related_cache[key] = r
        return r

    def norm_q(q: str | None) -> str | None:
        if q is None:
            return None
        q = " ".join(q.lower().split())
        return (qualifier_words or {}).get(q, q)

    s = GoldScores()
    for rec in records:
        s.reports += 1
        e = extract(rec["text"], rec["report_id"])
        preds = list(e.observations)
        gold = rec["observations"]
        for g in gold:
            s.gold += 1
            cands = [p for p in preds if related(p.finding, g["finding"])]
            if not cands:
                s.errors.append({"id": rec["report_id"], "kind": "missed", "gold": g})
                continue
            s.matched += 1
            best = max(cands, key=lambda p: (p.finding == g["finding"], p.laterality == g.get("laterality"),
                                             p.certainty == g["certainty"]))
            gc, pc = g["certainty"], best.certainty
            s.confusion[gc][pc] += 1
            if gc == pc:
                s.cert_ok += 1
            else:
                s.errors.append({"id": rec["report_id"], "kind": "certainty", "gold": g, "pred": pc,
                                 "pred_finding": best.finding})
            if gc != "present":
                s.not_present += 1
                if pc == "present":
                    s.overclaim += 1
            gl = g.get("laterality")
            if gl is not None or best.laterality is not None:
                s.side_n += 1
                if gl == best.laterality:
                    s.side_ok += 1
                else:
                    s.errors.append({"id": rec["report_id"], "kind": "side", "gold": g, "pred": best.laterality})
            if g.get("qualifier"):
                s.qual_n += 1
                if pc == "uncertain" and norm_q(best.qualifier) == norm_q(g["qualifier"]):
                    s.qual_ok += 1
        for p in preds:
            if p.certainty == "absent":
                continue
            s.pred_pos += 1
            hits = [g for g in gold if related(p.finding, g["finding"])]
            if hits:
                s.pred_pos_any += 1
            if any(g["certainty"] != "absent" for g in hits):
                s.pred_pos_ok += 1
            else:
                s.errors.append({"id": rec["report_id"], "kind": "spurious" if not hits else "negated_in_gold",
                                 "pred": [p.finding, p.certainty, p.laterality, [sp.text for sp in p.evidence]]})
    return s
