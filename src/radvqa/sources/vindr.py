"""VinDr-CXR (Nguyen et al., Scientific Data 2022).

Two layouts:
- PhysioNet (v1.0.0): ``annotations/annotations_{train,test}.csv`` (image_id, rad_id, class_name,
  x_min, y_min, x_max, y_max; the test file has no rad_id: it is the consensus of 5 readers) and
  ``annotations/image_labels_{train,test}.csv`` (image_id, rad_ID, then one 0/1 column per label:
  22 local + 6 global labels); images ``train/<image_id>.dicom``, ``test/<image_id>.dicom``.
- Kaggle competition: ``train.csv`` (image_id, class_name, class_id, rad_id, x_min, y_min, x_max,
  y_max; class 14 = "No finding" with empty coordinates); images ``train/<image_id>.dicom``.

Study = image (VinDr has no study or patient ids): ``vindr-cxr:<image_id>``, patient likewise.
Split = train/test from the table's name (Kaggle train.csv: train).

Labels (scheme ``vindr``), per reader (``reader`` = rad_id):
- from ``image_labels``: every label column, value 0/1 as given (blank: no Label; the test table
  spells "Other disease" where train says "Other diseases": both are scheme labels);
- else from the box table: the classes a reader drew are 1 and the other classes the table could
  hold are 0 for that reader: the 22 local labels (ontology ``vindr`` group ``local``) for
  PhysioNet's annotations, the 14 Kaggle classes (group ``kaggle14``) for train.csv; global labels
  (Pneumonia, COPD, ...) are never drawn, so a box table says nothing about them. A PhysioNet reader
  whose only row is "No finding" gets 0 for all 27 labels. Localize takes the 2-of-3 majority.
Boxes: per reader, in the DICOM's pixels (no rescaling: VinDr boxes are in the original image's
pixels and the DICOM is the original). Fused boxes are made in localize. Size from the DICOM header
(pydicom, no pixel read) when the image folder is given; a DICOM that cannot be read, or a missing
one, rejects the study.

The rows of one image are scattered through the tables, so they are grouped in memory as compact
tuples (about 100 bytes a box row; the 67,914 train rows fit in a few MB).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from radvqa.model import Box, Image, Label, Reject, Study
from radvqa.sources.tables import Layout, recognise_tables, split_from_name
from radvqa.sources.base import (
    LabelMapper,
    closed_label_list,
    Record,
    Source,
    SourceError,
    UnknownLabel,
    fnum,
    header_index,
    image_index,
    image_size,
    read_csv_rows,
)
from radvqa.sources import SOURCES

NO_FINDING = "no finding"

_BOX_COLS = {
    "image": ("image_id",),
    "cls": ("class_name",),
    "x1": ("x_min",),
    "y1": ("y_min",),
    "x2": ("x_max",),
    "y2": ("y_max",),
}


def _layouts() -> list[Layout]:
    return [
        Layout("boxes", "VinDr-CXR box table", ("image_id", "class_name", "x_min", "y_min", "x_max", "y_max")),
        Layout("labels", "VinDr-CXR image-label table", ("image_id",),
               any_of=(*closed_label_list("vindr"), "Other disease", "Other diseases")),
    ]


@SOURCES.register("vindr-cxr")
class VinDrSource(Source):
    name = "vindr-cxr"
    counts_reads = True
    description = "VinDr-CXR: PhysioNet annotations_*.csv + image_labels_*.csv, or Kaggle train.csv (+ DICOMs)"

    def _records(self, inputs: list[Path], onto: Any, limit: int | None) -> Iterator[Record]:
        # by columns, whatever the name (Kaggle's train.csv ships renamed and gzipped on mirrors)
        found = recognise_tables(self, inputs, _layouts())
        box_tables, label_tables = found["boxes"], found["labels"]
        if not box_tables and not label_tables:
            raise SourceError("vindr-cxr: no box table (image_id, class_name, x_min, ...) or image-label table "
                              "(image_id + the label columns) among the inputs")
        image_dirs = [p for p in inputs if p.is_dir()]
        images = image_index(image_dirs, box_tables + label_tables, (".dicom", ".dcm", ".png", ".jpg"))
        mapper = LabelMapper(onto, "vindr")
        scheme_labels = closed_label_list("vindr")
        local, kaggle = _group(onto, "local", scheme_labels), _group(onto, "kaggle14", scheme_labels)

        # image_id -> {"split", "boxes": [(reader, cls, x1, y1, x2, y2, ref)], "labels": [(reader, name, value, ref)],
        #              "readers": set, "errors": [reason]}
        per: dict[str, dict[str, Any]] = {}
        order: list[str] = []

        def entry(iid: str, split: str) -> dict[str, Any]:
            e = per.get(iid)
            if e is None:
                self.count_read()  # a study = an image_id, counted when its first row is read
                e = per[iid] = {"split": split, "boxes": [], "labels": [], "readers": [], "errors": [], "box_readers": [],
                                "no_finding": [], "drawable": scheme_labels, "physionet": False}
                order.append(iid)
            return e

        loose: list[Reject] = []
        for t in box_tables:
            split = _split_of(t)
            rows = read_csv_rows(t)
            first = next(rows, None)
            if first is None or first[1] is None:
                raise SourceError(f"vindr-cxr: {t}: empty or unreadable header")
            c = header_index(first[1], _BOX_COLS, str(t))
            rcol = _opt(first[1], ("rad_id", "rad_ID"))
            # Kaggle's train.csv carries 14 classes; PhysioNet's annotations the 22 local labels
            drawable = kaggle if _opt(first[1], ("class_id",)) is not None else local
            for lineno, row, err in rows:
                ref = f"{t}:{lineno}"
                if row is None:
                    self.count_read()
                    loose.append(self.reject(ref, err or "unreadable line"))
                    continue
                if not any(x.strip() for x in row):
                    continue
                if len(row) <= max(c.values()):
                    self.count_read()
                    loose.append(self.reject(ref, f"too few columns ({len(row)})"))
                    continue
                iid = row[c["image"]].strip()
                e = entry(iid, split)
                reader = row[rcol].strip() if rcol is not None and rcol < len(row) else None
                if reader not in e["box_readers"]:
                    e["box_readers"].append(reader)
                e["drawable"] = drawable
                e["physionet"] = drawable is local
                cls = row[c["cls"]].strip()
                if cls.lower() == NO_FINDING:
                    if reader not in e["no_finding"]:
                        e["no_finding"].append(reader)
                    continue
                try:
                    x1, y1, x2, y2 = (fnum(row[c[k]]) for k in ("x1", "y1", "x2", "y2"))
                except ValueError:
                    e["errors"].append(f"{ref}: non-numeric box {[row[c[k]] for k in ('x1', 'y1', 'x2', 'y2')]}")
                    continue
                if x2 <= x1 or y2 <= y1:
                    e["errors"].append(f"{ref}: inverted or empty box [{x1}, {y1}, {x2}, {y2}]")
                    continue
                e["boxes"].append((reader, cls, x1, y1, x2, y2, ref))

        for t in label_tables:
            split = _split_of(t)
            rows = read_csv_rows(t)
            first = next(rows, None)
            if first is None or first[1] is None:
                raise SourceError(f"vindr-cxr: {t}: empty or unreadable header")
            header = first[1]
            icol = header_index(header, {"image": ("image_id",)}, str(t))["image"]
            rcol = _opt(header, ("rad_ID", "rad_id"))
            label_cols = [(i, h.strip()) for i, h in enumerate(header) if i not in (icol, rcol)]
            for _i, name in label_cols:
                try:
                    mapper(name)
                except UnknownLabel as e:
                    raise SourceError(f"vindr-cxr: {t}: {e} (column header)") from None
            for item in self.table_rows(rows, len(header), t):
                if isinstance(item, Reject):
                    self.count_read()
                    loose.append(item)
                    continue
                ref, _, row = item
                iid = row[icol].strip()
                e = entry(iid, split)
                reader = row[rcol].strip() if rcol is not None else None
                e["readers"].append(reader)
                for i, name in label_cols:
                    v = row[i].strip()
                    if v == "":
                        continue  # blank cells occur in image_labels_test.csv: not given, no Label
                    if v not in ("0", "1", "0.0", "1.0"):
                        e["errors"].append(f"{ref}: label {name!r} value {v!r} is not 0 or 1")
                        break
                    e["labels"].append((reader, name, int(float(v)), ref))

        yield from loose
        for iid in order:
            yield self._study(iid, per.pop(iid), mapper, scheme_labels, images)

    def _study(
        self,
        iid: str,
        e: dict[str, Any],
        mapper: LabelMapper,
        scheme_labels: list[str],
        images: dict[str, Path] | None,
    ) -> Record:
        ref = e["boxes"][0][6] if e["boxes"] else f"image_id {iid}"
        if not iid:
            return self.reject(ref, "empty image_id")
        if e["errors"]:
            return self.reject(e["errors"][0].split(": ", 1)[0], f"{iid}: " + "; ".join(r.split(": ", 1)[1] for r in e["errors"]))
        labels: list[Label] = []
        try:
            if e["labels"]:
                seen: set[tuple[str | None, str]] = set()
                for reader, name, value, lref in e["labels"]:
                    if (reader, name) in seen:
                        return self.reject(lref, f"{iid}: duplicate label row for reader {reader}")
                    seen.add((reader, name))
                    labels.append(Label(scheme="vindr", name=name, value=value, findings=mapper(name), reader=reader))
            else:
                for reader in e["box_readers"]:
                    drawn = {b[1] for b in e["boxes"] if b[0] == reader}
                    for name in sorted(drawn):
                        labels.append(Label(scheme="vindr", name=name, value=1, findings=mapper(name), reader=reader))
                    # a box table only tells which drawable classes a reader did not draw; a reader
                    # who marked the image "No finding" (PhysioNet) rules out every label
                    closed = scheme_labels if reader in e["no_finding"] and not drawn and e["physionet"] else e["drawable"]
                    for name in closed:
                        if name not in drawn:
                            labels.append(Label(scheme="vindr", name=name, value=0, findings=mapper(name), reader=reader))
            boxes = []
            for reader, cls, x1, y1, x2, y2, _ref in e["boxes"]:
                fids = mapper(cls)
                boxes.append(Box(image_id=iid, x1=x1, y1=y1, x2=x2, y2=y2, source="expert", reader=reader, label=fids[0] if fids else None))
        except UnknownLabel as ex:
            return self.reject(ref, f"{iid}: {ex}")
        path = None
        w = h = None
        if images is not None:
            f = images.get(iid)
            if f is None:
                return self.reject(ref, f"{iid}: image file not found")
            try:
                w, h = image_size(f)
            except ValueError as ex:
                return self.reject(ref, f"{iid}: {ex}")
            path = str(f)
        return Study(
            id=f"vindr-cxr:{iid}",
            patient_id=f"vindr-cxr:{iid}",
            source=self.name,
            images=[Image(id=iid, path=path, width=w, height=h, view=None, modality="DX")],
            labels=labels,
            boxes=boxes,
            split=e["split"],
            meta={"readers": ",".join(sorted({r or "consensus" for r in (e["readers"] or e["box_readers"])}))},
        )


def _group(onto: Any, group: str, default: list[str]) -> list[str]:
    """A label group of the ontology's vindr scheme (``local``: the 22 boxable labels; ``kaggle14``:
    the Kaggle classes), else ``default`` (an ontology copy without groups)."""
    scheme = (getattr(onto, "schemes", None) or {}).get("vindr")
    names = (getattr(scheme, "groups", None) or {}).get(group)
    return list(names) if names else default


def _split_of(t: Path) -> str:
    return "test" if split_from_name(t) == "test" else "train"


def _opt(header: list[str], names: tuple[str, ...]) -> int | None:
    low = [h.strip().lower() for h in header]
    for n in names:
        if n.lower() in low:
            return low.index(n.lower())
    return None
