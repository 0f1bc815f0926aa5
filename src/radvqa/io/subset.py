"""``radvqa subset DATASET --balanced | --tier NAME --out DIR2``: named subsets of a build.

``--balanced`` makes an evaluation subset a blind model cannot pass by answer priors
(rules in ``io/data/subset.yaml``):

- rows come from the evaluation splits only (default ``test``), and no subset patient may have
  rows in the parent's train split (checked, never assumed);
- every closed yes/no cell -- (template group, subject), the subject being what the question asks
  about (the finding, region or subcategory: its template slots, read back from the question by
  the template's wordings, ``question_subject``) -- keeps its minority answer whole and
  down-samples the majority to ``max_majority_share`` (0.5: exactly balanced); a cell with one
  answer only cannot be balanced and is dropped (counted in the manifest). The wording is drawn
  independently of the answer, so each exact question text is balanced in expectation too. The
  template group joins templates with the same wordings (``template_group``: rin's closed+ and
  closed-), which a reader cannot tell apart; otherwise it is the template, one per question type;
- multiple-choice rows whose answer is the no-finding option ("no pathology seen") are capped at
  1/k of their (question type, number of options) group, then rows are down-sampled so the correct
  letter is uniform over the positions within each group;
- "none" / "0" answers of open short questions (where / which / how many) are capped per cell at
  the cell's number of positive answers;
- open questions are kept.

``--tier pretrain|finetune`` keeps the rows of grade at least the tier's threshold
(``quality/data/tiers.yaml``, CXR-QBA's release tiers), all splits.

Both write the build contract (``qa/`` and ``scene_graphs/`` Parquet shards, ``manifest.json``
with the subset's seed and its parent, ``rejected.jsonl``, card) and pass ``radvqa validate``:
``studies_in`` = the parent's studies of the chosen splits, ``studies_out`` = those with a kept row,
the rest are reject lines (stage ``subset``). Which rows a rule drops is decided by a stable hash of
(seed, qa_id), so the output depends only on the parent and the seed.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

from radvqa.io.manifest import MANIFEST, REJECTED, read_manifest, write_manifest
from radvqa.io.parquet import QA_ROW_GROUP_ROWS, SG_ROW_GROUP_ROWS, shard_files, write_table_atomic
from radvqa.model import GRADES

PLAN_COLUMNS = ["qa_id", "split", "patient_id", "study_id", "strategy", "question_type", "template_id",
                "question", "answer_short", "choices", "grade"]
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_DATA = Path(__file__).parent / "data" / "subset.yaml"
_TIERS = Path(__file__).parent.parent / "quality" / "data" / "tiers.yaml"
_TEMPLATES = Path(__file__).parent.parent / "generate" / "templates"

# reasons a row is left out (manifest counts them)
R_SPLIT = "not in the evaluation splits"
R_TRAIN_PATIENT = "patient has rows in the parent's train split"
R_ONE_ANSWER = "yes/no cell with a single answer (cannot be balanced)"
R_MAJORITY = "yes/no majority answer down-sampled"
R_NEGATIVE = "none/0 answer above the cell's positive count"
R_POSITION = "multiple-choice position down-sampled"
R_NO_LETTER = "multiple choice without a letter answer"
R_NEG_CHOICE = "multiple choice answered by the no-finding option, above 1/k of its group"
R_GRADE = "grade below the tier"


class SubsetError(ValueError):
    """A subset cannot be made (bad arguments, unreadable parent); the message says why."""


@dataclass
class BalanceRules:
    splits: tuple[str, ...] = ("test",)
    max_majority_share: float = 0.5
    negative_short_answers: tuple[str, ...] = ("none", "0")
    negative_choice_answers: tuple[str, ...] = ("no pathology seen",)
    version: int = 1

    def check(self) -> None:
        if not 0.5 <= self.max_majority_share <= 0.6:
            raise SubsetError(f"max_majority_share must be within [0.5, 0.6] (a yes share of 40-60%), "
                              f"got {self.max_majority_share}")
        if not self.splits:
            raise SubsetError("no evaluation split given")


def load_rules(path: Path | None = None) -> BalanceRules:
    d = yaml.safe_load((path or _DATA).read_text(encoding="utf-8")) or {}
    r = BalanceRules(splits=tuple(d.get("splits", ("test",))),
                     max_majority_share=float(d.get("max_majority_share", 0.5)),
                     negative_short_answers=tuple(str(x).lower() for x in d.get("negative_short_answers", ("none", "0"))),
                     negative_choice_answers=tuple(str(x).lower() for x in d.get("negative_choice_answers",
                                                                                    ("no pathology seen",))),
                     version=int(d.get("version", 1)))
    r.check()
    return r


@lru_cache(maxsize=4)
def load_tiers(path: str | None = None) -> dict[str, dict[str, Any]]:
    """Tier name -> {"min_grade": "B", "description": ...} (grades checked against ``GRADES``)."""
    d = yaml.safe_load(Path(path or _TIERS).read_text(encoding="utf-8")) or {}
    tiers = d.get("tiers") or {}
    for name, t in tiers.items():
        if t.get("min_grade") not in GRADES:
            raise SubsetError(f"tiers.yaml: tier {name!r} has min_grade {t.get('min_grade')!r}, not one of {list(GRADES)}")
    return dict(tiers)


def tier_counts(grades: dict[str, int], tiers: dict[str, dict[str, Any]] | None = None) -> dict[str, int]:
    """Rows per tier from a grade histogram (a manifest's ``counts.grades``)."""
    tiers = tiers if tiers is not None else load_tiers()
    out = {}
    for name, t in tiers.items():
        lim = GRADES.index(t["min_grade"])
        out[name] = sum(int(n) for g, n in grades.items() if g in GRADES and GRADES.index(g) <= lim)
    return out


@lru_cache(maxsize=1)
def _question_patterns() -> dict[str, list[re.Pattern[str]]]:
    """Template id -> one regex per question wording, capturing its slots (template YAML files)."""
    out: dict[str, list[re.Pattern[str]]] = {}
    for f in sorted(_TEMPLATES.glob("*.yaml")):
        d = yaml.safe_load(f.read_text(encoding="utf-8")) or {}
        for t in d.get("templates") or []:
            pats = []
            for q in t.get("questions") or []:
                rx, pos = "", 0
                for m in re.finditer(r"\{(\w+)\}", q):
                    rx += re.escape(q[pos:m.start()])
                    name = m.group(1)
                    rx += f"(?P<{name}>.+?)" if f"(?P<{name}>" not in rx else f"(?P={name})"
                    pos = m.end()
                rx += re.escape(q[pos:])
                pats.append(re.compile(rx + r"\Z", re.S))
            out[str(t.get("id"))] = pats
    return out


@lru_cache(maxsize=1)
def _template_groups() -> dict[str, str]:
    """Template id -> its group: templates with the same question wordings (rin's closed+ and
    closed-, one always "yes", the other always "no") are one question to a reader, so they are
    balanced, and audited, together. Named by the ids joined with "+"."""
    by_words: dict[tuple[str, ...], list[str]] = {}
    for f in sorted(_TEMPLATES.glob("*.yaml")):
        d = yaml.safe_load(f.read_text(encoding="utf-8")) or {}
        for t in d.get("templates") or []:
            by_words.setdefault(tuple(sorted(t.get("questions") or [])), []).append(str(t.get("id")))
    return {tid: "+".join(sorted(ids)) for ids in by_words.values() for tid in ids}


def template_group(template_id: str) -> str:
    return _template_groups().get(template_id, template_id)


def question_subject(template_id: str, question: str) -> str:
    """What a question asks about, whatever its wording: the slot values of the template wording
    it matches ("Is there any {finding}?" -> "nodule"; options of multiple choice left out), or the
    question itself when no wording of the template matches (a template from elsewhere)."""
    for rx in _question_patterns().get(template_id, ()):
        m = rx.match(question)
        if m:
            return "\x1f".join(f"{k}={v}" for k, v in sorted(m.groupdict().items()) if k != "options")
    return question


def _rank(seed: int, qa_id: str) -> bytes:
    return hashlib.blake2b(f"{seed}\x1f{qa_id}".encode(), digest_size=8).digest()


def _take(idx: list[int], m: int, ids: Sequence[str], seed: int) -> tuple[list[int], list[int]]:
    """(kept, dropped): the ``m`` rows of ``idx`` first in (seed, qa_id) hash order."""
    order = sorted(idx, key=lambda i: _rank(seed, ids[i]))
    return order[:m], order[m:]


def yes_no(short: Any, choices: Any) -> str | None:
    if choices:
        return None
    s = (short or "").strip().lower()
    return s if s in ("yes", "no") else None


@dataclass
class Plan:
    keep: list[bool]
    dropped: Counter[str] = field(default_factory=Counter)
    info: dict[str, Any] = field(default_factory=dict)


def plan_balanced(rows: dict[str, list[Any]], rules: BalanceRules, seed: int) -> Plan:
    """Which rows of ``rows`` (columns ``PLAN_COLUMNS``) the balanced subset keeps."""
    ids = rows["qa_id"]
    n = len(ids)
    keep = [False] * n
    plan = Plan(keep)
    splits = set(rules.splits)
    train_patients = {p for p, s in zip(rows["patient_id"], rows["split"]) if s == "train"}
    yn: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(lambda: {"yes": [], "no": []})
    mc: dict[tuple[str, int], dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    short: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(lambda: {"neg": [], "pos": []})
    neg = set(rules.negative_short_answers)
    for i in range(n):
        if rows["split"][i] not in splits:
            plan.dropped[R_SPLIT] += 1
            continue
        if rows["patient_id"][i] in train_patients:
            plan.dropped[R_TRAIN_PATIENT] += 1
            continue
        qt, q, s, ch = rows["question_type"][i], rows["question"][i], rows["answer_short"][i], rows["choices"][i]
        a = yes_no(s, ch)
        subj = question_subject(rows["template_id"][i], q)
        grp = template_group(rows["template_id"][i])
        if a is not None:
            yn[(grp, subj)][a].append(i)
        elif ch:
            letter = (s or "").strip().upper()
            pos = LETTERS.find(letter) if len(letter) == 1 else -1
            if 0 <= pos < len(ch):
                mc[(qt, len(ch))][pos].append(i)
            else:
                plan.dropped[R_NO_LETTER] += 1
        elif s is not None:
            short[(grp, subj)]["neg" if s.strip().lower() in neg else "pos"].append(i)
        else:
            keep[i] = True  # open question
    share = rules.max_majority_share
    cells = Counter()
    for (qt, _q), d in sorted(yn.items()):
        y, no = d["yes"], d["no"]
        lo, hi = (y, no) if len(y) <= len(no) else (no, y)
        if not lo:
            cells["yes_no_unbalanceable"] += 1
            plan.dropped[R_ONE_ANSWER] += len(hi)
            continue
        cells["yes_no_kept"] += 1
        m = int(len(lo) * share / (1.0 - share) + 1e-9)  # majority rows allowed beside len(lo) minority rows
        kept, dropped = _take(hi, m, ids, seed)
        for i in lo + kept:
            keep[i] = True
        plan.dropped[R_MAJORITY] += len(dropped)
    for (qt, _q), d in sorted(short.items()):
        kept, dropped = _take(d["neg"], len(d["pos"]), ids, seed)
        for i in d["pos"] + kept:
            keep[i] = True
        plan.dropped[R_NEGATIVE] += len(dropped)
        cells["short_capped" if dropped else "short_kept"] += 1
    positions: dict[str, dict[str, int]] = {}
    neg_choice = set(rules.negative_choice_answers)
    for (qt, k), by_pos in sorted(mc.items()):
        # the "nothing there" option ("no pathology seen", the answer of every normal image) is
        # capped at 1/k of the group's rows: always picking it must not beat chance
        rows_all = [i for p in range(k) for i in by_pos.get(p, [])]
        is_neg = {i for i in rows_all if str(rows["choices"][i][LETTERS.find(rows["answer_short"][i].strip().upper())]).lower()
                  in neg_choice}
        if is_neg:
            n_other = len(rows_all) - len(is_neg)
            kept_neg, dropped = _take(sorted(is_neg), n_other // (k - 1), ids, seed)
            plan.dropped[R_NEG_CHOICE] += len(dropped)
            gone = set(dropped)
            by_pos = {p: [i for i in by_pos.get(p, []) if i not in gone] for p in range(k)}
        m = min(len(by_pos.get(p, [])) for p in range(k))
        for p in range(k):
            kept, dropped = _take(by_pos.get(p, []), m, ids, seed)
            for i in kept:
                keep[i] = True
            plan.dropped[R_POSITION] += len(dropped)
        positions[f"{qt} ({k} options)"] = {LETTERS[p]: m for p in range(k)}
    plan.info = {"cells": dict(sorted(cells.items())), "multiple_choice_positions": positions}
    return plan


def plan_tier(rows: dict[str, list[Any]], tier: str, tiers: dict[str, dict[str, Any]]) -> Plan:
    if tier not in tiers:
        raise SubsetError(f"unknown tier {tier!r}; known: {sorted(tiers)} (quality/data/tiers.yaml)")
    lim = GRADES.index(tiers[tier]["min_grade"])
    keep = []
    plan = Plan(keep)
    for g in rows["grade"]:
        ok = g in GRADES and GRADES.index(g) <= lim
        keep.append(ok)
        if not ok:
            plan.dropped[R_GRADE] += 1
    plan.info = {"tier": tier, "min_grade": tiers[tier]["min_grade"], "description": tiers[tier].get("description", "")}
    return plan


def _read_plan_rows(parent: Path) -> tuple[dict[str, list[Any]], list[int]]:
    """The planning columns of every QA row (shard order) and each shard's row count."""
    files = shard_files(parent, "qa")
    if not files:
        raise SubsetError(f"{parent}: no qa/part-*.parquet files (is it a radvqa build output?)")
    cols: dict[str, list[Any]] = {c: [] for c in PLAN_COLUMNS}
    sizes = []
    for f in files:
        t = pq.read_table(f, columns=PLAN_COLUMNS)
        sizes.append(t.num_rows)
        for c in PLAN_COLUMNS:
            cols[c].extend(t.column(c).to_pylist())
    return cols, sizes


def _counts(rows: dict[str, list[Any]], keep: list[bool], sg_split: dict[str, str], studies_in: int,
            kept_studies: set[str]) -> dict[str, Any]:
    by = {k: Counter() for k in ("strategy", "question_type", "grade", "split")}
    patients = set()
    for i, k in enumerate(keep):
        if not k:
            continue
        for c in by:
            v = rows[c][i]
            by[c][v if v is not None else "ungraded"] += 1
        patients.add(rows["patient_id"][i])
    out = len(kept_studies)
    return {
        "studies_in": studies_in,
        "studies_out": out,
        "studies_rejected": studies_in - out,
        "patients": len(patients),
        "scene_graphs": out,
        "qa_rows": sum(keep),
        "qa_by_strategy": dict(sorted(by["strategy"].items())),
        "qa_by_question_type": dict(sorted(by["question_type"].items())),
        "grades": dict(sorted(by["grade"].items())),
        "qa_by_split": dict(sorted(by["split"].items())),
        "studies_by_split": dict(sorted(Counter(sg_split[s] for s in kept_studies).items())),
        "rejected_lines": studies_in - out,
        "rejects_by_stage": {"subset": studies_in - out} if studies_in - out else {},
    }


def subset(parent: Path | str, out: Path | str, *, balanced: bool = False, tier: str | None = None,
           seed: int = 0, splits: Sequence[str] | None = None, rules: BalanceRules | None = None) -> dict[str, Any]:
    """Write the subset to ``out``; returns its manifest. (The shortcut audit of its card is run by
    the command, ``radvqa.eval.shortcuts``: eval is a layer above io.)"""
    import time

    from radvqa import __version__
    from radvqa.io.card import write_card
    from radvqa.io.atomic import write_atomic as write_text_atomic

    t0 = time.perf_counter()
    parent, out = Path(parent).resolve(), Path(out)
    if balanced == (tier is not None):
        raise SubsetError("give exactly one of --balanced or --tier NAME")
    pm = read_manifest(parent)
    if out.resolve() == parent:
        raise SubsetError("--out must differ from the parent dataset")
    if out.exists() and any(out.iterdir()):
        raise SubsetError(f"{out} exists and is not empty: choose a new folder")
    rows, sizes = _read_plan_rows(parent)
    if balanced:
        rules = rules or load_rules()
        if splits:
            rules = BalanceRules(tuple(splits), rules.max_majority_share, rules.negative_short_answers,
                                 rules.negative_choice_answers, rules.version)
            rules.check()
        plan = plan_balanced(rows, rules, seed)
        chosen_splits = list(rules.splits)
        name = "balanced"
    else:
        plan = plan_tier(rows, tier or "", load_tiers())
        chosen_splits = sorted(set(splits)) if splits else None
        if chosen_splits:
            for i, s in enumerate(rows["split"]):
                if plan.keep[i] and s not in chosen_splits:
                    plan.keep[i] = False
                    plan.dropped[R_SPLIT] += 1
        name = f"tier:{tier}"
    keep = plan.keep
    kept_studies = {rows["study_id"][i] for i, k in enumerate(keep) if k}
    # patient disjointness from training, on what is written (not only by construction)
    if balanced:
        train_p = {p for p, s in zip(rows["patient_id"], rows["split"]) if s == "train"}
        leak = {rows["patient_id"][i] for i, k in enumerate(keep) if k} & train_p
        if leak:
            raise AssertionError(f"balanced subset would hold {len(leak)} patients of the train split")

    out.mkdir(parents=True, exist_ok=True)
    tmp_dirs = [out / "qa", out / "scene_graphs"]
    try:
        # QA shards: one output shard per parent shard, rows in parent order
        qa_rel = []
        start = 0
        for k, (f, size) in enumerate(zip(shard_files(parent, "qa"), sizes)):
            mask = pa.array(keep[start:start + size], type=pa.bool_())
            start += size
            t = pq.read_table(f).filter(mask)
            rel = f"qa/part-{k:05d}.parquet"
            write_table_atomic(out / rel, t, QA_ROW_GROUP_ROWS)
            qa_rel.append(rel)
        # scene graphs: the studies of the chosen splits are the subset's input studies
        sg_rel = []
        sg_split: dict[str, str] = {}
        rejects: list[str] = []
        studies_in = 0
        kept_arr = pa.array(sorted(kept_studies), type=pa.string())
        for k, f in enumerate(shard_files(parent, "scene_graphs")):
            t = pq.read_table(f)
            sids = t.column("study_id").to_pylist()
            sps = t.column("split").to_pylist()
            for sid, sp in zip(sids, sps):
                if chosen_splits is None or sp in chosen_splits:
                    studies_in += 1
                    sg_split[sid] = sp
                    if sid not in kept_studies:
                        rejects.append(json.dumps({"source": pm.get("source", "?"), "ref": sid, "stage": "subset",
                                                   "reason": f"{name} subset: no question of this study kept"},
                                                  ensure_ascii=False))
            t = t.filter(pc.is_in(t.column("study_id"), value_set=kept_arr))
            rel = f"scene_graphs/part-{k:05d}.parquet"
            write_table_atomic(out / rel, t, SG_ROW_GROUP_ROWS)
            sg_rel.append(rel)
        write_text_atomic(out / REJECTED, "".join(r + "\n" for r in rejects))
        counts = _counts(rows, keep, sg_split, studies_in, kept_studies)
        parent_eval = [i for i, s in enumerate(rows["split"]) if chosen_splits is None or s in chosen_splits]
        closed_parent = sum(1 for i in parent_eval if yes_no(rows["answer_short"][i], rows["choices"][i]) or rows["choices"][i])
        closed_kept = sum(1 for i in parent_eval if keep[i] and (yes_no(rows["answer_short"][i], rows["choices"][i]) or rows["choices"][i]))
        types_parent = sorted({rows["question_type"][i] for i in parent_eval})
        types_kept = set(counts["qa_by_question_type"])
        yes = sum(1 for i, k in enumerate(keep) if k and yes_no(rows["answer_short"][i], rows["choices"][i]) == "yes")
        no = sum(1 for i, k in enumerate(keep) if k and yes_no(rows["answer_short"][i], rows["choices"][i]) == "no")
        info: dict[str, Any] = {
            "name": name,
            "seed": seed,
            "splits": chosen_splits or "all",
            "parent": {"path": str(parent), "source": pm.get("source"), "seed": pm.get("seed"),
                       "qa_rows": pm.get("counts", {}).get("qa_rows"),
                       "manifest_blake2b": hashlib.blake2b((parent / MANIFEST).read_bytes(), digest_size=16).hexdigest(),
                       "subset": (pm.get("subset") or {}).get("name")},
            "rows_dropped_by_reason": dict(sorted((k, v) for k, v in plan.dropped.items() if v)),
            "parent_closed_rows_in_splits": closed_parent,
            "closed_rows_kept": closed_kept,
            "closed_rows_kept_share": round(closed_kept / closed_parent, 4) if closed_parent else None,
            "yes_share": round(yes / (yes + no), 4) if yes + no else None,
            "question_types_of_parent_splits": len(types_parent),
            "question_types_lost": [q for q in types_parent if q not in types_kept],
            **plan.info,
        }
        if balanced and rules is not None:
            info["rules"] = {"version": rules.version, "max_majority_share": rules.max_majority_share,
                             "negative_short_answers": list(rules.negative_short_answers),
                             "negative_choice_answers": list(rules.negative_choice_answers)}
        manifest: dict[str, Any] = {
            "manifest_version": pm.get("manifest_version", 1),
            "radvqa_version": __version__,
            "schema_version": pm.get("schema_version"),
            "source": pm.get("source"),
            "inputs": pm.get("inputs", []),
            "image_roots": pm.get("image_roots", []),
            "seed": seed,
            "options": pm.get("options", {}),
            "subset": info,
            "counts": counts,
            "shards": {"count": len(qa_rel), "qa": qa_rel, "scene_graphs": sg_rel},
            "timings": {"wall": 0.0},
        }
        if pm.get("counts", {}).get("grades"):
            info["parent_tier_counts"] = tier_counts(pm["counts"]["grades"])
        write_manifest(out, manifest)
        write_card(out, manifest)
        manifest["timings"]["wall"] = round(time.perf_counter() - t0, 3)
        write_manifest(out, manifest)
    except BaseException:
        for d in tmp_dirs:
            shutil.rmtree(d, ignore_errors=True)
        for p in (out / MANIFEST, out / REJECTED, out / "README.md", out / "qa_stats.png", out / "shortcuts.json"):
            p.unlink(missing_ok=True)
        raise
    return manifest
