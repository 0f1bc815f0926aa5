"""VinDr-CXR-VQA-style questions (REFERENCE.md §2) from expert labels and boxes: where / what /
is there / how many / which / yes-no, with full-sentence answers, the expert boxes, and a reasoning
sentence built from structured facts (finding, side and zone from the box geometry, size relative
to the lung field, reader agreement).

Polarity: each question is positive with probability ``vindr_positive_share`` (default 0.417, the
published share). Per image: draw the polarity, then a question type uniformly among the types that
have an item of that polarity, then the item. An image with no finding cannot take a positive draw,
so that draw yields no question; the positive share is therefore exact (in expectation) over images
with findings and lower overall when "No finding" images are included -- the rule is local to one
image so that it stays independent of worker and shard.

Side convention: frontal radiographs are displayed with the patient's right on the image's left, so
a box whose centre is left of the image's mid-line is on the patient's right.
"""

from __future__ import annotations

import random
from typing import Any

import msgspec

from radvqa.generate.engine import STRATEGY_REGISTRY, Generator, StudyCtx, pick_index
from radvqa.generate.facts import Fact, cap, join_list
from radvqa.generate.templates import Family, Op, Template
from radvqa.model import AnswerPart, Box, SceneGraph
from radvqa.quality.criteria import combine

F = frozenset
PN = F({"positive", "negative"})
IMAGE = F({"image"})
# one operation per VinDr question type, each over the image; the strategy draws (type, polarity,
# item) per image and renders the template whose op is the drawn type
OPS: dict[str, Op] = {
    "where": Op(PN, F({"location"}), IMAGE),
    # slot area: "in this image" / "on the right side of the chest" (preposition included);
    # A_list: the finding names with articles, capitalised ("A nodule and a mass"), be: is / are
    "what": Op(PN, F({"list", "n", "A_list", "be"}), IMAGE),
    "is_there": Op(PN, F({"a_finding"}), IMAGE),
    "how_many": Op(PN, F({"n", "noun"}), IMAGE),
    "which": Op(PN, F({"answer"}), IMAGE),
    "yes_no": Op(PN, F({"true_side"}), IMAGE),
}


class Config(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``config:`` of templates/vindr.yaml."""

    modalities: tuple[str, ...] = ("CR", "DX")
    label_sources: tuple[str, ...] = ()  # sources whose studies carry dataset labels
    complete_label_sources: tuple[str, ...] = ()  # label sets complete per image (unlabelled = absent)
    scheme_by_source: dict[str, str] = msgspec.field(default_factory=dict)
    default_scheme: str = "vindr"
    central_findings: tuple[str, ...] = ()  # no side questions about these
    box_types: tuple[str, ...] = ()  # types whose positives need box geometry
    zone_names: dict[str, str] = msgspec.field(default_factory=dict)
    area_names: dict[str, str] = msgspec.field(default_factory=dict)
    lung_field_fraction: float = 0.45
    count_keep: dict[int, float] = msgspec.field(default_factory=dict)

PHRASES: dict[str, frozenset[str]] = {
    "reason_positive": F({"name", "Name", "agreement", "location", "size"}),
    "reason_negative": F({"name", "Name", "readers"}),
    "reason_normal": F({"readers"}),
    "agreement_readers": F({"k", "n"}),
    "agreement_single": F(),
    "size_phrase": F({"pct"}),
    "reason_side_clear": F({"area"}),
}
TYPES = ("where", "what", "is_there", "how_many", "which", "yes_no")


def _side(b: Box, w: float) -> str:
    if b.x1 < 0.45 * w and b.x2 > 0.55 * w:
        return "central"
    return "right" if (b.x1 + b.x2) / 2 < w / 2 else "left"  # patient's right = image left


def _zone(b: Box, h: float) -> str:
    cy = (b.y1 + b.y2) / 2 / h
    return "upper" if cy < 0.4 else ("middle" if cy < 0.62 else "lower")


@STRATEGY_REGISTRY.register("vindr")
class Strategy:
    name = "vindr"

    def __init__(self, gen: Generator, fam: Family) -> None:
        self.gen = gen
        self.fam = fam
        self.t = {tpl.op: tpl for tpl in fam.templates.values()}
        cfg: Config = fam.config
        self.modalities = F(m.upper() for m in cfg.modalities)
        self.label_sources = F(cfg.label_sources)
        self.complete_sources = F(cfg.complete_label_sources)
        self.scheme_by_source: dict[str, str] = dict(cfg.scheme_by_source)
        self.default_scheme = cfg.default_scheme
        self.central_findings = F(cfg.central_findings)
        self.box_types = F(cfg.box_types)
        self.zone_names: dict[str, str] = dict(cfg.zone_names)
        self.area_names: dict[str, str] = dict(cfg.area_names)
        self.count_keep: dict[int, float] = {int(k): float(x) for k, x in cfg.count_keep.items()}
        self.lung_field_fraction = float(cfg.lung_field_fraction)
        self.p = gen.options.vindr_positive_share
        self.n_q = gen.options.vindr_questions_per_image
        self._classes: dict[str, list[str]] = {}

    def classes(self, scheme: str) -> list[str]:
        hit = self._classes.get(scheme)
        if hit is None:
            v = self.gen.vocab
            schemes = getattr(v.onto, "schemes", {}) or {}
            sch = schemes.get(scheme) if isinstance(schemes, dict) else None
            if sch is None:
                sch = schemes.get(self.default_scheme) if isinstance(schemes, dict) else None
            out: list[str] = []
            if sch is not None:
                for _label, fids in (getattr(sch, "labels", {}) or {}).items():
                    for fid in fids:
                        if fid in v.fname and fid not in out and v.fabnormal.get(fid, True):
                            out.append(fid)
            hit = self._classes[scheme] = out
        return hit

    def applies(self, sg: SceneGraph, prior: SceneGraph | None) -> bool:
        if sg.modality.upper() not in self.modalities:
            return False
        if sg.source in self.label_sources:
            return True
        # Other sources (OpenI's MeSH indexing, a generic CSV) carry labels that are summaries of the
        # report, not image annotations: their positives would never get balanced negatives, so the
        # vindr family runs there only when an expert drew boxes.
        return any(b.source != "region" for o in sg.observations for b in o.boxes)

    # ---------------------------------------------------------------------------------------------
    def run(self, ctx: StudyCtx, prior: SceneGraph | None) -> None:
        """Per image: the classes' positives and negatives, each positive's box geometry, the
        candidate items per (type, polarity), the draw (all from the image's stream, in this
        order), then one question per drawn item."""
        sg = ctx.sg
        rng = ctx.stream("vindr")
        pos, neg = self._labels(ctx)
        im = sg.images[0] if sg.images else None
        w = float(im.width) if im and im.width else 0.0
        h = float(im.height) if im and im.height else 0.0
        readers_all = sorted({b.reader for fs in pos.values() for f in fs for b in f.obs.boxes
                              if b.reader and b.source == "expert"})
        info = self._geometry(ctx, pos, w, h)
        cands = self._candidates(rng, pos, neg, info, bool(w and h))
        img = _Image(rng, len(readers_all), info, self.fam.phrases)
        for ty, want_pos, item in self._draw(rng, cands):
            self.one(ctx, img, self.t[ty], ty, want_pos, item)

    def _labels(self, ctx: StudyCtx) -> tuple[dict[str, list[Fact]], list[str]]:
        """(positive class -> its label/box facts, negative classes in scheme order)."""
        sg = ctx.sg
        classes = self.classes(self.scheme_by_source.get(sg.source, self.default_scheme))
        pos: dict[str, list[Fact]] = {}
        uncertain: set[str] = set()
        stated_absent: set[str] = set()
        for f in ctx.facts.values():
            if f.obs.source not in ("label", "box") and not any(b.source != "region" for b in f.obs.boxes):
                continue  # report-only facts belong to qba
            if f.present and f.abnormal:
                pos.setdefault(f.fid, []).append(f)
            elif f.uncertain:
                uncertain.add(f.fid)
            elif f.absent:
                stated_absent.add(f.fid)
        # a positive class makes its ontology parents present: never ask them as negatives
        implied_pos = {a for fid in pos for a in self.gen.vocab.fancestors.get(fid, ())}
        if sg.source in self.complete_sources:
            # every class of the scheme is labelled on every image: unlabelled = absent
            neg = [c for c in classes if c not in pos and c not in uncertain and c not in implied_pos]
        else:
            # CheXpert-style labels leave classes blank (not mentioned): only stated negatives
            neg = [c for c in classes if c in stated_absent and c not in pos and c not in implied_pos]
        return pos, neg

    def _geometry(self, ctx: StudyCtx, pos: dict[str, list[Fact]], w: float, h: float) -> dict[str, dict[str, Any]]:
        """Per positive finding: lesion boxes (fused if any, else per reader), count, sides, zones,
        reader agreement, share of the lung field."""
        info: dict[str, dict[str, Any]] = {}
        for fid, fs in pos.items():
            lesion = [b for f in fs for b in f.obs.boxes if b.source != "region"]
            fused = [b for b in lesion if b.source == "expert_fused"]
            boxes = fused or lesion
            if fused:
                count = len(fused)
            else:
                per_reader: dict[str | None, int] = {}
                for b in lesion:
                    per_reader[b.reader] = per_reader.get(b.reader, 0) + 1
                count = max(per_reader.values()) if per_reader else 0
            k = len({b.reader for b in lesion if b.reader and b.source == "expert"})
            sides, locs = [], []
            if w and h and boxes:
                for b in boxes:
                    s = _side(b, w)
                    z = _zone(b, h)
                    if s not in sides:
                        sides.append(s)
                    loc = (f"the central {self.zone_names.get(z, z)} chest" if s == "central"
                           else f"the {s} {self.zone_names.get(z, z)} zone")
                    if loc not in locs:
                        locs.append(loc)
            lung = self._lung_area(ctx, w, h)
            pct = 100.0 * sum(b.area() for b in boxes) / lung if (lung and boxes) else None
            info[fid] = {"facts": fs, "boxes": boxes, "count": count, "sides": sides, "locs": locs,
                         "k": k, "pct": pct}
        return info

    def _candidates(self, rng: random.Random, pos: dict[str, list[Fact]], neg: list[str],
                    info: dict[str, dict[str, Any]], has_size: bool) -> dict[tuple[str, bool], list[Any]]:
        """Candidate items per (type, polarity)."""
        cands: dict[tuple[str, bool], list[Any]] = {}
        t = self.t
        P = sorted(pos)  # stable order
        for ty in TYPES:
            if ty not in t:
                continue
            if ty == "what":
                # whole image, and each side of the chest where box geometry is known
                on_side = {sd: [f for f in P if sd in info[f]["sides"]] for sd in ("right", "left")}
                # a side is known clear only when every positive finding has box geometry: a
                # label without a box could lie on either side
                known = has_size and all(info[f]["sides"] for f in P)
                # on a "No finding" image the whole-image question is positive: its answer is the
                # dataset's "No finding" label (VinDr counts it as a class)
                cands[(ty, True)] = ["*"] + [sd for sd in ("right", "left") if on_side[sd]]
                cands[(ty, False)] = (
                    [sd for sd in ("right", "left") if not on_side[sd]] if known else [])
                continue
            if ty in ("where",):
                cands[(ty, True)] = [f for f in P if info[f]["locs"]]
            elif ty == "how_many":
                # count balance: most findings have one box, so "1" answers are thinned out;
                # central findings (cardiomegaly) are not lesions one counts
                cands[(ty, True)] = [f for f in P if info[f]["count"] > 0 and f not in self.central_findings
                                     and rng.random() < self.count_keep.get(info[f]["count"], 1.0)]
            elif ty == "which":
                cands[(ty, True)] = [f for f in P if info[f]["sides"] and "central" not in info[f]["sides"]
                                     and f not in self.central_findings]
            elif ty == "yes_no":
                cands[(ty, True)] = [f for f in P if info[f]["sides"] and "central" not in info[f]["sides"]
                                     and f not in self.central_findings]
            else:
                cands[(ty, True)] = list(P)
            negs = ([f for f in neg if f not in self.central_findings] if ty in ("which", "yes_no", "how_many")
                    else list(neg))
            if ty in self.box_types and not cands[(ty, True)]:
                # a type whose positives need box geometry gets negatives only on images where it
                # has positives too: otherwise, on sources with few boxes (NIH), "where" / "which" /
                # "how many" / side questions would be almost all "no" and the type alone would
                # give the answer away
                negs = []
            if ty == "yes_no":
                # wrong-side questions about a present finding are negatives too
                negs = negs + [f"{f}@wrong" for f in cands[(ty, True)] if len(info[f]["sides"]) == 1]
            cands[(ty, False)] = negs
        return cands

    def _draw(self, rng: random.Random, cands: dict[tuple[str, bool], list[Any]]) -> list[tuple[str, bool, str]]:
        """(type, polarity, item) per question of the image, in asking order."""
        # per image: positives = round(N * p) (as available), negatives = positives * (1 - p) / p,
        # both with random rounding, so every image -- normal ones included -- has share p in
        # expectation and the dataset's share does not depend on how many images are normal
        p = self.p
        if p <= 0:
            n_pos, n_neg = 0, self.n_q
        else:
            n_pos = min(_sround(rng, self.n_q * p), sum(len(cands.get((ty, True), ())) for ty in TYPES))
            n_neg = _sround(rng, n_pos * (1 - p) / p)
        picks: list[tuple[str, bool, str]] = []
        for want_pos, n in ((True, n_pos), (False, n_neg)):
            used: set[tuple[str, str]] = set()
            for _ in range(n):
                types = [ty for ty in TYPES if any((ty, x) not in used for x in cands.get((ty, want_pos), ()))]
                if not types:
                    break
                ty = types[int(rng.random() * len(types))]
                items = [x for x in cands[(ty, want_pos)] if (ty, x) not in used]
                item = items[int(rng.random() * len(items))]
                used.add((ty, item))
                picks.append((ty, want_pos, item))
        rng.shuffle(picks)
        return picks

    def _lung_area(self, ctx: StudyCtx, w: float, h: float) -> float | None:
        lungs = ctx.rboxes.get("lungs")
        if lungs:
            return sum(b.area() for b in lungs)
        both = (ctx.rboxes.get("left_lung") or []) + (ctx.rboxes.get("right_lung") or [])
        if both:
            return sum(b.area() for b in both)
        return w * h * self.lung_field_fraction if w and h else None

    def _reason(self, ctx: StudyCtx, img: "_Image", fid: str, info: dict[str, Any] | None) -> str:
        v = self.gen.vocab
        ph = img.ph
        name = v.finding_name(fid) if fid != "*" else ""
        nr = img.n_readers
        if info is None:
            readers = f"the {nr} readers" if nr > 1 else "the expert readers"
            if fid == "*":
                return ctx.pick(ph["reason_normal"]).format_map({"readers": readers})
            return ctx.pick(ph["reason_negative"]).format_map({"name": name, "Name": cap(name), "readers": readers})
        if info["k"] and nr:
            agreement = ctx.pick(ph["agreement_readers"]).format_map({"k": str(info["k"]), "n": str(nr)})
        else:
            agreement = ctx.pick(ph["agreement_single"])
        size = ctx.pick(ph["size_phrase"]).format_map({"pct": f"{info['pct']:.1f}"}) if info["pct"] else ""
        loc = join_list(info["locs"]) if info["locs"] else "the image"
        return ctx.pick(ph["reason_positive"]).format_map(
            {"name": name, "Name": cap(name), "agreement": agreement, "location": loc, "size": size})

    def _part(self, fid: str, text: str, boxes: list[Box], certainty: str) -> AnswerPart:
        v = self.gen.vocab
        return AnswerPart(part_type="main", text=text, tag=v.finding_name(fid) if certainty == "present"
                          else "no " + v.finding_name(fid), findings=[fid], certainty=certainty, boxes=boxes)

    def one(self, ctx: StudyCtx, img: "_Image", tpl: Template, ty: str, positive: bool, item: str) -> None:
        v = self.gen.vocab
        rng = img.rng
        info = img.info
        widx = pick_index(rng, tpl)
        if ty == "what":
            area = self.area_names.get(item, item)
            if item == "*":
                fids = sorted(info)
            else:
                fids = sorted(f for f in info if item in info[f]["sides"])
            if fids:
                parts = [self._part(f, cap(v.finding_name(f)) + (f" in {join_list(info[f]['locs'])}." if info[f]["locs"] else "."),
                                    info[f]["boxes"], "present") for f in fids]
                facts = [x for f in fids for x in info[f]["facts"]]
                lex = self.gen.lexicon
                forms = [lex.forms(v.finding_name(f), v.finding_name(f)) for f in fids]
                be = "are" if len(forms) > 1 or forms[0][1] == "are" else "is"
                lv = {"list": join_list([v.finding_name(f) for f in fids]), "n": str(len(fids)),
                      "A_list": cap(join_list([fm[0] for fm in forms])), "be": be}
                short = ", ".join(v.finding_name(f) for f in fids)
                self._say(ctx, tpl, widx, {"area": area}, item, "positive", lv, facts, short, positive, fids,
                          lambda lead: (lead, parts),
                          lambda: " ".join(self._reason(ctx, img, f, info[f]) for f in fids))
            else:  # a side without boxes, or a "No finding" image's whole-image question
                lv = {"list": "", "n": "0", "A_list": "", "be": "is"}
                if item == "*":
                    reasoning = lambda: self._reason(ctx, img, "*", None)  # noqa: E731
                else:
                    reasoning = lambda: ctx.pick(img.ph["reason_side_clear"]).format_map({"area": area})  # noqa: E731
                self._say(ctx, tpl, widx, {"area": area}, item, "negative", lv, [], "no finding", positive, [],
                          lambda lead: (lead, [AnswerPart(part_type="main", text=lead, tag="no finding")]),
                          reasoning)
            return
        wrong = item.endswith("@wrong")
        fid = item[:-6] if wrong else item
        name = v.finding_name(fid)
        slots = {"finding": name}
        slot_key = fid
        inf = info.get(fid)
        if ty == "yes_no":
            if positive:
                side = inf["sides"][0]  # type: ignore[index]
            elif wrong:
                side = "left" if inf["sides"][0] == "right" else "right"  # type: ignore[index]
            else:
                side = "left" if rng.random() < 0.5 else "right"
            slots["side"] = side
            slot_key = f"{fid}|{side}"
        if positive or wrong:
            assert inf is not None
            boxes = inf["boxes"]
            facts = inf["facts"]
            if ty == "where":
                lv = {"location": join_list(inf["locs"])}
                short = join_list(inf["locs"])
            elif ty == "how_many":
                noun = "lesion" if inf["count"] == 1 else "lesions"
                lv = {"n": str(inf["count"]), "noun": noun}
                short = str(inf["count"])
            elif ty == "which":
                sides = inf["sides"]
                ans = "both sides" if len(sides) > 1 else f"the {sides[0]} side"
                lv = {"answer": ans}
                short = "both" if len(sides) > 1 else sides[0]
            elif ty == "yes_no":
                lv = {"true_side": inf["sides"][0]}
                short = "yes" if positive else "no"
            else:
                lv = {"a_finding": self.gen.lexicon.forms(name, name)[0]}
                short = "yes"
            self._say(ctx, tpl, widx, slots, slot_key, "positive" if positive else "negative", lv, facts, short,
                      positive, [fid], lambda lead: (lead, [self._part(fid, lead, boxes, "present")]),
                      lambda: self._reason(ctx, img, fid, inf))
        else:
            nf = ctx.negative_fact(fid)
            lv = {"location": "", "n": "0", "noun": "lesions", "answer": "neither side", "true_side": "",
                  "a_finding": name}
            short = {"how_many": "0", "where": "none", "which": "none"}.get(ty, "no")
            self._say(ctx, tpl, widx, slots, slot_key, "negative", lv, [nf], short, positive, [fid],
                      lambda lead: (lead, [self._part(fid, lead, nf.boxes, "absent")]),
                      lambda: self._reason(ctx, img, fid, None))

    def _say(self, ctx: StudyCtx, tpl: Template, widx: int, slots: dict[str, str], slot_key: str, key: str,
             lv: dict[str, str], facts: list[Fact], short: str | None, positive: bool, findings: list[str],
             compose: Any, reasoning: Any) -> None:
        """vindr's grade and provenance policy, then the shared render-and-emit step."""
        grades = [f.grade for f in facts if not f.implied] or [(0, ())]
        # absence on a labelled image is stated by the labels, not implied by silence
        grade = combine(grades)
        prov: list[str] = []
        for f in facts:
            for p in f.prov:
                if p not in prov:
                    prov.append(p)
        if not prov:
            prov = [f"labels:{ctx.sg.study_id}"]
        ctx.render_emit(tpl, widx, slots, slot_key, key, lv, [], grade, prov, compose=compose, short=short,
                        reasoning=reasoning, polarity="positive" if positive else "negative",
                        findings=findings, regions=[])


class _Image:
    """One image's vindr state, built inside ``Strategy.run``: its random stream, reader count,
    per-finding box geometry and the phrase table."""

    __slots__ = ("rng", "n_readers", "info", "ph")

    def __init__(self, rng: random.Random, n_readers: int, info: dict[str, dict[str, Any]],
                 ph: dict[str, tuple[str, ...]]) -> None:
        self.rng = rng
        self.n_readers = n_readers
        self.info = info
        self.ph = ph


def _sround(rng: Any, x: float) -> int:
    """x rounded up with probability equal to its fractional part (unbiased in expectation)."""
    n = int(x)
    return n + (1 if rng.random() < x - n else 0)
