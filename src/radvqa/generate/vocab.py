"""A flat, precomputed view of the ontology for the generators.

The generators touch finding and region attributes millions of times, so everything they need is
copied once (per ``Generator``) into plain dicts and tuples here. The view reads the ontology through
the attribute names of docs/ARCHITECTURE.md only (``findings``, ``regions``, ``anatomies``,
``schemes``, ``modifiers``, ``ancestors``, ``region_ancestors``), with ``getattr`` defaults, so a
small hand-made ontology object (tests) works as well as the packaged one.
"""

from __future__ import annotations

import re
from typing import Any

from radvqa.ontology.core import sided_parts

# certainty cues that read as affirmative in radiology reports ("opacity consistent with
# atelectasis") or that are alternatives (graded as such)
_NOT_HEDGES = frozenset({"consistent with", "compatible with", "representing", "or", "versus", "vs"})
# hedges the extractor's cue list leaves to context ("some hyperinflation appears to be present")
_EXTRA_HEDGES = ("appears", "appear", "appearing", "may", "might", "could", "suggest", "suspicious",
                 "question", "uncertain", "unclear", "not certain", "vague", "subtle", "faint")
DEFAULT_SEVERITY_ORDER = ("trace", "minimal", "small", "mild", "moderate", "large", "severe")


def _norm_cat(value: Any) -> str:
    return str(value or "").upper()


class Vocab:
    """Finding / region / anatomy look-ups used on the hot path (plain dicts, no validation)."""

    def __init__(self, onto: Any) -> None:
        self.onto = onto
        self.version = str(getattr(onto, "version", "0"))
        findings = getattr(onto, "findings", {}) or {}
        regions = getattr(onto, "regions", {}) or {}
        self.fname: dict[str, str] = {}
        self.fcat: dict[str, str] = {}
        self.fsub: dict[str, str] = {}
        self.fparents: dict[str, tuple[str, ...]] = {}
        self.fdefault_regions: dict[str, tuple[str, ...]] = {}
        self.flateral: dict[str, bool] = {}
        self.fseverities: dict[str, tuple[str, ...]] = {}
        self.fabnormal: dict[str, bool] = {}
        self.fanatomies: dict[str, tuple[str, ...]] = {}
        for fid, f in findings.items():
            self.fname[fid] = str(getattr(f, "name", fid) or fid)
            self.fcat[fid] = _norm_cat(getattr(f, "category", ""))
            self.fsub[fid] = _norm_cat(getattr(f, "subcategory", ""))
            self.fparents[fid] = tuple(getattr(f, "parents", ()) or ())
            self.fdefault_regions[fid] = tuple(getattr(f, "default_regions", ()) or ())
            self.flateral[fid] = bool(getattr(f, "lateralised", False))
            self.fseverities[fid] = tuple(getattr(f, "severities", ()) or ())
            self.fabnormal[fid] = bool(getattr(f, "abnormal", True))
            self.fanatomies[fid] = tuple(getattr(f, "anatomies", ()) or ())
        # display names of subcategories (ontology display_names.yaml): id -> (name or None, kind)
        disp = (getattr(onto, "display", None) or {}).get("subcategories", {})
        self.sub_display: dict[str, tuple[str | None, str]] = {
            str(k).upper(): (rec.get("name"), str(rec.get("kind", "group"))) for k, rec in disp.items()}
        self.vague: frozenset[str] = frozenset((getattr(onto, "display", None) or {}).get("vague_findings", {}))
        self.rname: dict[str, str] = {}
        self.rparents: dict[str, tuple[str, ...]] = {}
        self.rside: dict[str, str | None] = {}
        self.rboxable: dict[str, bool] = {}
        for rid, r in regions.items():
            self.rname[rid] = str(getattr(r, "name", rid) or rid)
            self.rparents[rid] = tuple(getattr(r, "parents", ()) or ())
            self.rside[rid] = getattr(r, "side", None)
            self.rboxable[rid] = bool(getattr(r, "boxable", True))
        # transitive ancestors, computed once (the ontology forbids cycles; guard anyway)
        self.fancestors = {fid: self._closure(fid, self.fparents) for fid in self.fname}
        self.rancestors = {rid: self._closure(rid, self.rparents) for rid in self.rname}
        # (region, side) -> its one direct part of that side ("axillae", "left" -> "left_axilla")
        self.rsided_part = sided_parts(regions)
        fdesc: dict[str, list[str]] = {}
        for fid in sorted(self.fancestors):
            for a in self.fancestors[fid]:
                fdesc.setdefault(a, []).append(fid)
        self.fdescendants = {k: tuple(v) for k, v in fdesc.items()}
        mods = getattr(onto, "modifiers", None)
        # hedging cues of the ontology's certainty vocabulary (grading: a stated finding whose
        # sentence hedges something); alternatives and "consistent with"-style readings are judged
        # apart (quality.criteria)
        cues = (getattr(mods, "certainty", None) or {})
        words = sorted({c.lower() for k in ("uncertainty_pre", "uncertainty_post") for c in cues.get(k, ())
                        if c.lower() not in _NOT_HEDGES} | set(_EXTRA_HEDGES), key=len, reverse=True)
        self.hedge_re = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in words) + r")\b") if words else None
        order = tuple(getattr(mods, "severity_order", ()) or ()) or DEFAULT_SEVERITY_ORDER
        self.severity_rank = {s: i for i, s in enumerate(order)}
        # anatomies (CT / MR body regions) and their pathologies, for rin distractors
        self.aname: dict[str, str] = {}
        self.amodalities: dict[str, tuple[str, ...]] = {}
        anatomies = getattr(onto, "anatomies", {}) or {}
        items = anatomies.items() if isinstance(anatomies, dict) else ((a.id, a) for a in anatomies)
        for aid, a in items:
            self.aname[aid] = str(getattr(a, "name", aid) or aid)
            self.amodalities[aid] = tuple(m.upper() for m in (getattr(a, "modalities", ()) or ()))
        self.anatomy_pathologies: dict[str, tuple[str, ...]] = {}
        by_anat: dict[str, list[str]] = {}
        for fid, anats in self.fanatomies.items():
            if not self.fabnormal[fid]:
                continue
            for a in anats:
                by_anat.setdefault(a, []).append(fid)
        # also take the anatomy of every RadImageNet scheme label (label_anatomies), when present
        schemes = getattr(onto, "schemes", {}) or {}
        rin = schemes.get("radimagenet") if isinstance(schemes, dict) else None
        if rin is not None:
            labels = getattr(rin, "labels", {}) or {}
            for label, anat in (getattr(rin, "label_anatomies", {}) or {}).items():
                for fid in labels.get(label, ()):
                    if fid in self.fname and self.fabnormal.get(fid, True):
                        lst = by_anat.setdefault(anat, [])
                        if fid not in lst:
                            lst.append(fid)
        self.anatomy_pathologies = {a: tuple(sorted(v)) for a, v in sorted(by_anat.items())}
        for a in self.anatomy_pathologies:
            self.aname.setdefault(a, a.replace("_", " "))

    @staticmethod
    def _closure(start: str, parents: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
        out: list[str] = []
        seen = {start}
        stack = list(parents.get(start, ()))
        while stack:
            p = stack.pop(0)
            if p in seen:
                continue
            seen.add(p)
            out.append(p)
            stack.extend(parents.get(p, ()))
        return tuple(out)

    def finding_name(self, fid: str) -> str:
        return self.fname.get(fid) or fid.replace("_", " ")

    def region_name(self, rid: str) -> str:
        return self.rname.get(rid) or rid.replace("_", " ")

    def anatomy_name(self, aid: str) -> str:
        return self.aname.get(aid) or aid.replace("_", " ")
