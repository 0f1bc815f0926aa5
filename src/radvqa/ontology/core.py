"""The ``Ontology`` object: typed records plus the queries other stages need (hierarchy, lookup by
synonym, label-scheme mapping). Built by ``load_ontology``; read-only after that."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

from radvqa.ontology.loader import OntologyError, build, normalize_term
from radvqa.ontology.types import Anatomy, CheckResult, Finding, Modifiers, Region, Scheme

DATA_DIR = Path(__file__).with_name("data")

_VOWEL = set("aeiou")
_MODALITIES = {"ct", "mr", "mri", "us", "cr", "dx", "xr"}


def sided_parts(regions: Any) -> dict[tuple[str, str], str]:
    """(region, side) -> its one direct part of that side ("pleura", "right" -> "right_pleura";
    "axillae", "left" -> "left_axilla"). Only unsided regions: a sided region's own parts are
    narrower places, not its side. ``regions``: id -> record with ``side`` and ``parents`` (an
    ``Ontology``'s, or a small test ontology's)."""
    side = {rid: getattr(r, "side", None) for rid, r in regions.items()}
    found: dict[tuple[str, str], list[str]] = {}
    for rid, r in regions.items():
        s = side[rid]
        if s in ("left", "right"):
            for p in getattr(r, "parents", ()) or ():
                if side.get(p) is None:
                    found.setdefault((p, s), []).append(rid)
    return {k: rs[0] for k, rs in found.items() if len(rs) == 1}


def _fold(label: str) -> str:
    return " ".join(label.lower().split())


def _plural(term: str) -> str | None:
    """English plural of the last word ("pleural effusion" -> "pleural effusions"), or None when a
    rule would be a guess (already plural-looking, Latin/Greek endings)."""
    head, _, last = term.rpartition(" ")
    if len(last) < 3 or not last.isalpha():
        return None
    if last.endswith("sis"):  # stenosis -> stenoses, metastasis -> metastases
        new = last[:-2] + "es"
    elif last.endswith(("s", "x", "z", "ch", "sh", "um", "us", "ae", "ia")):
        return None
    elif last.endswith("y") and last[-2] not in _VOWEL:
        new = last[:-1] + "ies"
    else:
        new = last + "s"
    return f"{head} {new}" if head else new


class Ontology:
    """Findings, regions, anatomies, modifiers and label schemes of one ontology copy."""

    def __init__(self, findings: dict[str, Finding], regions: dict[str, Region], anatomies: dict[str, Anatomy],
                 schemes: dict[str, Scheme], modifiers: Modifiers, categories: dict[str, tuple[str, ...]],
                 spelling: Iterable[tuple[str, str]] = (), version: str = "", path: Path | None = None,
                 checks: list[CheckResult] | None = None):
        self.findings = findings
        self.regions = regions
        self.anatomies = anatomies
        self.schemes = schemes
        self.modifiers = modifiers
        self.categories = categories
        # display_names.yaml: {"categories"|"subcategories": {ID: {"name": str | None, "kind": ...}}}
        self.display: dict[str, dict[str, dict[str, Any]]] = {}
        self.spelling = tuple(spelling)
        # compiled once: (plain substring for a cheap pre-check, word-start pattern, replacement)
        self._spelling_rules = [(a, re.compile(rf"\b{re.escape(a)}"), b)
                                for us, uk in self.spelling for a, b in ((us, uk), (uk, us))]
        self.version = version
        self.path = path
        self.checks = checks or []
        self._children: dict[str, list[str]] = defaultdict(list)
        for f in findings.values():
            for p in f.parents:
                self._children[p].append(f.id)
        self._region_children: dict[str, list[str]] = defaultdict(list)
        for r in regions.values():
            for p in r.parents:
                self._region_children[p].append(r.id)
        self._finding_terms = self._term_index(findings.values(), with_ambiguous=True)
        self._region_terms = self._term_index(regions.values(), with_ambiguous=False)
        self._anatomy_terms = self._term_index(anatomies.values(), with_ambiguous=False)
        self._imagenome_regions = {r.imagenome_name: r for r in regions.values() if r.imagenome_name}
        # case-insensitive label views of schemes that allow it (spaces collapsed too: real files
        # carry "Subcutaneous  Emphysema" and trailing blanks)
        self._scheme_ci = {name: {_fold(k): k for k in s.labels} for name, s in schemes.items()}

    # ---- term indices ----------------------------------------------------------------------
    def _variants(self, term: str) -> set[str]:
        """Spelling variants (US <-> UK) and the plural of a term."""
        out = {term}
        for plain, pattern, repl in self._spelling_rules:
            if plain in term and pattern.search(term):
                out.add(pattern.sub(repl, term))
        for t in list(out):
            p = _plural(t)
            if p:
                out.add(p)
        return out

    def _term_index(self, items: Iterable[Finding | Region | Anatomy], with_ambiguous: bool) -> dict[str, tuple[str, ...]]:
        explicit: dict[str, list[str]] = defaultdict(list)
        generated: dict[str, list[str]] = defaultdict(list)
        for item in items:
            terms = [item.name, *item.synonyms]
            if with_ambiguous:
                terms += list(getattr(item, "ambiguous_synonyms", ()))
            for t in dict.fromkeys(normalize_term(x) for x in terms):
                if item.id not in explicit[t]:
                    explicit[t].append(item.id)
                for v in sorted(self._variants(t) - {t}):
                    if item.id not in generated[v]:
                        generated[v].append(item.id)
        index = {t: tuple(ids) for t, ids in explicit.items()}
        # a generated variant never overrides a term someone wrote down, and one that two items
        # generate is left out: a guess must not make a lookup ambiguous
        for v, ids in generated.items():
            if v not in index and len(ids) == 1:
                index[v] = tuple(ids)
        return index

    def finding_terms(self) -> dict[str, tuple[str, ...]]:
        """Every normalised finding term (names, synonyms, spelling variants, plurals) -> finding
        ids. More than one id means the term is declared ambiguous. For building matchers."""
        return dict(self._finding_terms)

    def region_terms(self) -> dict[str, tuple[str, ...]]:
        return dict(self._region_terms)

    def anatomy_terms(self) -> dict[str, tuple[str, ...]]:
        return dict(self._anatomy_terms)

    def findings_for_term(self, text: str) -> list[Finding]:
        """All findings a term names (several when it is declared ambiguous); [] if none."""
        return [self.findings[i] for i in self._finding_terms.get(normalize_term(text), ())]

    def finding_by_synonym(self, text: str) -> Finding | None:
        """The finding a term names, or None when unknown or ambiguous."""
        ids = self._finding_terms.get(normalize_term(text), ())
        return self.findings[ids[0]] if len(ids) == 1 else None

    def region_by_synonym(self, text: str) -> Region | None:
        ids = self._region_terms.get(normalize_term(text), ())
        return self.regions[ids[0]] if len(ids) == 1 else None

    def region_by_imagenome_name(self, bbox_name: str) -> Region | None:
        """The region of a Chest ImaGenome ``bbox_name`` ("right costophrenic angle", "svc")."""
        return self._imagenome_regions.get(" ".join(bbox_name.lower().split()))

    def anatomy_by_synonym(self, text: str) -> Anatomy | None:
        ids = self._anatomy_terms.get(normalize_term(text), ())
        return self.anatomies[ids[0]] if len(ids) == 1 else None

    # ---- hierarchy -------------------------------------------------------------------------
    @staticmethod
    def _walk(start: str, nxt) -> list[str]:  # type: ignore[no-untyped-def]
        # breadth first: nearest first, each id once, in data order (deterministic)
        out: list[str] = []
        seen = {start}
        frontier = [start]
        while frontier:
            new: list[str] = []
            for node in frontier:
                for n in nxt(node):
                    if n not in seen:
                        seen.add(n)
                        out.append(n)
                        new.append(n)
            frontier = new
        return out

    def _need(self, table: dict, key: str, what: str) -> None:  # type: ignore[type-arg]
        if key not in table:
            raise KeyError(f"unknown {what} id {key!r}")

    def ancestors(self, fid: str) -> list[str]:
        """Parent finding ids, transitively, nearest first."""
        self._need(self.findings, fid, "finding")
        return self._walk(fid, lambda x: self.findings[x].parents)

    def descendants(self, fid: str) -> list[str]:
        """Child finding ids, transitively, nearest first."""
        self._need(self.findings, fid, "finding")
        return self._walk(fid, lambda x: self._children.get(x, ()))

    def children(self, fid: str) -> list[str]:
        self._need(self.findings, fid, "finding")
        return list(self._children.get(fid, ()))

    def is_a(self, fid: str, ancestor: str) -> bool:
        """True when ``fid`` is ``ancestor`` or one of its descendants."""
        return fid == ancestor or ancestor in self.ancestors(fid)

    def region_ancestors(self, rid: str) -> list[str]:
        """Parent region ids (the regions containing this one), transitively, nearest first."""
        self._need(self.regions, rid, "region")
        return self._walk(rid, lambda x: self.regions[x].parents)

    def region_descendants(self, rid: str) -> list[str]:
        """Sub-region ids, transitively, nearest first."""
        self._need(self.regions, rid, "region")
        return self._walk(rid, lambda x: self._region_children.get(x, ()))

    def sub_regions(self, rid: str) -> list[str]:
        self._need(self.regions, rid, "region")
        return list(self._region_children.get(rid, ()))

    def counterpart(self, rid: str) -> str | None:
        self._need(self.regions, rid, "region")
        return self.regions[rid].counterpart

    def lateral_region(self, rid: str, side: str) -> str | None:
        """The ``side`` (left/right) version of a region: itself if it has that side, its counterpart
        if that has it, else the unique sided sub-region (``lungs`` + left -> ``left_lung``)."""
        self._need(self.regions, rid, "region")
        r = self.regions[rid]
        if r.side == side:
            return rid
        if r.counterpart and self.regions[r.counterpart].side == side:
            return r.counterpart
        if r.side is None:
            subs = [s for s in self._region_children.get(rid, ()) if self.regions[s].side == side]
            if len(subs) == 1:
                return subs[0]
        return None

    # ---- label schemes ---------------------------------------------------------------------
    def map_label(self, scheme: str, label: str) -> list[str]:
        """Finding ids a dataset label maps to ([] for "no finding"/"normal", or a label of the
        scheme's ``ignored`` group). Schemes with composite codes (openi_mesh, radimagenet) also
        accept a full code here (see ``map_code``). KeyError naming the scheme and the label when
        either is unknown."""
        s = self.schemes.get(scheme)
        if s is None:
            raise KeyError(f"unknown label scheme {scheme!r} (known: {', '.join(sorted(self.schemes))})")
        key = self._label_key(scheme, label)
        if key is None:
            if s.codes is not None:
                # composite-code schemes: a full code is also a valid label spelling
                # ("MR/af/achilles_pathology_", "Lung/hypoinflation/mild")
                try:
                    return self.map_code(scheme, label)
                except KeyError:
                    pass
            raise KeyError(f"label {label!r} is not in scheme {scheme!r}")
        return list(s.labels[key])

    def _label_key(self, scheme: str, label: str) -> str | None:
        s = self.schemes[scheme]
        if label in s.labels:
            return label
        if not s.case_sensitive:
            return self._scheme_ci[scheme].get(_fold(label))
        return None

    def map_code(self, scheme: str, code: str | tuple[str, ...] | list[str]) -> list[str]:
        """Finding ids of a composite dataset code; KeyError naming scheme and code if it maps to
        nothing known.

        - ``mesh`` schemes (OpenI): "Heading/qual/qual..." -> the last "Heading/qual" that is a
          label, else "Heading" ("Opacity/lung/base/left" -> lung_opacity; "Lung/hypoinflation/mild"
          -> low_lung_volumes).
        - ``path`` schemes (RadImageNet): "[MODALITY/]anatomy/pathology" or (anatomy, pathology);
          anatomy spellings resolve through the anatomies ("af", "ankle foot", "abd"); folder-name
          quirks (case, trailing "_", spaces) are normalised.
        Other schemes: same as ``map_label``.
        """
        s = self.schemes.get(scheme)
        if s is None:
            raise KeyError(f"unknown label scheme {scheme!r} (known: {', '.join(sorted(self.schemes))})")
        parts = [p.strip() for p in (code.split("/") if isinstance(code, str) else code)]
        parts = [p for p in parts if p]
        if s.codes == "mesh" and parts:
            head = parts[0]
            # the last matching qualifier is the most specific one:
            # "Calcinosis/lung/hilum/lymph nodes" -> calcified lymph nodes, not a calcified nodule
            for q in reversed(parts[1:]):
                key = self._label_key(scheme, f"{head}/{q}")
                if key is not None:
                    return list(s.labels[key])
            key = self._label_key(scheme, head)
            if key is not None:
                return list(s.labels[key])
        elif s.codes == "path" and len(parts) >= 2:
            if len(parts) >= 3 and parts[0].lower() in _MODALITIES:
                parts = parts[1:]
            # the pathology is the last part; the anatomy is what comes before it (it may contain
            # a "/" itself: "abd/pelvis")
            anatomy = self.anatomy_by_synonym("/".join(parts[:-1])) or self.anatomy_by_synonym(parts[-2])
            path = "_".join(parts[-1].lower().replace("-", " ").split()).strip("_")
            if anatomy is not None:
                key = self._label_key(scheme, f"{anatomy.id}/{path}")
                if key is not None:
                    return list(s.labels[key])
        else:
            key = self._label_key(scheme, code if isinstance(code, str) else "/".join(parts))
            if key is not None:
                return list(s.labels[key])
        raise KeyError(f"code {code!r} does not map in scheme {scheme!r}")

    def is_normal_label(self, scheme: str, label: str) -> bool:
        """True for labels meaning "no finding"/"normal" (not for ignored tags such as "unchanged")."""
        s = self.schemes.get(scheme)
        if s is None:
            raise KeyError(f"unknown label scheme {scheme!r}")
        key = self._label_key(scheme, label)
        return key is not None and key in s.normal_labels

    # ---- categories ------------------------------------------------------------------------
    def by_category(self, category: str, subcategory: str | None = None) -> list[Finding]:
        return [f for f in self.findings.values()
                if f.category == category and (subcategory is None or f.subcategory == subcategory)]

    def pathologies_of_anatomy(self, anatomy: str) -> list[Finding]:
        """Findings that belong to a CT/MR anatomy (for same-anatomy distractors)."""
        self._need(self.anatomies, anatomy, "anatomy")
        return [f for f in self.findings.values() if anatomy in f.anatomies]

    def __repr__(self) -> str:
        return (f"Ontology(version={self.version!r}, findings={len(self.findings)}, regions={len(self.regions)}, "
                f"anatomies={len(self.anatomies)}, schemes={sorted(self.schemes)})")


def check_ontology(path: str | Path | None = None) -> tuple[Ontology | None, list[CheckResult]]:
    """Validate an ontology directory (package data by default): (ontology or None, checks)."""
    p = Path(path) if path is not None else DATA_DIR
    built = build(p)
    if not built.ok or built.modifiers is None:
        return None, built.checks
    onto = Ontology(built.findings, built.regions, built.anatomies, built.schemes, built.modifiers,
                    built.categories, built.spelling, built.version, p, built.checks)
    onto.display = built.display
    return onto, built.checks


@lru_cache(maxsize=8)
def _load_cached(path: str) -> Ontology:
    onto, checks = check_ontology(path)
    if onto is None:
        raise OntologyError([e for c in checks for e in c.errors])
    return onto


def load_ontology(path: str | Path | None = None) -> Ontology:
    """Load and validate an ontology directory (the package's data by default). Cached per path.
    Raises ``OntologyError`` listing every problem, each naming its file and key."""
    p = Path(path) if path is not None else DATA_DIR
    return _load_cached(str(p.resolve()))
