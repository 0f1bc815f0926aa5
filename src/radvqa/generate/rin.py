"""RadImageNet-VQA-style tasks (REFERENCE.md §3) for any labelled CT / MR / US (or X-ray) image with
an anatomy: abnormality yes/no; anatomy open, closed+ (true anatomy, answer yes), closed- (another
anatomy, answer no), 4-option MC; pathology open, closed+, closed-, 4-option MC.

Rules (issue 5, deliverable 4):
- every answer is one full sentence, one style per task (templates/rin.yaml); ``answer_short`` is
  the letter (MC), yes/no (closed) or the label name (open); ``choices`` are the bare options;
- closed questions carry ``polarity``: "positive" phrasing (the statement asked is true, answer
  yes) or "negative" (answer no). Every image gets one closed+ and one closed- per task, so yes/no
  are balanced by construction (a normal image's pathology closed+ asks whether it is free of
  pathology, template ``rin.pathology_closed_pos_normal``, reported as ``pathology_closed_pos``);
- MC options are distinct, the correct letter is uniform over A-D (the study's own random stream);
- pathology distractors come from the same anatomy AND the same modality: RadImageNet's label sets
  differ by modality (abdomen/pelvis CT vs MR). The per-(modality, anatomy) pools are built once
  per Generator from modality-prefixed scheme labels ("CT/abdomen_pelvis/...") when the ontology
  has them, else from ``config.modality_labels`` in rin.yaml, else (pair not listed) from the
  anatomy's pathologies in the ontology; "no pathology seen" is always an option and the answer
  for a normal image;
- anatomy distractors are other anatomies imaged with the same modality (ontology
  ``Anatomy.modalities``); only when a modality has fewer than three others (CT: brain, lung,
  abdomen/pelvis) is the rest drawn from the other CT/MR anatomies of ``config.anatomies``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec

from radvqa.generate.engine import STRATEGY_REGISTRY, Generator, StudyCtx, pick_index
from radvqa.generate.facts import Fact, cap
from radvqa.generate.rin_chest import ChestTasks
from radvqa.generate.templates import Family, Op, Template, TemplateError
from radvqa.model import AnswerPart, SceneGraph
from radvqa.quality.criteria import A, A_PP, reason

F = frozenset
IMAGE = F({"image"})
# one operation per RadImageNet-VQA task, each over the image
OPS: dict[str, Op] = {
    "abnormality": Op(F({"yes", "no"}), F({"pathology"}), IMAGE),
    "anatomy_open": Op(F({"answer"}), F({"anatomy"}), IMAGE),
    "anatomy_closed_pos": Op(F({"yes"}), F(), IMAGE),
    "anatomy_closed_neg": Op(F({"no"}), F({"true_anatomy"}), IMAGE),
    "anatomy_mc": Op(F({"answer"}), F({"letter", "option"}), IMAGE),
    "pathology_open": Op(F({"pathology", "none"}), F({"pathology"}), IMAGE),
    "pathology_closed_pos": Op(F({"yes"}), F(), IMAGE),
    "pathology_closed_pos_normal": Op(F({"yes", "no"}), F({"pathology"}), IMAGE),
    "pathology_closed_neg": Op(F({"no_other", "no_normal"}), F({"true_pathology"}), IMAGE),
    "pathology_mc": Op(F({"answer", "none"}), F({"letter", "option"}), IMAGE),
}


class Config(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``config:`` of templates/rin.yaml."""

    modalities: tuple[str, ...] = ("CT", "MR", "US")
    modality_names: dict[str, str] = msgspec.field(default_factory=dict)
    anatomies: tuple[str, ...] = ()  # top-up pool for 4-option anatomy questions
    # modality -> anatomy -> radimagenet label folder names, or "*" for all of the anatomy
    modality_labels: dict[str, dict[str, str | list[str]]] = msgspec.field(default_factory=dict)
    # the same tasks on chest X-ray labels (rin_chest.ChestTasks): label schemes, region groups
    chest: dict[str, Any] = msgspec.field(default_factory=dict)
PHRASES: dict[str, frozenset[str]] = {"option_item": F({"letter", "option"}), "no_pathology": F()}
LETTERS = ("A", "B", "C", "D")
MODALITY_PREFIXES = ("CT", "MR", "US")
Key = tuple[str, str]  # (modality, anatomy id)


def _norm_mod(m: str) -> str:
    m = (m or "").strip().upper()
    return "MR" if m == "MRI" else m


@STRATEGY_REGISTRY.register("rin")
class Strategy:
    name = "rin"

    def __init__(self, gen: Generator, fam: Family) -> None:
        self.gen = gen
        self.fam = fam
        self.t = {tpl.op: tpl for tpl in fam.templates.values()}
        cfg: Config = fam.config
        self.modalities = F(_norm_mod(m) for m in cfg.modalities)
        self.modality_names: dict[str, str] = dict(cfg.modality_names)
        self.no_path = str(fam.phrases["no_pathology"][0])
        v = gen.vocab
        # everything below is per Generator, never per row
        self.anat_pools = self._anatomy_pools(v, cfg)
        self.path_pools, self.pool_origin = self._pathology_pools(v, cfg)
        # the normal-image closed+ is the pathology_closed_pos task with its own wording
        tn = self.t.get("pathology_closed_pos_normal")
        self.t_normal_pos = dataclasses.replace(tn, question_type="pathology_closed_pos") if tn else None
        # ... and asked of an abnormal image too ("no": a closed- question), so it is not always "yes"
        self.t_normal_neg = dataclasses.replace(tn, question_type="pathology_closed_neg") if tn else None
        # the same tasks on chest X-ray labels (rin_chest.py), when rin.yaml configures them
        self.chest = ChestTasks(self, cfg.chest) if cfg.chest else None

    # ---- pools (load time) ----------------------------------------------------------------------
    def _anatomy_pools(self, v: Any, cfg: Config) -> dict[Key, tuple[list[str], list[str]]]:
        """(modality, anatomy) -> (same-modality other anatomies, top-up anatomies), sorted."""
        listed = [a for a in cfg.anatomies if a in v.aname] or sorted(v.aname)
        out: dict[Key, tuple[list[str], list[str]]] = {}
        mods = {m for a in v.aname for m in v.amodalities.get(a, ())} | set(self.modalities)
        for mod in sorted(mods):
            for anat in sorted(v.aname):
                same = [a for a in sorted(v.aname) if a != anat and mod in v.amodalities.get(a, ())]
                # top-up: the family's other anatomies (CT/MR regions), never one already offered
                top = [a for a in listed if a != anat and a not in same]
                out[(mod, anat)] = (same, top)
        return out

    def _pathology_pools(self, v: Any, cfg: Config) -> tuple[dict[Key, tuple[str, ...]], dict[Key, str]]:
        """(modality, anatomy) -> sorted pathology ids, and where each pool came from
        ("scheme", "config" or "anatomy")."""
        pools: dict[Key, list[str]] = {}
        origin: dict[Key, str] = {}
        schemes = getattr(v.onto, "schemes", {}) or {}
        scheme = schemes.get("radimagenet") if isinstance(schemes, dict) else None
        labels: dict[str, Any] = dict(getattr(scheme, "labels", {}) or {}) if scheme is not None else {}

        def add(key: Key, fids: Any, how: str) -> None:
            lst = pools.setdefault(key, [])
            for fid in fids:
                if fid in v.fname and v.fabnormal.get(fid, True) and fid not in lst:
                    lst.append(fid)
            origin[key] = how

        # 1. modality-prefixed scheme labels ("CT/abdomen_pelvis/liver_lesion"), if the ontology has them
        for key, fids in labels.items():
            parts = key.split("/")
            if len(parts) == 3 and _norm_mod(parts[0]) in MODALITY_PREFIXES:
                add((_norm_mod(parts[0]), parts[1]), fids, "scheme")
        # 2. rin.yaml: modality -> anatomy -> label folder names ("*": every label of the anatomy)
        if scheme is not None:
            for mod, by_anat in cfg.modality_labels.items():
                m = _norm_mod(mod)
                for anat, names in (by_anat or {}).items():
                    if (m, anat) in origin:
                        continue  # the ontology's own modality labels win
                    if anat not in v.aname:
                        raise TemplateError(f"rin.yaml: config.modality_labels.{mod}: unknown anatomy {anat!r}")
                    if names == "*":
                        keys = [k for k in labels if k.startswith(anat + "/")]
                    else:
                        keys = [f"{anat}/{n}" for n in names]
                        bad = [k for k in keys if k not in labels]
                        if bad:
                            raise TemplateError(f"rin.yaml: config.modality_labels.{mod}.{anat}: labels not in "
                                                f"the radimagenet scheme: {bad}")
                    add((m, anat), (f for k in keys for f in labels[k]), "config")
        # 3. anything else: the anatomy's pathologies, whatever the modality (ontology has no more)
        for anat, fids in v.anatomy_pathologies.items():
            for mod in v.amodalities.get(anat, ()) or sorted(self.modalities):
                if (mod, anat) not in origin:
                    add((mod, anat), fids, "anatomy")
        return {k: tuple(sorted(p)) for k, p in sorted(pools.items())}, origin

    def pathology_pool(self, modality: str, anatomy: str) -> tuple[str, ...]:
        m = _norm_mod(modality)
        pool = self.path_pools.get((m, anatomy))
        if pool is None:  # a modality the ontology does not list for this anatomy: its own pathologies
            pool = self.gen.vocab.anatomy_pathologies.get(anatomy, ())
        return pool

    # ---- generation -----------------------------------------------------------------------------
    def applies(self, sg: SceneGraph, prior: SceneGraph | None) -> bool:
        return bool(sg.anatomy) or (self.chest is not None and self.chest.applies(sg))

    @staticmethod
    def _anat_id(a: str) -> str:
        return a.strip().lower().replace(" ", "_").replace("-", "_")

    def run(self, ctx: StudyCtx, prior: SceneGraph | None) -> None:
        sg = ctx.sg
        if not sg.anatomy and self.chest is not None:
            self.chest.run(ctx)
            return
        v = self.gen.vocab
        rng = ctx.stream("rin")
        anat = self._anat_id(sg.anatomy or "")
        aname = v.anatomy_name(anat)
        mod = _norm_mod(sg.modality)
        mname = self.modality_names.get(mod, mod or "medical")
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
                 short: str, polarity: str | None, choices: list[str] | None = None,
                 tag: str | None = None) -> None:
            def compose(answer: str) -> tuple[str, list[AnswerPart]]:
                return answer, [AnswerPart(part_type="main", text=answer, tag=tag or short, findings=findings,
                                           certainty="present" if path else "absent", boxes=box_src)]
            ctx.render_emit(tpl, pick_index(rng, tpl), slots, slot_key, key, lv, [], g, prov, compose=compose,
                            short=short, choices=choices, polarity=polarity, findings=findings)

        if "abnormality" in t:
            emit(t["abnormality"], base, "", "yes" if path else "no", {"pathology": pname},
                 "yes" if path else "no", "positive" if path else "negative", tag=pname or self.no_path)
        # anatomy ---------------------------------------------------------------------------------
        same_mod, top_up = self.anat_pools.get((mod, anat)) or ([], [a for a in sorted(v.aname) if a != anat])
        if "anatomy_open" in t:
            emit(t["anatomy_open"], base, "", "answer", {"anatomy": aname}, aname, None)
        if "anatomy_closed_pos" in t:
            emit(t["anatomy_closed_pos"], {**base, "anatomy": aname}, anat, "yes", {}, "yes", "positive", tag=aname)
        pool = same_mod or top_up
        if "anatomy_closed_neg" in t and pool:
            wrong = pool[int(rng.random() * len(pool))]
            emit(t["anatomy_closed_neg"], {**base, "anatomy": v.anatomy_name(wrong)}, wrong, "no",
                 {"true_anatomy": aname}, "no", "negative", tag=aname)
        if "anatomy_mc" in t and len(same_mod) + len(top_up) >= 3:
            k = min(3, len(same_mod))
            chosen = rng.sample(same_mod, k) + rng.sample(top_up, 3 - k)
            self._mc(rng, emit, t["anatomy_mc"], base, "answer", aname, [v.anatomy_name(a) for a in chosen])
        # pathology -------------------------------------------------------------------------------
        same = [p for p in self.pathology_pool(mod, anat) if path is None or p != path.fid]
        slots_pa = {**base, "anatomy": aname}
        if "pathology_open" in t:
            if path is not None:
                emit(t["pathology_open"], slots_pa, "", "pathology", {"pathology": pname}, pname, "positive")
            else:
                emit(t["pathology_open"], slots_pa, "", "none", {"pathology": ""}, self.no_path, "negative")
        # closed+ only where a closed- can be asked too (a pool with another pathology), so the
        # yes/no pair stays balanced by construction
        pair = bool(same) or "pathology_closed_neg" not in t
        if path is not None and "pathology_closed_pos" in t and pair:
            emit(t["pathology_closed_pos"], {**base, "pathology": pname}, path.fid, "yes", {}, "yes", "positive",
                 tag=pname)
        elif path is None and self.t_normal_pos is not None and pair:
            emit(self.t_normal_pos, slots_pa, "normal", "yes", {}, "yes", "positive", tag=self.no_path)
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
                self._mc(rng, emit, t["pathology_mc"], slots_pa, "answer" if path else "none", correct, distract)

    def _mc(self, rng: Any, emit: Any, tpl: Template, slots: dict[str, str], key: str, correct: str,
            distract: list[str]) -> None:
        opts = list(dict.fromkeys(distract))
        if len(opts) != 3:
            return  # three distinct distractors or no item; a distractor equal to the answer is
            # caught by the template's distinct_options constraint
        pos = int(rng.random() * 4)
        opts.insert(pos, correct)
        item = self.fam.phrases["option_item"][0]
        text = " ".join(item.format_map({"letter": L, "option": cap(o)}) for L, o in zip(LETTERS, opts))
        emit(tpl, {**slots, "options": text}, "|".join(opts), key,
             {"letter": LETTERS[pos], "option": correct}, LETTERS[pos], None, choices=opts, tag=correct)
