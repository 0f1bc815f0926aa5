"""The generator: scene graph (+ optional prior study) -> graded, split, provenance-carrying QA rows.

Determinism: every random choice for a study comes from ``random.Random`` streams seeded by a
stable hash of (seed, study id, stream name), never from global state, process-dependent ``hash()``
or set iteration order. A study's questions therefore do not depend on which worker, shard or
order produced them. ``qa_id`` is a BLAKE2b hash of (study id, template id, slot values, question
wording index).
"""

from __future__ import annotations

import hashlib
import importlib
import random
import re
import _random
import string
from bisect import bisect_right
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import msgspec

from radvqa.generate.constraints import Candidate
from radvqa.generate.facts import (Fact, Lexicon, _severity_words, build_fact, cleared_sides, implied_negative,
                                   union_boxes)
from radvqa.generate.priors import Priors, load_priors
from radvqa.generate.templates import Family, Op, Template, check_unique, load_family
from radvqa.generate.vocab import Vocab
from radvqa.model import GRADES, QA, AnswerPart, Box, Observation, Reject, SceneGraph
from radvqa.quality.criteria import CHANGE_TEXT_LEFT, EXTRACT_ERROR, GRADE_INDEX, label_only
from radvqa.quality.unvouched import Unvouched, normal_blocks
from radvqa.registry import Registry
from radvqa.splits import assign_split, normalize_split

# the packaged strategies, in the fixed order they run in (the one list: the build, the CLI and
# GenerateOptions take it from here); each module radvqa.generate.<name> registers its Strategy
# class with @STRATEGY_REGISTRY.register(name) and is imported on first use
STRATEGIES = ("qba", "vindr", "rin", "diff")
# asked for by name only (--strategies qba,probe), never part of the default set
OPTIONAL_STRATEGIES = ("probe",)
KNOWN_STRATEGIES = STRATEGIES + OPTIONAL_STRATEGIES
STRATEGY_REGISTRY: Registry[type] = Registry("strategy", modules=[f"radvqa.generate.{n}" for n in KNOWN_STRATEGIES])
_replace = msgspec.structs.replace
_Random = random.Random
_new_random = random.Random.__new__
_seed = _random.Random.seed

# placeholders the shared sentence pieces (templates/common.yaml) may use
COMMON_PHRASES: dict[str, frozenset[str]] = {
    "statement_present": frozenset({"name", "phrase", "a_phrase", "A_phrase", "be", "in_location"}),
    "statement_uncertain": frozenset({"name", "phrase", "a_phrase", "A_phrase", "be", "in_location"}),
    # session 16: a hedged finding the report calls probable ("Probable hiatal hernia")
    "statement_likely": frozenset({"name", "phrase", "a_phrase", "A_phrase", "be", "in_location"}),
    "statement_absent": frozenset({"name", "phrase", "a_phrase", "A_phrase", "be", "in_location"}),
    "statement_qualified": frozenset({"name", "phrase", "a_phrase", "A_phrase", "be", "in_location", "qualifier"}),
    # a label-only finding of a study with a report, stated as the label it is (--label-only state-as-label)
    "statement_label_only": frozenset({"name", "term", "be"}),
    "detail_location": frozenset({"name", "location", "be", "It", "It_be", "measures"}),
    "detail_size": frozenset({"name", "location", "size", "be", "It", "It_be", "measures"}),
    "detail_description": frozenset({"name", "location", "description", "be", "It", "It_be", "measures"}),
    # session 14: a present finding's change since the prior study, where the report states one
    "detail_change_improved": frozenset({"name", "location", "be", "It", "It_be", "measures", "has"}),
    "detail_change_worsened": frozenset({"name", "location", "be", "It", "It_be", "measures", "has"}),
    "detail_change_new": frozenset({"name", "location", "be", "It", "It_be", "measures", "has"}),
}


class CommonConfig(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """``config:`` of templates/common.yaml: lexical data and category groups every strategy uses."""

    mass_nouns: tuple[str, ...] = ()  # names (or last words) used without an article
    mass_endings: tuple[str, ...] = ()  # endings of uncountable nouns ("osis", "itis")
    singular_endings: tuple[str, ...] = ("sis", "us", "ss", "xis", "ous", "ax", "is")
    irregular_plurals: dict[str, str] = msgspec.field(default_factory=dict)  # "bulla" -> "bullae"
    device_categories: tuple[str, ...] = ("DEVICE",)
    technical_categories: tuple[str, ...] = ("TECHNICAL",)
    artifact_subcategories: tuple[str, ...] = ()
    artifact_findings: tuple[str, ...] = ()
    change_words: tuple[str, ...] = ()  # a quoted report sentence still carrying one lowers the grade
    # devices that are also abnormal findings (a study holding one is not normal): "foreign body
    # in the soft tissues of the left chest wall" was answered "the study is normal" (hand audit #13)
    abnormal_devices: tuple[str, ...] = ()
    # regions outside the chest though inside the image: a device lying only there (surgical clips
    # in the right upper quadrant) is no device "in the chest", and the chest is not called free
    # of devices either (hand audit #13, CXR131)
    device_regions_outside_chest: tuple[str, ...] = ()
    # source -> what its labels are called in a label-only statement ("MeSH term"); default "label"
    label_terms: dict[str, str] = msgspec.field(default_factory=dict)
    # catch-all findings never stated by their id in a reported study ("There is an other lesion"
    # for "posttraumatic deformities of the right posterior ribs", audit #13 r7): left unsaid like a
    # label-only finding, their regions (or, without one, every region) are never called normal
    unstated_findings: tuple[str, ...] = ()
    # groups of findings that name one lesion by its size (nodule / mass): stated once per place
    same_lesion: tuple[tuple[str, ...], ...] = ()
    # finding -> report words that say less than its name: an observation stated only by them is
    # left unsaid like ``unstated_findings`` (its places are never called normal or free of it)
    unstated_words: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    # past diseases: an observation of one described as old ("cavity ... related to prior
    # tuberculosis infection") is left unsaid like ``unstated_findings``, never "Tuberculosis is seen"
    unstated_when_old: tuple[str, ...] = ()
    # round 24: ages a hedged finding says ("It is described as old" after "may be present")
    hedged_ages: tuple[str, ...] = ()
    # session 16: words right before a hedged finding's mention that make it probable, not only
    # possible ("Probable hiatal hernia"), and words after it that offer an alternative instead
    # ("probable left basilar infiltrate versus atelectasis"): facts.likely_hedge
    likely_cues: tuple[str, ...] = ()
    likely_alternatives: tuple[str, ...] = ()
    # session 17: number words that make the plural mention they lead a count of the finding
    # ("Multiple round opacities" are nodules, not "a nodule"): facts.named_number
    plural_cues: tuple[str, ...] = ()
    # finding -> its name in the singular, for names in the plural ("calcified lymph nodes"): said
    # where the report names one (facts.named_number)
    singular_names: dict[str, str] = msgspec.field(default_factory=dict)
    # finding -> other plural nouns that, ending its mention, name several of it ("rib deformities")
    plural_mentions: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    # round 13: region -> subcategory of an abnormal finding the report places only in that region
    # (or inside it): "calcified granulomas in the spleen" are no finding of the lung fields
    region_subcategories: dict[str, str] = msgspec.field(default_factory=dict)
    # round 16: a lung the report calls clear narrows an unsided finding's two-sided place to the
    # other side (facts.build_fact; templates/common.yaml)
    clear_side_findings: tuple[str, ...] = ()
    clear_side_qualifiers: tuple[str, ...] = ()
    clear_side_subcategories: tuple[str, ...] = ()
    # round 17: words that limit a sentence's negatives to the rest of the lungs, and the forms a
    # hedged finding may take: such a negative is not said beside the hedge (facts.resolve_conflicts)
    limited_negative_words: tuple[str, ...] = ()
    open_finding_forms: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    # session 12: what a finding looks like on the film where the ontology does not file it under
    # that ("scarring" is a lung opacity on a radiograph): qba's alternatives rule
    film_forms: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    # round 27: a finding stated with no place beside the report's normal statement of the whole
    # place it would lie in is not said (facts.resolve_conflicts; templates/common.yaml)
    unplaced_beside_normal: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)


# Filling a wording (``str.format_map``) is a row's costliest step (about 5k instructions with
# two placeholders, more than the rest of ``emit``), and the same wording is filled with the same
# values study after study ("Is there any {finding}?" with "pleural effusion"): each result is
# kept, keyed by the wording and the values of its placeholders. A wording's placeholders are
# plain names (templates.py checks), so its text is a function of those values alone (all str).
# wording -> (its text if it has no placeholder, first name, second name, more than two names,
# all its names in order)
_WORDING: dict[str, tuple[str | None, str, str | None, bool, tuple[str, ...]]] = {}
_FILLED: dict[tuple[str, ...], str] = {}
_FORMATTER = string.Formatter()


def _wording(w: str) -> tuple[str | None, str, str | None, bool, tuple[str, ...]]:
    if len(_WORDING) > 100_000:
        _WORDING.clear()
    names = tuple(dict.fromkeys(name for _lit, name, _spec, _conv in _FORMATTER.parse(w) if name is not None))
    # no placeholder: the text format_map gives ("{{" is "{")
    hit = _WORDING[w] = (None if names else w.format_map({}), names[0] if names else "",
                         names[1] if len(names) > 1 else None, len(names) > 2, names)
    return hit


def _filled(key: tuple[str, ...], w: str, mapping: dict[str, str]) -> str:
    if len(_FILLED) > 200_000:
        _FILLED.clear()
    text = _FILLED[key] = w.format_map(mapping)
    return text


def fill(w: str, slots: dict[str, str], lvars: dict[str, str] | None = None) -> str:
    """``w.format_map({**slots, **lvars})`` (``lvars`` wins), kept per wording and values
    (``StudyCtx.emit`` inlines the one- and two-placeholder cases)."""
    mapping = {**slots, **lvars} if lvars else slots
    info = _WORDING.get(w)
    if info is None:
        info = _wording(w)
    if info[0] is not None:
        return info[0]
    try:
        key = (w, *[mapping[n] for n in info[4]])
    except KeyError:  # a placeholder without a value: format_map's own error
        return w.format_map(mapping)
    text = _FILLED.get(key)
    return text if text is not None else _filled(key, w, mapping)


def pick_index(rng: random.Random, tpl: Template) -> int:
    """Which question wording of ``tpl`` to ask (no draw when there is one)."""
    n = len(tpl.questions)
    return 0 if n == 1 else int(rng.random() * n)


Compose = Callable[[str], tuple[str, list[AnswerPart]]]
LABEL_ONLY_MODES = ("omit", "state-as-label")
UNVOUCHED_MODES = ("omit", "keep")
INCOMPLETE_LIST_MODES = ("omit", "grade")


class GenerateOptions(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Every generation option (docs/generation.md); ``radvqa build`` reaches each one, and
    ``BuildOptions.generate`` carries them to the workers."""

    strategies: tuple[str, ...] = STRATEGIES
    seed: int = 0
    # most rows per study (after per-template caps); None = no cap
    max_per_study: int | None = None
    # multiply every template's cap (e.g. 0.5 for a lighter dataset); caps stay >= 1
    cap_scale: float = 1.0
    vindr_positive_share: float = 0.417
    vindr_questions_per_image: int = 6
    # drop rows graded below this ("A++".."D"); None keeps all
    min_grade: str | None = None
    split_ratios: tuple[float, float, float] = (0.8, 0.1, 0.1)
    template_dir: str | None = None  # a folder with <family>.yaml files replacing the packaged ones
    priors: str | None = None  # a priors YAML replacing the packaged one
    # a label-only finding of a study that has a report (a label no report observation matches):
    # "omit" keeps it in the scene graph but states nothing from it, neither the finding nor a
    # negative it would contradict; "state-as-label" states it as the label it is, grade C
    label_only: str = "omit"
    # a positive report observation the extractor read only in part (quality/unvouched.py: words of
    # its sentence nothing read, a cause cue, mixed sides, ...): "omit" states nothing from it (as a
    # label-only finding: nor any negative it would contradict); "keep" states it, grade C
    unvouched: str = "omit"
    # a list answer ("Describe the lung fields.", "What devices are seen?", the indication's "what
    # do the images show") of a scope where the report states a positive that no row states (the
    # grade reason completeness:finding_not_stated): "omit" does not generate it, since it reads as
    # the full list (session 15: readers marked 1 in 5 such rows wrong, docs/generation.md); "grade"
    # keeps it, grade B. The yes/no questions of the same scope stay either way. Session 16: the
    # same for a finding's description ("Describe any nodule") beside a reading of it left unsaid
    incomplete_lists: str = "omit"

    def check(self) -> None:
        """Raise ValueError naming the first bad option (before any work starts)."""
        unknown = [s for s in self.strategies if s not in STRATEGY_REGISTRY]
        if unknown:
            raise ValueError(f"unknown strategies {unknown}; known: {list(STRATEGY_REGISTRY.names())}")
        if not 0.0 <= self.vindr_positive_share <= 1.0:
            raise ValueError("vindr_positive_share must be within [0, 1]")
        if self.vindr_questions_per_image < 0:
            raise ValueError("vindr_questions_per_image must be >= 0")
        if self.min_grade is not None and self.min_grade not in GRADE_INDEX:
            raise ValueError(f"min_grade must be one of {list(GRADES)}")
        if self.cap_scale <= 0:
            raise ValueError("cap_scale must be > 0")
        if self.max_per_study is not None and self.max_per_study < 1:
            raise ValueError("max_per_study must be >= 1")
        if len(self.split_ratios) != 3 or any(r < 0 for r in self.split_ratios) or sum(self.split_ratios) <= 0:
            raise ValueError("split_ratios must be three non-negative numbers (train, validate, test)")
        if self.template_dir is not None and not Path(self.template_dir).is_dir():
            raise ValueError(f"template_dir {self.template_dir} is not a folder")
        if self.priors is not None and not Path(self.priors).is_file():
            raise ValueError(f"priors file {self.priors} not found")
        if self.label_only not in LABEL_ONLY_MODES:
            raise ValueError(f"label_only must be one of {list(LABEL_ONLY_MODES)}")
        if self.unvouched not in UNVOUCHED_MODES:
            raise ValueError(f"unvouched must be one of {list(UNVOUCHED_MODES)}")
        if self.incomplete_lists not in INCOMPLETE_LIST_MODES:
            raise ValueError(f"incomplete_lists must be one of {list(INCOMPLETE_LIST_MODES)}")


def stable_int(*parts: object) -> int:
    h = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8)
    return int.from_bytes(h.digest(), "big")


def _id_map(value: str | None) -> dict[str, list[str]]:
    """"O01=nodule; O03=mass:absent" -> {"O01": ["nodule"], "O03": ["mass:absent"]}."""
    out: dict[str, list[str]] = {}
    if value:
        for item in value.split("; "):
            oid, _, rest = item.partition("=")
            if rest:
                out.setdefault(oid, []).append(rest)
    return out


def make_qa_id(study_id: str, template_id: str, slot_key: str, wording: int) -> str:
    h = hashlib.blake2b(f"{study_id}\x1f{template_id}\x1f{slot_key}\x1f{wording}".encode(), digest_size=10)
    return h.hexdigest()


class StudyCtx:
    """Everything about one study that several questions share, built once per study."""

    __slots__ = ("gen", "sg", "split", "image_ids", "image_paths", "rboxes", "sentences",
                 "rng", "facts", "by_finding", "extract_grade", "rows", "strategy", "_rngs",
                 "n_boxable_images", "implied", "no_strs", "no_boxes", "shared", "protos", "proto0",
                 "label_support", "label_conflicts", "shared_sentences", "hidden", "hidden_why", "blocked", "unvouched",
                 "normal_blocks", "cleared", "left_open")

    def __init__(self, gen: "Generator", sg: SceneGraph, split: str) -> None:
        self.gen = gen
        self.sg = sg
        self.split = split
        self.image_ids = [im.id for im in sg.images]
        self.image_paths = [im.path or "" for im in sg.images]
        # lateral views get no region boxes (ImaGenome / segmentation boxes are frontal only), so a
        # study is completely localised when every non-lateral image has a box
        self.n_boxable_images = sum(1 for im in sg.images
                                    if not (im.view or "").upper().startswith(("LAT", "LL", "RL")))
        rb: dict[str, list[Box]] = {}
        for b in sg.region_boxes:
            if b.label:
                rb.setdefault(b.label, []).append(b)
        self.rboxes = rb
        self.sentences = {s.id: s.text for s in sg.report.sentences} if sg.report else {}
        self._rngs: dict[str, random.Random] = {}
        self.rng = self.stream("facts")
        self.extract_grade = EXTRACT_ERROR if sg.meta.get("extract_error") else None
        # localize's label merge (graph.py): observation id -> label findings agreeing / conflicting
        self.label_support = _id_map(sg.meta.get("label_support"))
        self.label_conflicts = _id_map(sg.meta.get("label_conflicts"))
        # sentences that state more than one finding (grading: attributes may belong to another)
        per_sentence: dict[str, int] = {}
        for obs in sg.observations:
            if obs.certainty != "absent" and obs.source == "report":
                evidence = obs.evidence
                if len(evidence) == 1:  # the common case, without a set per observation
                    sid = evidence[0].sentence_id
                    if sid:
                        per_sentence[sid] = per_sentence.get(sid, 0) + 1
                    continue
                for sid in {ev.sentence_id for ev in evidence if ev.sentence_id}:
                    per_sentence[sid] = per_sentence.get(sid, 0) + 1
        self.shared_sentences = frozenset(k for k, n in per_sentence.items() if n > 1)
        self.facts: dict[str, Fact] = {}
        self.implied: dict[str, Fact] = {}
        self.by_finding: dict[str, list[Fact]] = {}
        # label-only findings of a study with a report (--label-only omit): no fact states them, and
        # no implied negative, "normal" region or study may contradict them (``blocked``: the
        # findings, their ancestors and descendants); hand audit: wrong 38 of 90 times as findings
        self.hidden: list[Observation] = []
        self.hidden_why: list[str] = []  # one per hidden positive observation
        # round 17: findings whose limited negative ("The remaining lungs are clear") was dropped
        # beside a hedge it may be (facts._open_beside): never asked, never answered "no"
        self.left_open: set[str] = set()
        omit = gen.options.label_only == "omit" and sg.report is not None
        blocked: set[str] = set()
        stated: set[str] = set()
        # (worked out only for a study holding a label-only candidate: most hold none)
        # (``label_only`` is false for any observation but a label's: most are the report's)
        if omit and any(obs.source == "label" and label_only(obs, True) for obs in sg.observations):
            # a label copy of a report finding (same finding, ancestor or descendant) is no
            # label-only finding even where the scene graph did not merge it (localize does)
            v = gen.vocab
            for obs in sg.observations:
                if obs.source == "report":
                    stated.add(obs.finding)
                    stated.update(v.fancestors.get(obs.finding, ()))
                    stated.update(v.fdescendants.get(obs.finding, ()))
        unstated = gen.unstated if sg.report is not None else frozenset()
        # positive report observations read only in part (round 10): omitted like label-only ones,
        # or stated graded C (``unvouched``: observation id -> (grade, reason)s; facts.py)
        self.unvouched = unv = gen.unvouched.study(sg, gen.vocab.fsub, gen.severity_words,
                                                         gen.vocab.fname) \
            if sg.report is not None else {}
        omit_unv = bool(unv) and gen.options.unvouched == "omit"
        # sentences stating something abnormal that the extractor read nothing positive from, or
        # negating a normal ("Lung parenchyma is not clear"): no "normal" claim may stand beside
        # them (round 11a; qba.Study turns them into regions and general negatives)
        self.normal_blocks = normal_blocks(gen.unvouched, sg) \
            if sg.report is not None and gen.options.unvouched == "omit" else ()
        said_less = gen.unstated_words if sg.report is not None else {}
        self.cleared = cleared_sides(gen, sg) if gen.clear_findings and sg.report is not None else ()
        for obs in sg.observations:
            # why it is left unstated, if it is (also the build's count: manifest ``findings_not_stated``)
            why = ("label_only" if omit and obs.source == "label" and label_only(obs, True) and obs.finding not in stated
                   else "unvouched" if omit_unv and obs.id in unv
                   else "never_stated" if (
                       obs.finding in unstated
                       or (obs.temporal == "old" and obs.finding in gen.unstated_old and sg.report is not None)
                       or (obs.finding in said_less and obs.source == "report" and obs.evidence
                           and all(" ".join(ev.text.lower().split()) in said_less[obs.finding] for ev in obs.evidence)))
                   else None)
            if why is not None:
                self.hidden.append(obs)
                if obs.certainty != "absent":
                    self.hidden_why.append(why)
                    v = gen.vocab
                    blocked.add(obs.finding)
                    blocked.update(v.fancestors.get(obs.finding, ()))
                    blocked.update(v.fdescendants.get(obs.finding, ()))
                continue
            f = build_fact(self, obs)
            self.facts[obs.id] = f
            self.by_finding.setdefault(obs.finding, []).append(f)
        self.blocked = frozenset(blocked)
        self.rows: list[QA] = []
        self.strategy = ""
        # empty lists shared by this study's rows and parts (rows are never mutated after
        # generation, see facts.py): fewer container objects per row means less work for Python's
        # cyclic GC, which dominates generation time while the writer holds a row group in memory
        self.no_strs: list[str] = []
        self.no_boxes: list[Box] = []
        self.shared: dict[tuple[Any, ...], Any] = {}
        self.protos: dict[str, tuple[QA, Any]] = {}  # template id -> (prototype row, qa_id hasher)
        self.proto0: tuple[QA, Any] | None = None  # the same for the study's fields alone

    def strs(self, items: list[str]) -> list[str]:
        """One shared list per distinct list of strings in this study (read-only)."""
        key = (1, *items)
        hit = self.shared.get(key)
        if hit is None:
            hit = self.shared[key] = items
        return hit

    def stream(self, name: str) -> random.Random:
        r = self._rngs.get(name)
        if r is None:
            # ``random.Random(stable_int(...))`` without its two Python-level frames (__init__,
            # seed): the same C seeding of the same integer, so the same state and draws
            r = self._rngs[name] = _new_random(_Random)
            _seed(r, stable_int(self.gen.options.seed, self.sg.study_id, name))
            r.gauss_next = None
        return r

    def pick(self, wordings: Sequence[str]) -> str:
        n = len(wordings)
        return wordings[0] if n == 1 else wordings[int(self.rng.random() * n)]

    def region_boxes_for(self, regions: Sequence[str]) -> list[Box]:
        rb = self.rboxes
        if not rb:
            return []
        out: list[Box] = []
        for r in regions:
            bs = rb.get(r)
            if bs:
                out.extend(bs)
        return out

    def provenance_of(self, obs: Observation) -> list[str]:
        out: list[str] = []
        sentences = self.sentences
        for ev in obs.evidence:
            sid = ev.sentence_id
            text = sentences.get(sid) if sid else None
            if text is not None:
                item = f"{sid}: {text}"
            else:
                item = f"span {ev.start}-{ev.end}: {ev.text}"
            if item not in out:
                out.append(item)
        if self.label_support:
            for fid in self.label_support.get(obs.id, ()):
                item = f"label:{fid}"
                if item not in out:
                    out.append(item)
        if self.label_conflicts:
            for note in self.label_conflicts.get(obs.id, ()):
                out.append(f"label_conflict:{note}")
        if obs.source != "report" or not obs.evidence:
            if obs.source in ("label", "box"):
                out.append(f"label:{obs.finding}")
            readers: list[str] = []
            for b in obs.boxes:
                if b.source != "region":
                    key = f"box:{b.image_id}:{b.reader or b.source}"
                    if key not in readers:
                        readers.append(key)
            out.extend(readers)
        return out

    def negative_fact(self, fid: str) -> Fact:
        """The study's fact for a finding: an explicit observation if any, else an implied negative."""
        lst = self.by_finding.get(fid)
        if lst:
            return lst[0]
        f = self.implied.get(fid)
        if f is None:  # kept apart from ``facts``: those are what the scene graph states
            f = self.implied[fid] = implied_negative(self, fid)
        return f

    def render_emit(
        self,
        tpl: Template,
        widx: int,
        slots: dict[str, str],
        slot_key: str,
        key: str,
        lvars: dict[str, str],
        parts: list[AnswerPart],
        grade: tuple[int, list[str] | tuple[str, ...]],
        provenance: list[str] | None,
        *,
        compose: Compose | None = None,
        wordings: Sequence[str] | None = None,
        short: str | None = None,
        polarity: str | None = None,
        findings: list[str] | None = None,
        regions: list[str] | None = None,
        choices: list[str] | None = None,
        reasoning: str | Callable[[], str] | None = None,
        pair: tuple[str, list[str], list[str]] | None = None,
    ) -> bool:
        """The one render-and-emit step of every strategy. Question wording ``widx`` filled with
        ``slots``; the template's constraints (constraints.CONSTRAINTS) checked, dropping the row
        when one fails (before any answer draw); the lead wording for answer ``key`` (or from
        ``wordings``) drawn from the study's wording stream and filled with slots + ``lvars``; the
        answer text composed (default: lead, then the parts' sentences; ``compose(lead) ->
        (answer, parts)`` otherwise); ``reasoning`` (a callable is evaluated after the lead draw);
        the row appended to ``rows``. The strategy gives the row's ``grade`` and ``provenance``
        (each has its own policy), its short answer, polarity, findings, regions, MC ``choices``
        and, for a study pair, ``pair`` = (reference study id, image ids, image paths).
        Returns whether the row was emitted."""
        return self.emit(tpl, widx, slots, slot_key, key, lvars, parts, grade, provenance, compose, wordings,
                         short, polarity, findings, regions, choices, reasoning, pair)

    def emit(self, tpl: Template, widx: int, slots: dict[str, str], slot_key: str, key: str,
             lvars: dict[str, str], parts: list[AnswerPart], grade: tuple[int, list[str] | tuple[str, ...]],
             provenance: list[str] | None, compose: Compose | tuple[str, list[str], list[Box]] | None,
             wordings: Sequence[str] | None,
             short: str | None, polarity: str | None, findings: list[str] | None, regions: list[str] | None,
             choices: list[str] | None, reasoning: str | Callable[[], str] | None,
             pair: tuple[str, list[str], list[str]] | None) -> bool:
        """``render_emit`` with every argument positional: qba's one call per row skips the
        keyword matching (about a twentieth of a row's instructions went to argument set-up).
        ``compose`` may also be a tuple (tag, regions, boxes): the lead is the whole answer and
        its one part, a main part with that tag, regions and boxes (no closure per row)."""
        q = tpl.questions[widx]
        info = _WORDING.get(q)
        if info is None:
            info = _wording(q)
        question = info[0]
        if question is None:  # ``fill``, inlined for one or two placeholders (one call per row)
            b = info[2]
            if info[3] or info[1] not in slots or (b is not None and b not in slots):
                question = fill(q, slots)
            else:
                fk = (q, slots[info[1]]) if b is None else (q, slots[info[1]], slots[b])
                question = _FILLED.get(fk)
                if question is None:
                    question = _filled(fk, q, slots)
        ws = wordings or tpl.answers[key]
        if tpl.checks:
            cand = Candidate(question, short, choices, ws, parts)
            for check in tpl.checks:
                if not check(cand):
                    return False
        n = len(ws)  # ``pick``, inlined (one call per row): same stream, same draw
        w = ws[0] if n == 1 else ws[int(self.rng.random() * n)]
        info = _WORDING.get(w)
        if info is None:
            info = _wording(w)
        lead = info[0]
        if lead is None:  # ``fill``, inlined as above (``lvars`` wins over ``slots``)
            a = info[1]
            src = None if info[2] is not None else lvars if a in lvars else slots if a in slots else None
            if src is None:  # two or more placeholders, or a missing value: the general path
                lead = fill(w, slots, lvars)
            else:
                fk = (w, src[a])
                lead = _FILLED.get(fk)
                if lead is None:
                    lead = _filled(fk, w, {**slots, **lvars} if slots else lvars)
        # identical lists within a study become one shared (read-only) list: the rows of a study
        # repeat the same part lists, findings and provenance many times over, and every list that
        # outlives the call is one more object for the cyclic GC to traverse while rows wait in
        # the writer's buffer (measured: the GC cost more than the rest of emit)
        shared = self.shared
        if compose.__class__ is tuple:
            # the same lead ("No devices are seen.") recurs across a study's rows: one part object
            # and one part list
            tag, rl, bl = compose  # type: ignore[misc]
            pkey = (2, lead, tag, id(rl), id(bl))
            hit = shared.get(pkey)
            if hit is None:
                lp = [AnswerPart(part_type="main", text=lead, tag=tag, findings=self.no_strs, regions=rl, boxes=bl)]
                hit = shared[pkey] = [lp, union_boxes(lp), None]
            answer = lead
        elif compose is not None:
            answer, parts = compose(lead)  # type: ignore[operator]
            k = (0, *map(id, parts))  # ids stay valid: the cached list keeps the parts alive
            hit = shared.get(k)
            if hit is None:
                hit = shared[k] = [parts, union_boxes(parts), None]
        else:
            # the parts' joined sentences are cached with the shared list (a part list recurs)
            k = (0, *map(id, parts))
            hit = shared.get(k)
            if hit is None:
                hit = shared[k] = [parts, union_boxes(parts), " ".join([p.text for p in parts])]
            body = hit[2]
            if body is None:
                body = hit[2] = " ".join([p.text for p in parts])
            answer = f"{lead} {body}" if lead else body
        parts = hit[0]
        boxes = hit[1]
        if reasoning is not None and not isinstance(reasoning, str):
            reasoning = reasoning()
        sg = self.sg
        sid = sg.study_id
        if findings:
            findings = shared.setdefault((1, *findings), findings)
        else:
            findings = self.no_strs
        if regions:
            regions = shared.setdefault((1, *regions), regions)
        else:
            regions = self.no_strs
        if provenance:
            provenance = shared.setdefault((1, *provenance), provenance)
        reasons = grade[1]
        k = (3, *reasons)
        grade_reasons = shared.get(k)
        if grade_reasons is None:
            grade_reasons = shared[k] = self.gen.reasons_list(reasons)
        grade_s = GRADES[grade[0]]
        if pair is None and choices is None and reasoning is None:
            # the common case: copy a per-(study, template) prototype row and set only what varies.
            # msgspec's ``replace`` with a dozen fields costs about a third of constructing the
            # 27-field struct from keywords (measured); the qa_id hash of the (study, template)
            # prefix is likewise computed once and copied per row
            hit = self.protos.get(tpl.id)
            if hit is None:
                hit = self.protos[tpl.id] = self._proto(tpl, sid)
            proto, h0 = hit
            h = h0.copy()
            h.update(f"{slot_key}\x1f{widx}".encode())
            self.rows.append(_replace(
                proto, qa_id=h.hexdigest(), question=question, answer=answer, answer_short=short,
                polarity=polarity, findings=findings, regions=regions, answer_parts=parts, boxes=boxes,
                grade=grade_s, grade_reasons=grade_reasons,
                provenance=provenance or [f"scene_graph:{sid}"]))
            return True
        reference, image_ids, image_paths = pair if pair is not None else (None, self.image_ids, self.image_paths)
        self.rows.append(QA(
            qa_id=make_qa_id(sid, tpl.id, slot_key, widx),
            source=sg.source,
            split=self.split,
            patient_id=sg.patient_id,
            study_id=sid,
            strategy=tpl.family,
            question_type=tpl.question_type,
            template_id=tpl.id,
            template_version=tpl.version,
            question=question,
            answer=answer,
            image_ids=image_ids,
            image_paths=image_paths,
            answer_short=short,
            choices=choices,
            polarity=polarity,
            findings=findings,
            regions=regions,
            answer_parts=parts,
            boxes=boxes,
            grade=grade_s,
            grade_reasons=grade_reasons,
            provenance=provenance or [f"scene_graph:{sid}"],
            modality=sg.modality,
            reference_study_id=reference,
            reasoning=reasoning,
        ))
        return True

    def _proto(self, tpl: Template, sid: str) -> tuple[QA, Any]:
        """A row with this study's and template's constant fields (never emitted itself) and
        the qa_id hasher fed with the (study, template) prefix (same bytes as ``make_qa_id``).
        The study's fields are set once (first template); each template then replaces its four."""
        base = self.proto0
        if base is None:
            sg = self.sg
            base = self.proto0 = (
                QA(qa_id="", source=sg.source, split=self.split, patient_id=sg.patient_id, study_id=sid,
                   strategy="", question_type="", template_id="", template_version=0, question="",
                   answer="", image_ids=self.image_ids, image_paths=self.image_paths, modality=sg.modality),
                hashlib.blake2b(f"{sid}\x1f".encode(), digest_size=10))
        h = base[1].copy()
        h.update(f"{tpl.id}\x1f".encode())
        return _replace(base[0], strategy=tpl.family, question_type=tpl.question_type, template_id=tpl.id,
                        template_version=tpl.version), h


class Strategy(Protocol):
    """A question family. Its module ``radvqa.generate.<name>`` defines, beside the class, ``OPS``
    (operation table), ``PHRASES`` (phrase keys -> variables) and ``Config`` (the msgspec struct of
    its config block); ``templates/<name>.yaml`` is validated against them. The class registers
    itself with ``@STRATEGY_REGISTRY.register(name)``. Per-study state lives in a value built
    inside ``run``, never on the strategy (one strategy object serves every study)."""

    name: str

    def __init__(self, gen: Generator, fam: Family) -> None: ...
    def applies(self, sg: SceneGraph, prior: SceneGraph | None) -> bool: ...
    def run(self, ctx: StudyCtx, prior: SceneGraph | None) -> None: ...


class Generator:
    """``Generator(onto, GenerateOptions(...)).generate(sg, prior=None) -> list[QA]``."""

    def __init__(self, onto: Any, options: GenerateOptions | None = None) -> None:
        self.options = opts = options or GenerateOptions()
        opts.check()
        self.min_grade = GRADE_INDEX[opts.min_grade] if opts.min_grade else None
        self.vocab = Vocab(onto)
        self.unvouched = Unvouched()
        self.priors: Priors = load_priors(opts.priors)
        self.common = self._family("common.yaml", {}, COMMON_PHRASES, CommonConfig)
        cfg: CommonConfig = self.common.config
        self.lexicon = Lexicon(msgspec.structs.asdict(cfg))
        self.device_categories = frozenset(c.upper() for c in cfg.device_categories)
        self.technical_categories = frozenset(c.upper() for c in cfg.technical_categories)
        self.artifact_subcategories = frozenset(c.upper() for c in cfg.artifact_subcategories)
        self.artifact_ids = frozenset(cfg.artifact_findings)
        # (ids a reduced ontology lacks are not an error: nothing can state them)
        self.abnormal_devices = frozenset(cfg.abnormal_devices)
        self.device_outside = frozenset(cfg.device_regions_outside_chest)
        self.change_words = tuple(w.lower() for w in cfg.change_words)
        self.unstated = frozenset(cfg.unstated_findings)
        # finding -> the index of its same-lesion group
        self.same_lesion = {fid: i for i, grp in enumerate(cfg.same_lesion) for fid in grp}
        self.unstated_words = {fid: frozenset(" ".join(w.lower().split()) for w in ws)
                               for fid, ws in cfg.unstated_words.items()}
        self.unstated_old = frozenset(cfg.unstated_when_old)
        self.hedged_ages = frozenset(cfg.hedged_ages)
        # "<cue> [up to four words]" at the end of the text before a mention; an alternative word
        # or a clause break between the mention and the end of its clause undoes it
        cues = sorted((" ".join(str(c).lower().split()) for c in cfg.likely_cues), key=len, reverse=True)
        self.likely_before = re.compile(r"\b(?:" + "|".join(map(re.escape, cues)) + r")\s+(?:[a-z-]+\s+){0,4}$") \
            if cues else None
        alts = sorted((" ".join(str(c).lower().split()) for c in cfg.likely_alternatives), key=len, reverse=True)
        self.likely_undone = re.compile(r"\b(?:" + "|".join(map(re.escape, alts)) + r")\b") if alts else None
        self.singular_names = dict(cfg.singular_names)
        self.plural_mentions = {fid: frozenset(w.lower() for w in ws) for fid, ws in cfg.plural_mentions.items()}
        pcues = sorted((" ".join(str(c).lower().split()) for c in cfg.plural_cues), key=len, reverse=True)
        self.plural_before = re.compile(r"\b(?:" + "|".join(map(re.escape, pcues)) + r")\s+(?:[a-z0-9-]+\s+){0,3}$") \
            if pcues else None
        # region (and every region inside it) -> the subcategory of findings placed only there
        self.region_subcats = {r: sub.upper() for top, sub in cfg.region_subcategories.items()
                               for r in self.vocab.rname if r == top or top in self.vocab.rancestors.get(r, ())}
        self.clear_findings = frozenset(cfg.clear_side_findings)
        self.clear_qualifiers = frozenset(cfg.clear_side_qualifiers)
        self.clear_subcats = frozenset(s.upper() for s in cfg.clear_side_subcategories)
        self.limited_re = re.compile(r"\b(?:" + "|".join(
            r"\s+".join(map(re.escape, w.split())) for w in cfg.limited_negative_words) + r")\b", re.I) \
            if cfg.limited_negative_words else None
        self.open_forms = {fid: frozenset(fs) for fid, fs in cfg.open_finding_forms.items()}
        self.film_forms = {fid: frozenset(fs) for fid, fs in cfg.film_forms.items()}
        self.unplaced_normal = {fid: frozenset(rs) for fid, rs in cfg.unplaced_beside_normal.items()}
        self.strategies: list[Strategy] = []
        families: list[Family] = []
        for name in STRATEGY_REGISTRY.names():  # fixed order, whatever order the user listed them in
            if name not in opts.strategies:
                continue
            cls = STRATEGY_REGISTRY.get(name)
            mod = importlib.import_module(cls.__module__)
            fam = self._family(f"{name}.yaml", mod.OPS, mod.PHRASES, mod.Config)
            families.append(fam)
            self.strategies.append(cls(self, fam))
        check_unique(families)
        self.templates = {t.id: t for fam in families for t in fam.templates.values()}
        self.rejects: list[Reject] = []
        # positive findings a study's rows do not state (StudyCtx.hidden), by why: ``label_only``
        # (--label-only omit), ``unvouched`` (--unvouched omit), ``never_stated`` (findings or
        # phrasings the templates never state); the build worker reads and clears it per shard
        self.not_stated: Counter[str] = Counter()
        # studies whose "normal" claims a sentence kept away (round 11a, StudyCtx.normal_blocks),
        # by why (unread_sentence, negated_normal): manifest ``normal_claims_blocked``
        self.normal_blocked: Counter[str] = Counter()
        # list rows said and taken back, by why (qba.py ``_take_back``): ``unsaid_list`` (the
        # report's impression or a region's opacity, bone lesion, effusion left unsaid: rounds
        # 26-30), ``incomplete_list`` (--incomplete-lists omit), ``incomplete_finding`` ("Describe
        # the X" beside a reading of X left unsaid, session 16): manifest ``rows_withheld``
        self.rows_withheld: Counter[str] = Counter()
        # grade reasons -> one list shared by every row with those reasons (read-only, see emit)
        self._reasons: dict[tuple[str, ...], list[str]] = {}
        self._caps: dict[str, int | None] = {}
        # (finding, *regions) -> (location informative, location narrows the finding): facts.py
        self.loc_cache: dict[tuple[str, ...], tuple[bool, bool]] = {}
        # finding -> (study-independent implied-negative fact, its formatted wordings): facts.py
        self.implied_cache: dict[str, tuple[Any, tuple[str, ...]]] = {}
        # (finding, certainty, side, severity, number) -> names, phrase and tag of a fact: facts.py
        self.fact_words: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        # finding -> (singular head noun, plural head noun, singular name of a plural one): facts.py
        self.plural_heads: dict[str, tuple[str, str, str]] = {}
        # everything obs_grade reads of an observation and its sentences -> its (grade, reasons):
        # report sentences repeat across a corpus ("No pneumothorax."), so most facts hit: facts.py
        self.grade_cache: dict[tuple[Any, ...], tuple[int, tuple[str, ...]]] = {}
        # (modifier words, sentence texts) -> negated_only; regions -> their phrase: facts.py
        self.negated_cache: dict[tuple[Any, ...], bool] = {}
        self.region_phrases: dict[tuple[str, ...], str] = {}
        # (wording, name, phrase, a_phrase, be, in_location) -> a fact's statement: facts.py
        self.fact_texts: dict[tuple[str, ...], str] = {}

    def severity_words(self, level: str) -> tuple[str, ...]:
        """The report words meaning a severity level (facts.py, cached per generator)."""
        return _severity_words(self, level)

    def _family(self, fname: str, ops: dict[str, Op], phrases: dict[str, frozenset[str]],
                config_type: type) -> Family:
        if self.options.template_dir:
            p = Path(self.options.template_dir) / fname
            if p.exists():
                return load_family(p, ops, phrases, config_type)
        return load_family(fname, ops, phrases, config_type)

    def reasons_list(self, reasons: Sequence[str]) -> list[str]:
        key = tuple(reasons)
        hit = self._reasons.get(key)
        if hit is None:
            hit = self._reasons[key] = list(key)
        return hit

    def cap(self, tpl: Template, default: int | None = None) -> int | None:
        if default is None:
            key = tpl.id
            if key in self._caps:
                return self._caps[key]
            c = self._caps[key] = self._cap(tpl, None)
            return c
        return self._cap(tpl, default)

    def _cap(self, tpl: Template, default: int | None) -> int | None:
        c = tpl.cap if tpl.cap is not None else default
        if c is None:
            return None
        return max(1, int(round(c * self.options.cap_scale)))

    def take_rejects(self) -> list[Reject]:
        """Rejects recorded since the last call (e.g. a diff prior that is not earlier)."""
        out, self.rejects = self.rejects, []
        return out

    def generate(self, sg: SceneGraph, prior: SceneGraph | None = None) -> list[QA]:
        opts = self.options
        split = normalize_split(sg.split) if sg.split else assign_split(sg.patient_id, opts.seed, opts.split_ratios)
        ctx = StudyCtx(self, sg, split)
        if ctx.hidden_why:
            self.not_stated.update(ctx.hidden_why)
        if ctx.normal_blocks:
            self.normal_blocked.update({b.why for b in ctx.normal_blocks})
        for strat in self.strategies:
            ctx.strategy = strat.name
            if strat.applies(sg, prior):
                strat.run(ctx, prior)
        rows = ctx.rows
        if self.min_grade is not None:
            rows = [r for r in rows if GRADE_INDEX[r.grade] <= self.min_grade]  # type: ignore[index]
        if opts.max_per_study is not None and len(rows) > opts.max_per_study:
            rng = ctx.stream("study-cap")
            keep = sorted(rng.sample(range(len(rows)), opts.max_per_study))
            rows = [rows[i] for i in keep]
        return rows


# shared helpers for strategies ------------------------------------------------------------------

def sample_capped(rng: random.Random, items: list[Any], cap: int | None) -> list[Any]:
    """At most ``cap`` items, order kept, chosen uniformly (deterministic given rng state)."""
    if cap is None or len(items) <= cap:
        return items
    idx = sorted(rng.sample(range(len(items)), cap))
    return [items[i] for i in idx]


class WeightedPool:
    """Items with weights, prepared once (cumulative sums) for fast weighted draws per study."""

    __slots__ = ("items", "cum", "total", "drawable")

    def __init__(self, items: Sequence[str], weights: Sequence[float]) -> None:
        self.items = list(items)
        cum: list[float] = []
        t = 0.0
        for w in weights:
            t += max(0.0, w)
            cum.append(t)
        self.cum = cum
        self.total = t
        # (index, item, 1 / weight) of the items a draw can return (weight > 0), in pool order;
        # the weight is the cumulative difference that ``weighted_sample`` draws by
        drawable = []
        prev = 0.0
        for j, c in enumerate(cum):
            if c > prev:
                drawable.append((j, self.items[j], 1.0 / (c - prev)))
            prev = c
        self.drawable = drawable


def weighted_sample(rng: random.Random, pool: WeightedPool, k: int, exclude: Callable[[str], bool]) -> list[str]:
    """k distinct items drawn one after another with probability proportional to weight
    (successive sampling without replacement; excluded and repeated draws are redrawn, at most
    30 draws per wanted item so a pool of mostly excluded items cannot loop). Result in draw order,
    so a caller keeping only the first few keeps the likelier ones."""
    if k <= 0 or pool.total <= 0:
        return []
    items, cum, total = pool.items, pool.cum, pool.total
    n = len(items)
    rnd = rng.random
    if k * 4 < n:
        # a few draws from a large pool (findings, regions): the exclusion test per drawn item
        chosen: dict[int, None] = {}
        tries = 30 * k
        while len(chosen) < k and tries > 0:
            tries -= 1
            i = bisect_right(cum, rnd() * total)
            if i >= n or i in chosen or exclude(items[i]):
                continue
            chosen[i] = None
        return [items[i] for i in chosen]
    # most of the pool wanted (subcategories): the exclusion test once per item, and no draws once
    # every item that can still be drawn (not excluded, weight > 0) is chosen: a pool of mostly
    # excluded items used to spend its 30 draws per wanted item on redraws (a third of qba's CPU
    # time on OpenI)
    cand = [(j, inv) for j, x, inv in pool.drawable if not exclude(x)]
    left = len(cand)
    want = min(k, left)
    if want == left:
        # every drawable item is wanted: an ordering by keys u ** (1 / w) (Efraimidis and
        # Spirakis) has the distribution of successive draws in one draw per item, where
        # redrawing the repeats of a skewed pool cost about 100 draws per call
        keyed = [(rnd() ** inv, j) for j, inv in cand]
        keyed.sort(reverse=True)
        return [items[j] for _, j in keyed]
    ok = [not exclude(x) for x in items]
    chosen = {}
    tries = 30 * k
    while len(chosen) < want and tries > 0:
        tries -= 1
        i = bisect_right(cum, rnd() * total)
        if i >= n or i in chosen or not ok[i]:
            continue
        chosen[i] = None
    return [items[i] for i in chosen]


def change_text_grade(text: str, words: tuple[str, ...]) -> tuple[int, tuple[str, ...]] | None:
    low = text.lower()
    for w in words:
        if w in low:
            return CHANGE_TEXT_LEFT
    return None
