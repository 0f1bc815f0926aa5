"""Read an ontology directory of YAML files and validate it.

Every ``*.yaml`` file in the directory carries a ``version`` and exactly one payload key that says
what it holds: ``findings`` (list), ``regions`` (list), ``anatomies`` (list), ``categories``
(mapping), ``modifiers`` (mapping), ``spelling`` (list of [US, UK] pairs) or ``scheme`` (one label
scheme). File names are free, so findings can be split over several files by category.

Validation collects every problem (it does not stop at the first) and names the file and the key
of each, so a broken copy is fixed in one pass. ``load_dir`` raises ``OntologyError`` listing them;
``check_dir`` returns the per-check results for ``radvqa ontology``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml

from radvqa.ontology.types import Anatomy, CheckResult, Finding, Modifiers, Region, Scheme

# libyaml's C parser when PyYAML has it (about 10x faster); same safe semantics
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

ID_RE = re.compile(r"^[a-z][a-z0-9_]*$")
PAYLOAD_KEYS = ("findings", "regions", "anatomies", "categories", "modifiers", "spelling", "scheme")
SIDES = ("left", "right")

# field -> (accepted python types, required). "list[str]" fields are given as list of str.
_STR, _LIST, _BOOL, _DICT = (str,), (list,), (bool,), (dict,)
FINDING_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "id": (_STR, True),
    "name": (_STR, True),
    "category": (_STR, True),
    "subcategory": (_STR, False),
    "synonyms": (_LIST, False),
    "parents": (_LIST, False),
    "default_regions": (_LIST, False),
    "lateralised": (_BOOL, False),
    "severities": (_LIST, False),
    "ambiguous_synonyms": (_LIST, False),
    "anatomies": (_LIST, False),
    "imagenome_name": (_STR, False),
    "abnormal": (_BOOL, False),
}
REGION_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "id": (_STR, True),
    "name": (_STR, True),
    "synonyms": (_LIST, False),
    "parents": (_LIST, False),
    "side": (_STR, False),
    "counterpart": (_STR, False),
    "boxable": (_BOOL, False),
    "imagenome_name": (_STR, False),
}
ANATOMY_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "id": (_STR, True),
    "name": (_STR, True),
    "synonyms": (_LIST, False),
    "modalities": (_LIST, False),
}
SCHEME_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "name": (_STR, True),
    "title": (_STR, True),
    "labels": (_DICT, True),
    "source": (_STR, False),
    "case_sensitive": (_BOOL, False),
    "label_anatomies": (_DICT, False),
    "groups": (_DICT, False),
    "codes": (_STR, False),
}
SCHEME_CODES = ("mesh", "path")
MODIFIER_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "certainty": (_DICT, True),
    "severity_order": (_LIST, True),
    "severity": (_DICT, True),
    "size_units": (_DICT, True),
    "change": (_DICT, True),
    "temporal": (_DICT, True),
    "texture": (_DICT, True),
    "spread": (_DICT, True),
    "laterality": (_DICT, True),
}
# The change vocabulary the IR documents (model.Observation.change); the data may add more.
REQUIRED_CHANGE = ("new", "increased", "decreased", "unchanged", "resolved", "improved", "worsened")
REQUIRED_CERTAINTY = ("negation_pre", "negation_post", "uncertainty_pre", "uncertainty_post",
                      "hypothetical", "historical")


class OntologyError(ValueError):
    """A broken ontology copy. ``errors`` lists every problem as "file: key: message"."""

    def __init__(self, errors: list[str]):
        self.errors = list(errors)
        shown = "\n  ".join(self.errors[:50])
        more = f"\n  ... and {len(self.errors) - 50} more" if len(self.errors) > 50 else ""
        super().__init__(f"invalid ontology ({len(self.errors)} problem(s)):\n  {shown}{more}")


def normalize_term(text: str) -> str:
    """The form synonyms are compared in: lower case, single spaces, no surrounding punctuation."""
    return " ".join(text.lower().replace("\u2019", "'").split()).strip(" .,;:")


class _Raw:
    """Everything read from one directory, with where each item came from (for messages)."""

    def __init__(self) -> None:
        self.findings: list[tuple[str, str, dict[str, Any]]] = []  # (file, key path, record)
        self.regions: list[tuple[str, str, dict[str, Any]]] = []
        self.anatomies: list[tuple[str, str, dict[str, Any]]] = []
        self.schemes: list[tuple[str, dict[str, Any]]] = []
        self.categories: dict[str, list[str]] = {}
        self.categories_file: str | None = None
        self.modifiers: tuple[str, dict[str, Any]] | None = None
        self.modifiers_seen = False  # a modifiers file exists (even if it failed the schema)
        self.spelling: list[tuple[str, str]] = []
        self.versions: dict[str, str] = {}


def _check_record(file: str, where: str, rec: Any, fields: dict[str, tuple[tuple[type, ...], bool]],
                  errors: list[str]) -> bool:
    if not isinstance(rec, dict):
        errors.append(f"{file}: {where}: expected a mapping, got {type(rec).__name__}")
        return False
    ok = True
    for key in rec:
        if key not in fields:
            errors.append(f"{file}: {where}.{key}: unknown key (allowed: {', '.join(fields)})")
            ok = False
    for key, (types, required) in fields.items():
        if key not in rec or rec[key] is None:
            if required:
                errors.append(f"{file}: {where}.{key}: missing required key")
                ok = False
            continue
        val = rec[key]
        # bool is an int subclass and YAML turns "no"/"yes" into bools: be strict about both
        if not isinstance(val, types) or (types == _STR and isinstance(val, bool)):
            errors.append(f"{file}: {where}.{key}: expected {types[0].__name__}, got {type(val).__name__} ({val!r})")
            ok = False
            continue
        if types == _LIST:
            bad = [v for v in val if not isinstance(v, str) or not v.strip()]
            if bad:
                errors.append(f"{file}: {where}.{key}: every item must be a non-empty string, got {bad[0]!r}")
                ok = False
    return ok


def _read_dir(path: Path, errors: list[str]) -> _Raw:
    raw = _Raw()
    files = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    if not files:
        errors.append(f"{path}: no *.yaml files (is this an ontology directory?)")
    for p in files:
        name = p.name
        try:
            doc = yaml.load(p.read_text(encoding="utf-8"), Loader=_SafeLoader)
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            errors.append(f"{name}: cannot read YAML: {exc}")
            continue
        if not isinstance(doc, dict):
            errors.append(f"{name}: top level must be a mapping with 'version' and one of {PAYLOAD_KEYS}")
            continue
        for key in doc:
            if key != "version" and key not in PAYLOAD_KEYS:
                errors.append(f"{name}: {key}: unknown top-level key (allowed: version, {', '.join(PAYLOAD_KEYS)})")
        if not isinstance(doc.get("version"), str):
            errors.append(f"{name}: version: missing required key (a string such as \"1.0.0\")")
        else:
            raw.versions[name] = doc["version"]
        payload = [k for k in PAYLOAD_KEYS if k in doc]
        if len(payload) != 1:
            errors.append(f"{name}: expected exactly one of {PAYLOAD_KEYS}, found {payload or 'none'}")
            continue
        kind = payload[0]
        body = doc[kind]
        if kind in ("findings", "regions", "anatomies"):
            if not isinstance(body, list):
                errors.append(f"{name}: {kind}: expected a list")
                continue
            fields = {"findings": FINDING_FIELDS, "regions": REGION_FIELDS, "anatomies": ANATOMY_FIELDS}[kind]
            for i, rec in enumerate(body):
                rid = rec.get("id") if isinstance(rec, dict) else None
                where = f"{kind}[{i}]" + (f" ({rid})" if isinstance(rid, str) else "")
                if _check_record(name, where, rec, fields, errors):
                    getattr(raw, kind).append((name, where, rec))
        elif kind == "scheme":
            if _check_record(name, "scheme", body, SCHEME_FIELDS, errors):
                raw.schemes.append((name, body))
        elif kind == "modifiers":
            raw.modifiers_seen = True
            if raw.modifiers is not None:
                errors.append(f"{name}: modifiers: defined twice (also in {raw.modifiers[0]})")
            elif _check_record(name, "modifiers", body, MODIFIER_FIELDS, errors):
                raw.modifiers = (name, body)
        elif kind == "categories":
            if not isinstance(body, dict) or not all(isinstance(v, list) for v in body.values()):
                errors.append(f"{name}: categories: expected a mapping CATEGORY -> list of SUBCATEGORY")
                continue
            for cat, subs in body.items():
                if cat in raw.categories:
                    errors.append(f"{name}: categories.{cat}: defined twice")
                raw.categories[cat] = [str(s) for s in subs]
            raw.categories_file = name
        elif kind == "spelling":
            if not isinstance(body, list):
                errors.append(f"{name}: spelling: expected a list of [US, UK] pairs")
                continue
            for i, pair in enumerate(body):
                if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
                    errors.append(f"{name}: spelling[{i}]: expected a pair of strings [US, UK], got {pair!r}")
                    continue
                raw.spelling.append((pair[0].lower(), pair[1].lower()))
    return raw


def _tuple(rec: dict[str, Any], key: str) -> tuple[str, ...]:
    return tuple(str(v).strip() for v in rec.get(key) or ())


def _str_table(file: str, where: str, table: Any, errors: list[str]) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    if not isinstance(table, dict):
        errors.append(f"{file}: {where}: expected a mapping")
        return out
    for key, words in table.items():
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            errors.append(f"{file}: {where}.{key}: expected a list of strings")
            continue
        out[str(key)] = tuple(words)
    return out


def _build_modifiers(raw: _Raw, errors: list[str]) -> Modifiers | None:
    if raw.modifiers is None:
        errors.append("modifiers: no file defines 'modifiers'")
        return None
    file, body = raw.modifiers
    n = len(errors)
    tables = {k: _str_table(file, f"modifiers.{k}", body[k], errors)
              for k in ("certainty", "severity", "change", "temporal", "texture", "spread", "laterality")}
    order = tuple(body["severity_order"])
    for level in tables["severity"]:
        if level not in order:
            errors.append(f"{file}: modifiers.severity.{level}: not in severity_order {list(order)}")
    units: dict[str, float] = {}
    for unit, mm in (body["size_units"] or {}).items():
        if isinstance(mm, bool) or not isinstance(mm, (int, float)) or mm <= 0:
            errors.append(f"{file}: modifiers.size_units.{unit}: expected a positive number of mm, got {mm!r}")
        else:
            units[str(unit).lower()] = float(mm)
    for key in REQUIRED_CHANGE:
        if key not in tables["change"]:
            errors.append(f"{file}: modifiers.change.{key}: missing required key")
    for key in REQUIRED_CERTAINTY:
        if key not in tables["certainty"]:
            errors.append(f"{file}: modifiers.certainty.{key}: missing required key")
    if len(errors) > n:
        return None
    return Modifiers(severity_order=order, size_units=units, **tables)


class Built:
    """Result of building: the typed records plus per-check outcomes."""

    def __init__(self) -> None:
        self.findings: dict[str, Finding] = {}
        self.regions: dict[str, Region] = {}
        self.anatomies: dict[str, Anatomy] = {}
        self.schemes: dict[str, Scheme] = {}
        self.modifiers: Modifiers | None = None
        self.categories: dict[str, tuple[str, ...]] = {}
        self.spelling: tuple[tuple[str, str], ...] = ()
        self.version: str = ""
        self.checks: list[CheckResult] = []

    @property
    def ok(self) -> bool:
        return all(c.passed for c in self.checks)

    def errors(self) -> list[str]:
        return [e for c in self.checks for e in c.errors]


def _find_cycle(graph: dict[str, tuple[str, ...]]) -> list[str] | None:
    """A cycle in a parent graph as a list of ids, or None (iterative DFS, deterministic)."""
    state: dict[str, int] = {}  # 1 on stack, 2 done
    for start in sorted(graph):
        if state.get(start):
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        path: list[str] = [start]
        state[start] = 1
        while stack:
            node, i = stack[-1]
            parents = [p for p in graph.get(node, ()) if p in graph]
            if i < len(parents):
                stack[-1] = (node, i + 1)
                nxt = parents[i]
                if state.get(nxt) == 1:
                    return path[path.index(nxt):] + [nxt]
                if not state.get(nxt):
                    state[nxt] = 1
                    stack.append((nxt, 0))
                    path.append(nxt)
            else:
                state[node] = 2
                stack.pop()
                path.pop()
    return None


def build(path: Path) -> Built:
    """Read and validate one ontology directory. Never raises for bad content: see ``checks``."""
    out = Built()
    read_errors: list[str] = []
    if not path.is_dir():
        out.checks.append(CheckResult(name="files and schema", passed=False,
                                      errors=[f"{path}: not a directory"]))
        return out
    raw = _read_dir(path, read_errors)
    mod_errors: list[str] = []
    if raw.modifiers is not None or not raw.modifiers_seen:
        out.modifiers = _build_modifiers(raw, mod_errors)
    out.spelling = tuple(raw.spelling)
    out.categories = {k: tuple(v) for k, v in raw.categories.items()}
    # the copy's version is the newest file version, compared numerically ("1.10.0" > "1.9.0")
    versions = sorted(set(raw.versions.values()),
                      key=lambda v: tuple(int(x) if x.isdigit() else -1 for x in v.split(".")))
    out.version = versions[-1] if versions else ""
    out.checks.append(CheckResult(
        name="files and schema (keys, types, version)", passed=not read_errors and not mod_errors,
        detail=f"{len(raw.versions)} files", errors=read_errors + mod_errors))

    scheme_files = _check_ids(raw, out)
    where_of = {rec["id"]: (file, where) for file, where, rec in raw.findings}
    rwhere_of = {rec["id"]: (file, where) for file, where, rec in raw.regions}
    _check_categories(raw, out, where_of)
    _check_references(out, where_of, rwhere_of)
    _check_cycles(out, where_of, rwhere_of)
    _check_synonyms(out, where_of, rwhere_of)
    _check_schemes(raw, out, scheme_files)
    return out


# each check below appends its CheckResult to ``out.checks``; they run in this order
Where = dict[str, tuple[str, str]]  # record id -> (file, "findings[3]"), for messages


def _check_ids(raw: _Raw, out: Built) -> dict[str, str]:
    """Ids well-formed and unique; builds the typed findings, regions and anatomies. Returns
    scheme name -> the file defining it first."""
    id_errors: list[str] = []
    seen: dict[str, dict[str, str]] = {"finding": {}, "region": {}, "anatomy": {}}
    for kind, items in (("finding", raw.findings), ("region", raw.regions), ("anatomy", raw.anatomies)):
        for file, where, rec in items:
            rid = rec["id"]
            if not ID_RE.match(rid):
                id_errors.append(f"{file}: {where}.id: {rid!r} is not lower snake_case")
            if rid in seen[kind]:
                id_errors.append(f"{file}: {where}.id: duplicate {kind} id {rid!r} (first in {seen[kind][rid]})")
                continue
            seen[kind][rid] = file
            if kind == "finding":
                out.findings[rid] = Finding(
                    id=rid, name=rec["name"], category=rec["category"], subcategory=rec.get("subcategory"),
                    synonyms=_tuple(rec, "synonyms"), parents=_tuple(rec, "parents"),
                    default_regions=_tuple(rec, "default_regions"), lateralised=bool(rec.get("lateralised", False)),
                    severities=_tuple(rec, "severities"), ambiguous_synonyms=_tuple(rec, "ambiguous_synonyms"),
                    anatomies=_tuple(rec, "anatomies"), imagenome_name=rec.get("imagenome_name"),
                    abnormal=bool(rec.get("abnormal", True)))
            elif kind == "region":
                out.regions[rid] = Region(
                    id=rid, name=rec["name"], synonyms=_tuple(rec, "synonyms"), parents=_tuple(rec, "parents"),
                    side=rec.get("side"), counterpart=rec.get("counterpart"), boxable=bool(rec.get("boxable", True)),
                    imagenome_name=rec.get("imagenome_name"))
            else:
                out.anatomies[rid] = Anatomy(id=rid, name=rec["name"], synonyms=_tuple(rec, "synonyms"),
                                             modalities=_tuple(rec, "modalities"))
    scheme_files: dict[str, str] = {}
    for file, body in raw.schemes:
        if body["name"] in scheme_files:
            id_errors.append(f"{file}: scheme.name: duplicate scheme {body['name']!r} (first in {scheme_files[body['name']]})")
            continue
        scheme_files[body["name"]] = file
    out.checks.append(CheckResult(name="ids well-formed and unique", passed=not id_errors,
                                  detail=f"{len(out.findings)} findings, {len(out.regions)} regions, "
                                         f"{len(out.anatomies)} anatomies", errors=id_errors))
    return scheme_files


def _check_categories(raw: _Raw, out: Built, where_of: Where) -> None:
    cat_errors: list[str] = []
    if not raw.categories:
        cat_errors.append("categories: no file defines 'categories'")
    else:
        for f in out.findings.values():
            file, where = where_of[f.id]
            if f.category not in raw.categories:
                cat_errors.append(f"{file}: {where}.category: unknown category {f.category!r} "
                                  f"(defined in {raw.categories_file}: {', '.join(raw.categories)})")
            elif f.subcategory is not None and f.subcategory not in raw.categories[f.category]:
                cat_errors.append(f"{file}: {where}.subcategory: {f.subcategory!r} is not a subcategory of "
                                  f"{f.category} in {raw.categories_file}")
    out.checks.append(CheckResult(name="categories and subcategories", passed=not cat_errors,
                                  detail=f"{len(raw.categories)} categories", errors=cat_errors))


def _check_references(out: Built, where_of: Where, rwhere_of: Where) -> None:
    """Parents, default regions, anatomies, severities and counterparts name existing records."""
    ref_errors: list[str] = []
    sev_levels = set(out.modifiers.severity_order) if out.modifiers else None
    for f in out.findings.values():
        file, where = where_of[f.id]
        for p in f.parents:
            if p not in out.findings:
                ref_errors.append(f"{file}: {where}.parents: unknown finding {p!r}")
            elif p == f.id:
                ref_errors.append(f"{file}: {where}.parents: a finding cannot be its own parent")
        for r in f.default_regions:
            if r not in out.regions:
                ref_errors.append(f"{file}: {where}.default_regions: unknown region {r!r}")
        for a in f.anatomies:
            if a not in out.anatomies:
                ref_errors.append(f"{file}: {where}.anatomies: unknown anatomy {a!r}")
        if sev_levels is not None:
            for s in f.severities:
                if s not in sev_levels:
                    ref_errors.append(f"{file}: {where}.severities: {s!r} is not in modifiers severity_order")
    for r in out.regions.values():
        file, where = rwhere_of[r.id]
        for p in r.parents:
            if p not in out.regions:
                ref_errors.append(f"{file}: {where}.parents: unknown region {p!r}")
            elif p == r.id:
                ref_errors.append(f"{file}: {where}.parents: a region cannot be its own parent")
        if r.side is not None and r.side not in SIDES:
            ref_errors.append(f"{file}: {where}.side: {r.side!r} must be one of {SIDES} or absent")
        if r.counterpart is not None:
            other = out.regions.get(r.counterpart)
            if other is None:
                ref_errors.append(f"{file}: {where}.counterpart: unknown region {r.counterpart!r}")
            elif other.counterpart != r.id:
                ref_errors.append(f"{file}: {where}.counterpart: {r.counterpart!r} does not name {r.id!r} back")
            elif r.side is None or other.side is None or r.side == other.side:
                ref_errors.append(f"{file}: {where}.counterpart: {r.id!r} and {r.counterpart!r} need opposite sides")
    out.checks.append(CheckResult(name="no dangling references", passed=not ref_errors,
                                  detail="parents, default_regions, anatomies, severities, counterparts",
                                  errors=ref_errors))


def _check_cycles(out: Built, where_of: Where, rwhere_of: Where) -> None:
    cyc_errors: list[str] = []
    cyc = _find_cycle({f.id: f.parents for f in out.findings.values()})
    if cyc:
        file, where = where_of[cyc[0]]
        cyc_errors.append(f"{file}: {where}.parents: cycle {' -> '.join(cyc)}")
    cyc = _find_cycle({r.id: r.parents for r in out.regions.values()})
    if cyc:
        file, where = rwhere_of[cyc[0]]
        cyc_errors.append(f"{file}: {where}.parents: cycle {' -> '.join(cyc)}")
    out.checks.append(CheckResult(name="no cycles in parents", passed=not cyc_errors, errors=cyc_errors))


def _check_synonyms(out: Built, where_of: Where, rwhere_of: Where) -> None:
    syn_errors: list[str] = []
    for kind, table, wmap in (("finding", out.findings, where_of), ("region", out.regions, rwhere_of)):
        claims: dict[str, list[str]] = defaultdict(list)
        for item in table.values():
            terms = {normalize_term(item.name), *(normalize_term(s) for s in item.synonyms)}
            if kind == "finding":
                terms |= {normalize_term(s) for s in item.ambiguous_synonyms}  # type: ignore[union-attr]
            for t in sorted(terms):
                claims[t].append(item.id)
        for term, ids in sorted(claims.items()):
            if len(ids) < 2:
                continue
            undeclared = [i for i in ids if kind == "region" or term not in
                          {normalize_term(s) for s in table[i].ambiguous_synonyms}]  # type: ignore[union-attr]
            if undeclared:
                file, where = wmap[undeclared[0]]
                syn_errors.append(f"{file}: {where}.synonyms: {term!r} is claimed by {kind}s {', '.join(ids)}; "
                                  f"declare it in ambiguous_synonyms of each, or remove it")
    out.checks.append(CheckResult(name="no synonym claimed twice (unless declared ambiguous)",
                                  passed=not syn_errors, errors=syn_errors))


def _check_schemes(raw: _Raw, out: Built, scheme_files: dict[str, str]) -> None:
    sch_errors: list[str] = []
    n_labels = 0
    for file, body in raw.schemes:
        name = body["name"]
        if scheme_files.get(name) != file:
            continue
        labels: dict[str, tuple[str, ...]] = {}
        for label, ids in body["labels"].items():
            key = f"scheme.labels.{label!s}"
            n_labels += 1
            if ids is None:
                sch_errors.append(f"{file}: {key}: label does not map (write [] for 'no finding'/'normal')")
                continue
            if isinstance(ids, str):
                ids = [ids]
            if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
                sch_errors.append(f"{file}: {key}: expected a list of finding ids, got {ids!r}")
                continue
            for i in ids:
                if i not in out.findings:
                    sch_errors.append(f"{file}: {key}: unknown finding {i!r}")
            labels[str(label)] = tuple(ids)
        label_anat: dict[str, str] = {}
        for label, anat in (body.get("label_anatomies") or {}).items():
            if str(label) not in labels:
                sch_errors.append(f"{file}: scheme.label_anatomies.{label}: not a label of the scheme")
            elif anat not in out.anatomies:
                sch_errors.append(f"{file}: scheme.label_anatomies.{label}: unknown anatomy {anat!r}")
            else:
                label_anat[str(label)] = anat
        groups: dict[str, tuple[str, ...]] = {}
        for g, members in (body.get("groups") or {}).items():
            if not isinstance(members, list):
                sch_errors.append(f"{file}: scheme.groups.{g}: expected a list of labels")
                continue
            for m in members:
                if str(m) not in labels:
                    sch_errors.append(f"{file}: scheme.groups.{g}: {m!r} is not a label of the scheme")
            groups[str(g)] = tuple(str(m) for m in members)
        # an empty mapping must be deliberate: "no finding"/"normal", or a declared non-finding tag
        declared = set(groups.get("normal", ())) | set(groups.get("ignored", ()))
        for label, ids in labels.items():
            if not ids and label not in declared:
                sch_errors.append(f"{file}: scheme.labels.{label}: maps to [] but is not in groups.normal or "
                                  f"groups.ignored")
            elif ids and label in declared:
                sch_errors.append(f"{file}: scheme.labels.{label}: listed in groups.normal/ignored but maps to {list(ids)}")
        codes = body.get("codes")
        if codes is not None and codes not in SCHEME_CODES:
            sch_errors.append(f"{file}: scheme.codes: {codes!r} must be one of {SCHEME_CODES}")
        if codes == "path":
            # "<anatomy>/<pathology>" labels: the prefix must be an anatomy; it gives label_anatomies
            for label in labels:
                anat, sep, _ = label.partition("/")
                if not sep or anat not in out.anatomies:
                    sch_errors.append(f"{file}: scheme.labels.{label}: expected '<anatomy id>/<pathology>' "
                                      f"with a known anatomy")
                else:
                    label_anat.setdefault(label, anat)
        out.schemes[name] = Scheme(name=name, title=body["title"], labels=labels, source=body.get("source"),
                                   case_sensitive=bool(body.get("case_sensitive", True)),
                                   label_anatomies=label_anat, groups=groups, codes=codes)
    out.checks.append(CheckResult(name="every scheme label maps to known findings", passed=not sch_errors,
                                  detail=f"{len(out.schemes)} schemes, {n_labels} labels", errors=sch_errors))
