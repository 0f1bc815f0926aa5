"""Build one SceneGraph per study: report observations + label observations + boxes.

Rules (contract for the generators):

1. **Report observations** come from the extraction unchanged (``source="report"``).
2. **Label observations** (``source="label"``, ``from_report=False``), one per ontology finding the
   study's labels map to (per finding and region set for region-level labels, ``Label.regions``),
   sorted by finding id; their laterality is the regions' common side, when they have one. Label values: 1 present, 0 absent, -1 uncertain.
   - Readers: per image, the majority over readers decides (more than half present -> present, more
     than half absent -> absent, otherwise uncertain: a tie or an uncertain majority stays uncertain;
     VinDr's 3 readers give the 2-of-3 rule). Labels without reader count as one reader.
   - Images: present if present on any image, else uncertain if uncertain on any, else absent.
   - Several labels mapping to the same finding (a scheme's label and its alias) merge with the same
     precedence present > uncertain > absent.
   - A "no finding" label (maps to no finding id) makes no observation; it is recorded as
     ``meta["no_finding_label"] = scheme`` when positive.
   - **Merge with the report.** A label observation that matches a report observation (same finding,
     or an ancestor or descendant of it, on an overlapping side) makes no observation of its own:
     the report's wording is the one statement. When some matching report observation has the
     label's certainty, the label supports it: ``meta["label_support"]`` lists
     ``<observation id>=<label finding>`` (the generator adds ``label:<finding>`` to its
     provenance). When none does (the report negates or hedges what the label asserts, or states
     what the label denies), the report wins and the conflict is kept:
     ``meta["label_conflicts"]`` lists ``<observation id>=<label finding>:<label certainty>``
     (provenance ``label_conflict:...``; grade C). A label never asserts what the report negates
     or hedges. ``meta["labels_agreeing_with_report"]`` keeps the supporting label findings.
   - **Several readers, one reader's dictation** (``meta["report_reader"]`` names the reader whose
     words are the report, as REFLACX's fused readings do). When two or more readers labelled the
     finding and their vote disagrees with the report (a finding the other readers mark that the
     dictation negates, or the reverse), neither side wins: one radiologist's words do not
     overrule the others' marks, nor the reverse. The report observation becomes ``uncertain``,
     the conflict is kept in ``meta["label_conflicts"]`` as ``<id>=<finding>:<label certainty>
     :readers=<readers whose label disagrees with the dictation>:dictation=<report reader>``
     (both sides in the provenance; grade C) and in ``meta["reader_conflicts"]``; the marking
     readers' boxes attach to it, as to any non-absent observation. With one labelling reader
     (REFLACX phase 3) the rule above holds: the report wins.
   - **Label-only findings** (no matching report observation) stay label observations
     (``source="label"``). Without a report the labels are all there is: answers state them, B.
     With a report (the report is silent about what a coder's label asserts) the generator by
     default states nothing from them (``GenerateOptions.label_only="omit"``, docs/generation.md);
     ``state-as-label`` says them as labels, graded C.
3. **Boxes** (``study.boxes``; ``label`` = finding id) are checked against their image's size
   (``boxes.check_box``: clipped and noted in ``meta["box_notes"]``, or a Reject with
   ``stage="localize"``). Expert boxes are kept per reader and fused across readers
   (``boxes.fuse_boxes``). All of a finding's boxes are attached to every non-absent observation of
   that finding (report and label). When all its observations are absent (a minority reader's box
   outvoted by the label majority) the boxes go to the absent label observation and the finding is
   listed in ``meta["boxes_on_absent_findings"]``: consumers must read boxes of present/uncertain
   observations only. A box whose finding has no observation at all gets one of its own
   (``source="box"``, certainty present). No box is dropped.
4. **Region boxes** (``label`` = region id) are checked the same way, kept in
   ``SceneGraph.region_boxes`` and attached to each observation whose regions include that region,
   else its nearest boxed ancestor region.
5. ``prior_study_id`` is set by the runner (it sees the patient's studies), not here.
"""

from __future__ import annotations

from typing import Any

import msgspec

from radvqa.localize.boxes import LocalizeParams, check_box, fuse_boxes, load_params
from radvqa.model import Box, Extraction, Label, Observation, Reject, Report, SceneGraph, Study

_VALUE_CERTAINTY = {1: "present", 0: "absent", -1: "uncertain"}
_RANK = {"present": 2, "uncertain": 1, "absent": 0}


def build_scene_graph(
    study: Study,
    extraction: Extraction | None,
    *,
    ontology: Any = None,
    params: LocalizeParams | None = None,
) -> tuple[SceneGraph, list[Reject]]:
    p = params or load_params()
    rejects: list[Reject] = []
    meta = dict(study.meta)
    sizes = {im.id: (im.width, im.height) for im in study.images}

    # -- report part
    if extraction is not None:
        report: Report | None = extraction.report
        # shallow copies: boxes are attached below without touching the caller's extraction
        observations = [msgspec.structs.replace(o) for o in extraction.observations]
        indication = extraction.indication
        extractor: str | None = extraction.extractor
        if extraction.error:
            meta["extract_error"] = extraction.error
    else:
        report = Report(text=study.report_text) if study.report_text else None
        observations, indication, extractor = [], None, None
    used_ids = {o.id for o in observations}
    counter = [len(observations)]

    def next_id() -> str:
        while True:
            counter[0] += 1
            oid = f"O{counter[0]:02d}"
            if oid not in used_ids:
                used_ids.add(oid)
                return oid

    # -- label part
    label_obs, no_finding, bad_values, voters = _label_observations(study.labels)
    report_reader = study.meta.get("report_reader")
    for lab in bad_values:
        rejects.append(_rej(study, f"label {lab.scheme}:{lab.name}", f"label value {lab.value!r} is not 1, 0 or -1"))
    for scheme in no_finding:
        meta["no_finding_label"] = scheme
    report_obs = list(observations)
    family = _Family(ontology)
    merged: list[str] = []
    support: list[str] = []
    conflicts: list[str] = []
    reader_conflicts: list[str] = []
    for fid, regions in sorted(label_obs):
        cert = label_obs[(fid, regions)]
        side = _side(regions, ontology)
        matches = [o for o in report_obs if family.related(o.finding, fid) and _sides_overlap(o.laterality, side)]
        if matches:
            # the report speaks about this finding (or its family): one statement, the report's;
            # the label is provenance (agreeing) or a recorded conflict (never a second statement)
            agree = [o for o in matches if o.certainty == cert]
            if agree:
                merged.append(fid)
                support.extend(f"{o.id}={fid}" for o in agree)
            elif report_reader and len(voters[(fid, regions)]) >= 2:
                # readers disagree with the one reader whose dictation is the report: uncertain
                vote = voters[(fid, regions)]
                for o in matches:
                    # the readers whose own label disagrees with the dictation
                    who = "+".join(sorted(r for r, c in vote.items() if c != o.certainty) or sorted(vote))
                    conflicts.append(f"{o.id}={fid}:{cert}:readers={who}:dictation={report_reader}")
                    reader_conflicts.append(f"{o.id}={fid}: {cert} by {who}, {o.certainty} in the dictation of {report_reader}")
                    o.certainty = "uncertain"
            else:
                conflicts.extend(f"{o.id}={fid}:{cert}" for o in matches)
            continue
        observations.append(
            Observation(
                id=next_id(),
                finding=fid,
                certainty=cert,
                laterality=side,
                regions=list(regions),
                from_report=False,
                source="label",
            )
        )

    # -- boxes
    notes: list[str] = []
    kept: list[Box] = []
    for i, b in enumerate(study.boxes):
        checked = _check(study, b, i, sizes, p, rejects, notes, "box")
        if checked is not None:
            if checked.label is None:
                rejects.append(_rej(study, f"box {i}", "box has no finding label"))
                continue
            kept.append(checked)
    all_boxes = kept + fuse_boxes(kept, p)
    by_finding: dict[str, list[Box]] = {}
    for b in all_boxes:
        by_finding.setdefault(b.label or "", []).append(b)
    disputed: list[str] = []
    for fid in sorted(by_finding):
        same = [o for o in observations if o.finding == fid]
        targets = [o for o in same if o.certainty != "absent"]
        if not targets and same:
            # every observation says absent (e.g. 1 of 3 readers drew it): the boxes stay with the
            # absent observations, so they are not lost, and the dispute is noted
            targets = [o for o in same if o.source == "label"] or same
            disputed.append(f"{fid} x{len(by_finding[fid])}")
        if not targets:
            o = Observation(id=next_id(), finding=fid, certainty="present", from_report=False, source="box")
            observations.append(o)
            targets = [o]
        for o in targets:
            o.boxes = list(o.boxes) + by_finding[fid]

    # -- region boxes
    region_boxes: list[Box] = []
    for i, b in enumerate(study.region_boxes):
        checked = _check(study, b, i, sizes, p, rejects, notes, "region box")
        if checked is not None:
            region_boxes.append(checked)
    if region_boxes:
        _attach_regions(observations, region_boxes, ontology)
    if notes:
        meta["box_notes"] = "; ".join(notes)
    if disputed:
        meta["boxes_on_absent_findings"] = "; ".join(disputed)
    if merged:
        meta["labels_agreeing_with_report"] = "; ".join(dict.fromkeys(merged))
    if support:
        meta["label_support"] = "; ".join(support)
    if conflicts:
        meta["label_conflicts"] = "; ".join(conflicts)
    if reader_conflicts:
        meta["reader_conflicts"] = "; ".join(reader_conflicts)

    modality = study.images[0].modality if study.images else "CR"
    sg = SceneGraph(
        study_id=study.id,
        patient_id=study.patient_id,
        source=study.source,
        images=list(study.images),
        report=report,
        indication=indication,
        observations=observations,
        region_boxes=region_boxes,
        split=study.split,
        study_time=study.study_time,
        anatomy=study.anatomy,
        modality=modality,
        extractor=extractor,
        meta=meta,
    )
    return sg, rejects


def _label_observations(
    labels: list[Label],
) -> tuple[dict[tuple[str, tuple[str, ...]], str], list[str], list[Label], dict[tuple[str, tuple[str, ...]], dict[str, str]]]:
    # (finding, regions, image) -> reader -> best value of that reader (a reader's labels merge by
    # precedence); region-level labels (Label.regions) make one observation per region set.
    votes: dict[tuple[str, tuple[str, ...], str], dict[str, str]] = {}
    no_finding: list[str] = []
    bad: list[Label] = []
    for lab in labels:
        cert = _VALUE_CERTAINTY.get(lab.value)
        if cert is None:
            bad.append(lab)
            continue
        if not lab.findings:
            if cert == "present" and lab.scheme not in no_finding:
                no_finding.append(lab.scheme)
            continue
        reader = lab.reader or ""
        regions = tuple(sorted(set(lab.regions)))
        for fid in lab.findings:
            per = votes.setdefault((fid, regions, lab.image_id or ""), {})
            old = per.get(reader)
            if old is None or _RANK[cert] > _RANK[old]:
                per[reader] = cert
    out: dict[tuple[str, tuple[str, ...]], str] = {}
    # (finding, regions) -> reader -> that reader's best value over the images (who voted what)
    voters: dict[tuple[str, tuple[str, ...]], dict[str, str]] = {}
    for (fid, regions, _img), per in votes.items():
        who = voters.setdefault((fid, regions), {})
        for reader, c0 in per.items():
            if reader not in who or _RANK[c0] > _RANK[who[reader]]:
                who[reader] = c0
        vals = list(per.values())
        n = len(vals)
        if vals.count("present") * 2 > n:
            c = "present"
        elif vals.count("absent") * 2 > n:
            c = "absent"
        else:
            c = "uncertain"
        old = out.get((fid, regions))
        if old is None or _RANK[c] > _RANK[old]:
            out[(fid, regions)] = c
    return out, no_finding, bad, voters


class _Family:
    """Ancestor look-ups (ontology ``ancestors``), cached; no ontology: a finding is only itself."""

    def __init__(self, ontology: Any) -> None:
        self.onto = ontology
        self.cache: dict[str, frozenset[str]] = {}

    def ancestors(self, fid: str) -> frozenset[str]:
        hit = self.cache.get(fid)
        if hit is None:
            try:
                hit = frozenset(self.onto.ancestors(fid)) if self.onto is not None and hasattr(self.onto, "ancestors") else frozenset()
            except KeyError:  # a finding the ontology does not know: related to itself only
                hit = frozenset()
            self.cache[fid] = hit
        return hit

    def related(self, a: str, b: str) -> bool:
        return a == b or a in self.ancestors(b) or b in self.ancestors(a)


def _sides_overlap(a: str | None, b: str | None) -> bool:
    # an unsided statement covers either side; "bilateral" overlaps left and right
    return a is None or b is None or a == b or "bilateral" in (a, b)


def _side(regions: tuple[str, ...], ontology: Any) -> str | None:
    """Laterality of a region-level label: the regions' common side (ontology ``Region.side``)."""
    if not regions or ontology is None:
        return None
    sides = {getattr(ontology.regions.get(r), "side", None) for r in regions} if hasattr(ontology, "regions") else {None}
    if len(sides) == 1:
        side = sides.pop()
        return side if side in ("left", "right") else None
    return "bilateral" if sides == {"left", "right"} else None


def _check(
    study: Study,
    b: Box,
    i: int,
    sizes: dict[str, tuple[int | None, int | None]],
    p: LocalizeParams,
    rejects: list[Reject],
    notes: list[str],
    what: str,
) -> Box | None:
    if b.image_id not in sizes:
        rejects.append(_rej(study, f"{what} {i}", f"{what} on unknown image {b.image_id!r}"))
        return None
    w, h = sizes[b.image_id]
    kept, msg = check_box(b, w, h, p)
    if kept is None:
        rejects.append(_rej(study, f"{what} {i} ({b.label})", msg or "bad box"))
        return None
    if msg:
        notes.append(f"{what} {i} ({b.label}) {msg}")
    return kept


def _rej(study: Study, what: str, reason: str) -> Reject:
    return Reject(source=study.source, ref=f"{study.id} {what}", reason=reason, stage="localize")


def _attach_regions(observations: list[Observation], region_boxes: list[Box], ontology: Any) -> None:
    by_region: dict[str, list[Box]] = {}
    for b in region_boxes:
        if b.label:
            by_region.setdefault(b.label, []).append(b)
    for o in observations:
        extra: list[Box] = []
        for r in o.regions:
            chain = [r]
            if ontology is not None and hasattr(ontology, "region_ancestors"):
                try:
                    chain += list(ontology.region_ancestors(r))
                except KeyError:
                    pass  # region unknown to the ontology: only an exact region box can match
            for rid in chain:
                if rid in by_region:
                    extra += [b for b in by_region[rid] if b not in extra]
                    break
        if extra:
            o.boxes = list(o.boxes) + extra


__all__ = ["build_scene_graph"]
