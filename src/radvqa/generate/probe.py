"""Probe pairs: two yes/no questions about one observation that differ only in negation ("Is
pleural effusion present?" / "Is pleural effusion absent?") or only in side ("Is the pleural
effusion on the left side?" / "... on the right side?"), answered from the scene graph. A model
that understands the image answers both right; ``radvqa eval`` counts a pair only when it does
(pair consistency, ``radvqa.eval.pairs``).

Rules:
- only observations with evidence (a report span, or a box) graded ``config.worst_grade`` or
  better: hedged, alternative, qualified ("no large effusion"), conflicting and label-only
  statements grade B or C and give no pair, nor do uncertain observations at all; reasons listed in
  ``config.skip_reasons`` (vague findings) and technical findings are left out too; a negative
  only where its sentence names the finding (name or ontology synonym) or states nothing else
  (``config.negatives_named_only``: "Heart size is normal." gives "no cardiomegaly", but the
  negatives the extractor expands "No acute cardiopulmonary abnormality." into give no pair);
- negation pairs: a present finding is asked without its side ("Is pleural effusion present?"
  yes / "... absent?" no); an absent one with its stated side ("Is left pleural effusion
  present?" no / "... absent?" yes), and only when no stated or uncertain observation of the same
  finding (or a finding below it, whose presence would make "absent" false) overlaps that side;
  a "bilateral" negative ("both lungs are clear") is asked without a side; a plural name gets
  "Are ..." (the template's "Is {finding} ..." with its verb agreeing);
- side pairs: only a present finding whose side (left or right) is written in its sentence
  (grade reason ``side:inferred`` excludes it), and only when the study states that finding on no
  other side (so "the pleural effusion" names one thing);
- both rows of a pair share the question wording index (the wordings of ``negation_present`` and
  ``negation_absent`` are aligned by position), the grade and provenance of the observation, and a
  pair id in provenance: ``probe_pair:<negation|side>:<id>``; if a template constraint drops one row
  the other is dropped too. ``cap`` counts pairs. ``polarity`` is the phrasing: positive for the
  row asking "present" / the stated side, negative for its twin.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import Any

import msgspec

from radvqa.generate.engine import STRATEGY_REGISTRY, Generator, StudyCtx, pick_index, sample_capped
from radvqa.generate.facts import Fact
from radvqa.generate.templates import Family, Op, Template, TemplateError
from radvqa.model import SceneGraph
from radvqa.quality.criteria import GRADE_INDEX

F = frozenset
OBSERVATION = F({"observation"})
YES_NO = F({"yes", "no"})
OPS: dict[str, Op] = {
    "negation_present": Op(YES_NO, F(), OBSERVATION),
    "negation_absent": Op(YES_NO, F(), OBSERVATION),
    "side": Op(YES_NO, F(), OBSERVATION),
}
PHRASES: dict[str, frozenset[str]] = {}
SIDES = ("left", "right")


class Config(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``config:`` of templates/probe.yaml."""

    worst_grade: str = "A"  # pairs only from observations graded this or better
    skip_reasons: tuple[str, ...] = ("entities:vague",)  # grade reasons (prefixes) that exclude an observation
    side_skip_reasons: tuple[str, ...] = ("side:inferred",)  # ... that exclude it from side pairs
    # a negative only where its sentence names the finding (name or ontology synonym) or states
    # nothing else: "Heart size is normal." -> no cardiomegaly, but not the dozen negatives a
    # "No acute cardiopulmonary abnormality." is expanded into
    negatives_named_only: bool = True
    # ... and where the sentence does not name it, no word narrowing the negative ("There are no
    # acute bony findings." says nothing about an old fracture)
    unnamed_negative_blockers: tuple[str, ...] = ()


def _agree(question: str) -> str:
    """Number agreement of a question opening on its finding: "Is {finding} ..." -> "Are {finding}
    ...", "Is the {finding} ..." -> "Are the {finding} ..."."""
    for a in ("Is {finding}", "Is the {finding}"):
        if question.startswith(a):
            return "Are" + question[2:]
    return question


def sides_overlap(a: str | None, b: str | None) -> bool:
    """No side means anywhere; bilateral overlaps both sides."""
    return a is None or b is None or a == b or "bilateral" in (a, b)


def pair_id(study_id: str, kind: str, key: str) -> str:
    return hashlib.blake2b(f"{study_id}\x1f{kind}\x1f{key}".encode(), digest_size=8).hexdigest()


@STRATEGY_REGISTRY.register("probe")
class Strategy:
    name = "probe"

    def __init__(self, gen: Generator, fam: Family) -> None:
        self.gen = gen
        self.t: dict[str, Template] = {tpl.op: tpl for tpl in fam.templates.values()}
        cfg: Config = fam.config
        if cfg.worst_grade not in GRADE_INDEX:
            raise TemplateError(f"{fam.path}: config.worst_grade {cfg.worst_grade!r} is not one of {list(GRADE_INDEX)}")
        self.worst = GRADE_INDEX[cfg.worst_grade]
        self.skip = tuple(cfg.skip_reasons)
        self.side_skip = tuple(cfg.side_skip_reasons)
        self.named_only = cfg.negatives_named_only
        words = [w.lower() for w in cfg.unnamed_negative_blockers if w.strip()]
        self.blockers = re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")\b") if words else None
        self._terms: dict[str, Any] = {}
        # "Is {finding} present?" of a plural name ("low lung volumes") reads "Are ...": the same
        # template with its verb agreeing, built once
        self.plural = {op: dataclasses.replace(t, questions=tuple(_agree(q) for q in t.questions))
                       for op, t in self.t.items()}
        tp, ta = self.t.get("negation_present"), self.t.get("negation_absent")
        if (tp is None) != (ta is None):
            raise TemplateError(f"{fam.path}: negation pairs need both a negation_present and a negation_absent template")
        if tp is not None and ta is not None and len(tp.questions) != len(ta.questions):
            raise TemplateError(f"{fam.path}: {tp.id} and {ta.id} must have as many question wordings "
                                f"(they are paired by position)")

    def applies(self, sg: SceneGraph, prior: SceneGraph | None) -> bool:
        return bool(sg.observations)

    # -- which observations ------------------------------------------------------------------------
    def _usable(self, f: Fact) -> bool:
        obs = f.obs
        if f.uncertain or f.qualified or f.implied or f.is_technical:
            return False
        if not (f.abnormal or f.is_device):
            return False
        if not obs.evidence and not obs.boxes:
            return False
        grade, reasons = f.grade
        if grade > self.worst:
            return False
        return not any(r.startswith(self.skip) for r in reasons)

    def _overlaps(self, v: Any, f: Fact, g: Fact) -> bool:
        """``g`` (not absent) makes "f is absent" false: same finding or one below it, on a side
        that overlaps f's (no side = anywhere)."""
        if g.fid != f.fid and f.fid not in v.fancestors.get(g.fid, ()):
            return False
        side = f.lat if f.lat in SIDES else None  # a "bilateral" negative denies both sides
        return sides_overlap(side, g.lat)

    def _negation_ok(self, ctx: StudyCtx, f: Fact, facts: list[Fact]) -> bool:
        if f.present:
            return not self._conflicted(f, facts)
        v = self.gen.vocab
        return not any(not g.absent and self._overlaps(v, f, g) for g in facts)

    @staticmethod
    def _conflicted(f: Fact, facts: list[Fact]) -> bool:
        """The report also states this finding absent or uncertain on an overlapping side (the
        generator grades such a positive down when it resolves conflicts; here it gives no pair)."""
        return any(g is not f and g.fid == f.fid and not g.present and not g.implied and sides_overlap(f.lat, g.lat)
                   for g in facts)

    def _terms_of(self, fid: str) -> Any:
        rx = self._terms.get(fid)
        if rx is None:
            v = self.gen.vocab
            f = getattr(v.onto, "findings", {}).get(fid)
            terms = {v.finding_name(fid).lower(), fid.replace("_", " ").lower()}
            terms.update(str(t).lower() for t in (getattr(f, "synonyms", None) or ()))
            rx = self._terms[fid] = re.compile(r"\b(?:" + "|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True) if t) + r")\b")
        return rx

    def _stated(self, ctx: StudyCtx, f: Fact, per_sentence: dict[str, int]) -> bool:
        """A negative whose sentence names the finding, or says nothing else."""
        if not self.named_only or not f.absent:
            return True
        sids = [ev.sentence_id for ev in f.obs.evidence if ev.sentence_id]
        texts = [ctx.sentences.get(sid, "") for sid in sids] or [ev.text for ev in f.obs.evidence]
        if any(self._terms_of(f.fid).search(t.lower()) for t in texts):
            return True
        if self.blockers is not None and any(self.blockers.search(t.lower()) for t in texts):
            return False
        return bool(sids) and all(per_sentence.get(sid, 0) == 1 for sid in sids)

    def _side_ok(self, f: Fact, facts: list[Fact]) -> bool:
        if not f.present or f.lat not in SIDES:
            return False
        if any(r.startswith(self.side_skip) for r in f.grade[1]) or self._conflicted(f, facts):
            return False
        return all(g is f or g.fid != f.fid or g.absent or g.lat == f.lat for g in facts)

    # -- rows --------------------------------------------------------------------------------------
    def run(self, ctx: StudyCtx, prior: SceneGraph | None) -> None:
        facts = [ctx.facts[o.id] for o in ctx.sg.observations if o.id in ctx.facts]
        per_sentence: dict[str, int] = {}
        for o in ctx.sg.observations:
            for sid in {ev.sentence_id for ev in o.evidence if ev.sentence_id}:
                per_sentence[sid] = per_sentence.get(sid, 0) + 1
        usable = [f for f in facts if self._usable(f) and self._stated(ctx, f, per_sentence)]
        rng = ctx.stream("probe")
        tp, ta, ts = self.t.get("negation_present"), self.t.get("negation_absent"), self.t.get("side")
        if tp is not None and ta is not None:
            seen: set[str] = set()
            items = []
            for f in usable:
                # a negative keeps a stated left/right ("no left pneumothorax"); "bilateral" on a
                # negative comes from "both lungs are clear" and means none on either side
                name = f"{f.lat} {f.name}" if f.absent and f.lat in SIDES else f.name
                if name not in seen and self._negation_ok(ctx, f, facts):
                    seen.add(name)
                    items.append((f, name))
            for f, name in sample_capped(rng, items, self.gen.cap(tp)):
                widx = pick_index(rng, tp)
                pid = pair_id(ctx.sg.study_id, "negation", name)
                present = "yes" if f.present else "no"
                absent = "no" if f.present else "yes"
                many = self.gen.lexicon.forms(name, name)[1] == "are"
                self._pair(ctx, f, pid, "negation", [
                    (self.plural["negation_present"] if many else tp, widx, {"finding": name}, present, "positive"),
                    (self.plural["negation_absent"] if many else ta, widx, {"finding": name}, absent, "negative"),
                ])
        if ts is not None:
            seen = set()
            items = []
            for f in usable:
                if f.name not in seen and self._side_ok(f, facts):
                    seen.add(f.name)
                    items.append(f)
            for f in sample_capped(rng, items, self.gen.cap(ts)):
                widx = pick_index(rng, ts)
                pid = pair_id(ctx.sg.study_id, "side", f.name)
                other = "right" if f.lat == "left" else "left"
                tpl = self.plural["side"] if self.gen.lexicon.forms(f.name, f.name)[1] == "are" else ts
                self._pair(ctx, f, pid, "side", [
                    (tpl, widx, {"finding": f.name, "side": f.lat}, "yes", "positive"),
                    (tpl, widx, {"finding": f.name, "side": other}, "no", "negative"),
                ])

    def _pair(self, ctx: StudyCtx, f: Fact, pid: str, kind: str,
              rows: list[tuple[Template, int, dict[str, str], str, str]]) -> None:
        start = len(ctx.rows)
        prov = [f"probe_pair:{kind}:{pid}", *f.prov]
        for tpl, widx, slots, key, polarity in rows:
            slot_key = "\x1f".join(f"{k}={slots[k]}" for k in sorted(slots))
            ok = ctx.render_emit(tpl, widx, slots, slot_key, key, {}, [f.main], f.grade, prov,
                                 short=key, polarity=polarity, findings=[f.fid], regions=list(f.regions))
            if not ok:
                del ctx.rows[start:]  # a pair is both rows or none
                return
