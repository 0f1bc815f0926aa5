"""Which regions a finding can be located in (``data/finding_places.yaml``).

The attribute binder gives a place word to the nearest finding of its sentence; when that
finding cannot lie there ("cardiomegaly ... in the pulmonary vasculature", "pneumothorax ... in
the right lower lobe"), the word described another finding of the sentence and is dropped for
this one. The table is data; this module checks it against the ontology and answers
``allowed(finding, region)`` from a precomputed set per finding (no work per mention beyond a set
lookup)."""

from __future__ import annotations

from typing import Any

from radvqa.extract._data import load_data


class FindingPlaces:
    def __init__(self, ontology: Any, data: dict[str, Any] | None = None):
        data = load_data("finding_places") if data is None else data
        regions = ontology.regions
        errors: list[str] = []

        def expand(where: str, ids: Any) -> set[str]:
            """Region ids with their descendants ("=id": that region alone); unknown ids are errors."""
            members: set[str] = set()
            for rid in ids or []:
                exact = rid.startswith("=")
                rid = rid.lstrip("=")
                if rid not in regions:
                    errors.append(f"{where}: unknown region {rid!r}")
                    continue
                members.add(rid)
                if not exact:
                    members.update(ontology.region_descendants(rid))
            return members

        families = {fam: frozenset(expand(f"places.{fam}", ids)) for fam, ids in (data.get("places") or {}).items()}

        def union(where: str, fams: Any) -> frozenset[str]:
            out: set[str] = set()
            for fam in fams or []:
                if fam not in families:
                    errors.append(f"{where}: unknown place family {fam!r}")
                else:
                    out |= families[fam]
            return frozenset(out)

        by_sub = {sub: union(f"subcategories.{sub}", fams) for sub, fams in (data.get("subcategories") or {}).items()}
        subs = {f.subcategory for f in ontology.findings.values()}
        errors += [f"subcategories: unknown subcategory {s!r}" for s in by_sub if s not in subs]
        allowed: dict[str, frozenset[str]] = {}
        for fid, f in ontology.findings.items():
            if f.subcategory in by_sub:
                allowed[fid] = by_sub[f.subcategory]
        for fid, fams in (data.get("findings") or {}).items():
            if fid not in ontology.findings:
                errors.append(f"findings: unknown finding {fid!r}")
                continue
            allowed[fid] = union(f"findings.{fid}", fams)
        # a category whose findings lie anywhere but a few places ("shunt tubing courses along the
        # anterior left hemithorax" is no device in the lung): every region but those
        for cat, ids in (data.get("categories_except") or {}).items():
            if cat not in {f.category for f in ontology.findings.values()}:
                errors.append(f"categories_except: unknown category {cat!r}")
                continue
            out_ids = expand(f"categories_except.{cat}", ids)
            rest = frozenset(r for r in regions if r not in out_ids)
            for fid, f in ontology.findings.items():
                if f.category == cat and fid not in allowed:
                    allowed[fid] = rest
        # session 15: a finding that names another one when every place of it lies in a family
        # ("metastatic disease" placed in a rib is a bone lesion, not a lung tumour)
        becomes: dict[str, tuple[frozenset[str], str]] = {}
        for fid, spec in (data.get("placed_becomes") or {}).items():
            to, fam = (spec or {}).get("finding"), (spec or {}).get("in")
            bad = [x for x in (fid, to) if x not in ontology.findings]
            if bad or fam not in families:
                errors.append(f"placed_becomes.{fid}: unknown finding {bad} or place family {fam!r}")
                continue
            becomes[fid] = (families[fam], to)
        if errors:
            raise ValueError("finding_places.yaml: " + "; ".join(errors))
        # finding -> the regions it can lie in; a finding not in the table may lie anywhere
        self.allowed_regions = allowed
        # finding -> (places, the finding it is when every place of it lies there)
        self.placed_becomes = becomes

    def allowed(self, finding: str, region: str) -> bool:
        ok = self.allowed_regions.get(finding)
        return ok is None or region in ok
