"""CheXpert (Irvin et al., AAAI 2019): ``train.csv`` / ``valid.csv`` (and CheXpert-v1.0-small).

Columns: Path, Sex, Age, Frontal/Lateral, AP/PA, then the 14 labels (No Finding, Enlarged
Cardiomediastinum, Cardiomegaly, Lung Opacity, Lung Lesion, Edema, Consolidation, Pneumonia,
Atelectasis, Pneumothorax, Pleural Effusion, Pleural Other, Fracture, Support Devices) with
1.0 / 0.0 / -1.0 / blank. Path: ``CheXpert-v1.0-small/train/patient00001/study1/view1_frontal.jpg``.

Study = patient + study folder: ``chexpert:patient00001/study1`` (the images of a study are
consecutive rows in the released tables; a study whose rows reappear later is rejected as a
duplicate). ``study_time`` = the study number zero-padded (``"0001"``): CheXpert numbers a patient's
studies in time order. Split = ``train`` / ``valid`` from the table name.

Labels (scheme ``chexpert14``): 1 positive, 0 negative, -1 uncertain (kept uncertain), blank =
unmentioned (no Label). The labeler runs on the study's report, so the labels of a study's rows are
the same; if they differ, each image keeps its own (``image_id`` set).

Images: the table's paths start with the dataset folder; they are resolved against the folder above
the table's folder and against any given folder (and its parent). A listed image missing from its
study folder (the folder is there, the file is not), or unreadable, rejects the study; a study whose
folder is absent was not downloaded: ``path=None``, size unknown.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from radvqa.model import Image, Label, Reject, Study
from radvqa.sources.tables import Layout, plan_line_ranges, recognise_tables, split_from_name
from radvqa.sources.base import (
    DirCache,
    LabelMapper,
    Record,
    Source,
    SourceError,
    UnknownLabel,
    closed_label_list,
    header_index,
    image_size,
    parse_label_value,
    read_csv_rows,
    read_csv_rows_split,
)
from radvqa.sources import SOURCES

_META = {"path": ("Path",)}
_OPTIONAL = {"sex": "Sex", "age": "Age", "fl": "Frontal/Lateral", "view": "AP/PA"}  # absent in test_labels.csv
# train.csv / valid.csv / test_labels.csv, under any name: a Path column and CheXpert's label columns
def _layouts() -> list[Layout]:
    return [Layout("labels", "CheXpert label table", ("Path",), any_of=tuple(closed_label_list("chexpert14")))]
_PATH_RE = re.compile(r"(?:^|/)(patient\d+)/study(\d+)/([^/]+)$")


@SOURCES.register("chexpert")
class CheXpertSource(Source):
    name = "chexpert"
    counts_reads = True
    description = "CheXpert: train.csv / valid.csv (+ image folder)"
    # the part iter_part reads: {"table": index, and a line range of it (tables.plan_line_ranges)}
    _part: dict[str, Any] | None = None

    def plan_parts(self, inputs: Any, n_parts: int, *, ontology: Any = None,
                   limit: int | None = None) -> list[dict[str, Any]] | None:
        """Each table in line ranges (``tables.plan_line_ranges``), the tables in input order.
        A study's rows are consecutive, so a part owns the studies whose first row is in its
        range: it reads on past its end to finish its last study, and the next part passes over
        the rows that finish it (rows are cut at the first row of another study, the same rule
        on both sides of a cut)."""
        try:
            tables = recognise_tables(self, [Path(p) for p in inputs], _layouts())["labels"]
        except SourceError:
            return None
        specs: list[dict[str, Any]] = []
        for i, t in enumerate(tables):
            ranges = plan_line_ranges(t, n_parts) or [{"lo": 0, "hi": None, "line0": 0, "line_hi": None}]
            specs += [{"table": i, **r} for r in ranges]
        return specs if len(specs) > 1 else None

    def iter_part(self, inputs: Any, part: dict[str, Any], *, ontology: Any = None) -> Any:
        self._part = dict(part)
        return self.iter_records(inputs, ontology=ontology)

    def _records(self, inputs: list[Path], onto: Any, limit: int | None) -> Iterator[Record]:
        tables = recognise_tables(self, inputs, _layouts())["labels"]
        if not tables:
            raise SourceError("chexpert: no CheXpert label table (columns Path + the 14 labels) among the inputs")
        image_roots = [p for p in inputs if p.is_dir()]
        mapper = LabelMapper(onto, "chexpert14")
        self._dirs = DirCache()
        seen: set[str] = set()
        part = self._part
        for ti, t in enumerate(tables):
            if part is not None and ti > part["table"]:
                return
            # Paths in the table start with the dataset folder (CheXpert-v1.0-small/...): resolve
            # them against the folder above it and against the given folders.
            roots = [str(r) for r in dict.fromkeys([t.parent.parent, *image_roots, *(r.parent for r in image_roots)])]
            check_images = True
            rows = read_csv_rows(t)
            first = next(rows, None)
            if first is None or first[1] is None:
                raise SourceError(f"chexpert: {t}: empty or unreadable header")
            header = first[1]
            c = header_index(header, _META, str(t))
            low = [h.strip().lower() for h in header]
            for k, name in _OPTIONAL.items():
                if name.lower() in low:
                    c[k] = low.index(name.lower())
            label_cols = [(i, h.strip()) for i, h in enumerate(header) if i not in c.values()]
            for _i, name in label_cols:
                try:
                    mapper(name)
                except UnknownLabel as e:
                    raise SourceError(f"chexpert: {t}: {e} (column header)") from None
            split = split_from_name(t)
            group: list[tuple[str, list[str]]] = []
            key = None
            if part is not None and ti < part["table"]:
                _earlier_keys(self.table_rows(rows, len(header), t), c["path"], seen)  # duplicates
                continue
            prev = None  # the study of the last row before this part (finished by the part before)
            items: Iterator[Any]
            if part is not None and part["lo"]:
                # the earlier parts' rows (split on commas: a split table has no quotes): the
                # studies read before (duplicates) and the one that runs into this part
                rows.close()
                before = read_csv_rows_split(t, 0, part["lo"])
                next(before, None)
                prev = _earlier_keys(self.table_rows(before, len(header), t), c["path"], seen)
                rows = read_csv_rows(t, part["lo"], None, part["line0"])
                items = _skip_run(self.table_rows(rows, len(header), t), prev, c["path"])
            else:
                items = self.table_rows(rows, len(header), t)
            if part is not None and part["line_hi"] is not None:
                items = _until_next_study(items, part["line_hi"], c["path"], prev)
            for item in items:
                if isinstance(item, Reject):
                    self.count_read()
                    yield item
                    continue
                ref, _, row = item
                m = _PATH_RE.search(row[c["path"]].strip().replace("\\", "/"))
                if m is None:
                    self.count_read()
                    yield self.reject(ref, f"Path {row[c['path']]!r} is not .../patientN/studyM/file")
                    continue
                k = f"{m.group(1)}/study{m.group(2)}"
                if k != key:
                    self.count_read()  # a study = a run of rows with one patient/study, counted at its first row
                    if group:
                        yield self._study(key, group, c, label_cols, mapper, split, roots, check_images, seen)  # type: ignore[arg-type]
                        group = []
                key = k
                group.append((ref, row))
            if group:
                yield self._study(key, group, c, label_cols, mapper, split, roots, check_images, seen)  # type: ignore[arg-type]

    def _study(
        self,
        key: str,
        group: list[tuple[str, list[str]]],
        c: dict[str, int],
        label_cols: list[tuple[int, str]],
        mapper: LabelMapper,
        split: str,
        roots: list[str],
        check_images: bool,
        seen: set[str],
    ) -> Record:
        ref = group[0][0]
        if key in seen:
            return self.reject(ref, f"{key}: duplicate study (its rows appear twice or are not contiguous)")
        seen.add(key)
        patient, study = key.split("/")
        per_image: list[list[tuple[str, int]]] = []
        images: list[Image] = []
        for rref, row in group:
            vals: list[tuple[str, int]] = []
            for i, name in label_cols:
                try:
                    v = parse_label_value(row[i])
                except ValueError as e:
                    return self.reject(rref, f"{key}: {name}: {e}")
                if v is not None:
                    vals.append((name, v))
            per_image.append(vals)
            rel = row[c["path"]].strip().replace("\\", "/")
            iid = "/".join(rel.split("/")[-3:])
            path = None
            w = h = None
            f = next((f"{r}/{rel}" for r in roots if self._dirs.exists(f"{r}/{rel}")), None)
            study_dir_there = f is None and any(self._dirs.is_dir(f"{r}/{rel.rsplit('/', 1)[0]}") for r in roots)
            if f is not None:
                try:
                    w, h = image_size(Path(f))
                except ValueError as e:
                    return self.reject(rref, f"{key}: {e}")
                path = f
            elif check_images and study_dir_there:
                # the study's folder was downloaded but this listed image is not in it
                return self.reject(rref, f"{key}: image {rel} not found")
            fl = row[c["fl"]].strip().lower() if "fl" in c else ("lateral" if "lateral" in rel else "")
            view = "LATERAL" if fl == "lateral" else ((row[c["view"]].strip().upper() if "view" in c else "") or None)
            images.append(Image(id=iid, path=path, width=w, height=h, view=view, modality="CR"))
        labels: list[Label] = []
        same = all(v == per_image[0] for v in per_image)
        for img, vals in zip(images, per_image[:1] if same else per_image):
            for name, v in vals:
                labels.append(
                    Label(scheme="chexpert14", name=name, value=v, findings=mapper(name), image_id=None if same else img.id)
                )
        row0 = group[0][1]
        meta = {k: row0[c[k]].strip() for k in ("sex", "age") if k in c and row0[c[k]].strip()}
        return Study(
            id=f"chexpert:{key}",
            patient_id=f"chexpert:{patient}",
            source=self.name,
            images=images,
            labels=labels,
            split=split,
            study_time=f"{int(study[5:]):04d}",
            meta=meta,
        )


def _key(row: list[str], pcol: int) -> str | None:
    """A row's study (``patientN/studyM``), None when its Path is not one (a rejected row)."""
    m = _PATH_RE.search(row[pcol].strip().replace("\\", "/"))
    return None if m is None else f"{m.group(1)}/study{m.group(2)}"


def _line(item: Any) -> int:
    """The line of a ``table_rows`` item: a usable row's, or a Reject's (its ref ends in it)."""
    return int(item.ref.rsplit(":", 1)[1]) if isinstance(item, Reject) else int(item[1])


def _earlier_keys(items: Iterator[Any], pcol: int, seen: set[str]) -> str | None:
    """The studies of an earlier part's rows into ``seen`` (as reading them would put them
    there); returns the study of the last usable row."""
    last = None
    for item in items:
        if not isinstance(item, Reject) and (k := _key(item[2], pcol)) is not None:
            seen.add(k)
            last = k
    return last


def _skip_run(items: Iterator[Any], prev: str | None, pcol: int) -> Iterator[Any]:
    """A part's rows from the first row of another study than ``prev`` (the one that runs into
    the part; the part before reads its rest, and the rejected rows among them)."""
    if prev is not None:
        for item in items:
            if not isinstance(item, Reject) and (k := _key(item[2], pcol)) is not None and k != prev:
                yield item
                break
        else:
            return
    yield from items


def _until_next_study(items: Iterator[Any], line_hi: int, pcol: int, key: str | None) -> Iterator[Any]:
    """A part's rows up to its last line, and on past it until the first row of another study
    (the rule ``_skip_run`` applies from the other side of the cut). ``key``: the study of the
    last usable row so far."""
    for item in items:
        usable = not isinstance(item, Reject) and (k := _key(item[2], pcol)) is not None
        if _line(item) > line_hi and (key is None or (usable and k != key)):
            return
        if usable:
            key = k
        yield item
