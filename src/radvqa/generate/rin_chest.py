"""RadImageNet-VQA's tasks on chest X-ray labels (issue 14, deliverable 4): the ``rin`` family's
templates and rules applied to the dataset labels of a chest radiograph (NIH-14, CheXpert, VinDr,
PadChest, OpenI MeSH): abnormality yes/no; pathology open, closed with positive and negative
phrasing, and 4-option multiple choice. Anatomy tasks do not apply (every study is a chest).

Truthfulness rules (``config.chest`` in templates/rin.yaml says which label scheme a source has and
the anatomical region groups):

- the study's pathologies are its *label* observations that are present (``source`` label or box)
  and abnormal; the report does not add any, but it can take them away: a finding the study has or
  may have -- any observation, report or label, present or uncertain, with its ontology ancestors
  and descendants ("consolidation" makes "lung opacity" and its kinds unaskable) -- is never asked
  with a "no" and never a distractor. Only findings the labels say are negative, or that nothing
  mentions, are;
- "abnormality: no" and the normal study's "free of pathology: yes" need a study with nothing
  present or uncertain at all; a study whose labels say normal while its report states a finding is
  ambiguous and gets no abnormality question;
- multiple-choice distractors are findings of the scheme in the same anatomical region group as the
  correct finding (lungs, pleura, cardiomediastinal, bones; a finding whose regions fall in no group
  is never a distractor, so no option is an implausible region); a normal study's options are three
  findings of one region group and "no pathology seen";
- closed+ is asked only where a closed- can be asked too, so the yes/no pair stays balanced; the
  normal image's "free of pathology?" (yes) is asked of abnormal images too (no), so no closed
  template has a single answer.
"""

from __future__ import annotations

from typing import Any

from radvqa.generate.engine import StudyCtx, pick_index
from radvqa.generate.facts import Fact
from radvqa.generate.templates import TemplateError
from radvqa.model import AnswerPart, SceneGraph
from radvqa.quality.criteria import A_PP, combine

LABEL_SOURCES = frozenset({"label", "box"})


class ChestTasks:
    """Per Generator: scheme pools and region groups; ``run`` per study."""

    def __init__(self, strat: Any, chest: dict[str, Any]) -> None:
        self.strat = strat
        v = strat.gen.vocab
        self.modalities = frozenset(str(m).upper() for m in chest.get("modalities", ("CR", "DX")))
        self.anatomy = str(chest.get("anatomy_name", "chest"))
        self.scheme_of: dict[str, str] = {str(k): str(s) for k, s in (chest.get("label_schemes") or {}).items()}
        groups = chest.get("region_groups") or {}
        if not isinstance(groups, dict) or not all(isinstance(r, list) for r in groups.values()):
            raise TemplateError("rin.yaml: config.chest.region_groups must map group names to lists of region ids")
        # regions an ontology copy lacks (a test ontology, a non-chest one) are simply not matched
        groups = {g: [r for r in regs if r in v.rname] for g, regs in groups.items()}
        # devices and technical findings are not pathologies ("orthopedic hardware")
        self.not_pathology = frozenset(strat.gen.device_categories | strat.gen.technical_categories)
        self.v = v
        schemes = getattr(v.onto, "schemes", {}) or {}
        self.group: dict[str, str] = {}  # finding -> region group
        self.pool: dict[str, tuple[str, ...]] = {}  # scheme -> its abnormal findings with a group, sorted
        for scheme in sorted(set(self.scheme_of.values())):
            sc = schemes.get(scheme) if isinstance(schemes, dict) else None
            if sc is None:
                continue
            fids = sorted({f for lst in (getattr(sc, "labels", {}) or {}).values() for f in lst if self.is_pathology(f)})
            for f in fids:
                if f not in self.group:
                    g = self._group_of(v, f, groups)
                    if g is not None:
                        self.group[f] = g
            self.pool[scheme] = tuple(f for f in fids if f in self.group)

    def is_pathology(self, fid: str) -> bool:
        v = self.v
        return fid in v.fname and v.fabnormal.get(fid, True) and v.fcat.get(fid, "") not in self.not_pathology

    @staticmethod
    def _group_of(v: Any, fid: str, groups: dict[str, list[str]]) -> str | None:
        """The first region group (file order) holding one of the finding's default regions or an
        ancestor of one."""
        regs = [r for r0 in v.fdefault_regions.get(fid, ()) for r in (r0, *v.rancestors.get(r0, ()))]
        for g, members in groups.items():
            if any(r in members for r in regs):
                return g
        return None

    def applies(self, sg: SceneGraph) -> bool:
        if sg.anatomy or (sg.modality or "").upper() not in self.modalities:
            return False
        scheme = self.scheme_of.get(sg.source)
        if scheme not in self.pool:
            return False
        return bool(sg.meta.get("no_finding_label")) or any(o.source in LABEL_SOURCES for o in sg.observations)

    def run(self, ctx: StudyCtx) -> None:
        strat = self.strat
        v = strat.gen.vocab
        sg = ctx.sg
        t = strat.t
        pool = self.pool[self.scheme_of[sg.source]]
        # what the study has or may have: never a "no", never a distractor
        has: set[str] = set()
        for o in sg.observations:
            if o.certainty in ("present", "uncertain"):
                has.add(o.finding)
                has.update(v.fancestors.get(o.finding, ()))
                has.update(v.fdescendants.get(o.finding, ()))
        hidden = {id(o) for o in ctx.hidden}  # label-only findings of a reported study (--label-only omit)
        present: list[str] = sorted({o.finding for o in sg.observations
                                     if o.source in LABEL_SOURCES and o.certainty == "present" and id(o) not in hidden
                                     and self.is_pathology(o.finding)})
        # a label beside a more specific one of the study names one thing twice ("aortic
        # enlargement ... and tortuous aorta"): the specific one says it (the audit counts a finding
        # beside its parent as a duplicate statement)
        anc = v.fancestors
        present = [f for f in present if not any(f in anc.get(o, ()) for o in present if o != f)]
        normal = not present and not any(o.certainty in ("present", "uncertain") and self.is_pathology(o.finding)
                                          for o in sg.observations)
        if not present and not normal:
            return  # labels and report disagree, or only uncertain labels: nothing truthful to ask
        # the study's own stream, seeded only for a study that asks (no other stream's draws move)
        rng = ctx.stream("rin-chest")
        negatives = [f for f in pool if f not in has]
        mod = sg.modality.upper()
        mname = strat.modality_names.get(mod, "X-ray")
        base = {"modality": mname}
        slots_pa = {**base, "anatomy": self.anatomy}
        facts: list[Fact] = [f for fid in present for f in ctx.by_finding.get(fid, ()) if f.present]
        names = [v.finding_name(f) for f in present]
        pname = _join(names)
        prov = sorted({p for f in facts for p in f.prov}) or [f"label:{fid}:{sg.study_id}" for fid in present] \
            or [f"label:normal:{sg.study_id}"]
        # a positive answer is only as good as the observations it rests on (#13): a label the
        # report is silent about, or one it explains away, keeps its low grade here too
        if facts:
            worst, why = combine([f.grade for f in facts])
            g = (worst, tuple(why))
        else:
            g = (A_PP, ())

        def emit(tpl: Any, slots: dict[str, str], slot_key: str, key: str, lv: dict[str, str], short: str,
                 polarity: str | None, choices: list[str] | None = None, tag: str | None = None,
                 findings: list[str] | None = None, boxes: list[Any] | None = None) -> None:
            fl = findings if findings is not None else present

            def compose(answer: str) -> tuple[str, list[AnswerPart]]:
                return answer, [AnswerPart(part_type="main", text=answer, tag=tag or short, findings=fl,
                                           certainty="present" if present else "absent", boxes=boxes or [])]
            ctx.render_emit(tpl, pick_index(rng, tpl), slots, slot_key, key, lv, [], g, prov, compose=compose,
                            short=short, choices=choices, polarity=polarity, findings=fl)

        def boxes_of(fid: str) -> list[Any]:
            return [b for f in ctx.by_finding.get(fid, ()) if f.present for b in f.boxes]

        if "abnormality" in t:
            emit(t["abnormality"], base, "chest", "yes" if present else "no", {"pathology": pname},
                 "yes" if present else "no", "positive" if present else "negative", tag=pname or strat.no_path)
        if "pathology_open" in t:
            if present:
                emit(t["pathology_open"], slots_pa, "chest", "pathology", {"pathology": pname}, pname, "positive",
                     boxes=[b for f in facts for b in f.boxes])
            else:
                emit(t["pathology_open"], slots_pa, "chest", "none", {"pathology": ""}, strat.no_path, "negative")
        # closed: one present finding (yes) and one negative finding of its region group when there
        # is one, else of any group (no); closed+ only where closed- can be asked too
        asked = present[int(rng.random() * len(present))] if present else None
        if asked is not None:
            group = self.group
            g_asked = group.get(asked)
            same = [f for f in negatives if group.get(f) == g_asked]
        else:
            same = []
        wrong_pool = same or negatives
        if wrong_pool and "pathology_closed_neg" in t:
            if asked is not None and "pathology_closed_pos" in t:
                emit(t["pathology_closed_pos"], {**base, "pathology": v.finding_name(asked)}, asked, "yes", {}, "yes",
                     "positive", tag=v.finding_name(asked), findings=[asked], boxes=boxes_of(asked))
            elif asked is None and strat.t_normal_pos is not None:
                emit(strat.t_normal_pos, slots_pa, "normal", "yes", {}, "yes", "positive", tag=strat.no_path, findings=[])
            if asked is not None and strat.t_normal_neg is not None:
                # ask both ways: "Is this image free of pathology?" of an abnormal image too
                emit(strat.t_normal_neg, slots_pa, "normal", "no", {"pathology": pname}, "no", "negative", tag=pname)
            wrong = wrong_pool[int(rng.random() * len(wrong_pool))]
            emit(t["pathology_closed_neg"], {**base, "pathology": v.finding_name(wrong)}, wrong,
                 "no_other" if present else "no_normal", {"true_pathology": pname}, "no", "negative",
                 tag=pname or strat.no_path, findings=[wrong])
        # multiple choice: distractors of the correct finding's region group, never one the study has
        if "pathology_mc" in t:
            grouped = [f for f in present if f in self.group]
            if grouped:
                correct = grouped[int(rng.random() * len(grouped))]
                cands = [f for f in negatives if self.group[f] == self.group[correct]]
                if len(cands) >= 2:
                    distract = [v.finding_name(f) for f in rng.sample(cands, 2)] + [strat.no_path]
                    self._mc(rng, emit, t["pathology_mc"], slots_pa, "answer", v.finding_name(correct), distract,
                             [correct], boxes_of(correct))
            elif normal:
                by_group: dict[str, list[str]] = {}
                for f in negatives:
                    by_group.setdefault(self.group[f], []).append(f)
                ok = sorted(gname for gname, fs in by_group.items() if len(fs) >= 3)
                if ok:
                    gname = ok[int(rng.random() * len(ok))]
                    distract = [v.finding_name(f) for f in rng.sample(by_group[gname], 3)]
                    self._mc(rng, emit, t["pathology_mc"], slots_pa, "none", strat.no_path, distract, [], [])

    def _mc(self, rng: Any, emit: Any, tpl: Any, slots: dict[str, str], key: str, correct: str,
            distract: list[str], findings: list[str], boxes: list[Any]) -> None:
        def emit_mc(tpl_: Any, slots_: dict[str, str], slot_key: str, key_: str, lv: dict[str, str], short: str,
                    polarity: str | None, choices: list[str] | None = None, tag: str | None = None) -> None:
            emit(tpl_, slots_, slot_key, key_, lv, short, polarity, choices=choices, tag=tag, findings=findings,
                 boxes=boxes)

        self.strat._mc(rng, emit_mc, tpl, slots, key, correct, distract)


def _join(names: list[str]) -> str:
    if len(names) <= 1:
        return names[0] if names else ""
    return ", ".join(names[:-1]) + " and " + names[-1]
