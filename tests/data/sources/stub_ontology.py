"""A minimal stand-in with the ontology interface (schemes + map_label + region_ancestors), used by
the source/localize tests only while the package ontology cannot be loaded. Names follow the
datasets' own label spellings; the ids are illustrative."""

from __future__ import annotations

from typing import Any

_NIH = {
    "Atelectasis": ["atelectasis"], "Cardiomegaly": ["cardiomegaly"], "Effusion": ["pleural_effusion"],
    "Infiltration": ["infiltration"], "Mass": ["mass"], "Nodule": ["nodule"], "Pneumonia": ["pneumonia"],
    "Pneumothorax": ["pneumothorax"], "Consolidation": ["consolidation"], "Edema": ["pulmonary_edema"],
    "Emphysema": ["emphysema"], "Fibrosis": ["fibrosis"], "Pleural_Thickening": ["pleural_thickening"],
    "Hernia": ["hiatal_hernia"], "No Finding": [],
}


class _Scheme:
    def __init__(self, labels: dict[str, list[str]]) -> None:
        self.labels = labels


class StubOntology:
    version = "stub"

    def __init__(self, extra: dict[str, dict[str, list[str]]] | None = None) -> None:
        self.schemes: dict[str, Any] = {"nih14": _Scheme(dict(_NIH))}
        for k, v in (extra or {}).items():
            self.schemes[k] = _Scheme(v)
        self._region_parents = {"left_lower_lung_zone": ["left_lung"], "left_lung": ["lungs"]}

    def map_label(self, scheme: str, label: str) -> list[str]:
        try:
            return list(self.schemes[scheme].labels[label])
        except KeyError:
            raise KeyError(f"unknown label {label!r} in scheme {scheme!r}") from None

    def region_ancestors(self, rid: str) -> list[str]:
        out: list[str] = []
        todo = list(self._region_parents.get(rid, []))
        while todo:
            r = todo.pop(0)
            if r not in out:
                out.append(r)
                todo += self._region_parents.get(r, [])
        return out
