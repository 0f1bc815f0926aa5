"""RadGraph (Jain et al. 2021) and RadGraph2 (Khanna, Dejl et al. 2023): radiologists' entity
graphs of reports as a source (shared FORMATS.md section 4). The human annotation, not radvqa's
extractor, says what each report states: every observation entity becomes a ``model.Annotation``
on the study (``Study.annotations``), which the build's extract stage names through the ontology's
term matcher (``radvqa.extract.annotated``) and states in place of the extractor's reading.

Inputs (any order; files recognised by content, never by name):
- graph files: JSON ``{report_id: {"text", "entities": {id: {"tokens", "label", "start_ix",
  "end_ix", "relations": [[type, target_id], ...]}}, "data_split", "data_source"}}``, plain or
  gzip, with or without a byte-order mark (``train.json``, ``dev.json``, ``test.json``, RadGraph2's
  ``*_final.json``, the package's inference output); in a folder, ``*.json`` / ``*.json.gz`` down
  to depth 2 whose content is such an object. ``test.json`` puts the entities under ``labeler_1``
  / ``labeler_2``: **labeler_1 is used** (deterministic; ``RadGraphSource(labeler="labeler_2")`` or
  ``RADVQA_RADGRAPH_LABELER=labeler_2`` for the other), the study's meta says which and how many
  there were. Fusing the two is not done: they disagree on entity spans, so a fused graph would be
  neither radiologist's.
- optionally the MIMIC-CXR inputs (tables, ``files/`` tree with JPGs: see ``radvqa.sources.mimic``):
  each gold report whose key ``.../p<subject>/s<study>.txt`` names a MIMIC study gets that study's
  images, view, StudyDate+StudyTime and official split. MIMIC records of studies the gold files do
  not hold are passed over (they are not this source's records); MIMIC rejects are passed on as row
  rejects (``stage="source-row"``). A gold report the MIMIC inputs lack (RadGraph's 50 CheXpert
  test reports, or a partial MIMIC download) is built without images, and counted in a note.

Study = one gold report: ``radgraph:<study>`` (the MIMIC study id from the key; other keys are
used whole), patient ``radgraph:<subject>`` (a key without a subject is its own patient).
``report_text`` = the gold ``text`` (the token indices refer to it). Split: MIMIC's when joined,
else the file's ``data_split`` (train / dev / test, written train / validation / test as the QA rows
name them); a patient whose reports sit in several splits is put in the most held-out one
(test > validation > train), noted in ``meta["split_moved_from"]``, so the
build's leakage check holds.

From entities to annotations (shared with ``radvqa score-extraction``, ``radvqa.eval.radgraph``):
each observation entity (``OBS-DP`` / ``OBS-U`` / ``OBS-DA``, or RadGraph-XL's long labels) that
does not itself ``modify`` another observation is one annotation; its phrase is its tokens with those
of the entities that ``modify`` it and of the anatomy it is ``located_at`` (and that anatomy's
modifiers), in text order; certainty from the label; side from left / right / bilateral words;
change from a ``CHAN-*`` entity linked by ``modify`` in either direction (both RadGraph2 spellings:
``CHAN-WOR`` / ``CHAN-CON-WOR``, ``CHAN-IMP`` / ``CHAN-CON-IMP``, and the draft labels); evidence =
the character spans of those entities in ``text``.

Rejects (one line per report, with file and key): a record that is not an object, has no text or
no entities (nor the chosen labeler's), an entity that is not an object, has an unknown label,
token indices that are not integers or fall outside the text, a ``tokens`` field that differs from
the text at those indices (the annotation would point at the wrong words), a relation that is not
``[type, id]`` or points at no entity; a report id seen in an earlier file.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from radvqa.model import Annotation, Reject, Span, Study
from radvqa.sources import SOURCES
from radvqa.sources.base import Record, Source, SourceError
from radvqa.sources.tables import files_depth2, is_gzip
from radvqa.splits import normalize_split

CERTAINTY = {
    "OBS-DP": "present", "OBS-U": "uncertain", "OBS-DA": "absent",
    "Observation::definitely present": "present", "Observation::uncertain": "uncertain",
    "Observation::definitely absent": "absent",
}
ANATOMY = frozenset({"ANAT-DP", "Anatomy::definitely present"})
# RadGraph2 change labels, both spellings (code vocabulary and paper hierarchy) and the drafts;
# DEV-PLACE (a device moved) has no radvqa change value
CHANGE: dict[str, str | None] = {
    "CHAN-NC": "unchanged", "CHAN-CON-AP": "new", "CHAN-AP": "new", "CHAN-WOR": "worsened", "CHAN-CON-WOR": "worsened",
    "CHAN-IMP": "improved", "CHAN-CON-IMP": "improved", "CHAN-CON-RES": "resolved", "CHAN-DISA": "resolved",
    "CHAN-DEV-AP": "new", "CHAN-DEV-DISA": "resolved", "CHAN-DEV-PLACE": None, "CHAN-DISP": None,
}
RELATIONS = frozenset({"modify", "located_at", "suggestive_of"})
SIDES = (("bilateral", "bilateral"), ("both", "bilateral"), ("bibasilar", "bilateral"), ("bibasal", "bilateral"),
         ("left", "left"), ("right", "right"))
_KEY = re.compile(r"(?:^|/)p(\d+)/s(\d+)(?:\.txt)?$")
_HELD_OUT = {"test": 2, "validation": 1}


def side_of(words: str) -> str | None:
    """left / right / bilateral from the words of a phrase (the first side word in SIDES order)."""
    ws = words.lower().split()
    return next((sd for w, sd in SIDES if w in ws), None)


def annotations(text: str, ents: dict[str, Any], ref: str = "", strict: bool = False) -> list[Annotation]:
    """The observation entities of one report graph as annotations (module docstring). With
    ``strict`` a malformed entity or relation raises ValueError naming it (the source rejects the
    report); otherwise it is read as far as it can be (the extraction scorer's tolerance)."""
    spans = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    toks = [text[a:b] for a, b in spans]

    def bounds(eid: str, e: dict[str, Any]) -> tuple[int, int] | None:
        try:
            a, b = e["start_ix"], e["end_ix"]
            if isinstance(a, bool) or isinstance(b, bool):
                raise TypeError
            a, b = int(a), int(b)
            if a != e["start_ix"] or b != e["end_ix"]:
                raise TypeError
        except (KeyError, TypeError, ValueError, OverflowError):  # OverflowError: Infinity in the JSON
            if strict:
                raise ValueError(f"entity {eid}: start_ix / end_ix are not integers") from None
            return None
        if not 0 <= a <= b < len(toks):
            if strict:
                raise ValueError(f"entity {eid}: tokens {str(a)[:12]}-{str(b)[:12]} outside the text's {len(toks)} tokens")
            return None
        return a, b

    def rels(eid: str, e: dict[str, Any]) -> list[tuple[str, str]]:
        out = []
        raw = e.get("relations") or []
        if not isinstance(raw, list):
            if strict:
                raise ValueError(f"entity {eid}: relations is not a list")
            return out
        for r in raw:
            if isinstance(r, (list, tuple)) and len(r) == 2 and isinstance(r[0], str) and isinstance(r[1], (str, int)) \
                    and not isinstance(r[1], bool):
                if strict and (str(r[1]) not in ents or r[0] not in RELATIONS):
                    raise ValueError(f"entity {eid}: relation {r[0]!r} -> {r[1]!r} "
                                     + ("points at no entity" if str(r[1]) not in ents else "is not a RadGraph relation"))
                out.append((r[0], str(r[1])))
            elif strict:
                raise ValueError(f"entity {eid}: relation {str(r)[:60]} is not [type, target id]")
        return out

    # each entity read once: label, token bounds, words, relations (strict: checked here)
    info: dict[str, tuple[str, tuple[int, int] | None, str, list[tuple[str, str]], int]] = {}
    for eid, e in ents.items():
        eid = str(eid)
        if not isinstance(e, dict):
            if strict:
                raise ValueError(f"entity {eid} is not an object")
            continue
        lab = e.get("label")
        if strict and (not isinstance(lab, str) or not (lab in CERTAINTY or lab in ANATOMY or lab in CHANGE)):
            raise ValueError(f"entity {eid}: unknown label {str(lab)[:60]!r}")
        ab = bounds(eid, e)
        w = " ".join(toks[ab[0]: ab[1] + 1]) if ab else str(e.get("tokens", ""))
        tok = e.get("tokens")
        if strict and ab and isinstance(tok, str) and " ".join(tok.split()) != w:
            raise ValueError(f"entity {eid}: tokens {tok[:60]!r} differ from the text at {ab[0]}-{ab[1]}")
        try:
            first = ab[0] if ab else int(e.get("start_ix", 0))
        except (TypeError, ValueError, OverflowError):
            first = 0
        info[eid] = (str(lab), ab, w, rels(eid, e), first)

    def label(eid: str) -> str:
        hit = info.get(eid)
        return hit[0] if hit else ""

    modifiers: dict[str, list[str]] = {}  # target id -> ids of the entities that modify it
    for eid, (_, _, _, rs, _) in info.items():
        for t, dst in rs:
            if t == "modify":
                modifiers.setdefault(dst, []).append(eid)
    out: list[Annotation] = []
    for eid, (lab, _, own_words, own_rels, _) in info.items():
        cert = CERTAINTY.get(lab)
        if cert is None:
            continue
        # an observation that modifies another observation ("small" -> "effusion") is part of
        # that observation's phrase, not an observation of its own
        if any(t == "modify" and label(dst) in CERTAINTY for t, dst in own_rels):
            continue
        members = [eid] + [m for m in modifiers.get(eid, []) if label(m) not in CHANGE]
        change: str | None = None
        for t, dst in own_rels:
            if t == "located_at" and label(dst) in ANATOMY:
                members += [dst] + [m for m in modifiers.get(dst, []) if label(m) in ANATOMY]
            elif label(dst) in CHANGE:
                change = change or CHANGE[label(dst)]
        for m in modifiers.get(eid, []):
            if label(m) in CHANGE:
                change = change or CHANGE[label(m)]
        parts: set[tuple[int, str, int, int]] = set()
        for m in dict.fromkeys(members):
            hit = info.get(m)
            if hit is None:
                continue
            _, ab, w, _, first = hit
            parts.add((ab[0], w, spans[ab[0]][0], spans[ab[1]][1]) if ab else (first, w, -1, -1))
        ordered = sorted(parts)
        phrase = " ".join(w for _, w, _, _ in ordered).lower()
        # one span per run of annotated words ("small left pleural effusion"), not one per entity
        runs: list[list[int]] = []
        for _, _, a, b in ordered:
            if a < 0:
                continue
            if runs and (a < runs[-1][1] or not text[runs[-1][1]:a].strip()):
                runs[-1][1] = max(runs[-1][1], b)
            else:
                runs.append([a, b])
        evidence = [Span(start=a, end=b, text=text[a:b]) for a, b in runs]
        out.append(Annotation(ref=f"{ref}#{eid}" if ref else eid, phrase=phrase, term=own_words.lower(),
                              certainty=cert, laterality=side_of(phrase), change=change, evidence=evidence))
    return out


def load_json(path: Path) -> Any:
    """A JSON file, plain or gzip (by content), with or without a byte-order mark."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw.decode("utf-8-sig"))


def looks_like_graphs(data: Any) -> bool:
    """A RadGraph file: an object of which some record has text and entities (or labeler_N); its
    other records, whatever they are, are then read as records (and rejected when broken)."""
    if not isinstance(data, dict) or not data:
        return False
    return any(isinstance(r, dict) and "text" in r and ("entities" in r or any(str(k).startswith("labeler_") for k in r))
               for r in data.values())


def _json_candidate(f: Path) -> bool:
    """A file in a folder worth parsing as a graph file: named *.json(.gz), or gzip/JSON content."""
    n = f.name.lower()
    return n.endswith((".json", ".json.gz"))


def _starts_like_json(f: Path) -> bool:
    try:
        with open(f, "rb") as fh:
            head = fh.read(16)
        if head[:2] == b"\x1f\x8b":
            with gzip.open(f, "rb") as g:
                head = g.read(16)
    except (OSError, EOFError, gzip.BadGzipFile):
        return False
    return head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"{"


def split_graph_inputs(src: Source, inputs: list[Path], looks: Any = looks_like_graphs) -> tuple[list[tuple[Path, Any]], list[Path]]:
    """(graph files with their loaded content, the other inputs: MIMIC-CXR's). A named file whose
    content is a JSON object is a graph file or an error; a folder holding graph files (depth 2)
    gives those; anything else is passed to the MIMIC-CXR join."""
    graphs: list[tuple[Path, Any]] = []
    other: list[Path] = []
    for p in inputs:
        if p.is_file():
            if not _starts_like_json(p):
                other.append(p)
                continue
            try:
                data = load_json(p)
            except (OSError, EOFError, UnicodeDecodeError, ValueError, gzip.BadGzipFile) as e:
                raise SourceError(f"{src.name}: {p}: not a readable JSON file ({' '.join(str(e).split())[:200]})") from None
            if not looks(data):
                raise SourceError(f"{src.name}: {p}: not a RadGraph file (expected {{report_id: {{text, entities}}}})")
            src.note(f"{p}: recognised as a RadGraph graph file (by its content{', gzip' if is_gzip(p) else ''})")
            graphs.append((p, data))
            continue
        found = []
        for f in files_depth2(p):
            if _json_candidate(f) and _starts_like_json(f):
                try:
                    data = load_json(f)
                except (OSError, EOFError, UnicodeDecodeError, ValueError, gzip.BadGzipFile):
                    src.note(f"{f}: not readable JSON, passed over")
                    continue
                if looks(data):
                    src.note(f"{f}: recognised as a RadGraph graph file (by its content{', gzip' if is_gzip(f) else ''})")
                    found.append((f, data))
        if found:
            graphs += found
        else:
            other.append(p)
    return graphs, other


def mimic_ids(key: str) -> tuple[str, str] | None:
    """(subject, study) from a MIMIC report key ``p10/p10000032/s50414267.txt``."""
    m = _KEY.search(key.strip())
    return (m.group(1), m.group(2)) if m else None


def join_mimic(src: Source, studies: list[Study], by_mimic: dict[str, Study], mimic_inputs: list[Path],
               onto: Any, keep_time: bool = False) -> Iterator[Reject]:
    """Give the gold studies named in ``by_mimic`` (MIMIC study id -> study) their MIMIC-CXR images,
    time and split; yields the MIMIC rejects as row rejects. Notes how many matched. ``keep_time``:
    the study keeps its own ``study_time`` (Lunguage's sequence) and MIMIC's goes to meta."""
    from radvqa.sources.mimic import MimicSource

    matched = 0
    mimic = MimicSource()
    mimic.notify = src.notify
    for rec in mimic.iter_joined(mimic_inputs, onto, None):
        if isinstance(rec, Reject):
            yield src.reject_row(rec.ref, f"mimic-cxr: {rec.reason}")
            continue
        st = by_mimic.get(rec.id.removeprefix("mimic-cxr:"))
        if st is None:
            continue
        matched += 1
        st.images = list(rec.images)
        meta = dict(st.meta)
        if keep_time and st.study_time is not None:
            if rec.study_time:
                meta["mimic_study_time"] = rec.study_time
        else:
            st.study_time = rec.study_time
        if rec.split:
            if st.split:
                meta[f"{src.name}_split"] = st.split
            st.split = normalize_split(rec.split)
        meta["mimic_cxr"] = "joined"
        st.meta = meta
    keyed = {id(st) for st in by_mimic.values()}
    for st in studies:
        if "mimic_cxr" not in st.meta:
            st.meta = dict(st.meta) | {"mimic_cxr": "not in the MIMIC-CXR inputs" if id(st) in keyed else "not a MIMIC report"}
    src.note(f"{src.name}: {matched} of {len(studies)} gold reports joined to MIMIC-CXR studies "
             f"({len(by_mimic) - matched} MIMIC keys not found in the MIMIC-CXR inputs, "
             f"{len(studies) - len(by_mimic)} reports not from MIMIC-CXR)")


def held_out_splits(studies: list[Study]) -> None:
    """Every patient's studies in one split: the most held-out one among them (test > validation > train)."""
    best: dict[str, str] = {}
    for st in studies:
        if st.split is None:
            continue
        cur = best.get(st.patient_id)
        if cur is None or _HELD_OUT.get(st.split, 0) > _HELD_OUT.get(cur, 0):
            best[st.patient_id] = st.split
    for st in studies:
        want = best.get(st.patient_id)
        if want is not None and st.split != want:
            st.meta = dict(st.meta) | {"split_moved_from": str(st.split)}
            st.split = want


@SOURCES.register("radgraph")
class RadGraphSource(Source):
    name = "radgraph"
    description = "RadGraph / RadGraph2 gold entity graphs (+ MIMIC-CXR inputs to join with)"
    counts_reads = True  # each report record of a graph file

    def __init__(self, labeler: str | None = None) -> None:
        self.labeler = labeler or os.environ.get("RADVQA_RADGRAPH_LABELER") or "labeler_1"

    def _records(self, inputs: list[Path], onto: Any, limit: int | None) -> Iterator[Record]:
        graphs, mimic_inputs = split_graph_inputs(self, inputs)
        if not graphs:
            raise SourceError("radgraph: no RadGraph graph file among the inputs (JSON {report_id: {text, entities}})")
        studies: list[Study] = []
        by_mimic: dict[str, Study] = {}
        seen: dict[str, str] = {}
        for path, data in graphs:
            for key, rec in data.items():
                self.count_read()
                ref = f"{path}#{key}"
                got = self._study(str(key), rec, path)
                if isinstance(got, str):
                    yield self.reject(ref, got)
                    continue
                if got.id in seen:
                    yield self.reject(ref, f"report {key!r} already read from {seen[got.id]}")
                    continue
                seen[got.id] = str(path)
                studies.append(got)
                ids = mimic_ids(str(key))
                if ids:
                    by_mimic[ids[1]] = got
                if limit is not None and len(studies) >= limit:
                    break
        if mimic_inputs:
            yield from join_mimic(self, studies, by_mimic, mimic_inputs, onto)
        held_out_splits(studies)
        yield from studies

    def _study(self, key: str, rec: Any, path: Path) -> Study | str:
        if not isinstance(rec, dict):
            return "record is not an object"
        text = rec.get("text")
        if not isinstance(text, str) or not text.strip():
            return "record has no text"
        body = rec
        labelers = sorted(k for k in rec if isinstance(k, str) and k.startswith("labeler_"))
        if "entities" not in rec:
            if self.labeler not in rec:
                return f"record has no entities (nor {self.labeler}.entities; labelers: {', '.join(labelers) or 'none'})"
            body = rec[self.labeler]
            if not isinstance(body, dict):
                return f"{self.labeler} is not an object"
        ents = body.get("entities")
        if not isinstance(ents, dict):
            return "entities is not an object {id: entity}"
        try:
            ann = annotations(text, ents, ref=key, strict=True)
        except ValueError as e:
            return str(e)
        ids = mimic_ids(key)
        sid, pid = (ids[1], ids[0]) if ids else (key, key)
        split = body.get("data_split") if isinstance(body.get("data_split"), str) else None
        meta = {"annotations": f"{self.name} gold graph ({path.name})", f"{self.name}_key": key}
        if labelers and body is not rec:
            meta["labeler"] = f"{self.labeler} of {len(labelers)}"
        if isinstance(body.get("data_source"), str):
            meta["data_source"] = body["data_source"]
        # split names as the QA rows write them (dev -> validation), so the scene graphs and rows
        # of one patient name the same split
        return Study(id=f"{self.name}:{sid}", patient_id=f"{self.name}:{pid}", source=self.name,
                     report_text=text, split=normalize_split(split) if split and split != "inference" else None,
                     meta=meta, annotations=ann)


__all__ = ["RadGraphSource", "annotations", "side_of"]
