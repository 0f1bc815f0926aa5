"""``radvqa grade``: the judge pass over a built dataset.

For every QA row whose study has a report (``scene_graphs``, joined by ``study_id``) one request
asks the judge for a verdict per criterion (:mod:`radvqa.quality.judge`); the row's grade becomes the
worst of its rule grade and the criteria's grades, and ``grade_reasons`` gain
``judge:<criterion>:<verdict>-><grade>``. Rows of label-only studies get ``judge:not_applicable``;
rows the judge could not grade keep their rule grade and get ``judge:failed``. Nothing is dropped.

Shards are rewritten one at a time with the io area's ``ShardWriter`` (temp name, then rename), in
the same row order and schema, so an interrupted in-place pass leaves every shard either old or new.
Progress (per-shard counts) goes to ``.radvqa/judge.json`` after each shard; ``resume`` skips
finished shards, and rows that already carry ``judge:`` reasons are never judged twice. With the
on-disk cache a rerun sends no request for rows already answered.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from radvqa.model import GRADES, QA, SceneGraph
from radvqa.quality.criteria import GRADE_INDEX
from radvqa.quality.judge import CriteriaJudge, JudgePrompt, verdict_reasons

STATE_FILE = "judge.json"
_CHUNK = 512
NA = "judge:not_applicable"
FAILED = "judge:failed"
_SENT_ID = re.compile(r"^(S\d+)\s*:")
_RULE_REASON = re.compile(r"->(A\+\+|A\+|A|B|C|D)$")


class GradeError(RuntimeError):
    """The pass cannot start or continue (bad input folder, mismatched resume); message says why."""


@dataclass
class ShardCounts:
    rows: int = 0
    judged: int = 0
    failed: int = 0
    not_applicable: int = 0
    not_judged_limit: int = 0
    lowered: int = 0
    from_cache: int = 0
    before: Counter = field(default_factory=Counter)
    after: Counter = field(default_factory=Counter)
    verdicts: dict[str, Counter] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, Counter) else
                    {c: dict(x) for c, x in v.items()} if k == "verdicts" else v)
                for k, v in self.__dict__.items()}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ShardCounts:
        s = cls(**{k: v for k, v in d.items() if k not in ("before", "after", "verdicts")})
        s.before, s.after = Counter(d.get("before", {})), Counter(d.get("after", {}))
        s.verdicts = {c: Counter(x) for c, x in d.get("verdicts", {}).items()}
        return s

    def add(self, o: ShardCounts) -> None:
        for k in ("rows", "judged", "failed", "not_applicable", "not_judged_limit", "lowered", "from_cache"):
            setattr(self, k, getattr(self, k) + getattr(o, k))
        self.before.update(o.before)
        self.after.update(o.after)
        for c, x in o.verdicts.items():
            self.verdicts.setdefault(c, Counter()).update(x)


# -- prompt ----------------------------------------------------------------------------------------


def highlight_report(sg: SceneGraph, cited: set[str]) -> tuple[str, list[str]]:
    """Report text with cited sentences wrapped in ``[[ ]]`` (by their offsets), and those sentences."""
    assert sg.report is not None
    text = sg.report.text
    spans = sorted((s for s in sg.report.sentences if s.id in cited), key=lambda s: s.start, reverse=True)
    for s in spans:
        if 0 <= s.start <= s.end <= len(text) and text[s.start:s.end] == s.text:
            text = text[:s.start] + "[[" + text[s.start:s.end] + "]]" + text[s.end:]
        elif s.text and s.text in text:  # offsets disagree with the text: mark the first occurrence
            text = text.replace(s.text, "[[" + s.text + "]]", 1)
    lines = [f"{s.id}: {s.text}" for s in sg.report.sentences if s.id in cited]
    return text, lines


def user_prompt(prompt: JudgePrompt, qa: QA, sg: SceneGraph, prior: SceneGraph | None) -> str:
    cited = {m.group(1) for p in qa.provenance if (m := _SENT_ID.match(p))}
    report, lines = highlight_report(sg, cited)
    other = [p for p in qa.provenance if not _SENT_ID.match(p)]
    if other:
        lines.append("other sources (labels, annotations): " + "; ".join(other))
    prior_text = ""
    if prior is not None and prior.report is not None and prior.report.text.strip():
        prior_text = f"\nReport of the earlier (reference) study:\n{prior.report.text}\n"
    return prompt.user.format(report=report, prior=prior_text, cited="\n".join(lines) or "(none)",
                              question=qa.question, answer=qa.answer)


# -- the pass --------------------------------------------------------------------------------------


def _rule_grade(qa: QA) -> str:
    """The grade before any judge reasons: the row's grade, or, for a row already judged (resume
    after a crash between rename and progress write), the worst grade its rule reasons name."""
    if not any(r.startswith("judge:") for r in qa.grade_reasons):
        return qa.grade or "ungraded"
    g = 0
    for r in qa.grade_reasons:
        m = _RULE_REASON.search(r)
        if m and not r.startswith("judge:"):
            g = max(g, GRADE_INDEX[m.group(1)])
    return GRADES[g]


def _count_existing(qa: QA, st: ShardCounts) -> None:
    """Count a row that already carries judge reasons from an earlier, interrupted pass."""
    rs = qa.grade_reasons
    if NA in rs:
        st.not_applicable += 1
    elif FAILED in rs:
        st.failed += 1
    else:
        st.judged += 1
        for r in rs:
            parts = r.split(":")
            if len(parts) == 3 and parts[0] == "judge":
                st.verdicts.setdefault(parts[1], Counter())[parts[2].split("->")[0]] += 1
        if GRADE_INDEX.get(qa.grade or "", 0) > GRADE_INDEX.get(_rule_grade(qa), 0):
            st.lowered += 1


def _load_reports(src: Path) -> dict[str, SceneGraph]:
    from radvqa.io import iter_objects

    return {sg.study_id: sg for sg in iter_objects(src, "scene_graphs")}


def _has_report(sg: SceneGraph | None) -> bool:
    return sg is not None and sg.report is not None and bool(sg.report.text.strip())


def _write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    from radvqa.io.atomic import write_atomic

    write_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n")


def _prepare_out(src: Path, out: Path, resume: bool) -> None:
    """Copy everything but the QA shards from ``src`` to a fresh ``out``."""
    if out.exists() and any(out.iterdir()) and not resume:
        raise GradeError(f"{out} exists and is not empty (use another --out, or --resume to finish a pass)")
    from radvqa.io.atomic import state_dir

    skip = {(src / "qa").resolve(): lambda n: n.endswith(".parquet"),
            state_dir(src).resolve(): lambda n: n == STATE_FILE}

    def ignore(d: str, names: list[str]) -> list[str]:
        test = skip.get(Path(d).resolve())
        return [n for n in names if test(n)] if test else []

    shutil.copytree(src, out, dirs_exist_ok=True, ignore=ignore)


def grade_dataset(src: Path | str, judge: CriteriaJudge, out: Path | str | None = None, *,
                  limit: int | None = None, concurrency: int = 4, resume: bool = False,
                  on_shard: Callable[[str, ShardCounts], None] | None = None,
                  card: bool = True) -> dict[str, Any]:
    """Run the judge over ``src``; write to ``out`` (default: ``src`` in place). Returns the
    manifest's new ``judge`` section. ``card``: rewrite README.md and its plot with the new grades."""
    from radvqa.io.manifest import read_manifest, write_manifest
    from radvqa.io.parquet import ShardWriter, shard_files
    from radvqa.io.schema import codec
    from radvqa.io.atomic import state_dir

    import pyarrow.parquet as pq

    src = Path(src)
    manifest = read_manifest(src)  # raises FileNotFoundError with a clear message
    shards = shard_files(src, "qa")
    if not shards:
        raise GradeError(f"{src}/qa holds no part-*.parquet shards")
    out_dir = Path(out) if out is not None else src
    in_place = out_dir.resolve() == src.resolve()
    if not in_place:
        _prepare_out(src, out_dir, resume)
    prompt = judge.prompt
    state_path = state_dir(out_dir) / STATE_FILE
    state: dict[str, Any] = {"model": judge.model, "prompt_version": prompt.version, "shards": {}}
    if state_path.exists():
        old = json.loads(state_path.read_text(encoding="utf-8"))
        if not resume:
            raise GradeError(f"{state_path} shows an earlier or interrupted judge pass: pass --resume to "
                             "finish it, or grade a fresh build")
        if (old.get("model"), old.get("prompt_version")) != (judge.model, prompt.version):
            raise GradeError(f"--resume with model {judge.model!r} / prompt {prompt.version!r}, but the "
                             f"earlier pass used {old.get('model')!r} / {old.get('prompt_version')!r}")
        state = old
    elif manifest.get("judge") and not resume:
        raise GradeError(f"{src} was already graded by a judge ({manifest['judge'].get('model')}); "
                         "grade a fresh build")

    reports = _load_reports(src)
    qa_codec = codec("qa")
    total = ShardCounts()
    budget = [limit if limit is not None else -1]  # rows the judge may still be asked about
    t0 = time.perf_counter()
    for f in shards:
        name = f.name
        done = state["shards"].get(name)
        if done is not None and done.get("complete"):
            total.add(ShardCounts.from_json(done["counts"]))
            continue
        # resuming into another folder: a shard written there already holds the judged rows
        prev = out_dir / "qa" / name
        read_from = prev if resume and not in_place and prev.exists() else f
        rows: list[QA] = qa_codec.from_table(pq.read_table(read_from))
        st = ShardCounts(rows=len(rows))
        todo: list[int] = []
        for i, qa in enumerate(rows):
            st.before[_rule_grade(qa)] += 1
            if any(r.startswith("judge:") for r in qa.grade_reasons):
                _count_existing(qa, st)
            elif not _has_report(reports.get(qa.study_id)):
                qa.grade_reasons = [*qa.grade_reasons, NA]
                st.not_applicable += 1
            elif budget[0] == 0:
                st.not_judged_limit += 1
            else:
                todo.append(i)
                budget[0] -= 1
        results = []
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as ex:
            for k in range(0, len(todo), _CHUNK):  # prompts built per chunk: memory stays bounded
                users = [user_prompt(prompt, rows[i], reports[rows[i].study_id],
                                     reports.get(rows[i].reference_study_id or "")) for i in todo[k:k + _CHUNK]]
                results.extend(ex.map(judge.judge, users))
        for i, res in zip(todo, results):
            qa = rows[i]
            if res.verdicts is None:
                qa.grade_reasons = [*qa.grade_reasons, FAILED]
                st.failed += 1
                continue
            st.judged += 1
            st.from_cache += int(res.cached)
            worst, reasons = verdict_reasons(res.verdicts, prompt)
            for c, v in res.verdicts.items():
                st.verdicts.setdefault(c, Counter())[v] += 1
            rule = GRADE_INDEX.get(qa.grade or "A++", 0)
            if worst > rule:
                qa.grade = GRADES[worst]
                st.lowered += 1
            qa.grade_reasons = [*qa.grade_reasons, *reasons]
        for qa in rows:
            st.after[qa.grade or "ungraded"] += 1
        with ShardWriter(out_dir / "qa" / name, "qa") as w:
            w.extend(rows)
        state["shards"][name] = {"complete": st.not_judged_limit == 0, "counts": st.to_json()}
        _write_json_atomic(state_path, state)
        total.add(st)
        if on_shard:
            on_shard(name, st)

    order = [*GRADES, "ungraded"]
    section = {
        "model": judge.model,
        "prompt_version": prompt.version,
        "temperature": 0,
        "criteria": {c: v for c, v in prompt.criteria.items()},
        "rows": total.rows,
        "judged": total.judged,
        "failed": total.failed,
        "not_applicable": total.not_applicable,
        "not_judged_limit": total.not_judged_limit,
        "lowered": total.lowered,
        "from_cache": total.from_cache,
        "failure_reasons": dict(judge.errors),
        "requests": judge.requests,
        "verdicts": {c: dict(sorted(x.items())) for c, x in sorted(total.verdicts.items())},
        "grades_before": {g: total.before[g] for g in order if total.before[g]},
        "grades_after": {g: total.after[g] for g in order if total.after[g]},
        "wall_s": round(time.perf_counter() - t0, 3),
    }
    if total.rows != total.judged + total.failed + total.not_applicable + total.not_judged_limit:
        raise AssertionError(f"judge counts do not add up: {section}")
    manifest["judge"] = section
    manifest.setdefault("counts", {})["grades"] = section["grades_after"]
    write_manifest(out_dir, manifest)
    if card:
        from radvqa.io.card import write_card

        write_card(out_dir, manifest)
    return section


__all__ = ["GradeError", "ShardCounts", "grade_dataset", "highlight_report", "user_prompt"]
