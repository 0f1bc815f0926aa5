"""Chest ImaGenome (Wu et al., 2021): per-image scene graphs joined to MIMIC-CXR studies.

Input: scene-graph files ``<dicom_id>_SceneGraph.json`` (a folder such as
``silver_dataset/scene_graph/``, or single files), plus, optionally, the MIMIC-CXR inputs (see
``radvqa.sources.mimic``). With MIMIC inputs every MIMIC study gets the scene graphs of its images
(a scene graph whose dicom_id matches no MIMIC image is a Reject); without them the studies are
built from the scene graphs alone (study_id / patient_id / viewpoint / StudyDateTime inside them).

Fields read (tolerant: a missing key is counted in ``meta["imagenome_ignored"]``, never fatal):
- ``objects[]``: ``bbox_name`` and ``original_x1..original_y2`` (pixels of the original DICOM/JPG,
  the stored MIMIC-CXR-JPG size) -> ``Study.region_boxes`` (``source="region"``, ``label`` = the
  ontology region whose ``imagenome_name`` is the bbox_name). The 224-scaled ``x1..y2`` are not
  used (they refer to a padded thumbnail).
- ``attributes[]``: per bbox_name, ``attributes`` = lists (one per phrase) of
  ``"category|yes/no|name"`` strings -> ``Label(scheme="imagenome", name, value 1/0, findings,
  regions=[region], image_id, reader="imagenome")``; an entry not bound to a known region
  (``<bbox_name>: false`` or an unknown name) gives study-level labels (``regions=[]``), counted. Category ``nlp`` (normal/abnormal) is a
  summary, not a finding: skipped and counted. Names map through the ontology's ``imagenome``
  scheme (``map_label("imagenome", name)``); a name it lacks is tried as a finding's
  ``imagenome_name``, then as a finding name/synonym; unknown names are counted, not rejected (an
  open, NLP-made vocabulary).
- ``relationships[]`` (comparisons across studies) are not used yet: counted.
A file that is not JSON, or not an object, is a Reject naming the file.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from radvqa.model import Box, Image, Label, Reject, Study
from radvqa.sources.base import (
    LabelMapper,
    Record,
    Source,
    SourceError,
    UnknownLabel,
    finding_for_term,
    region_for_term,
    walk_files,
)
from radvqa.sources.mimic import MimicSource
from radvqa.sources import SOURCES

SUFFIX = "_SceneGraph.json"
_XY = ("original_x1", "original_y1", "original_x2", "original_y2")


@SOURCES.register("chest-imagenome")
class ImaGenomeSource(Source):
    name = "chest-imagenome"
    counts_reads = True
    description = "Chest ImaGenome *_SceneGraph.json (+ MIMIC-CXR inputs to join with)"

    def _records(self, inputs: list[Path], onto: Any, limit: int | None) -> Iterator[Record]:
        graphs: dict[str, Path] = {}
        mimic_inputs: list[Path] = []
        for p in inputs:
            if p.is_file() and p.name.endswith(".json"):
                graphs[p.name[: -len(SUFFIX)] if p.name.endswith(SUFFIX) else p.stem] = p
            elif p.is_dir() and _holds_graphs(p):
                for f in walk_files([p]):
                    if f.name.endswith(SUFFIX):
                        graphs.setdefault(f.name[: -len(SUFFIX)], f)
            else:
                mimic_inputs.append(p)
        if not graphs:
            raise SourceError("chest-imagenome: no *_SceneGraph.json files among the inputs")
        self._name_index: dict[str, list[str]] | None = None
        self._mapper = LabelMapper(onto, "imagenome") if "imagenome" in (getattr(onto, "schemes", None) or {}) else None
        if mimic_inputs:
            used: set[str] = set()

            def extra(study: Study) -> Record:
                return self._augment(study, graphs, used, onto)

            mimic = MimicSource()
            mimic.counts = self.counts  # MIMIC's records read are this pass's
            for rec in mimic.iter_joined(mimic_inputs, onto, extra):
                if isinstance(rec, Reject):
                    rec.source = self.name
                else:
                    rec.source = self.name
                    rec.id = rec.id.replace("mimic-cxr:", f"{self.name}:", 1)
                    rec.patient_id = rec.patient_id.replace("mimic-cxr:", f"{self.name}:", 1)
                yield rec
            unmatched = sorted(set(graphs) - used)
            self.count_read(len(unmatched))  # a scene graph no study took is a record of its own
            for did in unmatched:
                yield self.reject(graphs[did], f"scene graph for dicom_id {did} matches no MIMIC-CXR image")
            return
        yield from self._standalone(graphs, onto)

    # ------------------------------------------------------------------------------------------
    def _augment(self, study: Study, graphs: dict[str, Path], used: set[str], onto: Any) -> Record:
        ignored: Counter[str] = Counter()
        for im in study.images:
            f = graphs.get(im.id)
            if f is None:
                continue
            used.add(im.id)
            g = _load(f)
            if isinstance(g, str):
                return self.reject(f, g)
            rb, labels = self._parse(g, im.id, onto, ignored)
            study.region_boxes = list(study.region_boxes) + rb
            study.labels = list(study.labels) + labels
        if ignored:
            study.meta = dict(study.meta) | {"imagenome_ignored": _fmt(ignored)}
        return study

    def _standalone(self, graphs: dict[str, Path], onto: Any) -> Iterator[Record]:
        studies: dict[str, dict[str, Any]] = {}
        for did in sorted(graphs):
            f = graphs[did]
            g = _load(f)
            if isinstance(g, str):
                self.count_read()
                yield self.reject(f, g)
                continue
            sid = str(g.get("study_id", "") or "")
            pid = str(g.get("patient_id", "") or "")
            if not sid or not pid:
                self.count_read()
                yield self.reject(f, "scene graph lacks study_id or patient_id (give the MIMIC-CXR tables to join)")
                continue
            if sid not in studies:
                self.count_read()  # a study = a study_id, counted at its first scene graph
            ignored: Counter[str] = Counter()
            rb, labels = self._parse(g, did, onto, ignored)
            st = studies.setdefault(sid, {"pid": pid, "images": [], "rb": [], "labels": [], "ignored": Counter(), "time": None})
            view = str(g.get("viewpoint", "") or "").upper() or None
            st["images"].append(Image(id=did, view=view, modality="DX"))
            st["rb"] += rb
            st["labels"] += labels
            st["ignored"] += ignored
            dt = str(g.get("StudyDateTime", "") or "")
            if dt:
                st["time"] = dt.replace(" ", "T")
        for sid in sorted(studies, key=lambda s: (studies[s]["pid"], studies[s]["time"] or "~", s)):
            st = studies.pop(sid)
            yield Study(
                id=f"{self.name}:{sid}",
                patient_id=f"{self.name}:{st['pid']}",
                source=self.name,
                images=st["images"],
                labels=st["labels"],
                region_boxes=st["rb"],
                study_time=st["time"],
                meta={"imagenome_ignored": _fmt(st["ignored"])} if st["ignored"] else {},
            )

    def _parse(self, g: dict[str, Any], did: str, onto: Any, ignored: Counter[str]) -> tuple[list[Box], list[Label]]:
        boxes: list[Box] = []
        objs = g.get("objects")
        if not isinstance(objs, list):
            ignored["no objects list"] += 1
            objs = []
        for o in objs:
            if not isinstance(o, dict):
                ignored["object not a dict"] += 1
                continue
            name = str(o.get("bbox_name", "") or "")
            rid = region_for_term(onto, name) if name else None
            if rid is None:
                ignored[f"unknown region {name!r}" if name else "object without bbox_name"] += 1
                continue
            try:
                x1, y1, x2, y2 = (float(o[k]) for k in _XY)
            except (KeyError, TypeError, ValueError):
                ignored["object without original_x1..y2"] += 1
                continue
            boxes.append(Box(image_id=did, x1=x1, y1=y1, x2=x2, y2=y2, source="region", reader="imagenome", label=rid))
        labels: list[Label] = []
        attrs = g.get("attributes")
        if not isinstance(attrs, list):
            ignored["no attributes list"] += 1
            attrs = []
        for a in attrs:
            if not isinstance(a, dict):
                ignored["attribute entry not a dict"] += 1
                continue
            name = str(a.get("bbox_name", "") or "")
            # an entry is bound to its anatomy when it carries ``<bbox_name>: true``; when that key
            # is absent we still trust bbox_name if the ontology knows it
            bound = a.get(name, True) is True if name else False
            rid = region_for_term(onto, name) if bound else None
            if rid is None:
                # still used, as study-level labels (no region): counted so the loss of place shows
                ignored[f"attributes not bound to a known region ({name or 'no bbox_name'!r})"] += 1
            seen: set[tuple[str, int]] = set()
            for phrase_attrs in a.get("attributes") or []:
                for s in phrase_attrs if isinstance(phrase_attrs, list) else [phrase_attrs]:
                    parts = str(s).split("|")
                    if len(parts) != 3 or parts[1] not in ("yes", "no"):
                        ignored["malformed attribute string"] += 1
                        continue
                    cat, yn, fname = parts
                    if cat == "nlp":
                        ignored["nlp normal/abnormal summary"] += 1
                        continue
                    fids = self._finding(onto, fname)
                    if not fids:
                        # "normal"/"abnormal" under another category map to no finding by design
                        known = self._mapper is not None and fname in self._mapper.labels()
                        ignored[f"attribute {fname!r} names no finding" if known else f"unknown finding {fname!r}"] += 1
                        continue
                    key = (fname, 1 if yn == "yes" else 0)
                    if key in seen:
                        continue  # the same statement in several phrases of one region
                    seen.add(key)
                    labels.append(
                        Label(scheme="imagenome", name=fname, value=key[1], findings=fids, reader="imagenome",
                              image_id=did, regions=[rid] if rid else [])
                    )
        rels = g.get("relationships")
        if rels:
            ignored["relationships (not used)"] += len(rels) if isinstance(rels, list) else 1
        return boxes, labels

    def _finding(self, onto: Any, name: str) -> list[str]:
        # the ontology's imagenome scheme first (the attribute names as the scene graphs write
        # them); an ontology copy without it falls back to findings' imagenome_name, then synonyms
        if self._mapper is not None:
            try:
                return self._mapper(name)
            except UnknownLabel:
                pass
        if self._name_index is None:
            self._name_index = {}
            for f in getattr(onto, "findings", {}).values():
                n = getattr(f, "imagenome_name", None)
                if n:
                    self._name_index.setdefault(n, []).append(f.id)
        return self._name_index.get(name) or finding_for_term(onto, name)


def _holds_graphs(d: Path) -> bool:
    for sub in (d, d / "scene_graph", d / "silver_dataset" / "scene_graph", d / "gold_dataset"):
        if sub.is_dir():
            for e in sub.iterdir():
                if e.name.endswith(SUFFIX):
                    return True
    return False


def _load(f: Path) -> dict[str, Any] | str:
    try:
        g = json.loads(f.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        return "scene graph is not UTF-8"
    except json.JSONDecodeError as e:
        return f"malformed JSON: {e.msg} (line {e.lineno})"
    if not isinstance(g, dict):
        return "scene graph is not a JSON object"
    return g


def _fmt(c: Counter[str]) -> str:
    return "; ".join(f"{k} x{v}" for k, v in sorted(c.items()))


__all__ = ["ImaGenomeSource"]
