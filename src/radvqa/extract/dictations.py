"""Other readers' dictations of a multi-reader study, extracted as those readers' labels.

A source whose study was read by several readers, each dictating a report (REFLACX: up to five
radiologists per image), puts ONE dictation in ``Study.report_text`` (the report the questions
quote; ``meta["report_reader"]`` names its reader) and every other reader's in
``meta["transcription:<reader>"]``. Each of those is extracted here with the build's own
extractor, and its findings become that reader's labels (scheme ``dictation``, name and finding =
the ontology finding id, value 1 present / 0 absent / -1 uncertain, ``reader`` = the reader,
``image_id`` = the image that reader's other labels are on). localize then fuses them with the
readers' other labels exactly as it fuses their ellipses and certainty labels: per finding a
reader's labels merge by precedence (present > uncertain > absent) and the majority over
readers decides; a finding the other readers' votes put against the report reader's dictation
becomes uncertain with both sides named (localize/graph.py, "Several readers, one reader's
dictation"). The report text itself stays the one chosen dictation.

Provenance in the study's meta: ``reader_dictations`` lists the readers whose dictation was
extracted, ``reader_dictations_failed`` those whose dictation the extractor could not use
(``reader: reason``); such a reader keeps its other labels, nothing else is dropped.
"""

from __future__ import annotations

from typing import Any

import msgspec

from radvqa.model import Label, Study

PREFIX = "transcription:"
SCHEME = "dictation"
_VALUE = {"present": 1, "uncertain": -1, "absent": 0}
_RANK = {1: 2, -1: 1, 0: 0}  # localize's precedence: present > uncertain > absent


def with_reader_dictations(study: Study, extractor: Any) -> Study:
    """``study`` with a label per finding of each other reader's dictation (a copy; the study
    itself unchanged when it has none)."""
    keys = sorted(k for k in study.meta if k.startswith(PREFIX))
    if not keys:
        return study
    image_of: dict[str, str] = {}
    for lab in study.labels:
        if lab.reader and lab.image_id:
            image_of.setdefault(lab.reader, lab.image_id)
    labels = list(study.labels)
    done: list[str] = []
    failed: list[str] = []
    for key in keys:
        reader = key[len(PREFIX):]
        try:
            ex = extractor.extract(study.meta[key], f"{study.id}#{reader}")
        except Exception as exc:  # noqa: BLE001 - one reader's unusable dictation must not drop the study
            failed.append(f"{reader}: extractor failed ({type(exc).__name__})")
            continue
        if getattr(ex, "error", None):
            failed.append(f"{reader}: {ex.error}")
            continue
        best: dict[str, int] = {}
        for o in ex.observations:
            v = _VALUE.get(o.certainty)
            if v is None or not o.finding:
                continue
            old = best.get(o.finding)
            if old is None or _RANK[v] > _RANK[old]:
                best[o.finding] = v
        labels += [Label(scheme=SCHEME, name=fid, value=v, findings=[fid], reader=reader, image_id=image_of.get(reader))
                   for fid, v in sorted(best.items())]
        done.append(reader)
    meta = dict(study.meta)
    if done:
        meta["reader_dictations"] = ",".join(done)
    if failed:
        meta["reader_dictations_failed"] = "; ".join(failed)
    return msgspec.structs.replace(study, labels=labels, meta=meta)


__all__ = ["PREFIX", "SCHEME", "with_reader_dictations"]
