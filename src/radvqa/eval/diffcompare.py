"""radvqa's diff family beside Medical-Diff-VQA on the same MIMIC-CXR studies and pairs.

Inputs: a radvqa build of MIMIC-CXR (``radvqa build mimic-cxr ...``: its scene graphs and QA rows)
and a Medical-Diff-VQA dataset imported with ``radvqa import medical-diff-vqa``. Studies are
matched by the MIMIC study id (``mimic-cxr:<id>`` on both sides).

What is compared, and how (each figure is printed with its denominator):

- **coverage**: Medical-Diff-VQA's pairs (its difference rows), how many have both studies in the
  build, and for how many radvqa asks its diff questions about exactly that pair (radvqa pairs a
  study with the patient's previous study; Medical-Diff-VQA with an earlier one). Its questions
  per type whose main study is in the build.
- **presence agreement** (closed): "is there X?" questions (the presence type), X mapped to an
  ontology finding through ``eval/data/medical_diff_vqa.yaml``; radvqa's answer is read from the
  main study's scene graph: "yes" when an observation of X (or of a more specific finding whose
  nearest mapped ancestor is X) is present, "no" when none is present or uncertain, and *uncertain* (left out of the agreement,
  counted) when the report hedges it. Agreement and Cohen's kappa over the questions both answer.
- **difference agreement**: for pairs with both scene graphs, the findings Medical-Diff-VQA says
  the main image has in addition to / is missing compared with the reference, against the same
  sets computed from radvqa's two scene graphs, both restricted to the mapped vocabulary:
  exact-set agreement and micro precision / recall of radvqa's items against Medical-Diff-VQA's.
  Level changes are not compared (radvqa's severity words and its levels differ).

Unmapped finding names are listed with their counts; nothing is dropped silently.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import yaml

from radvqa.eval.diffvqa import _ADD, _MISS, _names

_PRESENCE = (
    re.compile(r"^is there evidence of (.+?) in this image\?$"),
    re.compile(r"^is there (.+?) in the .+\?$"),
    re.compile(r"^is there (.+?)\?$"),
)


@lru_cache(maxsize=1)
def name_map() -> dict[str, str | None]:
    text = resources.files("radvqa.eval").joinpath("data/medical_diff_vqa.yaml").read_text("utf-8")
    return dict(yaml.safe_load(text)["findings"])


def _read(root: Path, sub: str, columns: list[str]) -> dict[str, list[Any]]:
    t = ds.dataset(str(root / sub), format="parquet").to_table(columns=columns)
    return {c: t.column(c).to_pylist() for c in columns}


class SceneGraphs:
    """Per study: Medical-Diff-VQA finding -> strongest certainty stated (present > uncertain >
    absent). A radvqa finding counts as the vocabulary finding it is, or else as its nearest
    ancestor in the vocabulary ("lobar atelectasis" -> atelectasis); it is not credited to every
    ancestor, since Medical-Diff-VQA names only what the report names (consolidation does not make
    it list "lung opacity" as well)."""

    def __init__(self, build: Path, ontology: Any, vocab: set[str]) -> None:
        sg = _read(build, "scene_graphs", ["study_id", "observations"])
        rank = {"absent": 0, "uncertain": 1, "present": 2}
        proj: dict[str, str | None] = {}
        self.status: dict[str, dict[str, int]] = {}
        for sid, obs in zip(sg["study_id"], sg["observations"]):
            st: dict[str, int] = {}
            for o in obs or []:
                f = o["finding"]
                if f not in proj:
                    proj[f] = f if f in vocab else next((a for a in ontology.ancestors(f) if a in vocab), None)
                v = proj[f]
                r = rank.get(o["certainty"], 0)
                if v is not None and r > st.get(v, -1):
                    st[v] = r
            self.status[sid] = st

    def answer(self, study: str, finding: str) -> str:
        r = self.status[study].get(finding, 0)
        return ("no", "uncertain", "yes")[r]


def _kappa(pairs: list[tuple[str, str]]) -> float | None:
    n = len(pairs)
    if n == 0:
        return None
    po = sum(a == b for a, b in pairs) / n
    ca, cb = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    pe = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    return None if pe == 1 else (po - pe) / (1 - pe)


def compare(build: str | Path, mdvqa: str | Path, ontology: Any = None) -> dict[str, Any]:
    if ontology is None:
        from radvqa.ontology import load_ontology

        ontology = load_ontology()
    build, mdvqa = Path(build), Path(mdvqa)
    names = name_map()
    vocab = {f for f in names.values() if f}
    graphs = SceneGraphs(build, ontology, vocab)
    qa = _read(build, "qa", ["strategy", "study_id", "reference_study_id"])
    radvqa_pairs = {(s, r) for st, s, r in zip(qa["strategy"], qa["study_id"], qa["reference_study_id"]) if st == "diff" and r}
    md = _read(mdvqa, "qa", ["study_id", "reference_study_id", "question_type", "question", "answer"])
    unmapped: Counter[str] = Counter()

    def fid(name: str) -> str | None:
        if name in names:
            f = names[name]
        else:
            from radvqa.sources.base import finding_for_term

            hit = finding_for_term(ontology, name)
            f = hit[0] if len(hit) == 1 else None
        if f is None:
            unmapped[name] += 1
        return f

    by_type: dict[str, list[int]] = defaultdict(list)  # [questions, main study in build]
    pairs_total = pairs_both = pairs_same = 0
    presence: list[tuple[str, str]] = []
    presence_uncertain = presence_unmapped = 0
    diff_n = diff_add_exact = diff_miss_exact = 0
    tp = fp = fn = 0
    for sid, ref, qtype, q, a in zip(md["study_id"], md["reference_study_id"], md["question_type"], md["question"], md["answer"]):
        c = by_type.setdefault(qtype, [0, 0])
        c[0] += 1
        in_build = sid in graphs.status
        c[1] += in_build
        if qtype == "difference":
            pairs_total += 1
            if not (in_build and ref in graphs.status):
                continue
            pairs_both += 1
            pairs_same += (sid, ref) in radvqa_pairs
            text = a.strip()
            m_add, m_miss = _ADD.search(text), _MISS.search(text)
            add = {f for f in map(fid, _names(m_add.group(1)) if m_add else []) if f}
            miss = {f for f in map(fid, _names(m_miss.group(1)) if m_miss else []) if f}
            r_add = {f for f in vocab if graphs.answer(sid, f) == "yes" and graphs.answer(ref, f) != "yes"}
            r_miss = {f for f in vocab if graphs.answer(ref, f) == "yes" and graphs.answer(sid, f) != "yes"}
            diff_n += 1
            diff_add_exact += add == r_add
            diff_miss_exact += miss == r_miss
            tp += len(add & r_add) + len(miss & r_miss)
            fp += len(r_add - add) + len(r_miss - miss)
            fn += len(add - r_add) + len(miss - r_miss)
        elif qtype == "presence" and in_build and a.strip().lower() in ("yes", "no"):
            m = next((p.match(q.strip().lower()) for p in _PRESENCE if p.match(q.strip().lower())), None)
            f = fid(m.group(1)) if m else None
            if f is None:
                presence_unmapped += 1
                continue
            ours = graphs.answer(sid, f)
            if ours == "uncertain":
                presence_uncertain += 1
                continue
            presence.append((a.strip().lower(), ours))
    agree = sum(x == y for x, y in presence)
    return {
        "coverage": {
            "pairs": pairs_total,
            "pairs_with_both_studies_built": pairs_both,
            "pairs_radvqa_asks_diff_questions_about": pairs_same,
            "note": "radvqa pairs a study with the patient's previous study; Medical-Diff-VQA with any earlier one",
            "questions_by_type": {t: {"questions": v[0], "main_study_built": v[1]} for t, v in sorted(by_type.items())},
        },
        "presence": {
            "compared": len(presence),
            "agree": agree,
            "agreement": agree / len(presence) if presence else None,
            "kappa": _kappa(presence),
            "radvqa_uncertain_left_out": presence_uncertain,
            "finding_not_mapped_left_out": presence_unmapped,
            "confusion": {f"mdvqa {x} / radvqa {y}": n for (x, y), n in sorted(Counter(presence).items())},
        },
        "difference": {
            "pairs_compared": diff_n,
            "added_set_exact": diff_add_exact,
            "missing_set_exact": diff_miss_exact,
            "items_tp_fp_fn": [tp, fp, fn],
            "precision": tp / (tp + fp) if tp + fp else None,
            "recall": tp / (tp + fn) if tp + fn else None,
            "vocabulary": sorted(vocab),
        },
        "unmapped_names": dict(unmapped.most_common()),
    }


def format_table(res: dict[str, Any]) -> str:
    c, p, d = res["coverage"], res["presence"], res["difference"]

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.1f}%"

    lines = [
        f"pairs: {c['pairs']}; both studies built: {c['pairs_with_both_studies_built']}; "
        f"radvqa asks diff questions about the same pair: {c['pairs_radvqa_asks_diff_questions_about']}",
        "questions by type (main study built / all): " + ", ".join(f"{t} {v['main_study_built']}/{v['questions']}" for t, v in c["questions_by_type"].items()),
        f"presence yes/no: agreement {pct(p['agreement'])} of {p['compared']} (kappa "
        f"{'n/a' if p['kappa'] is None else round(p['kappa'], 3)}); left out: {p['radvqa_uncertain_left_out']} hedged by radvqa, "
        f"{p['finding_not_mapped_left_out']} finding not mapped",
        f"difference: {d['pairs_compared']} pairs; added set equal {d['added_set_exact']}, missing set equal {d['missing_set_exact']}; "
        f"items precision {pct(d['precision'])}, recall {pct(d['recall'])} (tp/fp/fn {d['items_tp_fp_fn']})",
    ]
    if res["unmapped_names"]:
        lines.append("unmapped finding names: " + ", ".join(f"{k} ({v})" for k, v in res["unmapped_names"].items()))
    return "\n".join(lines)
