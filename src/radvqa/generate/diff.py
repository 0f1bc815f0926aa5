"""Longitudinal difference questions (Medical-Diff-VQA's idea, REFERENCE.md §4, done consistently):
main study vs the patient's previous study, which must be strictly earlier (else a Reject, no rows).

Per finding the two scene graphs give a state (present with a severity / absent or unmentioned).
- new: present now, not before;  resolved: present before, not now;
- increased / decreased: present in both with known severities of different rank, or, without two
  severities, the later report's change word (increased/worsened, decreased/improved);
- unchanged: present in both and the later report says unchanged/stable, or equal severities.
The later report's change words must agree with the graph comparison: "new" for a finding already
present before, "resolved" for one still present, "increased" against decreasing severities, or a
change word about a finding the prior study never had (other than "new") are conflicts; such a
finding is left out of every diff question and the "what changed" row records the conflict in its
grade reasons. "Not mentioned" in a report counts as absent, as Medical-Diff-VQA does, but lowers
the row's grade (negative:implied -> B) unless the study's findings come from complete label sets.
"""

from __future__ import annotations

import random
from typing import Any, Callable

import msgspec

from radvqa.generate.engine import STRATEGY_REGISTRY, Generator, StudyCtx, pick_index, sample_capped
from radvqa.generate.facts import Fact, cap, join_list
from radvqa.generate.templates import Family, Op, Template
from radvqa.model import AnswerPart, Reject, SceneGraph
from radvqa.quality.criteria import C, IMPLIED_NEGATIVE, combine, reason

F = frozenset
PAIR, FINDING = F({"pair"}), F({"finding"})
# the pair of studies as a whole, or one finding of the pair
OPS: dict[str, Op] = {
    "what_changed": Op(F({"changes", "nothing"}), F({"n"}), PAIR),
    "new_findings": Op(F({"yes", "no"}), F({"list"}), PAIR),
    "resolved_findings": Op(F({"yes", "no"}), F({"list"}), PAIR),
    "increased_findings": Op(F({"yes", "no"}), F({"list"}), PAIR),
    "decreased_findings": Op(F({"yes", "no"}), F({"list"}), PAIR),
    "finding_change": Op(F({"new", "resolved", "increased", "decreased", "unchanged", "persistent"}),
                         F({"from", "to"}), FINDING),
    "level_change": Op(F({"increased", "decreased", "same"}), F({"from", "to"}), FINDING),
}


class Config(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``config:`` of templates/diff.yaml."""

    # sources whose findings come from complete label sets (absence is stated, not implied)
    label_sources: tuple[str, ...] = ()
PHRASES: dict[str, frozenset[str]] = {
    "item_new": F({"name", "phrase", "a_phrase", "A_phrase"}),
    "item_resolved": F({"name", "Name"}),
    "item_increased": F({"name", "Name"}),
    "item_decreased": F({"name", "Name"}),
    "item_increased_level": F({"name", "Name", "from", "to"}),
    "item_decreased_level": F({"name", "Name", "from", "to"}),
}
UP = F({"increased", "worsened", "worsening", "increasing", "enlarged"})
DOWN = F({"decreased", "improved", "improving", "decreasing", "smaller"})
SAME = F({"unchanged", "stable"})


def _time_key(t: str) -> tuple[int, float | str]:
    try:
        return (0, float(t))
    except ValueError:
        return (1, t)


def _positives(c: StudyCtx) -> dict[str, Fact]:
    out: dict[str, Fact] = {}
    for f in c.facts.values():
        if f.present and f.abnormal and f.fid not in out:
            out[f.fid] = f
    return out


def _explicit_absent(c: StudyCtx) -> set[str]:
    return {f.fid for f in c.facts.values() if f.absent}


def compare(ctx: StudyCtx, now: dict[str, Fact], before: dict[str, Fact],
            rank: dict[str, int]) -> tuple[dict[str, tuple[str, str | None, str | None]], list[str]]:
    """Per finding of either study: (kind, severity before, severity now), kind one of new,
    resolved, increased, decreased, unchanged, persistent; and the findings whose change words
    contradict the comparison (conflicts, left out of every question)."""
    changes: dict[str, tuple[str, str | None, str | None]] = {}
    conflicts: list[str] = []
    for fid in list(dict.fromkeys([*before, *now])):
        fn, fb = now.get(fid), before.get(fid)
        word = (fn.obs.change if fn is not None else None) or next(
            (f.obs.change for f in ctx.facts.values() if f.fid == fid and f.obs.change), None)
        if fn is not None and fb is None:
            if word and word not in ("new",) and word not in UP:
                conflicts.append(fid)  # "unchanged"/"decreased" about something not seen before
                continue
            if word in UP:
                conflicts.append(fid)  # increased, but the prior study never had it
                continue
            changes[fid] = ("new", None, fn.severity)
        elif fb is not None and fn is None:
            if word and word != "resolved" and word not in DOWN:
                conflicts.append(fid)
                continue
            changes[fid] = ("resolved", fb.severity, None)
        elif fn is not None and fb is not None:
            if word == "new" or word == "resolved":
                conflicts.append(fid)
                continue
            s0, s1 = fb.severity, fn.severity
            if s0 in rank and s1 in rank and s0 != s1:
                kind = "increased" if rank[s1] > rank[s0] else "decreased"
                if (word in UP and kind == "decreased") or (word in DOWN and kind == "increased") or word in SAME:
                    conflicts.append(fid)
                    continue
                changes[fid] = (kind, s0, s1)
            elif word in UP:
                changes[fid] = ("increased", s0, s1)
            elif word in DOWN:
                changes[fid] = ("decreased", s0, s1)
            elif word in SAME or (s0 and s0 == s1):
                changes[fid] = ("unchanged", s0, s1)
            else:
                changes[fid] = ("persistent", s0, s1)
    return changes, conflicts


@STRATEGY_REGISTRY.register("diff")
class Strategy:
    name = "diff"

    def __init__(self, gen: Generator, fam: Family) -> None:
        self.gen = gen
        self.fam = fam
        self.t = {tpl.op: tpl for tpl in fam.templates.values()}
        cfg: Config = fam.config
        self.label_sources = F(cfg.label_sources)

    def applies(self, sg: SceneGraph, prior: SceneGraph | None) -> bool:
        return prior is not None

    def _check(self, sg: SceneGraph, prior: SceneGraph) -> str | None:
        if prior.patient_id != sg.patient_id:
            return f"reference study {prior.study_id} belongs to patient {prior.patient_id}, not {sg.patient_id}"
        if not sg.study_time or not prior.study_time:
            return "study_time missing on the main or the reference study"
        a, b = _time_key(prior.study_time), _time_key(sg.study_time)
        if a[0] != b[0]:
            return f"study times not comparable: {prior.study_time!r} vs {sg.study_time!r}"
        if not a < b:
            return f"reference study is not strictly earlier ({prior.study_time} >= {sg.study_time})"
        return None

    def run(self, ctx: StudyCtx, prior: SceneGraph | None) -> None:
        assert prior is not None
        sg = ctx.sg
        err = self._check(sg, prior)
        if err is not None:
            self.gen.rejects.append(Reject(source=sg.source, ref=f"{sg.study_id} vs {prior.study_id}",
                                           reason=f"diff: {err}", stage="generate"))
            return
        pctx = StudyCtx(self.gen, prior, ctx.split)
        rng = ctx.stream("diff")
        now, before = _positives(ctx), _positives(pctx)
        changes, conflicts = compare(ctx, now, before, self.gen.vocab.severity_rank)
        if ctx.blocked or pctx.blocked:
            # a finding an unstated label-only finding of either study speaks for: its "new" or
            # "resolved" would rest on the report's silence against the label (--label-only omit)
            changes = {k: x for k, x in changes.items() if k not in ctx.blocked and k not in pctx.blocked}
        now_abs = _explicit_absent(ctx)
        labelled_now = sg.source in self.label_sources
        labelled_before = prior.source in self.label_sources
        implied = {fid for fid, (k, _, _) in changes.items()
                   if (k == "resolved" and fid not in now_abs and not labelled_now)
                   or (k == "new" and not labelled_before and fid not in _explicit_absent(pctx))}
        pair = _Pair(ctx, pctx, rng, now, before, implied, changes)
        conflict_grade = [(C, tuple(reason("change", f"conflict:{fid}", C) for fid in conflicts))] if conflicts else []
        moved = [fid for fid, (k, _, _) in changes.items() if k in ("new", "resolved", "increased", "decreased")]
        self._ask_what_changed(pair, moved, conflict_grade)
        self._ask_lists(pair, moved)
        self._ask_finding_change(pair)
        self._ask_level_change(pair)

    def _item(self, pair: "_Pair", fid: str) -> AnswerPart:
        """The answer part saying how one finding changed."""
        ctx, now, before, changes = pair.ctx, pair.now, pair.before, pair.changes
        ph = self.fam.phrases
        kind, s0, s1 = changes[fid]
        f = now.get(fid) or before[fid]
        if kind in ("unchanged", "persistent"):
            return f.main
        name = f.name
        if kind == "new":
            text = ctx.pick(ph["item_new"]).format_map({"name": name, "phrase": f.phrase,
                                                         "a_phrase": f.a_phrase, "A_phrase": cap(f.a_phrase)})
        elif kind in ("increased", "decreased") and s0 and s1:
            text = ctx.pick(ph[f"item_{kind}_level"]).format_map({"name": name, "Name": cap(name),
                                                                   "from": s0, "to": s1})
        else:
            text = ctx.pick(ph[f"item_{kind}"]).format_map({"name": name, "Name": cap(name)})
        return AnswerPart(part_type="main", text=text, tag=f"{name}, {kind}", findings=[fid],
                          regions=list(f.regions), laterality=f.lat,
                          certainty="absent" if kind == "resolved" else "present",
                          severity=s1, boxes=f.boxes)

    def _ask_what_changed(self, pair: "_Pair", moved: list[str], conflict_grade: list[Any]) -> None:
        item = self._item
        tpl = self.t.get("what_changed")
        if tpl is not None:
            if moved:
                parts = [item(pair, fid) for fid in moved]
                self._emit(pair, tpl, {}, "", "changes", {"n": str(len(moved))}, parts, moved, None, "positive", conflict_grade)
            else:
                self._emit(pair, tpl, {}, "", "nothing", {"n": "0"}, [], [], None, "negative", conflict_grade,
                           lead_only="no change")

    def _ask_lists(self, pair: "_Pair", moved: list[str]) -> None:
        """New / resolved / increased / decreased findings, each a yes/no with the list."""
        item, t, changes, now, before = self._item, self.t, pair.changes, pair.now, pair.before
        for qt, kind in (("new_findings", "new"), ("resolved_findings", "resolved"),
                         ("increased_findings", "increased"), ("decreased_findings", "decreased")):
            tpl = t.get(qt)
            if tpl is None:
                continue
            fids = [fid for fid in moved if changes[fid][0] == kind]
            if not fids and kind in ("increased", "decreased") and (
                    any(c[0] == "persistent" for c in changes.values())
                    or not any(c[0] in ("unchanged", "increased", "decreased") for c in changes.values())):
                # "nothing has increased" needs a finding of both studies whose degree is known: a
                # finding with no severity and no change word (label-only data: NIH, VinDr) may have
                # grown or shrunk, and with no finding in common the "no" is trivial (on NIH the type
                # was 100% "no")
                continue
            names = join_list([(now.get(f) or before[f]).name for f in fids])
            if fids:
                self._emit(pair, tpl, {}, "", "yes", {"list": names}, [item(pair, f) for f in fids], fids, "yes", "positive", [])
            else:
                # "no new findings" beside a finding the current report hedges (new, or where the
                # prior stated it) is not a fact either study states: graded C with its reason
                doubt = [reason("change", f"uncertain_{kind}:{f.fid}", C) for f in pair.ctx.facts.values()
                         if f.uncertain and f.abnormal and (f.fid in before) == (kind != "new")]
                extra = [(C, tuple(doubt[:3]))] if doubt else []
                self._emit(pair, tpl, {}, "", "no", {"list": ""}, [], [], "no", "negative", extra,
                           lead_only=f"no {kind} findings")

    def _ask_finding_change(self, pair: "_Pair") -> None:
        changes, now, before = pair.changes, pair.now, pair.before
        tpl = self.t.get("finding_change")
        if tpl is not None:
            for fid in sample_capped(pair.rng, list(changes), self.gen.cap(tpl)):
                kind, s0, s1 = changes[fid]
                f = now.get(fid) or before[fid]
                lv = {"from": s0 or "", "to": s1 or ""}
                key = kind
                if kind in ("increased", "decreased") and not (s0 and s1):
                    lv = {"from": "", "to": ""}
                self._emit(pair, tpl, {"finding": f.name}, fid, key, lv, [self._item(pair, fid)], [fid], kind, None, [],
                           finding_key=(kind in ("increased", "decreased") and bool(s0 and s1)))

    def _ask_level_change(self, pair: "_Pair") -> None:
        changes, now, before = pair.changes, pair.now, pair.before
        rank = self.gen.vocab.severity_rank
        tpl = self.t.get("level_change")
        if tpl is not None:
            both = [fid for fid in now if fid in before and now[fid].severity in rank and before[fid].severity in rank
                    and fid in changes]
            for fid in sample_capped(pair.rng, both, self.gen.cap(tpl)):
                kind, s0, s1 = changes[fid]
                key = kind if kind in ("increased", "decreased") else "same"
                self._emit(pair, tpl, {"finding": now[fid].name}, fid, key, {"from": s0 or "", "to": s1 or ""},
                           [self._item(pair, fid)], [fid], "yes" if key != "same" else "no", None, [])

    def _emit(self, pair: "_Pair", tpl: Template, slots: dict[str, str], slot_key: str, key: str,
              lv: dict[str, str], parts: list[AnswerPart], fids: list[str], short: str | None,
              polarity: str | None, extra: list[Any], lead_only: str | None = None,
              finding_key: bool = True) -> None:
        """diff's grade and provenance policy (both studies' facts, implied changes), then the shared
        step. ``lead_only``: the lead is the whole answer, one part with this tag."""
        ctx, pctx = pair.ctx, pair.pctx
        wordings = None
        compose: Callable[[str], tuple[str, list[AnswerPart]]] | None = None
        if lead_only is not None:
            tag = lead_only

            def compose(lead: str) -> tuple[str, list[AnswerPart]]:
                return lead, [AnswerPart(part_type="main", text=lead, tag=tag)]
        elif not finding_key:  # no levels known: only wordings that do not print them
            ws = tpl.answers[key]
            wordings = tuple(w for w in ws if "{from}" not in w and "{to}" not in w) or ws
        grades: list[Any] = list(extra)
        prov: list[str] = [f"reference:{pctx.sg.study_id}"]
        for fid in fids:
            for f in (pair.now.get(fid), pair.before.get(fid)):
                if f is not None:
                    grades.append(f.grade)
                    prov.extend(p for p in f.prov if p not in prov)
            if fid in pair.implied:
                grades.append(IMPLIED_NEGATIVE)
        grade = combine(grades) if grades else (0, [])
        ctx.render_emit(tpl, pick_index(pair.rng, tpl), slots, f"{pctx.sg.study_id}|{slot_key}", key, lv, parts,
                        grade, prov, compose=compose, wordings=wordings, short=short, polarity=polarity,
                        findings=list(fids), regions=[r for p in parts for r in p.regions],
                        pair=(pctx.sg.study_id, pair.image_ids, pair.image_paths))


class _Pair:
    """One (study, prior) pair's diff state, built inside ``Strategy.run``."""

    __slots__ = ("ctx", "pctx", "rng", "now", "before", "implied", "changes", "image_ids", "image_paths")

    def __init__(self, ctx: StudyCtx, pctx: StudyCtx, rng: random.Random, now: dict[str, Fact],
                 before: dict[str, Fact], implied: set[str],
                 changes: dict[str, tuple[str, str | None, str | None]]) -> None:
        self.ctx, self.pctx, self.rng = ctx, pctx, rng
        self.now, self.before, self.implied, self.changes = now, before, implied, changes
        self.image_ids = ctx.image_ids + pctx.image_ids
        self.image_paths = ctx.image_paths + pctx.image_paths
