"""The intermediate representation (IR) every stage of radvqa passes along.

Objects here are built millions of times per run, so they are ``msgspec.Struct``s: slotted, cheap to
construct, no per-object validation on the hot path (validation happens at the edges: source
adapters, ontology load, ``radvqa validate``). ``to_json``/``from_json`` and ``to_builtins`` give the
round trips to JSON and (via ``radvqa.io.schema``) to Arrow.

Conventions (contract):
- Box coordinates are pixels of the *stored* image file (what ``Image.path`` points at), with
  ``x1 < x2`` and ``y1 < y2``, inside ``[0, width] x [0, height]`` when the size is known.
- Finding ids and region ids are ontology ids (``radvqa.ontology``), snake_case strings.
- Character offsets (``Span.start``/``end``, ``Sentence.start``/``end``) index ``Report.text``.
- Certainty is one of ``present``, ``absent``, ``uncertain``.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

Certainty = Literal["present", "absent", "uncertain"]
Laterality = Literal["left", "right", "bilateral"]
PartType = Literal["main", "details", "related"]
Polarity = Literal["positive", "negative"]

CERTAINTIES: tuple[str, ...] = ("present", "absent", "uncertain")
PART_TYPES: tuple[str, ...] = ("main", "details", "related")
GRADES: tuple[str, ...] = ("A++", "A+", "A", "B", "C", "D")


class Box(msgspec.Struct, kw_only=True):
    """An axis-aligned box on one image, in that image's stored pixels."""

    image_id: str
    x1: float
    y1: float
    x2: float
    y2: float
    # expert (one reader), expert_fused (readers merged), region (anatomical region box),
    # derived (computed from other boxes), predicted
    source: str = "expert"
    reader: str | None = None
    # ontology finding id (lesion boxes) or region id (region boxes)
    label: str | None = None
    # a drawn ellipse (REFLACX): [cx, cy, rx, ry], centre and semi-axes of an axis-aligned ellipse in
    # the same pixels; the box is its bounding box (clipped to the image where the ellipse crosses it)
    ellipse: list[float] | None = None
    # the reader's certainty for this mark on the source's ordinal scale (REFLACX: 1-5), when given
    reader_certainty: int | None = None

    def area(self) -> float:
        return max(0.0, self.x2 - self.x1) * max(0.0, self.y2 - self.y1)

    def as_list(self) -> list[float]:
        return [self.x1, self.y1, self.x2, self.y2]


# Span and Sentence hold only strings and ints (no cycle can pass through them): gc=False keeps
# them out of the cyclic garbage collector (the extractor makes one per sentence and mention of
# every report: nothing for a collection to link or walk)
class Span(msgspec.Struct, kw_only=True, gc=False):
    """Evidence: a character span of the report text (and the sentence it lies in)."""

    start: int
    end: int
    text: str
    sentence_id: str | None = None


class Sentence(msgspec.Struct, kw_only=True, gc=False):
    id: str  # "S01", "S02", ... in report order
    section: str  # upper-case section name: FINDINGS, IMPRESSION, INDICATION, ... or "BODY"
    start: int
    end: int
    text: str


class Section(msgspec.Struct, kw_only=True):
    name: str
    start: int  # offset of the section body (after the header)
    end: int


class Report(msgspec.Struct, kw_only=True):
    text: str
    sections: list[Section] = []
    sentences: list[Sentence] = []


class Image(msgspec.Struct, kw_only=True):
    id: str
    path: str | None = None  # as given by the source (absolute, or relative to an image root)
    width: int | None = None  # stored file's pixels; None when the image is not on disk
    height: int | None = None
    view: str | None = None  # PA, AP, LATERAL, LL, ... or None when unknown
    modality: str = "CR"  # DICOM-style: CR/DX (radiograph), CT, MR, US
    original_width: int | None = None  # acquisition size, when the stored file is a resized copy
    original_height: int | None = None


class Label(msgspec.Struct, kw_only=True):
    """An expert or dataset label as the source ships it, plus its ontology mapping."""

    scheme: str  # nih14, chexpert14, vindr, padchest, radimagenet, ...
    name: str  # label exactly as in the source
    value: int  # 1 positive, 0 negative, -1 uncertain
    findings: list[str] = []  # ontology finding ids it maps to (empty: "no finding"/normal)
    reader: str | None = None
    image_id: str | None = None  # when the label is per image rather than per study
    # region ids the label is about (region-level labels: Chest ImaGenome attributes); [] = study
    regions: list[str] = []


class Annotation(msgspec.Struct, kw_only=True):
    """One observation as people annotated it on the report (a RadGraph observation entity with the
    entities that modify it and the anatomy it is located at; a Lunguage row), before the ontology
    names it: the build's extract stage reads ``phrase`` (else ``term``) with the term matcher
    (``radvqa.extract.annotated``)."""

    ref: str  # where it is in the gold file: entity ids, row numbers
    phrase: str  # the annotated words the term matcher reads, in text order ("left pleural effusion")
    term: str  # the entity's own words: the fallback, and the name listed when nothing matches
    certainty: str = "present"  # Certainty, from the gold label
    laterality: str | None = None
    change: str | None = None  # Observation.change values
    severity: str | None = None  # when the gold names one (Lunguage's severity column)
    evidence: list[Span] = []  # character spans of Study.report_text (sentence ids set by extract)


class Study(msgspec.Struct, kw_only=True):
    """What a source adapter yields: one study as the dataset defines it."""

    id: str  # globally unique: "<source>:<dataset study id>"
    patient_id: str
    source: str
    images: list[Image] = []
    report_text: str | None = None
    labels: list[Label] = []
    boxes: list[Box] = []  # expert lesion boxes (label = finding id), per reader
    region_boxes: list[Box] = []  # anatomical region boxes (label = region id)
    split: str | None = None  # split given by the dataset, if any
    study_time: str | None = None  # ISO 8601, or a sortable surrogate (follow-up number)
    anatomy: str | None = None  # body region for non-chest sources (RadImageNet: "knee", ...)
    meta: dict[str, str] = {}
    # observations annotated by people on report_text (RadGraph, Lunguage): when set (even to []),
    # the build states these instead of what the extractor reads in the text
    annotations: list[Annotation] | None = None


class Reject(msgspec.Struct, kw_only=True):
    """A record that could not be used, with why. Written to rejected.jsonl (contract)."""

    source: str
    ref: str  # file path, row number, study id: enough for a person to find it
    reason: str
    stage: str = "source"  # source, extract, localize, generate, write


class Observation(msgspec.Struct, kw_only=True):
    id: str  # "O01", ... unique within a scene graph
    finding: str  # ontology finding id
    certainty: str = "present"  # Certainty
    laterality: str | None = None  # Laterality
    regions: list[str] = []  # ontology region ids
    severity: str | None = None  # trace, small, mild, moderate, large, severe
    size_mm: float | None = None
    change: str | None = None  # new, increased, decreased, unchanged, resolved, improved, worsened
    temporal: str | None = None  # acute, chronic, old, healed, ...
    texture: str | None = None
    spread: str | None = None
    children: list[str] = []  # ids of child observations
    evidence: list[Span] = []
    from_report: bool = True
    # report (extracted), label (dataset/expert labels), default (implied negative), box
    source: str = "report"
    boxes: list[Box] = []  # lesion or region boxes localising this observation
    qualifier: str | None = None  # qualified negative ("no large effusion" -> "large"); certainty is then "uncertain"
    # what the sentence said near this finding but the extractor did not attach to it, because the
    # finding cannot lie there (extract/data/finding_places.yaml) or the word's binding was
    # ambiguous: "place:<region id>", "severity:<level>" (the grade reads it)
    dropped: list[str] = []


class Indication(msgspec.Struct, kw_only=True):
    text: str
    evaluate: list[str] = []  # ontology finding ids the indication asks about
    evidence: list[Span] = []


class SceneGraph(msgspec.Struct, kw_only=True):
    """One per study: everything the QA generators read."""

    study_id: str
    patient_id: str
    source: str
    images: list[Image] = []
    report: Report | None = None
    indication: Indication | None = None
    observations: list[Observation] = []
    region_boxes: list[Box] = []
    split: str | None = None
    study_time: str | None = None
    prior_study_id: str | None = None  # the patient's previous study (strictly earlier), if any
    anatomy: str | None = None
    modality: str = "CR"
    extractor: str | None = None  # "rules:1" / "llm:<model>:<prompt version>"
    meta: dict[str, str] = {}


class AnswerPart(msgspec.Struct, kw_only=True):
    part_type: str  # PartType
    text: str
    level: int = 0  # 0 top-level; children of a part have level + 1
    tag: str | None = None  # short name tag ("pleural effusion, left")
    findings: list[str] = []
    regions: list[str] = []
    laterality: str | None = None
    certainty: str | None = None
    severity: str | None = None
    boxes: list[Box] = []


class QA(msgspec.Struct, kw_only=True):
    """One question-answer row (contract: the QA Parquet columns)."""

    qa_id: str
    source: str
    split: str
    patient_id: str
    study_id: str
    strategy: str  # qba, vindr, rin, diff
    question_type: str
    template_id: str
    template_version: int
    question: str
    answer: str
    image_ids: list[str] = []
    image_paths: list[str] = []
    answer_short: str | None = None
    choices: list[str] | None = None
    polarity: str | None = None  # Polarity
    findings: list[str] = []
    regions: list[str] = []
    answer_parts: list[AnswerPart] = []
    boxes: list[Box] = []
    grade: str | None = None
    grade_reasons: list[str] = []
    provenance: list[str] = []  # sentence ids + text, annotation ids
    modality: str | None = None
    reference_study_id: str | None = None  # diff questions: the earlier study
    reasoning: str | None = None


_encoder = msgspec.json.Encoder()


def to_json(obj: msgspec.Struct) -> bytes:
    return _encoder.encode(obj)


def from_json(data: bytes | str, kind: type[msgspec.Struct]) -> Any:
    return msgspec.json.decode(data, type=kind)


def to_builtins(obj: msgspec.Struct) -> Any:
    """Plain dicts/lists (every field present, so Arrow sees a stable set of keys: no
    struct omits defaults)."""
    return msgspec.to_builtins(obj, builtin_types=None)


def from_builtins(data: Any, kind: type[msgspec.Struct]) -> Any:
    return msgspec.convert(data, type=kind)


class Extraction(msgspec.Struct, kw_only=True):
    """What a report extractor returns for one report (rules or LLM backend)."""

    report: Report
    observations: list[Observation] = []
    indication: Indication | None = None
    extractor: str = "rules:1"
    error: str | None = None  # set when the text could not be used (empty, binary, ...)
