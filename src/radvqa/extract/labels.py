"""Report labels from an Extraction in a dataset's label scheme (``radvqa label``).

Value per label: 1 if any observation of a finding the label covers is present, else -1 if one is
uncertain, else 0 if one is absent, else None (not mentioned). A finding counts for a label when
the label maps to it or to one of its ontology ancestors. A label that maps to no finding ("No
Finding" / "normal") is 1 when the report has no present observation of an abnormal finding
(uncertain ones, "no definite effusion", do not make a report abnormal), else 0. A past disease
marked old (context.yaml ``past_diseases``: "previous active tuberculosis pneumonia") counts for
nothing.

Scheme policy beyond the ontology (``data/labeling.yaml``): findings that do not count toward a
label although they descend from its finding (OpenI/NIH gold: granulomas are not nodules), and
findings that count toward a label although they do not descend from its finding (OpenI gold:
a pericardial effusion is an "Effusion"). Both only change report labels, never the scheme's
label -> finding map that sources use."""

from __future__ import annotations

from typing import Any, Final

from radvqa.extract._data import load_data
from radvqa.model import Extraction


_RANK: Final = {"absent": 0, "uncertain": -1, "present": 1}
_ORDER: Final = {None: 0, 0: 1, -1: 2, 1: 3}  # which value of a label wins: present > uncertain > absent > not mentioned


class Labeler:
    def __init__(self, ontology: Any, scheme: str):
        if scheme not in ontology.schemes:
            raise KeyError(f"unknown label scheme {scheme!r}; known: {sorted(ontology.schemes)}")
        self.scheme = scheme
        sch = ontology.schemes[scheme]
        # Alias labels (another spelling of a label, e.g. "Infiltrate") get no column of their own.
        groups = getattr(sch, "groups", {}) or {}
        aliases = set(groups.get("aliases", ()))
        table = {k: v for k, v in sch.labels.items() if k not in aliases}
        self.labels: list[str] = list(table)
        # every label not mentioned, copied per report (a dict copy instead of dict.fromkeys: the
        # compiled engine looked the class method up each time)
        self._blank: dict[str, int | None] = dict.fromkeys(self.labels)
        # "No Finding"-type labels: the scheme's `normal` group when it declares one (labels in
        # its `ignored` group map to nothing and stay empty), else every label mapping to [].
        if "normal" in groups:
            self.normal_labels = [lab for lab in self.labels if lab in set(groups["normal"])]
        else:
            self.normal_labels = [lab for lab, ids in table.items() if not ids]
        policy = (load_data("labeling").get("schemes") or {}).get(scheme) or {}
        not_counted = {lab: set(ids or ()) for lab, ids in (policy.get("not_counted") or {}).items()}
        also_counted = {lab: set(ids or ()) for lab, ids in (policy.get("also_counted") or {}).items()}
        for key, pol in (("not_counted", not_counted), ("also_counted", also_counted)):
            for lab, ids in pol.items():
                if lab not in table:
                    raise ValueError(f"labeling.yaml {scheme}.{key}: {lab!r} is no label of the scheme")
                if ids - set(ontology.findings):
                    raise ValueError(f"labeling.yaml {scheme}.{key}.{lab}: unknown finding id(s) {sorted(ids - set(ontology.findings))}")
        self._for_finding: dict[str, tuple[str, ...]] = {}
        for fid in ontology.findings:
            up = {fid, *ontology.ancestors(fid)}
            self._for_finding[fid] = tuple(
                lab for lab, ids in table.items()
                if (ids and up.intersection(ids) or up.intersection(also_counted.get(lab, ())))
                and not up.intersection(not_counted.get(lab, ())))
        self._abnormal = {fid for fid, f in ontology.findings.items() if getattr(f, "abnormal", True)}
        # a past disease the extractor marks old ("Findings consistent with previous active
        # pulmonary tuberculosis pneumonia", CXR1160, R2Gen train) is the history of what the film
        # shows, no finding of it: it labels nothing, as the QA generator leaves it unsaid
        # (context.yaml ``past_diseases``, generate ``unstated_when_old``)
        self._past: frozenset[str] = frozenset((load_data("context").get("past_diseases") or {}).get("findings") or ())

    def label(self, ex: Extraction) -> dict[str, int | None]:
        out = self._blank.copy()
        if ex.error is not None:
            return out
        rank = _RANK
        order = _ORDER
        abnormal = False
        for_finding = self._for_finding
        past = self._past
        for o in ex.observations:
            cert = o.certainty
            f = o.finding  # (each field read once: a generic attribute read per use when compiled)
            if f in past and o.temporal == "old":
                continue
            if cert == "present" and not abnormal and f in self._abnormal:
                abnormal = True
            labs = for_finding.get(f)
            if labs:  # most findings count for no label of the scheme
                v = rank.get(cert, 0)
                ov = order[v]
                for lab in labs:
                    if ov > order[out[lab]]:
                        out[lab] = v
        for lab in self.normal_labels:
            out[lab] = 0 if abnormal else 1
        return out
