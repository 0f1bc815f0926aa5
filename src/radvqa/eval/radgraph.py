"""Score radvqa's report extractor against radiologists' entity graphs: RadGraph (Jain et al. 2021)
and RadGraph2 (Khanna, Dejl et al. 2023), as laid out in the shared FORMATS.md section 4, and
Lunguage's structured reports (section 5: ``read_lunguage``; tentative -> uncertain, negative ->
absent, the improved / worsened / no change columns -> change).

Gold layout: ``{report_id: {"text", "entities": {id: {"tokens", "label", "start_ix", "end_ix",
"relations": [[type, target_id], ...]}}, "data_split", ...}}``; the v1 test file puts the entities
under ``labeler_1`` / ``labeler_2`` (text stays on top). Labels: ``OBS-DP`` / ``OBS-U`` /
``OBS-DA`` (present / uncertain / absent), ``ANAT-DP``, and in RadGraph2 the change entities
``CHAN-*`` in both spellings the sources show (``CHAN-WOR`` and ``CHAN-CON-WOR``, ``CHAN-IMP`` and
``CHAN-CON-IMP``, and the draft ``CHAN-AP`` / ``CHAN-DISA`` / ``CHAN-DISP``). RadGraph-XL's long
labels (``Observation::definitely present``) are read too.

From gold entities to radvqa observations:

- each observation entity becomes one finding: its phrase (its own tokens with the tokens of the
  entities that ``modify`` it and of the anatomy it is ``located_at``, in text order: "pleural" +
  "effusion", "heart" + "enlarged") is read by radvqa's own term matcher (the rules extractor run
  on that phrase alone); when that finds nothing, the entity's own tokens are tried; when that
  finds nothing either, the phrase is *unmapped* and listed with its count (never dropped silently);
- certainty from the label; side from left / right / bilateral words in the phrase and anatomy;
- change from a ``CHAN-*`` entity linked to it by ``modify`` in either direction (the direction is
  UNVERIFIED in FORMATS.md): NC -> unchanged, CON-AP -> new, WOR -> worsened, IMP -> improved,
  CON-RES -> resolved, DEV-AP -> new, DEV-PLACE -> changed position (no radvqa change value: not
  scored), DEV-DISA -> resolved;
- one observation per (finding, side) per report: the strongest certainty (present > uncertain >
  absent) and the first change.

Matching (per report): a gold and a predicted observation match when they name the same finding or
one is an ancestor of the other (exact ids first). Levels, each micro precision / recall / F1 with
its counts: ``finding``; ``finding+certainty``; ``finding+side`` (sides equal, None included);
``finding+change`` (over observations that carry a change on either side). Predictions are the
extractor's report observations (implied defaults excluded).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Iterator

from radvqa.extract.annotated import TermMapper
from radvqa.model import Observation
from radvqa.sources.lunguage import SKIP_CATS, certainty as lunguage_certainty, change as lunguage_change
from radvqa.sources.radgraph import CERTAINTY, CHANGE, SIDES, annotations, load_json

FORMATS = ("radgraph", "radgraph2", "lunguage")
# the gold label vocabularies and the entity -> phrase reading are the radgraph source's
# (radvqa.sources.radgraph), so the scorer and `radvqa build radgraph` read a graph the same way
_CERTAINTY = CERTAINTY
_CHANGE = CHANGE
_SIDES = SIDES
# radvqa's change values distinguish size ("increased") from course ("worsened"); the gold
# vocabularies do not, so both are compared as one class
_CHANGE_CLASS = {"increased": "worsened", "decreased": "improved"}
_RANK = {"absent": 0, "uncertain": 1, "present": 2}


class GoldError(ValueError):
    """A gold file that cannot be read at all."""


class GoldObs:
    __slots__ = ("finding", "certainty", "laterality", "change", "phrase")

    def __init__(self, finding: str, certainty: str, laterality: str | None, change: str | None, phrase: str) -> None:
        self.finding, self.certainty, self.laterality, self.change, self.phrase = finding, certainty, laterality, change, phrase


def read_gold(path: str | Path, labeler: str = "labeler_1") -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(report_id, text, entities) per report; ``labeler`` picks the annotator in the v1 test file."""
    p = Path(path)
    try:
        data = load_json(p)  # plain or gzip (by content), with or without a byte-order mark
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as e:
        raise GoldError(f"{p}: not a readable JSON file ({e})") from e
    if not isinstance(data, dict):
        raise GoldError(f"{p}: expected an object {{report_id: record}}, found {type(data).__name__}")
    for rid, rec in data.items():
        if not isinstance(rec, dict) or not isinstance(rec.get("text"), str):
            raise GoldError(f"{p}: record {rid!r} has no text")
        ents = rec.get("entities")
        if ents is None and isinstance(rec.get(labeler), dict):
            ents = rec[labeler].get("entities")
        if not isinstance(ents, dict):
            raise GoldError(f"{p}: record {rid!r} has no entities (nor {labeler!r}.entities)")
        yield str(rid), rec["text"], ents


def gold_observations(text: str, ents: dict[str, Any], mapper: TermMapper, unmapped: Counter[str]) -> list[GoldObs]:
    best: dict[tuple[str, str | None], GoldObs] = {}
    for ann in annotations(text, ents):
        hit = mapper(ann.phrase) or mapper(ann.term)
        if hit is None:
            unmapped[ann.term] += 1
            continue
        finding, states_normal = hit
        cert = ann.certainty
        if states_normal and cert == "present":
            cert = "absent"
        key = (finding, ann.laterality)
        prev = best.get(key)
        if prev is None:
            best[key] = GoldObs(finding, cert, ann.laterality, ann.change, ann.phrase)
        else:
            if _RANK[cert] > _RANK[prev.certainty]:
                prev.certainty = cert
            prev.change = prev.change or ann.change
    return list(best.values())


def _related(a: str, b: str, onto: Any) -> bool:
    return a == b or a in onto.ancestors(b) or b in onto.ancestors(a)


def match(gold: list[GoldObs], pred: list[Observation], onto: Any) -> list[tuple[GoldObs, Observation]]:
    """Greedy one-to-one: exact finding ids first, then ancestor/descendant; same side preferred."""
    pairs: list[tuple[GoldObs, Observation]] = []
    free = list(pred)
    for exact in (True, False):
        for g in gold:
            if any(g is x for x, _ in pairs):
                continue
            cands = [p for p in free if (p.finding == g.finding if exact else _related(p.finding, g.finding, onto))]
            if cands:
                p = next((c for c in cands if c.laterality == g.laterality), cands[0])
                pairs.append((g, p))
                free.remove(p)
    return pairs


class Counts:
    def __init__(self) -> None:
        self.c = {k: [0, 0, 0] for k in ("finding", "finding+certainty", "finding+side", "finding+change")}

    def add(self, level: str, tp: int, fp: int, fn: int) -> None:
        x = self.c[level]
        x[0] += tp
        x[1] += fp
        x[2] += fn

    def table(self) -> dict[str, dict[str, Any]]:
        out = {}
        for k, (tp, fp, fn) in self.c.items():
            p = tp / (tp + fp) if tp + fp else None
            r = tp / (tp + fn) if tp + fn else None
            f = 2 * p * r / (p + r) if p and r else (0.0 if p is not None and r is not None else None)
            out[k] = {"tp": tp, "fp": fp, "fn": fn, "precision": p, "recall": r, "f1": f,
                      "predicted": tp + fp, "gold": tp + fn}
        return out


def _gold_reports(path: str | Path, fmt: str, labeler: str, mapper: TermMapper,
                  unmapped: Counter[str]) -> Iterator[tuple[str, str, int, list[GoldObs]]]:
    """(report id, text, gold observation entities, gold observations) per report."""
    if fmt == "lunguage":
        yield from read_lunguage(path, mapper, unmapped)
        return
    for rid, text, ents in read_gold(path, labeler):
        n = sum(1 for e in ents.values() if isinstance(e, dict) and str(e.get("label")) in _CERTAINTY)
        yield rid, text, n, gold_observations(text, ents, mapper, unmapped)


# Lunguage (shared FORMATS.md section 5): one row per (entity, sentence); columns read here are the
# ones public code reads (their order and completeness are UNVERIFIED). The single-report score
# drops the history section; rows of the "patient info." and "oth" categories are not findings.
_LUNGUAGE_SKIP_CATS = SKIP_CATS


def read_lunguage(path: str | Path, mapper: TermMapper, unmapped: Counter[str]) -> Iterator[tuple[str, str, int, list[GoldObs]]]:
    import csv

    p = Path(path)
    try:
        fh = open(p, encoding="utf-8-sig", newline="")
    except OSError as e:
        raise GoldError(f"{p}: cannot read ({e})") from e
    with fh:
        r = csv.DictReader(fh)
        need = {"study_id", "section", "ent", "dx_status", "dx_certainty", "report"}
        if not need <= set(r.fieldnames or []):
            raise GoldError(f"{p}: not Lunguage.csv (needs {', '.join(sorted(need))}; found {', '.join((r.fieldnames or [])[:12])})")
        cur: str | None = None
        text = ""
        n = 0
        best: dict[tuple[str, str | None], GoldObs] = {}
        for row in r:
            sid = (row.get("study_id") or "").strip()
            if sid != cur:
                if cur is not None:
                    yield cur, text, n, list(best.values())
                cur, text, n, best = sid, row.get("report") or "", 0, {}
            if (row.get("section") or "").strip().lower() == "hist" or (row.get("cat") or "").strip().lower() in _LUNGUAGE_SKIP_CATS:
                continue
            n += 1
            ent = (row.get("ent") or "").strip().lower()
            loc = (row.get("location") or "").strip().lower()
            hit = mapper(ent) or (mapper(f"{loc} {ent}") if loc else None)
            if hit is None:
                unmapped[ent] += 1
                continue
            finding, states_normal = hit
            cert = lunguage_certainty((row.get("dx_status") or "").strip().lower(), (row.get("dx_certainty") or "").strip().lower())
            if cert == "present" and states_normal:
                cert = "absent"
            change = lunguage_change(row)
            side = next((sd for w, sd in _SIDES if w in f"{loc} {ent}".split()), None)
            key = (finding, side)
            prev = best.get(key)
            if prev is None:
                best[key] = GoldObs(finding, cert, side, change, f"{loc} {ent}".strip())
            else:
                if _RANK[cert] > _RANK[prev.certainty]:
                    prev.certainty = cert
                prev.change = prev.change or change
        if cur is not None:
            yield cur, text, n, list(best.values())


def _tally(counts: Counts, gold: list[GoldObs], pred: list[Observation], onto: Any) -> None:
    pairs = match(gold, pred, onto)
    tp = len(pairs)
    counts.add("finding", tp, len(pred) - tp, len(gold) - tp)
    ok = sum(g.certainty == p.certainty for g, p in pairs)
    counts.add("finding+certainty", ok, len(pred) - ok, len(gold) - ok)
    ok = sum(g.laterality == p.laterality for g, p in pairs)
    counts.add("finding+side", ok, len(pred) - ok, len(gold) - ok)
    ok = sum(1 for g, p in pairs if g.change is not None and _CHANGE_CLASS.get(g.change, g.change) == _CHANGE_CLASS.get(p.change, p.change))
    counts.add("finding+change", ok, sum(1 for p in pred if p.change) - ok, sum(1 for g in gold if g.change) - ok)


def score(gold_path: str | Path, fmt: str = "radgraph", labeler: str = "labeler_1",
          predictions: dict[str, list[Observation]] | None = None, extractor: Any = None, ontology: Any = None) -> dict[str, Any]:
    """Score predictions (report id -> observations; default: radvqa's rules extractor run on each
    gold text) against a gold file. Returns the levels' counts, the mapped share of gold
    observation entities, and the unmapped terms."""
    if fmt not in FORMATS:
        raise GoldError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    if ontology is None:
        from radvqa.ontology import load_ontology

        ontology = load_ontology()
    if extractor is None:
        from radvqa.extract import get_extractor

        extractor = get_extractor("rules", ontology=ontology)
    mapper = TermMapper(extractor, ontology)
    unmapped: Counter[str] = Counter()
    counts, positive = Counts(), Counts()
    n_reports = n_obs_entities = n_gold = 0
    missing_pred: list[str] = []
    for rid, text, n_ents, gold in _gold_reports(gold_path, fmt, labeler, mapper, unmapped):
        n_reports += 1
        n_obs_entities += n_ents
        n_gold += len(gold)
        if predictions is None:
            pred = [o for o in extractor.extract(text, rid).observations if o.from_report and o.source == "report"]
        elif rid in predictions:
            pred = predictions[rid]
        else:
            missing_pred.append(rid)
            pred = []
        _tally(counts, gold, pred, ontology)
        _tally(positive, [g for g in gold if g.certainty != "absent"], [p for p in pred if p.certainty != "absent"], ontology)
    unmapped_n = sum(unmapped.values())
    return {
        "gold": str(gold_path),
        "format": fmt,
        "labeler": labeler,
        "reports": n_reports,
        "gold_observation_entities": n_obs_entities,
        "gold_entities_mapped": n_obs_entities - unmapped_n,
        "mapped_share": (n_obs_entities - unmapped_n) / n_obs_entities if n_obs_entities else None,
        "gold_observations": n_gold,
        "levels": counts.table(),
        "levels_positive": positive.table(),
        "note": ("levels: every gold and predicted observation; levels_positive: present and uncertain only. radvqa "
                 "expands a normal statement ('lungs are clear', 'no acute cardiopulmonary process') into the "
                 "negatives it implies, which RadGraph annotates as one entity or not at all, so precision over "
                 "all certainties is a lower bound"),
        "unmapped_terms": dict(unmapped.most_common()),
        "reports_without_prediction": missing_pred,
        "extractor": getattr(extractor, "version", None) if predictions is None else "predictions file",
    }


def read_predictions(path: str | Path) -> dict[str, list[Observation]]:
    """``radvqa extract`` output (JSONL of scene graphs / extractions): report id -> observations."""
    import msgspec

    out: dict[str, list[Observation]] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                rid = str(rec.get("study_id") or rec.get("id") or rec.get("report_id"))
                obs = msgspec.convert(rec.get("observations") or [], list[Observation])
            except (ValueError, msgspec.ValidationError, AttributeError) as e:
                raise GoldError(f"{path}:{n}: not a scene-graph line ({e})") from e
            out[rid] = [o for o in obs if o.from_report and o.source == "report"]
    return out


def format_table(res: dict[str, Any]) -> str:
    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.1f}"

    lines = [
        f"{res['reports']} reports ({res['format']}, {res['labeler']}); gold observation entities "
        f"{res['gold_observation_entities']}, mapped to ontology findings {res['gold_entities_mapped']} "
        f"({pct(res['mapped_share'])}%); gold observations after merging per finding and side {res['gold_observations']}",
        "| level | precision | recall | F1 | tp | fp | fn |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, key in (("all certainties", "levels"), ("present + uncertain only", "levels_positive")):
        for k, v in res[key].items():
            lines.append(f"| {k} ({name}) | {pct(v['precision'])} | {pct(v['recall'])} | {pct(v['f1'])} | {v['tp']} | {v['fp']} | {v['fn']} |")
    if res["unmapped_terms"]:
        lines.append("unmapped gold terms: " + ", ".join(f"{k} ({v})" for k, v in list(res["unmapped_terms"].items())[:40]))
    if res["reports_without_prediction"]:
        lines.append(f"reports without a prediction (scored as predicting nothing): {len(res['reports_without_prediction'])}")
    return "\n".join(lines)


def iter_reports(path: str | Path, labeler: str = "labeler_1") -> Iterable[tuple[str, str]]:
    """(report id, text): for `radvqa extract` to make a predictions file from the gold texts."""
    for rid, text, _ in read_gold(path, labeler):
        yield rid, text
