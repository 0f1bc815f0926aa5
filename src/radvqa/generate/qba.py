"""CXR-QBA's 27 question types (REFERENCE.md §1) from one report scene graph.

Question sets per study follow the anchor: a default set (from ``qba.yaml`` config) + what the
report mentions (and the parents of mentioned regions) + negatives sampled with probability
proportional to corpus positive rates (``data/priors.yaml``), then yes/no balancing and per-template
caps. Answers are full sentences: a lead wording from the template, then the answer parts (main per
finding, details for location / size / description / child observations, related for other
findings in the same region), each with its tag and boxes.
"""

from __future__ import annotations

import re
from typing import Any

from radvqa.generate.engine import StudyCtx, WeightedPool, change_text_grade, sample_capped, weighted_sample
from radvqa.generate.facts import Fact, fold_ancestors, join_list, merge_facts
from radvqa.generate.templates import Family, Spec, Template
from radvqa.model import AnswerPart, SceneGraph
from radvqa.quality.criteria import IMPLIED_NEGATIVE, combine

F = frozenset
YN = F({"yes", "no"})
DESC = F({"abnormal", "normal"})
LIST = F({"list", "n"})
SPECS: dict[str, Spec] = {
    "A_indication": Spec(F({"positive", "negative"}), LIST),
    "B01_describe_all": Spec(DESC, LIST),
    "B02_describe_abnormal": Spec(DESC, LIST),
    "B03_is_abnormal": Spec(YN, LIST),
    "B04_is_normal": Spec(YN, LIST),
    "B08_describe_subcat": Spec(DESC, LIST),
    "B09_describe_abnormal_subcat": Spec(DESC, LIST),
    "B10_is_abnormal_subcat": Spec(YN, LIST),
    "B11_is_normal_subcat": Spec(YN, LIST),
    "B12_describe_device": Spec(F({"devices", "none"}), LIST),
    "B13_has_devices": Spec(YN, LIST),
    "B14_describe_acquisition": Spec(F({"views", "no_views"}), F({"n", "images", "views", "modality"})),
    "B15_describe_artifacts": Spec(F({"artifacts", "none"}), LIST),
    "B16_has_artifacts": Spec(YN, LIST),
    "C01_describe_region": Spec(DESC, LIST),
    "C02_describe_abnormal_region": Spec(DESC, LIST),
    "C03_is_abnormal_region": Spec(YN, LIST),
    "C04_is_normal_region": Spec(YN, LIST),
    "C07_describe_device_region": Spec(F({"devices", "none"}), LIST),
    "C08_has_device_region": Spec(YN, LIST),
    "D01_describe_finding": Spec(F({"present", "uncertain", "absent"}), F({"phrase", "location"})),
    "D02_has_finding": Spec(F({"present", "uncertain", "absent"}), F({"phrase", "location"})),
    "D03_where_is_finding": Spec(F({"located", "sided"}), F({"phrase", "location"})),
    "D04_how_severe_is_finding": Spec(F({"severity"}), F({"phrase", "severity"})),
    "D05_describe_device": Spec(F({"present", "absent"}), F({"phrase", "location"})),
    "D06_has_device": Spec(F({"present", "absent"}), F({"phrase", "location"})),
    "D07_where_is_device": Spec(F({"located"}), F({"phrase", "location"})),
}
PHRASES: dict[str, frozenset[str]] = {
    "view_item": F({"view"}),
}

_NONE: tuple[int, tuple[str, ...]] = (0, ())
_WORD = re.compile(r"[a-z][a-z/-]*")
_PUNCT = str.maketrans({c: " " for c in ".,;:!?()[]\"'/"})


class Strategy:
    name = "qba"

    def __init__(self, gen: Any, fam: Family) -> None:
        self.gen = gen
        self.fam = fam
        self.t = fam.templates
        cfg = fam.config
        v = gen.vocab
        pri = gen.priors
        self.require_report = bool(cfg.get("require_report", True))
        self.modalities = F(m.upper() for m in cfg.get("modalities", ("CR", "DX")))

        def chest(fid: str) -> bool:
            return not v.fanatomies.get(fid) and not v.fcat.get(fid, "").startswith("RADIMAGENET")

        dev_c, tech_c = gen.device_categories, gen.technical_categories
        all_ids = sorted(v.fname)
        self.cand_findings = [f for f in all_ids if chest(f) and v.fabnormal[f]
                              and v.fcat[f] not in dev_c and v.fcat[f] not in tech_c]
        # ask both ways (issue 14): every closed question asked "yes" somewhere is asked "no" elsewhere
        self.both_ways = bool(cfg.get("ask_both_ways", False))
        pool_ids = list(self.cand_findings)
        pool_w = [pri.finding_weight(f) for f in self.cand_findings]
        if self.both_ways:
            # an abnormal ancestor of a candidate ("degenerative changes" above "degenerative
            # spine") is asked "yes" whenever a descendant is present: it joins the negative pool,
            # weighted by its own and its descendants' positive rates
            cand = set(self.cand_findings)
            for a in sorted({a for f in self.cand_findings for a in v.fancestors.get(f, ())} - cand):
                if v.fabnormal.get(a, True) and v.fcat.get(a) not in dev_c and v.fcat.get(a) not in tech_c:
                    pool_ids.append(a)
                    pool_w.append(pri.finding_weight(a) + sum(pri.finding_weight(d) for d in v.fdescendants.get(a, ())
                                                              if d in cand))
        self.pool_findings = WeightedPool(pool_ids, pool_w)
        self.cand_devices = [f for f in all_ids if chest(f) and v.fcat[f] in dev_c]
        self.pool_devices = WeightedPool(self.cand_devices, [pri.finding_weight(f) for f in self.cand_devices])
        self.cand_regions = sorted(v.rname)
        self.pool_regions = WeightedPool(self.cand_regions, [pri.region_weight(r) for r in self.cand_regions])
        self.default_regions = [r for r in cfg.get("default_regions", ()) if r in v.rname]
        self.default_findings = [f for f in cfg.get("default_findings", ()) if f in v.fname]
        self.default_devices = [f for f in cfg.get("default_devices", ()) if f in v.fname]
        subs = {v.fsub[f] for f in self.cand_findings if v.fsub[f]}
        self.default_subcats = [s for s in cfg.get("default_subcategories", ()) if s in subs]
        # subcategories weighted by how often one of their findings is positive: the negatives of
        # B08-B11 are drawn from it (ask both ways), so "lung volumes" is asked when normal too
        sub_w: dict[str, float] = {}
        for f in self.cand_findings:
            if v.fsub[f]:
                sub_w[v.fsub[f]] = sub_w.get(v.fsub[f], 0.0) + pri.finding_weight(f)
        self.pool_subcats = WeightedPool(sorted(sub_w), [sub_w[k] for k in sorted(sub_w)])
        self.sub_names: dict[str, str] = dict(cfg.get("subcategory_names", {}))
        self.k_findings = int(cfg.get("finding_negatives", 4))
        self.k_devices = int(cfg.get("device_negatives", 1))
        self.k_regions = int(cfg.get("region_negatives", 2))
        self.max_related = int(cfg.get("max_related", 2))
        self.view_names: dict[str, str] = dict(cfg.get("view_names", {}))
        self.modality_names: dict[str, str] = dict(cfg.get("modality_names", {}))
        self.yes_share = float(cfg.get("yes_share", 0.5))
        self.min_neg = int(cfg.get("min_negatives", 2))
        self.deid_mask = str(cfg.get("deid_mask", "xxxx")).lower()
        self.ind_filler = F(w.lower() for w in cfg.get("indication_filler_words", ()))
        self._bal: dict[str, tuple[float, int]] = {}
        self._counts: dict[tuple[Any, ...], tuple[int, int, int]] = {}

    def applies(self, sg: SceneGraph, prior: SceneGraph | None) -> bool:
        if sg.modality.upper() not in self.modalities:
            return False
        return sg.report is not None or not self.require_report

    def sub_name(self, s: str) -> str:
        return self.sub_names.get(s) or s.lower().replace("_", " ")

    # ---------------------------------------------------------------------------------------------
    def run(self, ctx: StudyCtx, prior: SceneGraph | None) -> None:
        rng = ctx.stream("qba")
        self.rng = rng
        facts = list(ctx.facts.values())
        child_ids = {c for f in facts for c in f.obs.children}
        top = fold_ancestors(ctx, merge_facts(ctx, [f for f in facts if f.obs.id not in child_ids]))
        # the study's fact per finding (merged copies), for questions that name a finding
        self.top_by: dict[str, Fact] = {}
        for f in top:
            self.top_by.setdefault(f.fid, f)
        self.child_parts: dict[str, list[AnswerPart]] = {}
        for f in top:
            if f.obs.children:
                kids = []
                for cid in f.obs.children:
                    cf = ctx.facts.get(cid)
                    if cf is not None:
                        kids.append(AnswerPart(part_type="details", text=cf.main.text, level=1, tag=cf.tag,
                                               findings=[cf.fid], regions=cf.main.regions,
                                               laterality=cf.lat, certainty=cf.certainty,
                                               severity=cf.severity, boxes=cf.boxes))
                self.child_parts[f.obs.id] = kids
        ab_pos = [f for f in top if f.abnormal and not f.absent]
        ab_neg = [f for f in top if f.abnormal and f.absent]
        devs = [f for f in top if f.is_device and not f.absent]
        tech = [f for f in top if f.is_technical and not f.is_artifact and not f.absent]
        arts = [f for f in top if f.is_artifact and not f.absent]
        self._all_pos = ab_pos
        t = self.t
        S = self
        if "A_indication" in t:
            S.a_indication(ctx, t["A_indication"], ab_pos)
        for qt, fn in (("B01_describe_all", S.b_describe_all), ("B02_describe_abnormal", S.b_describe_abn),
                       ("B03_is_abnormal", S.b_is_abn), ("B04_is_normal", S.b_is_normal)):
            if qt in t:
                fn(ctx, t[qt], ab_pos, ab_neg, devs)
        if any(q in t for q in ("B08_describe_subcat", "B09_describe_abnormal_subcat",
                                "B10_is_abnormal_subcat", "B11_is_normal_subcat")):
            S.subcats(ctx, ab_pos, ab_neg)
        S.devices_study(ctx, devs)
        if "B14_describe_acquisition" in t:
            S.acquisition(ctx, t["B14_describe_acquisition"], tech)
        S.artifacts(ctx, arts)
        S.regions(ctx, ab_pos, ab_neg, devs)
        S.findings(ctx, top, ab_pos, ab_neg)
        S.devices(ctx, top, devs)

    # helpers -------------------------------------------------------------------------------------
    def fact_for(self, ctx: StudyCtx, fid: str) -> Fact:
        """The study's (merged) fact for a finding, else an implied negative."""
        f = self.top_by.get(fid)
        return f if f is not None else ctx.negative_fact(fid)

    def parts_of(self, f: Fact, details: bool = True) -> list[AnswerPart]:
        if not details:
            return [f.main]
        kids = self.child_parts.get(f.obs.id)
        if not f.details and not kids:
            return [f.main]
        out = [f.main, *f.details]
        if kids:
            out.extend(kids)
        return out

    def out(self, ctx: StudyCtx, tpl: Template, slots: dict[str, str], slot_key: str, key: str,
            lvars: dict[str, str], parts: list[AnswerPart], facts: list[Fact], *,
            short: str | None = None, polarity: str | None = None, findings: list[str] | None = None,
            regions: list[str] | None = None, lead_tag: str | None = None,
            lead_boxes: list | None = None, extra: list | None = None) -> None:
        qs = tpl.questions
        widx = 0 if len(qs) == 1 else int(self.rng.random() * len(qs))
        question = qs[widx].format_map(slots)
        if short and "answer_not_in_question" in tpl.constraints and _leaks(short, question):
            return  # e.g. "Where is the degenerative change of the spine?" -> "the spine": degenerate
        ws = tpl.answers[key]  # ctx.pick, inlined (one call per row): same stream, same draw
        n = len(ws)
        lead = (ws[0] if n == 1 else ws[int(ctx.rng.random() * n)]).format_map(
            {**slots, **lvars} if slots else lvars)
        if not parts:
            tag = lead_tag or key
            rl = ctx.strs(regions) if regions else ctx.no_strs
            bl = lead_boxes or ctx.no_boxes
            # the same lead ("No devices are seen.") recurs across a study's rows: one part object
            pkey = (2, lead, tag, id(rl), id(bl))
            p0 = ctx.shared.get(pkey)
            if p0 is None:
                p0 = ctx.shared[pkey] = AnswerPart(part_type="main", text=lead, tag=tag, findings=ctx.no_strs,
                                                   regions=rl, boxes=bl)
            parts = [p0]
            answer = lead
        else:
            body = " ".join([p.text for p in parts])
            answer = f"{lead} {body}" if lead else body
        if len(facts) == 1 and not extra:  # the common case, without the merging loops
            f0 = facts[0]
            grade = f0.grade
            prov = f0.prov  # shared, read-only from here on (facts are complete before questions)
            if findings is None:
                findings = f0.main.findings  # [fid], shared
        elif not extra:  # the same fact lists recur across a study's questions: merge once
            fkey = (4, *map(id, facts))
            hit = ctx.shared.get(fkey)
            if hit is None:  # the tuple of facts keeps them alive, so their ids stay theirs
                hit = ctx.shared[fkey] = (tuple(facts), *_merged(facts, None))
            grade, prov, fl = hit[1], hit[2], hit[3]
            if findings is None:
                findings = fl
        else:
            grade, prov, fl = _merged(facts, extra)
            if findings is None:
                findings = fl
        if not facts and polarity == "negative":
            # a "no" / "nothing" that no stated negative supports rests on the report's silence:
            # graded like every other implied negative (B), whatever the question type
            grade = IMPLIED_NEGATIVE
            prov = ["report:not_mentioned"]
        elif not prov:  # an answer that rests on no observation: the report mentions nothing of it
            prov = ["report:no_matching_observation"]
        ctx.emit(tpl, slot_key, widx, question, answer, parts, grade, answer_short=short,
                 polarity=polarity, findings=findings, regions=regions or ctx.no_strs, provenance=prov)

    def _desc(self, ctx: StudyCtx, tpl: Template, slots: dict[str, str], slot_key: str,
              pos: list[Fact], neg: list[Fact], with_negatives: bool, **kw: Any) -> None:
        """describe-type: mains for positives (+details), related for some explicit negatives."""
        if pos:
            parts: list[AnswerPart] = []
            for f in pos:
                parts.extend(self.parts_of(f))
            if with_negatives:
                parts.extend(f.related() for f in neg[: self.max_related])
            names = [f.a_phrase for f in pos]
            self.out(ctx, tpl, slots, slot_key, "abnormal", {"list": join_list(names), "n": str(len(pos))},
                     parts, pos + (neg[: self.max_related] if with_negatives else []),
                     polarity="positive", **kw)
        else:
            parts = [f.main for f in neg[: self.max_related + 1]] if with_negatives else []
            # the stated negatives support the "normal" answer (grade, provenance) even where the
            # template does not list them
            self.out(ctx, tpl, slots, slot_key, "normal", {"list": "", "n": "0"}, parts,
                     neg[: self.max_related + 1], polarity="negative",
                     lead_tag="normal", **kw)

    def _yn(self, ctx: StudyCtx, tpl: Template, slots: dict[str, str], slot_key: str, yes: bool,
            pos: list[Fact], neg: list[Fact], **kw: Any) -> None:
        """yes/no-type: 'yes' lists the positives as parts; 'no' states the explicit negatives."""
        if pos:
            parts: list[AnswerPart] = []
            for f in pos:
                parts.extend(self.parts_of(f))
            lv = {"list": join_list([f.a_phrase for f in pos]), "n": str(len(pos))}
            self.out(ctx, tpl, slots, slot_key, "yes" if yes else "no", lv, parts, pos,
                     short="yes" if yes else "no", polarity="positive", **kw)
        else:
            nn = neg[: self.max_related + 1]
            self.out(ctx, tpl, slots, slot_key, "yes" if yes else "no", {"list": "", "n": "0"},
                     [f.main for f in nn], nn, short="yes" if yes else "no", polarity="negative",
                     lead_tag="normal", **kw)

    # A -------------------------------------------------------------------------------------------
    def a_indication(self, ctx: StudyCtx, tpl: Template, ab_pos: list[Fact]) -> None:
        ind = ctx.sg.indication
        if ind is None or not ind.text.strip():
            return
        text = ind.text.strip().rstrip(".")
        if not self._has_content(text):
            return  # "XXXX-year-old XXXX with XXXX": de-identification left nothing to ask about
        if ind.evaluate:
            facts = [self.fact_for(ctx, fid) for fid in ind.evaluate if fid in self.gen.vocab.fname]
            pos = [f for f in facts if not f.absent]
            neg = [f for f in facts if f.absent]
        else:
            pos, neg = ab_pos, []
        extra = []
        g = change_text_grade(" " + text.lower().translate(_PUNCT) + " ", self._cw())
        if g is not None:
            extra.append(g)
        prov = [f"indication: {text}"] + [f"{e.sentence_id}: {e.text}" for e in ind.evidence if e.sentence_id]
        slots = {"indication": text}
        if pos:
            parts = [p for f in pos for p in self.parts_of(f)] + [f.main for f in neg]
            self.out(ctx, tpl, slots, "", "positive", {"list": join_list([f.a_phrase for f in pos]),
                     "n": str(len(pos))}, parts, pos + neg, polarity="positive", extra=extra)
        else:
            self.out(ctx, tpl, slots, "", "negative", {"list": "", "n": "0"}, [f.main for f in neg],
                     neg, polarity="negative", lead_tag="normal", extra=extra)
        row = ctx.rows[-1]
        row.provenance = [p for p in prov if p not in row.provenance] + row.provenance

    def _has_content(self, text: str) -> bool:
        """Some word of the indication is neither a de-identification mask nor a filler word."""
        for w in _WORD.findall(text.lower()):
            if self.deid_mask not in w and w not in self.ind_filler:
                return True
        return False

    def _cw(self) -> tuple[str, ...]:
        return tuple(f" {w} " for w in self.gen.change_words)

    # B -------------------------------------------------------------------------------------------
    def b_describe_all(self, ctx, tpl, ab_pos, ab_neg, devs) -> None:  # type: ignore[no-untyped-def]
        self._desc(ctx, tpl, {}, "", ab_pos + devs, ab_neg, True)

    def b_describe_abn(self, ctx, tpl, ab_pos, ab_neg, devs) -> None:  # type: ignore[no-untyped-def]
        self._desc(ctx, tpl, {}, "", ab_pos, ab_neg, False)

    def b_is_abn(self, ctx, tpl, ab_pos, ab_neg, devs) -> None:  # type: ignore[no-untyped-def]
        self._yn(ctx, tpl, {}, "", bool(ab_pos), ab_pos, ab_neg)

    def b_is_normal(self, ctx, tpl, ab_pos, ab_neg, devs) -> None:  # type: ignore[no-untyped-def]
        self._yn(ctx, tpl, {}, "", not ab_pos, ab_pos, ab_neg)

    def subcats(self, ctx: StudyCtx, ab_pos: list[Fact], ab_neg: list[Fact]) -> None:
        t = self.t
        by_pos: dict[str, list[Fact]] = {}
        by_neg: dict[str, list[Fact]] = {}
        for f in ab_pos:
            if f.subcategory:
                by_pos.setdefault(f.subcategory, []).append(f)
        for f in ab_neg:
            if f.subcategory:
                by_neg.setdefault(f.subcategory, []).append(f)
        subs = list(dict.fromkeys([*by_pos, *by_neg, *self.default_subcats]))
        sampled: list[str] = []
        if self.both_ways:
            # negatives: what the report negates, then subcategories drawn by how often they are
            # abnormal in the corpus (own stream: the other questions' draws stay as they were)
            subs = list(dict.fromkeys([*by_pos, *by_neg]))
            sampled = weighted_sample(ctx.stream("qba-subcats"), self.pool_subcats, len(self.pool_subcats.items),
                                      lambda s: s in by_pos or s in by_neg)
        for qt in ("B08_describe_subcat", "B09_describe_abnormal_subcat", "B10_is_abnormal_subcat",
                   "B11_is_normal_subcat"):
            tpl = t.get(qt)
            if tpl is None:
                continue
            chosen = self._balance([s for s in subs if s in by_pos], [s for s in subs if s not in by_pos],
                                   self.gen.cap(tpl), tpl, sampled)
            for s in chosen:
                slots = {"subcategory": self.sub_name(s)}
                pos, neg = by_pos.get(s, []), by_neg.get(s, [])
                if qt == "B08_describe_subcat":
                    self._desc(ctx, tpl, slots, s, pos, neg, True)
                elif qt == "B09_describe_abnormal_subcat":
                    self._desc(ctx, tpl, slots, s, pos, neg, False)
                elif qt == "B10_is_abnormal_subcat":
                    self._yn(ctx, tpl, slots, s, bool(pos), pos, neg)
                else:
                    self._yn(ctx, tpl, slots, s, not pos, pos, neg)

    def _balance(self, pos: list[Any], neg: list[Any], cap_n: int | None, tpl: Template,
                 sampled: list[Any] | None = None) -> list[Any]:
        """Yes/no balance within a cap: about ``yes_share`` positives, negatives following the
        positives (at least ``min_negatives``), topping up positives when negatives run short.
        ``neg`` comes in priority order (what the report negates, then the default set);
        ``sampled`` negatives (drawn by corpus priors) get at least one of the negative slots, so
        the anchor's prior-weighted negatives appear even when the report negates many things.
        Template ``balance`` overrides the family config."""
        sampled = sampled or []
        # the counts depend on the template and the three lengths only: worked out once each
        ckey = (tpl.id, cap_n, len(pos), len(neg), len(sampled))
        counts = self._counts.get(ckey)
        if counts is None:
            counts = self._counts[ckey] = self._balance_counts(len(pos), len(neg), len(sampled), cap_n, tpl)
        n_pos, n_e, n_s = counts
        return pos[:n_pos] + neg[:n_e] + sampled[:n_s]

    def _balance_counts(self, n_pos_all: int, n_neg: int, n_sampled: int, cap_n: int | None,
                        tpl: Template) -> tuple[int, int, int]:
        """(positives, explicit negatives, sampled negatives) that ``_balance`` keeps."""
        pos = range(n_pos_all)
        neg = range(n_neg)
        sampled = range(n_sampled)
        hit = self._bal.get(tpl.id)
        if hit is None:  # per template, not per study
            hit = self._bal[tpl.id] = (float(tpl.balance.get("yes_share", self.yes_share)),
                                       int(tpl.balance.get("min_negatives", self.min_neg)))
        ys, mn = hit
        n_all_neg = len(neg) + len(sampled)
        cap_n = cap_n if cap_n is not None else len(pos) + n_all_neg
        n_pos = min(len(pos), max(1, int(round(cap_n * ys))) if pos else 0)
        quota = (1 << 30) if ys <= 0 else max(mn, int(round(n_pos * (1 - ys) / ys)))
        n_neg = min(n_all_neg, cap_n - n_pos, quota)
        n_pos = min(len(pos), cap_n - n_neg)
        n_s = min(len(sampled), max(1, n_neg // 2)) if n_neg else 0
        n_e = min(len(neg), n_neg - n_s)
        n_s = min(len(sampled), n_neg - n_e)
        return n_pos, n_e, n_s

    def devices_study(self, ctx: StudyCtx, devs: list[Fact]) -> None:
        t = self.t
        tpl = t.get("B12_describe_device")
        if tpl is not None:
            if devs:
                parts = [p for f in devs for p in self.parts_of(f)]
                self.out(ctx, tpl, {}, "", "devices", {"list": join_list([f.a_phrase for f in devs]),
                         "n": str(len(devs))}, parts, devs, polarity="positive")
            else:
                self.out(ctx, tpl, {}, "", "none", {"list": "", "n": "0"}, [], [], polarity="negative",
                         lead_tag="no devices")
        tpl = t.get("B13_has_devices")
        if tpl is not None:
            if devs:
                self._yn(ctx, tpl, {}, "", True, devs, [])
            else:
                self.out(ctx, tpl, {}, "", "no", {"list": "", "n": "0"}, [], [], short="no",
                         polarity="negative", lead_tag="no devices")

    def acquisition(self, ctx: StudyCtx, tpl: Template, tech: list[Fact]) -> None:
        ims = ctx.sg.images
        views = [im.view for im in ims if im.view]
        if not views and not tech:
            return  # nothing known about the acquisition: no degenerate question
        ph = self.fam.phrases["view_item"]
        items = [ctx.pick(ph).format_map({"view": self.view_names.get(v.upper(), v)}) for v in views]
        mod = ctx.sg.modality.upper()
        lv = {"n": str(len(ims)), "images": f"{len(ims)} image" + ("" if len(ims) == 1 else "s"),
              "views": join_list(items) if items else "views not recorded",
              "modality": self.modality_names.get(mod, mod)}
        lead = ctx.pick(tpl.answers["views" if items else "no_views"]).format_map(lv)
        parts = [AnswerPart(part_type="main", text=lead, tag="acquisition")]
        parts.extend(f.main for f in tech)
        qs = tpl.questions
        widx = int(self.rng.random() * len(qs))
        grade = combine([f.grade for f in tech]) if tech else _NONE
        ctx.emit(tpl, "", widx, qs[widx], " ".join(p.text for p in parts), parts, grade,
                 findings=[f.fid for f in tech],
                 provenance=["images:" + ",".join(f"{im.id}={im.view or '?'}" for im in ims)]
                 + [p for f in tech for p in f.prov])

    def artifacts(self, ctx: StudyCtx, arts: list[Fact]) -> None:
        t = self.t
        tpl = t.get("B15_describe_artifacts")
        if tpl is not None:
            if arts:
                parts = [p for f in arts for p in self.parts_of(f)]
                self.out(ctx, tpl, {}, "", "artifacts", {"list": join_list([f.a_phrase for f in arts]),
                         "n": str(len(arts))}, parts, arts, polarity="positive")
            else:
                self.out(ctx, tpl, {}, "", "none", {"list": "", "n": "0"}, [], [], polarity="negative",
                         lead_tag="no artifacts")
        tpl = t.get("B16_has_artifacts")
        if tpl is not None:
            if arts:
                self._yn(ctx, tpl, {}, "", True, arts, [])
            else:
                self.out(ctx, tpl, {}, "", "no", {"list": "", "n": "0"}, [], [], short="no",
                         polarity="negative", lead_tag="no artifacts")

    # C -------------------------------------------------------------------------------------------
    def regions(self, ctx: StudyCtx, ab_pos: list[Fact], ab_neg: list[Fact], devs: list[Fact]) -> None:
        t = self.t
        qts = ("C01_describe_region", "C02_describe_abnormal_region", "C03_is_abnormal_region",
               "C04_is_normal_region", "C07_describe_device_region", "C08_has_device_region")
        if not any(q in t for q in qts):
            return
        v = self.gen.vocab
        anc = v.rancestors
        pos_at: dict[str, list[Fact]] = {}
        neg_at: dict[str, list[Fact]] = {}
        dev_at: dict[str, list[Fact]] = {}
        mentioned: list[str] = []
        for lst, index in ((ab_pos, pos_at), (devs, dev_at)):
            for f in lst:
                for r in f.regions:
                    for rr in (r, *anc.get(r, ())):
                        bucket = index.setdefault(rr, [])
                        if not bucket or bucket[-1] is not f:
                            bucket.append(f)
                for r in f.explicit_regions:
                    mentioned.append(r)
                    mentioned.extend(anc.get(r, ()))
        for f in ab_neg:
            for r in f.explicit_regions:
                neg_at.setdefault(r, []).append(f)
                mentioned.append(r)
        base = list(dict.fromkeys([*(r for r in mentioned if r in v.rname), *self.default_regions]))
        chosen = set(base)
        sampled = weighted_sample(self.rng, self.pool_regions, self.k_regions, chosen.__contains__)
        regions = base + sampled
        base_set = set(base)
        neg_cache: dict[str, list[Fact]] = {}
        rlists: dict[str, list[str]] = {}

        def neg_for(r: str) -> list[Fact]:
            # "the lungs are clear" speaks for the right lung too: negatives stated for the region
            # or any region containing it
            hit = neg_cache.get(r)
            if hit is None:
                hit = list(neg_at.get(r, ()))
                for a in anc.get(r, ()):
                    if a in neg_at:
                        hit.extend(f for f in neg_at[a] if f not in hit)
                neg_cache[r] = hit
            return hit

        # the region lists of the two indexes, each worked out once for its templates
        split_by: dict[int, tuple[list[str], list[str], list[str]]] = {}
        # region -> (name, slots, [r], its boxes, negatives), shared by the region's questions
        per_r: dict[str, tuple[str, dict[str, str], list[str], list, list[Fact]]] = {}
        for qt in qts:
            tpl = t.get(qt)
            if tpl is None:
                continue
            index = dev_at if qt in ("C07_describe_device_region", "C08_has_device_region") else pos_at
            lists = split_by.get(id(index))
            if lists is None:
                lists = split_by[id(index)] = (
                    [r for r in regions if r in index], [r for r in base if r not in index],
                    [r for r in sampled if r not in index and r not in base_set])
            rs = self._balance(lists[0], lists[1], self.gen.cap(tpl), tpl, lists[2])
            for r in rs:
                hit_r = per_r.get(r)
                if hit_r is None:
                    rname = v.region_name(r)
                    rl = rlists[r] = [r]  # one [r] (and one box list) shared by the region's rows
                    hit_r = per_r[r] = (rname, {"region": rname}, rl, ctx.region_boxes_for(rl), neg_for(r))
                rname, slots, rl, rb, neg_r = hit_r
                pos = index.get(r, [])
                kw = {"regions": rl, "lead_boxes": rb}
                if qt == "C01_describe_region":
                    self._desc(ctx, tpl, slots, r, pos, neg_r, True, **kw)
                elif qt == "C02_describe_abnormal_region":
                    self._desc(ctx, tpl, slots, r, pos, neg_r, False, **kw)
                elif qt == "C03_is_abnormal_region":
                    self._yn(ctx, tpl, slots, r, bool(pos), pos, neg_r, **kw)
                elif qt == "C04_is_normal_region":
                    self._yn(ctx, tpl, slots, r, not pos, pos, neg_r, **kw)
                elif qt == "C07_describe_device_region":
                    if pos:
                        parts = [p for f in pos for p in self.parts_of(f)]
                        self.out(ctx, tpl, slots, r, "devices", {"list": join_list([f.a_phrase for f in pos]),
                                 "n": str(len(pos))}, parts, pos, polarity="positive", regions=rl)
                    else:
                        self.out(ctx, tpl, slots, r, "none", {"list": "", "n": "0"}, [], [],
                                 polarity="negative", regions=rl, lead_tag=f"no devices, {rname}",
                                 lead_boxes=rb)
                else:
                    if pos:
                        self._yn(ctx, tpl, slots, r, True, pos, [], **kw)
                    else:
                        self.out(ctx, tpl, slots, r, "no", {"list": "", "n": "0"}, [], [], short="no",
                                 polarity="negative", regions=rl, lead_tag=f"no devices, {rname}",
                                 lead_boxes=rb)

    # D -------------------------------------------------------------------------------------------
    def _finding_set(self, ctx: StudyCtx, mentioned: list[str], defaults: list[str], pool: WeightedPool,
                     k: int) -> tuple[list[str], list[str]]:
        if self.both_ways:
            # the default negatives in a per-study order (own stream), so each of them is asked
            # "no" somewhere, not only the first few of the list; and they stay in the weighted
            # draw (a study with no device is asked about a drawn device only: "support device",
            # a default, was never asked "no")
            defaults = list(defaults)
            ctx.stream("qba-defaults").shuffle(defaults)
            sampled = weighted_sample(self.rng, pool, k, set(mentioned).__contains__)
            return list(dict.fromkeys([*mentioned, *(d for d in defaults if d not in sampled)])), sampled
        base = list(dict.fromkeys([*mentioned, *defaults]))
        chosen = set(base)
        return base, weighted_sample(self.rng, pool, k, chosen.__contains__)

    def findings(self, ctx: StudyCtx, top: list[Fact], ab_pos: list[Fact], ab_neg: list[Fact]) -> None:
        t = self.t
        v = self.gen.vocab
        pos_by: dict[str, list[Fact]] = {}
        for f in ab_pos:
            pos_by.setdefault(f.fid, []).append(f)
        # a present finding makes its parents present ("consolidation" is a "lung opacity"), and
        # its children unknowable from silence: never an implied "no" about them
        via_child: dict[str, list[Fact]] = {}
        unknowable: set[str] = set()
        for f in ab_pos:
            for a in v.fancestors.get(f.fid, ()):
                if a not in pos_by:
                    via_child.setdefault(a, []).append(f)
            unknowable.update(v.fdescendants.get(f.fid, ()))
        stated = {f.fid for f in ab_neg}
        mentioned = [*pos_by, *via_child, *(f.fid for f in ab_neg)]
        base, sampled = self._finding_set(ctx, mentioned, self.default_findings, self.pool_findings,
                                          self.k_findings)
        pos_by.update(via_child)
        fids = [x for x in base + sampled if x in pos_by or x in stated or x not in unknowable]
        base = [x for x in base if x in fids]
        sampled = [x for x in sampled if x in fids]
        lists = ([x for x in fids if x in pos_by], [x for x in base if x not in pos_by],
                 [x for x in sampled if x not in pos_by])
        # fid -> what both templates say about it (name, answer key, parts, lead variables,
        # facts, regions): worked out at its first question, the same objects for the second
        per_fid: dict[str, tuple[Any, ...]] = {}
        for qt in ("D01_describe_finding", "D02_has_finding"):
            tpl = t.get(qt)
            if tpl is None:
                continue
            chosen = self._balance(lists[0], lists[1], self.gen.cap(tpl), tpl, lists[2])
            d02 = qt == "D02_has_finding"
            for fid in chosen:
                hit = per_fid.get(fid)
                if hit is None:
                    slots = {"finding": v.finding_name(fid)}
                    fs = pos_by.get(fid)
                    if fs:
                        f0 = fs[0]
                        key = "present" if any(f.present for f in fs) else "uncertain"
                        parts = [p for f in fs for p in self.parts_of(f)]
                        parts.extend(self._related(fs))
                        lv = {"phrase": f0.phrase, "location": f0.location or "the image"}
                        hit = (slots, key, parts, lv, fs, f0.regions)
                    else:  # may build the implied negative (a wording draw): in the same order as before
                        nf = self.fact_for(ctx, fid)
                        rel = self._related_to_absent(nf)
                        hit = (slots, "absent", [nf.main, *rel], {"phrase": nf.phrase, "location": "the image"},
                               [nf], nf.regions)
                    per_fid[fid] = hit
                slots, key, parts, lv, fs, regs = hit
                if key == "absent":
                    self.out(ctx, tpl, slots, fid, "absent", lv, parts, fs, short="no" if d02 else None,
                             polarity="negative", regions=regs)
                else:
                    self.out(ctx, tpl, slots, fid, key, lv, parts, fs,
                             short=("yes" if key == "present" else "possibly") if d02 else None,
                             polarity="positive", regions=regs)
        tpl = t.get("D03_where_is_finding")
        if tpl is not None:
            located = [f for f in ab_pos if self._informative(f) or f.lat]
            for f in sample_capped(self.rng, located, self.gen.cap(tpl)):
                if self._informative(f):
                    loc = f.location
                elif f.lat == "bilateral":
                    loc = "both sides"
                else:
                    loc = f"the {f.lat} side"
                # a side only: the lead says it ("It is on the left side."), so the short answer
                # is in the answer text
                self.out(ctx, tpl, {"finding": f.name}, f.obs.id, "located" if self._informative(f) else "sided",
                         {"phrase": f.phrase, "location": loc}, self.parts_of(f), [f],
                         short=loc, polarity="positive", regions=f.regions)
        tpl = t.get("D04_how_severe_is_finding")
        if tpl is not None:
            graded = [f for f in ab_pos if f.severity]
            for f in sample_capped(self.rng, graded, self.gen.cap(tpl)):
                self.out(ctx, tpl, {"finding": f.name}, f.obs.id, "severity",
                         {"phrase": f.phrase, "severity": f.severity or ""}, self.parts_of(f), [f],
                         short=f.severity, polarity="positive", regions=f.regions)

    def _informative(self, f: Fact) -> bool:
        """A location says more than the finding's name: explicit regions that are not just the
        finding's default regions or their parents ("pleural effusion" -> "the pleura" is not)."""
        if not f.explicit_regions:
            return False
        v = self.gen.vocab
        dflt = set(v.fdefault_regions.get(f.fid, ()))
        for r in tuple(dflt):
            dflt.update(v.rancestors.get(r, ()))
        return any(r not in dflt for r in f.explicit_regions)

    def _related(self, fs: list[Fact]) -> list[AnswerPart]:
        """Other positive findings sharing a region with these (related information)."""
        ctx_regions = {r for f in fs for r in f.explicit_regions}
        if not ctx_regions:
            return []
        out: list[AnswerPart] = []
        ids = {f.obs.id for f in fs}
        for f in self._all_pos:
            if f.obs.id in ids:
                continue
            if ctx_regions.intersection(f.explicit_regions):
                out.append(f.related())
                if len(out) >= self.max_related:
                    break
        return out

    def _related_to_absent(self, nf: Fact) -> list[AnswerPart]:
        """For "no" answers: positive findings inside the regions where the asked finding would be
        (its default regions or their sub-regions), as related information."""
        if not self._all_pos or not nf.regions:
            return []
        anc = self.gen.vocab.rancestors
        where = set(nf.regions)
        out: list[AnswerPart] = []
        for f in self._all_pos:
            if f.fid == nf.fid:
                continue
            for r in f.regions:
                if r in where or where.intersection(anc.get(r, ())):
                    out.append(f.related())
                    break
            if len(out) >= self.max_related:
                break
        return out

    def devices(self, ctx: StudyCtx, top: list[Fact], devs: list[Fact]) -> None:
        t = self.t
        dbase, dsampled = self._finding_set(ctx, [f.fid for f in devs] + [f.fid for f in top if f.is_device and f.absent],
                                            self.default_devices, self.pool_devices, self.k_devices)
        v = self.gen.vocab
        by: dict[str, list[Fact]] = {}
        for f in devs:
            by.setdefault(f.fid, []).append(f)
        # as for findings: a pacemaker is a support device (never "no support device" beside it),
        # and a generic "catheter" leaves its kinds unknowable (no implied "no central line")
        unknowable: set[str] = set()
        via: dict[str, list[Fact]] = {}
        for f in devs:
            for a in v.fancestors.get(f.fid, ()):
                if a not in by:
                    via.setdefault(a, []).append(f)
            unknowable.update(v.fdescendants.get(f.fid, ()))
        by.update(via)
        stated = {f.fid for f in top if f.is_device and f.absent}
        dids = [d for d in dbase + dsampled if d in by or d in stated or d not in unknowable]
        dbase = [d for d in dbase if d in dids]
        dsampled = [d for d in dsampled if d in dids]
        for qt in ("D05_describe_device", "D06_has_device"):
            tpl = t.get(qt)
            if tpl is None:
                continue
            chosen = self._balance([d for d in dids if d in by], [d for d in dbase if d not in by],
                                   self.gen.cap(tpl), tpl, [d for d in dsampled if d not in by])
            for d in chosen:
                slots = {"device": v.finding_name(d)}
                fs = by.get(d)
                if fs:
                    f0 = fs[0]
                    self.out(ctx, tpl, slots, d, "present", {"phrase": f0.phrase, "location": f0.location or "the image"},
                             [p for f in fs for p in self.parts_of(f)], fs,
                             short="yes" if qt == "D06_has_device" else None, polarity="positive",
                             regions=f0.regions)
                else:
                    nf = self.fact_for(ctx, d)
                    self.out(ctx, tpl, slots, d, "absent", {"phrase": nf.phrase, "location": "the image"},
                             [nf.main], [nf], short="no" if qt == "D06_has_device" else None,
                             polarity="negative", regions=nf.regions)
        tpl = t.get("D07_where_is_device")
        if tpl is not None:
            located = [f for f in devs if self._informative(f)]
            for f in sample_capped(self.rng, located, self.gen.cap(tpl)):
                self.out(ctx, tpl, {"device": f.name}, f.obs.id, "located",
                         {"phrase": f.phrase, "location": f.location}, self.parts_of(f), [f],
                         short=f.location, polarity="positive", regions=f.regions)

    _all_pos: list[Fact] = []


def _merged(facts: list[Fact], extra: list | None) -> tuple[Any, list[str], list[str]]:
    """(combined grade, provenance, finding ids) of several facts, first occurrences in order."""
    grades = [f.grade for f in facts]
    if extra:
        grades.extend(extra)
    grade = combine(grades) if grades else _NONE
    prov: list[str] = []
    for f in facts:
        for p in f.prov:
            if p not in prov:
                prov.append(p)
    findings: list[str] = []
    for f in facts:
        if f.fid not in findings:
            findings.append(f.fid)
    return grade, prov, findings


def _leaks(short: str, question: str) -> bool:
    """The short answer (a location, a severity) appears in the question's wording."""
    s = short.lower()
    if s.startswith("the "):
        s = s[4:]
    # whole words only: "trachea" does not leak from "endotracheal tube"
    q = " " + question.lower().replace("?", " ").replace(",", " ").replace(".", " ") + " "
    return f" {s} " in q
