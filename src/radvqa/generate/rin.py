"""RadImageNet-VQA-style tasks (REFERENCE.md §3) for any labelled CT / MR / US (or X-ray) image with
an anatomy: abnormality yes/no; anatomy open, closed+ (true anatomy, answer yes), closed- (another
anatomy, answer no), 4-option MC; pathology open, closed+, closed-, 4-option MC.

MC rules: options are distinct; pathology distractors come from the same anatomy (ontology: finding
``anatomies``), "no pathology seen" is always an option (and the answer for normal images); the
correct letter is drawn uniformly over A-D from the study's own random stream.
"""

from __future__ import annotations

from typing import Any

from radvqa.generate.engine import StudyCtx
from radvqa.generate.facts import Fact, cap
from radvqa.generate.templates import Family, Spec, Template
from radvqa.model import AnswerPart, SceneGraph
from radvqa.quality.criteria import A, A_PP, reason

F = frozenset
SPECS: dict[str, Spec] = {
    "abnormality": Spec(F({"yes", "no"}), F({"pathology"})),
    "anatomy_open": Spec(F({"answer"}), F({"anatomy"})),
    "anatomy_closed_pos": Spec(F({"yes"}), F()),
    "anatomy_closed_neg": Spec(F({"no"}), F({"true_anatomy"})),
    "anatomy_mc": Spec(F({"answer"}), F({"letter", "option"})),
    "pathology_open": Spec(F({"pathology", "none"}), F({"pathology"})),
    "pathology_closed_pos": Spec(F({"yes"}), F()),
    "pathology_closed_neg": Spec(F({"no_other", "no_normal"}), F({"true_pathology"})),
    "pathology_mc": Spec(F({"answer"}), F({"letter", "option"})),
}
PHRASES: dict[str, frozenset[str]] = {"option_item": F({"letter", "option"}), "no_pathology": F()}
LETTERS = ("A", "B", "C", "D")


class Strategy:
    name = "rin"

    def __init__(self, gen: Any, fam: Family) -> None:
        self.gen = gen
        self.fam = fam
        self.t = fam.templates
        cfg = fam.config
        self.modalities = F(m.upper() for m in cfg.get("modalities", ("CT", "MR", "US")))
        self.modality_names: dict[str, str] = dict(cfg.get("modality_names", {}))
        self.no_path = str(fam.phrases["no_pathology"][0])

    def applies(self, sg: SceneGraph, prior: SceneGraph | None) -> bool:
        return bool(sg.anatomy) and (sg.modality.upper() in self.modalities or bool(sg.anatomy))

    def _anat_id(self, a: str) -> str:
        key = a.strip().lower().replace(" ", "_").replace("-", "_")
        return key

    def run(self, ctx: StudyCtx, prior: SceneGraph | None) -> None:
        sg = ctx.sg
        v = self.gen.vocab
        rng = ctx.stream("rin")
        self.rng = rng
        anat = self._anat_id(sg.anatomy or "")
        aname = v.anatomy_name(anat)
        mod = sg.modality.upper()
        mname = self.modality_names.get(mod, mod)
        facts = [f for f in ctx.facts.values() if f.abnormal and f.present]
        path: Fact | None = facts[0] if facts else None
        t = self.t
        base = {"modality": mname}
        # grades: the label is the whole-image fact; regions/boxes do not apply to these tasks
        if path is not None:
            g = (A_PP, ()) if path.fid in v.fname else (A, (reason("entities", "unresolved", A),))
        else:
            g = (A_PP, ())
        prov = path.prov if path is not None else [f"label:normal:{sg.study_id}"]
        if not prov:
            prov = [f"label:{path.fid if path else 'normal'}:{sg.study_id}"]
        pname = path.name if path is not None else ""
        findings = [path.fid] if path else []
        box_src = path.boxes if path is not None else []

        def emit(tpl: Template, slots: dict[str, str], slot_key: str, key: str, lv: dict[str, str],
                 short: str | None, polarity: str | None, choices: list[str] | None = None,
                 tag: str | None = None) -> None:
            qs = tpl.questions
            widx = 0 if len(qs) == 1 else int(rng.random() * len(qs))
            question = qs[widx].format_map(slots)
            answer = ctx.pick(tpl.answers[key]).format_map({**slots, **lv})
            if "answer_not_in_question" in tpl.constraints and short and len(short) > 1 and \
                    short.lower() in question.lower().replace(slots.get("options", "").lower(), ""):
                return
            part = AnswerPart(part_type="main", text=answer, tag=tag or short, findings=findings,
                              certainty="present" if path else "absent", boxes=box_src)
            ctx.emit(tpl, slot_key, widx, question, answer, [part], g, answer_short=short,
                     polarity=polarity, findings=findings, provenance=prov, choices=choices)

        if "abnormality" in t:
            emit(t["abnormality"], base, "", "yes" if path else "no", {"pathology": pname},
                 "yes" if path else "no", "positive" if path else "negative", tag=pname or self.no_path)
        # anatomy ---------------------------------------------------------------------------------
        others = [a for a in sorted(v.aname) if a != anat]
        # distractor anatomies: the same modality first (a CT question offering an MR-only
        # anatomy is easier to eliminate without the image), then the others
        same_mod = [a for a in others if mod in v.amodalities.get(a, ())]
        other_mod = [a for a in others if a not in same_mod]
        pool = same_mod or others
        if "anatomy_open" in t:
            emit(t["anatomy_open"], base, "", "answer", {"anatomy": aname}, aname, None)
        if "anatomy_closed_pos" in t:
            emit(t["anatomy_closed_pos"], {**base, "anatomy": aname}, anat, "yes", {}, "yes", "positive", tag=aname)
        if "anatomy_closed_neg" in t and pool:
            wrong = pool[int(rng.random() * len(pool))]
            emit(t["anatomy_closed_neg"], {**base, "anatomy": v.anatomy_name(wrong)}, wrong, "no",
                 {"true_anatomy": aname}, "no", "negative", tag=aname)
        if "anatomy_mc" in t and len(others) >= 3:
            k = min(3, len(same_mod))
            chosen = rng.sample(same_mod, k) + rng.sample(other_mod, 3 - k)
            distract = [v.anatomy_name(a) for a in chosen]
            self._mc(ctx, emit, t["anatomy_mc"], base, aname, distract)
        # pathology -------------------------------------------------------------------------------
        same = [p for p in v.anatomy_pathologies.get(anat, ()) if path is None or p != path.fid]
        if "pathology_open" in t:
            slots = {**base, "anatomy": aname}
            if path is not None:
                emit(t["pathology_open"], slots, "", "pathology", {"pathology": pname}, pname, "positive")
            else:
                emit(t["pathology_open"], slots, "", "none", {"pathology": ""}, self.no_path, "negative")
        if "pathology_closed_pos" in t and path is not None:
            emit(t["pathology_closed_pos"], {**base, "pathology": pname}, path.fid, "yes", {}, "yes", "positive",
                 tag=pname)
        if "pathology_closed_neg" in t and same:
            wrong = same[int(rng.random() * len(same))]
            emit(t["pathology_closed_neg"], {**base, "pathology": v.finding_name(wrong)}, wrong,
                 "no_other" if path else "no_normal", {"true_pathology": pname}, "no", "negative",
                 tag=pname or self.no_path)
        if "pathology_mc" in t:
            need = 2 if path is not None else 3
            if len(same) >= need:
                distract = [v.finding_name(p) for p in rng.sample(same, need)]
                if path is not None:
                    distract.append(self.no_path)
                correct = pname if path is not None else self.no_path
                self._mc(ctx, emit, t["pathology_mc"], {**base, "anatomy": aname}, correct, distract)

    def _mc(self, ctx: StudyCtx, emit: Any, tpl: Template, slots: dict[str, str], correct: str,
            distract: list[str]) -> None:
        opts = list(dict.fromkeys(distract))
        if correct in opts or len(opts) != 3:
            return  # a repeated option would make the item degenerate
        pos = int(self.rng.random() * 4)
        opts.insert(pos, correct)
        item = self.fam.phrases["option_item"][0]
        text = " ".join(item.format_map({"letter": L, "option": cap(o)}) for L, o in zip(LETTERS, opts))
        emit(tpl, {**slots, "options": text}, "|".join(opts), "answer",
             {"letter": LETTERS[pos], "option": correct}, LETTERS[pos], None, choices=opts, tag=correct)
