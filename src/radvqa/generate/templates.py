"""Template engine: question/answer templates as YAML data, validated once at load.

A family file (``templates/<family>.yaml``) holds::

    family: qba            # strategy name; every template id starts with "<family>."
    version: 1             # file format version
    config: {...}          # strategy settings (default region sets, caps, ...): checked against
                           # the strategy's ``Config`` struct (unknown keys are an error)
    phrases: {key: [wording, ...]}          # sentence pieces the strategy builds answer parts from
    templates:
      - id: qba.D02_has_finding              # stable, globally unique
        version: 1                           # bump when the rendered output changes
        scope: finding                       # what the question is about: the strategy's scopes
        op: has_finding                      # what it asks about it: the strategy's operations
                                             # (default: the question type; scope: the op's only one)
        slots: {finding: finding}            # slot name -> slot type
        questions: ["Is there {finding}?", ...]         # several wordings, each uses every slot
        answers: {present: [...], absent: [...]}        # wordings per polarity / certainty key
        parts: [main, details, related]      # answer parts this template builds
        constraints: [answer_not_in_question]           # names in constraints.CONSTRAINTS
        cap: 6                               # most instances per study

A question type is data: the template's ``op`` names an entry of the strategy's operation table
(``OPS``: which answer keys and variables it fills, which scopes it works over) and its ``scope``
one of the scopes that operation accepts. A new template over an existing scope and operation
needs no Python. The template id only names the question type in the output.

Loading rejects: duplicate ids (across all files), ids outside their family, unknown operations,
scopes an operation does not work over, unknown slot types, placeholders naming an unknown slot or
variable, slots a question wording does not use, answer or phrase keys the operation never uses
("unused wordings") and keys it needs but that are missing, unknown constraints and config keys.
Everything is checked here so rendering a row is one ``str.format_map`` call, nothing else.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable

import msgspec
import yaml

from radvqa.generate.constraints import CONSTRAINTS, Candidate

SLOT_TYPES = frozenset(
    {"finding", "region", "device", "subcategory", "modality", "option", "anatomy", "pathology",
     "count", "side", "view", "indication", "reference"}
)
PART_NAMES = frozenset({"main", "details", "related"})
_TEMPLATE_KEYS = frozenset(
    {"id", "version", "scope", "op", "slots", "questions", "answers", "parts", "constraints", "cap",
     "answer_short", "description", "balance"}
)
_FILE_KEYS = frozenset({"family", "version", "config", "phrases", "templates", "description"})


class TemplateError(ValueError):
    """A template file is invalid; the message names the file and the template id / key."""


@dataclass(frozen=True, slots=True)
class Op:
    """One operation of a strategy: what it needs from a template and (for strategies that
    dispatch on it) how it renders one item of its scope."""

    answers: frozenset[str]  # answer wording keys it looks up
    variables: frozenset[str] = frozenset()  # extra placeholders it fills in answers
    scopes: frozenset[str] = frozenset()  # scopes it works over (empty: any)
    subject: str = ""  # which facts count as its positives (qba: abnormal, devices, artifacts, ...)
    render: Callable[..., None] | None = None
    select: Callable[..., bool] | None = None  # which observations of the scope it asks about


@dataclass(frozen=True, slots=True)
class Template:
    id: str
    family: str
    question_type: str
    version: int
    scope: str
    op: str
    slots: dict[str, str]
    questions: tuple[str, ...]
    answers: dict[str, tuple[str, ...]]
    parts: tuple[str, ...]
    constraints: frozenset[str]
    cap: int | None
    answer_short: str | None
    balance: dict[str, float] = field(default_factory=dict)  # yes_share / min_negatives overrides
    # the constraint functions, resolved at load (run by StudyCtx.render_emit)
    checks: tuple[Callable[[Candidate], bool], ...] = ()


@dataclass(slots=True)
class Family:
    name: str
    version: int
    path: str
    templates: dict[str, Template] = field(default_factory=dict)  # question_type -> template
    phrases: dict[str, tuple[str, ...]] = field(default_factory=dict)
    config: Any = None  # the strategy's Config struct (a plain dict when no struct is given)


def _fields(text: str, where: str) -> set[str]:
    out: set[str] = set()
    try:
        for _lit, name, spec, conv in string.Formatter().parse(text):
            if name is None:
                continue
            if not name.isidentifier():
                raise TemplateError(f"{where}: placeholder {{{name}}} is not a plain name")
            if spec or conv:
                raise TemplateError(f"{where}: placeholder {{{name}}} must have no format spec")
            out.add(name)
    except ValueError as exc:  # unbalanced braces
        raise TemplateError(f"{where}: bad wording {text!r}: {exc}") from None
    return out


def _wordings(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    # "" is allowed: an answer with no lead sentence (the answer parts say everything)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and (v == "" or v.strip()) for v in value):
        raise TemplateError(f"{where}: expected a non-empty list of strings (no whitespace-only wording)")
    if len(set(value)) != len(value):
        raise TemplateError(f"{where}: duplicate wording")
    return tuple(value)


def parse_family(
    data: Any,
    path: str,
    ops: dict[str, Op],
    phrase_specs: dict[str, frozenset[str]],
    config_type: type | None = None,
) -> Family:
    """Validate one family document (already YAML-parsed). ``config_type``: a msgspec struct
    (unknown fields forbidden) the ``config:`` block must convert to."""
    if not isinstance(data, dict):
        raise TemplateError(f"{path}: top level must be a mapping")
    unknown = set(data) - _FILE_KEYS
    if unknown:
        raise TemplateError(f"{path}: unknown key(s) {sorted(unknown)}")
    fam = data.get("family")
    if not isinstance(fam, str) or not fam:
        raise TemplateError(f"{path}: missing 'family'")
    family = Family(name=fam, version=int(data.get("version", 1)), path=path,
                    config=_config(data.get("config") or {}, config_type, path))
    # phrases: every key the strategy uses must be there, and nothing else
    phrases = data.get("phrases") or {}
    for key, wordings in phrases.items():
        where = f"{path}: phrases.{key}"
        if key not in phrase_specs:
            raise TemplateError(f"{where}: unused wording (the {fam} strategy never uses this key)")
        words = _wordings(wordings, where)
        for w in words:
            bad = _fields(w, where) - phrase_specs[key]
            if bad:
                raise TemplateError(f"{where}: unknown variable(s) {sorted(bad)} in {w!r}")
        family.phrases[key] = words
    missing = set(phrase_specs) - set(phrases)
    if missing:
        raise TemplateError(f"{path}: phrases missing key(s) {sorted(missing)}")
    for i, t in enumerate(data.get("templates") or []):
        tpl = _parse_template(t, f"{path}: templates[{i}]", fam, ops)
        if tpl.question_type in family.templates:
            raise TemplateError(f"{path}: duplicate template id {tpl.id!r}")
        family.templates[tpl.question_type] = tpl
    return family


def _config(raw: Any, config_type: type | None, path: str) -> Any:
    if config_type is None:
        return dict(raw)
    try:
        return msgspec.convert(raw, config_type)
    except msgspec.ValidationError as exc:
        raise TemplateError(f"{path}: config: {exc}") from None


def _parse_template(t: Any, where: str, fam: str, ops: dict[str, Op]) -> Template:
    if not isinstance(t, dict):
        raise TemplateError(f"{where}: a template must be a mapping")
    tid = t.get("id")
    if not isinstance(tid, str) or not tid.startswith(fam + ".") or len(tid) <= len(fam) + 1:
        raise TemplateError(f"{where}: id {tid!r} must be '{fam}.<question_type>'")
    where = f"{where} ({tid})"
    unknown = set(t) - _TEMPLATE_KEYS
    if unknown:
        raise TemplateError(f"{where}: unknown key(s) {sorted(unknown)}")
    qtype = tid[len(fam) + 1:]
    # a file written before scope/op existed still loads: the id's question type names its op,
    # and an op over a single scope needs no scope
    op_name = t.get("op", qtype if qtype in ops else None)
    spec = ops.get(op_name) if isinstance(op_name, str) else None
    if spec is None:
        raise TemplateError(f"{where}: unknown op {op_name!r}; the {fam} strategy has {sorted(ops)}")
    scope = t.get("scope", next(iter(spec.scopes)) if len(spec.scopes) == 1 else None)
    if not isinstance(scope, str) or (spec.scopes and scope not in spec.scopes):
        raise TemplateError(f"{where}: op {op_name!r} works over scope(s) {sorted(spec.scopes)}, "
                            f"not {scope!r}")
    version = t.get("version")
    if not isinstance(version, int) or version < 1:
        raise TemplateError(f"{where}: 'version' must be a positive integer")
    slots = t.get("slots") or {}
    if not isinstance(slots, dict):
        raise TemplateError(f"{where}: 'slots' must be a mapping name -> type")
    for name, typ in slots.items():
        if typ not in SLOT_TYPES:
            raise TemplateError(f"{where}: slot {name!r} has unknown type {typ!r}; known: {sorted(SLOT_TYPES)}")
    questions = _wordings(t.get("questions"), f"{where}: questions")
    if any(not q for q in questions):
        raise TemplateError(f"{where}: questions: empty wording")
    for q in questions:
        used = _fields(q, f"{where}: questions")
        bad = used - set(slots)
        if bad:
            raise TemplateError(f"{where}: unknown slot(s) {sorted(bad)} in question {q!r}")
        unused = set(slots) - used
        if unused:
            raise TemplateError(f"{where}: question {q!r} does not use slot(s) {sorted(unused)}")
    answers_raw = t.get("answers")
    if not isinstance(answers_raw, dict):
        raise TemplateError(f"{where}: 'answers' must be a mapping key -> wordings")
    answers: dict[str, tuple[str, ...]] = {}
    allowed = set(slots) | set(spec.variables)
    for key, words in answers_raw.items():
        if isinstance(key, bool):
            raise TemplateError(f"{where}: answer key {key!r}: YAML reads unquoted yes/no as booleans; "
                                f"quote the key (\"yes\":)")
        if key not in spec.answers:
            raise TemplateError(f"{where}: unused wording answers.{key} (op {op_name} never uses it; "
                                f"it uses {sorted(spec.answers)})")
        ws = _wordings(words, f"{where}: answers.{key}")
        for w in ws:
            bad = _fields(w, f"{where}: answers.{key}") - allowed
            if bad:
                raise TemplateError(f"{where}: unknown slot/variable(s) {sorted(bad)} in answer {w!r}")
        answers[key] = ws
    missing = spec.answers - set(answers)
    if missing:
        raise TemplateError(f"{where}: answers missing key(s) {sorted(missing)}")
    parts = tuple(t.get("parts") or ("main",))
    if not set(parts) <= PART_NAMES or "main" not in parts:
        raise TemplateError(f"{where}: 'parts' must include main and only {sorted(PART_NAMES)}")
    constraints = frozenset(t.get("constraints") or ())
    unknown_c = constraints - set(CONSTRAINTS)
    if unknown_c:
        raise TemplateError(f"{where}: unknown constraint(s) {sorted(unknown_c)}; known: {sorted(CONSTRAINTS)}")
    cap = t.get("cap")
    if cap is not None and (not isinstance(cap, int) or cap < 1):
        raise TemplateError(f"{where}: 'cap' must be a positive integer")
    balance = t.get("balance") or {}
    if not isinstance(balance, dict) or not set(balance) <= {"yes_share", "min_negatives"}:
        raise TemplateError(f"{where}: 'balance' takes only yes_share and min_negatives")
    return Template(id=tid, family=fam, question_type=qtype, version=version, scope=scope, op=op_name,
                    slots=dict(slots), questions=questions, answers=answers, parts=parts,
                    constraints=constraints, cap=cap, answer_short=t.get("answer_short"),
                    balance=dict(balance), checks=tuple(CONSTRAINTS[c] for c in sorted(constraints)))


def load_family(source: str | Path, ops: dict[str, Op], phrase_specs: dict[str, frozenset[str]],
                config_type: type | None = None) -> Family:
    """Load and validate one family file: a path, or a file name inside the package templates."""
    p = Path(source)
    if p.exists():
        text, where = p.read_text(encoding="utf-8"), str(p)
    else:
        ref = resources.files("radvqa.generate") / "templates" / str(source)
        text, where = ref.read_text(encoding="utf-8"), f"radvqa/generate/templates/{source}"
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise TemplateError(f"{where}: not valid YAML: {exc}") from None
    return parse_family(data, where, ops, phrase_specs, config_type)


def check_unique(families: Iterable[Family]) -> None:
    """Template ids must be unique across every loaded file (not only within one)."""
    seen: dict[str, str] = {}
    for fam in families:
        for tpl in fam.templates.values():
            if tpl.id in seen:
                raise TemplateError(f"duplicate template id {tpl.id!r} in {fam.path} and {seen[tpl.id]}")
            seen[tpl.id] = fam.path
