"""Lunguage (Moon et al. 2025; PhysioNet ``lunguage`` v1.0.0): radiologists' structured reports as
a source (shared FORMATS.md section 5). Like ``radgraph``, the annotation says what each report
states: every finding row becomes a ``model.Annotation`` (``Study.annotations``), named through the
ontology's term matcher by the build's extract stage (``radvqa.extract.annotated``).

Inputs (files recognised by their columns, never by name; plain or gzip, BOM, LF or CRLF):
- ``Lunguage.csv``: one row per (entity, sentence); the columns read are those public code reads
  (their order and completeness are UNVERIFIED): required ``study_id``, ``section``, ``sent``,
  ``ent``, ``dx_status``, ``dx_certainty``, ``report``; used when present ``subject_id``,
  ``sequence``, ``cat``, ``location``, ``severity``, ``onset``, ``improved``, ``worsened``,
  ``no change``. The other attribute columns (morphology, measurement, placement, ...), the
  ``evidence`` / ``associate`` relations and the sequential ``gt_entity_group`` /
  ``gt_temporal_group`` columns are not read. ``Lunguage_vocab.csv`` is recognised and passed
  over (noted).
- optionally the MIMIC-CXR inputs (see ``radvqa.sources.radgraph.join_mimic``): each study gets its
  MIMIC images and official split; the MIMIC study time goes to ``meta["mimic_study_time"]``.

Study = ``study_id`` (``s5...`` -> ``lunguage:5...``), patient = ``subject_id`` (``p1...`` ->
``lunguage:1...``; without the column each study is its own patient). ``report_text`` = ``report``.
**Time order** = ``sequence`` (the study's place in the patient's series), as ``study_time``
``"0001"``, ``"0002"``, ... whether or not MIMIC is joined, so a patient's studies are ordered as the
annotators ordered them and the build hands each study its predecessor: the diff family then asks
what changed between consecutive studies, from the annotated findings of both (a study without a
sequence has no time: no diff questions).

Rows -> annotations: rows of the ``hist`` section (history, not this study's findings) and of the
categories ``patient info.`` / ``oth`` (not findings) are counted in ``meta["lunguage_rows"]``, not
stated. Certainty: ``tentative`` -> uncertain, else ``negative`` -> absent, else present. Change:
``improved`` / ``worsened`` / ``no change`` columns (a value in the column) -> improved / worsened /
unchanged, else ``onset`` "new" -> new. Phrase for the term matcher: severity, location and entity,
the location's words the entity repeats said once ("small" + "left pleural" + "pleural effusion" ->
"small left pleural effusion"); the entity alone is the fallback. Side from left / right /
bilateral words of location and entity. Evidence = the row's sentence located in the report
(exact, else ignoring case and spacing).

Rejects: a row (``stage="source-row"``, the study keeps its other rows; ``meta["lunguage_rows"]``
counts them) with a blank study_id or entity, a ``dx_status`` other than positive / negative, a
``dx_certainty`` other than definitive / tentative, an unknown section, a sentence not found in the
report, a malformed CSV line; a study whose rows disagree on the report text, the subject or the
sequence, or whose sequence is not a whole number.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from radvqa.model import Annotation, Span, Study
from radvqa.sources import SOURCES
from radvqa.sources.base import ROW_STAGE, Record, Source, SourceError, header_index, read_csv_rows
from radvqa.sources.radgraph import join_mimic, side_of
from radvqa.sources.tables import Layout, is_gzip, read_header, table_files

LAYOUT = Layout("lunguage", "Lunguage structured reports (Lunguage.csv)",
                ("study_id", "section", "sent", "ent", "dx_status", "dx_certainty", "report"))
VOCAB = Layout("vocab", "Lunguage entity vocabulary (Lunguage_vocab.csv)", ("target_term", "normed_term"))
OPTIONAL = ("subject_id", "sequence", "cat", "location", "severity", "onset", "improved", "worsened", "no change")
SKIP_CATS = frozenset({"patient info.", "oth"})
SECTIONS = frozenset({"hist", "find", "impr"})
CHANGE_COLUMNS = (("improved", "improved"), ("worsened", "worsened"), ("no change", "unchanged"))
_ID = re.compile(r"^[ps](\d+)$")
_SEQ = re.compile(r"^(\d{1,9})(?:\.0*)?$")


def bare_id(s: str) -> str:
    """``s50000001`` -> ``50000001``, ``p10000001`` -> ``10000001``; other ids as they are."""
    m = _ID.match(s.strip())
    return m.group(1) if m else s.strip()


def certainty(status: str, cert: str) -> str:
    return "uncertain" if cert == "tentative" else ("absent" if status == "negative" else "present")


def change(row: dict[str, str]) -> str | None:
    ch = next((v for col, v in CHANGE_COLUMNS if (row.get(col) or "").strip()), None)
    if ch is None and (row.get("onset") or "").strip().lower() in ("new", "newly"):
        ch = "new"
    return ch


def locate(sentence: str, report: str) -> tuple[int, int] | None:
    """Where the sentence is in the report: exact, else ignoring case and runs of spaces."""
    s = sentence.strip()
    if not s:
        return None
    i = report.find(s)
    if i >= 0:
        return i, i + len(s)
    m = re.search(r"\s+".join(re.escape(w) for w in s.split()), report, re.IGNORECASE)
    return (m.start(), m.end()) if m else None


class _Group:
    __slots__ = ("ref", "sid", "subjects", "sequences", "reports", "ann", "n_hist", "n_cat", "n_bad")

    def __init__(self, ref: str, sid: str) -> None:
        self.ref, self.sid = ref, sid
        self.subjects: set[str] = set()
        self.sequences: set[str] = set()
        self.reports: dict[str, None] = {}
        self.ann: list[Annotation] = []
        self.n_hist = self.n_cat = self.n_bad = 0


@SOURCES.register("lunguage")
class LunguageSource(Source):
    name = "lunguage"
    description = "Lunguage structured reports (Lunguage.csv; + MIMIC-CXR inputs to join with)"
    counts_reads = True  # each study's group of rows (bad rows are row rejects, not records)

    def _records(self, inputs: list[Path], onto: Any, limit: int | None) -> Iterator[Record]:
        tables, mimic_inputs = self._split_inputs(inputs)
        if not tables:
            raise SourceError("lunguage: no Lunguage.csv among the inputs (a table with columns "
                              + ", ".join(LAYOUT.columns) + ")")
        groups: dict[str, _Group] = {}
        for t in tables:
            yield from self._read(t, groups)
        studies: list[Study] = []
        by_mimic: dict[str, Study] = {}
        for g in groups.values():
            self.count_read()
            got = self._study(g, tables[0] if len(tables) == 1 else None)
            if isinstance(got, str):
                yield self.reject(g.ref, got)
                continue
            studies.append(got)
            if got.id.removeprefix("lunguage:").isdigit():
                by_mimic[got.id.removeprefix("lunguage:")] = got
            if limit is not None and len(studies) >= limit:
                break
        if mimic_inputs:
            yield from join_mimic(self, studies, by_mimic, mimic_inputs, onto, keep_time=True)
        yield from studies

    def _split_inputs(self, inputs: list[Path]) -> tuple[list[Path], list[Path]]:
        tables: list[Path] = []
        other: list[Path] = []
        for p in inputs:
            files = [p] if p.is_file() else table_files(p) if p.is_dir() else []
            mine = []
            for f in files:
                header = read_header(f)
                if header is None:
                    continue
                gz = ", gzip" if is_gzip(f) else ""
                if not LAYOUT.missing(header):
                    self.note(f"{f}: recognised as {LAYOUT.name} (by its columns{gz})")
                    mine.append(f)
                elif not VOCAB.missing(header):
                    self.note(f"{f}: recognised as {VOCAB.name} (by its columns{gz}); not used")
                    mine.append(None)
            if any(m is not None for m in mine):
                tables += [m for m in mine if m is not None]
            elif not mine:
                other.append(p)
        return tables, other

    def _read(self, path: Path, groups: dict[str, _Group]) -> Iterator[Record]:
        rows = read_csv_rows(path)
        first = next(rows, None)
        if first is None or first[1] is None:
            raise SourceError(f"lunguage: {path}: empty or unreadable header")
        header = first[1]
        c = header_index(header, {k: (k,) for k in LAYOUT.columns}, str(path))
        loose = {"".join(ch for ch in h.lower() if ch.isalnum()): i for i, h in enumerate(header)}
        opt = {k: loose[key] for k in OPTIONAL if (key := "".join(ch for ch in k if ch.isalnum())) in loose}
        cols = c | opt
        for item in self.table_rows(rows, len(header), path):
            if not isinstance(item, tuple):
                item.stage = ROW_STAGE  # a Lunguage row is not a study
                yield item
                continue
            ref, _lineno, cells = item
            row = {k: cells[i] for k, i in cols.items()}
            sid = bare_id(row["study_id"])
            if not sid:
                yield self.reject_row(ref, "blank study_id")
                continue
            g = groups.get(sid)
            if g is None:
                g = groups[sid] = _Group(ref, sid)
            g.reports[row["report"]] = None
            if "subject_id" in row:
                g.subjects.add(bare_id(row["subject_id"]))
            if "sequence" in row:
                g.sequences.add(row["sequence"].strip())
            why = self._row(row, ref, g)
            if why is not None:
                g.n_bad += 1
                yield self.reject_row(ref, why)

    def _row(self, row: dict[str, str], ref: str, g: _Group) -> str | None:
        section = row["section"].strip().lower()
        if section not in SECTIONS:
            return f"section {row['section'][:40]!r} is not hist, find or impr"
        if section == "hist":
            g.n_hist += 1
            return None
        if (row.get("cat") or "").strip().lower() in SKIP_CATS:
            g.n_cat += 1
            return None
        ent = " ".join(row["ent"].split())
        if not ent:
            return "blank entity (ent)"
        status, cert = row["dx_status"].strip().lower(), row["dx_certainty"].strip().lower()
        if status not in ("positive", "negative"):
            return f"dx_status {row['dx_status'][:40]!r} is not positive or negative"
        if cert not in ("definitive", "tentative"):
            return f"dx_certainty {row['dx_certainty'][:40]!r} is not definitive or tentative"
        report = row["report"]
        where = locate(row["sent"], report)
        if where is None:
            return f"sentence {row['sent'][:60]!r} not found in the report text"
        loc = " ".join((row.get("location") or "").split())
        sev = " ".join((row.get("severity") or "").split())
        # the location's words the entity repeats are said once ("right pleural" + "pleural
        # effusion" -> "right pleural effusion"), so the term matcher reads one place
        ent_words = set(ent.lower().split())
        loc_own = " ".join(w for w in loc.split() if w.lower() not in ent_words)
        g.ann.append(Annotation(
            ref=ref, phrase=" ".join(x for x in (sev, loc_own, ent) if x).lower(), term=ent.lower(),
            certainty=certainty(status, cert), laterality=side_of(f"{loc} {ent}"), change=change(row),
            evidence=[Span(start=where[0], end=where[1], text=report[where[0]:where[1]])]))
        return None

    def _study(self, g: _Group, table: Path | None) -> Study | str:
        if len(g.reports) > 1:
            return f"rows of study {g.sid} disagree on the report text ({len(g.reports)} versions)"
        if len(g.subjects) > 1:
            return f"rows of study {g.sid} disagree on subject_id ({', '.join(sorted(g.subjects))[:80]})"
        if len(g.sequences) > 1:
            return f"rows of study {g.sid} disagree on sequence ({', '.join(sorted(g.sequences))[:80]})"
        seq = next(iter(g.sequences), "")
        time = None
        if seq:
            m = _SEQ.match(seq)  # "2" or "2.0" (a float-typed export); never inf, nan, 1e400
            if m is None or int(m.group(1)) > 9999:
                return f"sequence {seq[:40]!r} is not a whole number 0-9999"
            time = f"{int(m.group(1)):04d}"
        report = next(iter(g.reports))
        if not report.strip():
            return "blank report text"
        pid = next(iter(g.subjects), "") or g.sid
        used = len(g.ann)
        meta = {"annotations": "lunguage structured report" + (f" ({table.name})" if table else ""),
                "lunguage_rows": f"{used} findings stated, {g.n_hist} history, {g.n_cat} patient info./other, "
                                 f"{g.n_bad} rejected"}
        if time is not None:
            meta["lunguage_sequence"] = seq
        return Study(id=f"{self.name}:{g.sid}", patient_id=f"{self.name}:{pid}", source=self.name,
                     report_text=report, study_time=time, meta=meta, annotations=g.ann)


__all__ = ["LunguageSource", "bare_id", "certainty", "change", "locate"]
