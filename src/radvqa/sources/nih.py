"""NIH ChestX-ray14 (Wang et al., CVPR 2017).

Inputs (the dataset root, or any of these files/folders):
- ``Data_Entry_2017*.csv`` or ``.csv.gz``: Image Index, Finding Labels (``A|B``), Follow-up #,
  Patient ID, Patient Age, Patient Gender, View Position, OriginalImage[Width,Height],
  OriginalImagePixelSpacing[x,y] (the bracketed headers split into two columns each; the 2017
  release also has a trailing empty column).
- ``BBox_List_2017.csv``: Image Index, Finding Label, ``Bbox [x,y,w,h]`` (its header is malformed:
  the one column name is split over four cells, plus empty trailing cells) — 984 boxes on 880 images.
- image folders (``images/``, ``images_001/images/``...), and optionally ``images.csv``
  (image_index, file, source_width, source_height, width, height) describing a resized mirror.

Studies: NIH has none, so one image = one study, id ``nih-cxr14:00000001_000``; patient
``nih-cxr14:00000001``; ``study_time`` = the follow-up number zero-padded (``"0003"``), a sortable
surrogate that orders a patient's studies.

Labels (scheme ``nih14``): the positive labels as shipped (value 1; ``No Finding`` maps to no
finding) plus value 0 for every other scheme label, because ChestX-ray14 is distributed and used as
a closed 14-label multi-hot table (absent = negative; the list is ``data/label_lists.yaml``). An unknown label rejects the row.

Boxes: the BBox coordinates are pixels of the distributed 1024x1024 PNGs — *not* of the acquisition
size in ``OriginalImage[Width,Height]`` (e.g. 2682x2749). So the reference size is ``images.csv``'s
source size when given, else 1024x1024, and boxes are scaled to the stored file's size (read from the
file header with Pillow when the file is present, else ``images.csv``'s width/height). ``Image``
records ``original_width/height`` = the reference size when the stored copy differs; the acquisition
size is kept in ``meta["acquisition_size"]``. The BBox table says ``Infiltrate`` where the labels say
``Infiltration``: aliases live in ``data/nih_aliases.yaml``.

Images on disk are optional. Data_Entry lists all 112,120 images and mirrors are often partial, so an
image absent from the folders is recorded as ``path=None`` (size unknown unless images.csv gives it);
an image that images.csv lists but that is not on disk, or that cannot be read, rejects the study.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from radvqa.model import Box, Image, Label, Study
from radvqa.sources.tables import Layout, plan_line_ranges, recognise_tables, text_before
from radvqa.sources.base import (
    LabelMapper,
    closed_label_list,
    Record,
    Source,
    SourceError,
    UnknownLabel,
    fnum,
    header_index,
    image_size,
    index_images,
    read_csv_rows,
    walk_files,
)
from radvqa.sources import SOURCES

NIH_REFERENCE_SIZE = (1024, 1024)  # the distributed PNGs; BBox_List coordinates are in these pixels

_DATA_ENTRY_COLS = {
    "image": ("Image Index",),
    "labels": ("Finding Labels",),
    "followup": ("Follow-up #", "Follow-up"),
    "patient": ("Patient ID",),
    "age": ("Patient Age",),
    "sex": ("Patient Gender", "Patient Sex"),
    "view": ("View Position",),
}


_LAYOUTS = [
    Layout("entries", "NIH Data_Entry table", ("Image Index", "Finding Labels", "Patient ID")),
    Layout("boxes", "NIH BBox_List table", ("Image Index", "Finding Label"), prefix=("Bbox",)),
    Layout("sizes", "image size table (images.csv)", ("image_index", "file", "source_width", "source_height", "width", "height")),
]


def _aliases() -> dict[str, str]:
    text = resources.files("radvqa.sources").joinpath("data/nih_aliases.yaml").read_text("utf-8")
    data = yaml.safe_load(text) or {}
    return dict(data.get("bbox_label_aliases", {}))


@SOURCES.register("nih-cxr14")
class NIHSource(Source):
    name = "nih-cxr14"
    counts_reads = True
    description = "NIH ChestX-ray14: Data_Entry_2017*.csv(.gz) + BBox_List_2017.csv (+ images, images.csv)"
    # the part of the Data_Entry table iter_part reads ({"lo", "hi", "line0"}); None: all of it
    _part: dict[str, Any] | None = None

    def plan_parts(self, inputs: Any, n_parts: int, *, ontology: Any = None,
                   limit: int | None = None) -> list[dict[str, Any]] | None:
        """Byte ranges of the Data_Entry table at line starts (``tables.plan_line_ranges``: one
        pass over its bytes that parses nothing). Every part re-reads the small BBox and
        images.csv tables; the first yields their rejects, the last the rejects of box rows on
        images the table does not list."""
        try:
            entries = recognise_tables(self, [Path(p) for p in inputs], _LAYOUTS)["entries"]
        except SourceError:
            return None  # read whole: the reader reports what is wrong
        return plan_line_ranges(entries[0], n_parts) if len(entries) == 1 else None

    def iter_part(self, inputs: Any, part: dict[str, Any], *, ontology: Any = None) -> Any:
        self._part = dict(part)
        return self.iter_records(inputs, ontology=ontology)

    def _records(self, inputs: list[Path], onto: Any, limit: int | None) -> Iterator[Record]:
        entries: list[Path] = []
        bbox_tables: list[Path] = []
        sizes_tables: list[Path] = []
        image_dirs: list[Path] = []
        for p in inputs:
            if p.is_dir():
                image_dirs.append(p)
            elif p.suffix.lower() in (".png", ".jpg", ".jpeg"):
                image_dirs.append(p.parent)
        # tables by their columns, whatever their names (renamed, gzipped mirrors)
        tables = recognise_tables(self, inputs, _LAYOUTS)
        entries, bbox_tables, sizes_tables = tables["entries"], tables["boxes"], tables["sizes"]
        if not entries:
            raise SourceError("nih-cxr14: no Data_Entry table (columns Image Index, Finding Labels, Patient ID, ...) among the inputs")
        if len(entries) > 1:
            # Two releases (2017 and v2020) list the same images: reading both would duplicate.
            raise SourceError(f"nih-cxr14: several Data_Entry tables given, pass one: {[str(e) for e in entries]}")

        mapper = LabelMapper(onto, "nih14")
        scheme_labels = closed_label_list("nih14")
        aliases = _aliases()
        box_refs: dict[str, list[str]] = {}
        part = self._part or {"lo": 0, "hi": None, "line0": 0}
        lo, hi = int(part["lo"]), part["hi"]
        boxes_by_image, box_rejects = self._read_boxes(bbox_tables, aliases, mapper, box_refs)
        sizes, size_rejects = self._read_sizes(sizes_tables)
        if lo == 0:
            yield from box_rejects
            yield from size_rejects
        images = index_images(image_dirs) if image_dirs else {}

        seen: set[str] = set()
        # the header, then this part's rows or (a later part) the earlier parts' rows
        rows = read_csv_rows(entries[0], 0, hi if lo == 0 else lo)
        first = next(rows, None)
        if first is None or first[1] is None:
            raise SourceError(f"nih-cxr14: {entries[0]}: empty or unreadable header")
        header = first[1]
        col = header_index(header, _DATA_ENTRY_COLS, str(entries[0]))
        # The bracketed size/spacing headers split into 2 cells each; find them by prefix.
        wcol = next((i for i, h in enumerate(header) if h.startswith("OriginalImage[")), None)
        scol = next((i for i, h in enumerate(header) if h.startswith("OriginalImagePixelSpacing")), None)
        ncols = max(col.values()) + 1
        short: set[str] = set()  # image indices of rows too short to use (the rest land in ``seen``)
        if lo:
            text = text_before(entries[0], lo)
            if text is not None:  # the planner splits only tables without quotes: split on commas
                rows.close()
                _earlier_images_text(text, col["image"], ncols, seen, short)
            else:
                _earlier_images(rows, col["image"], ncols, seen, short)
            rows = read_csv_rows(entries[0], lo, hi, int(part["line0"]))
        for lineno, row, err in rows:
            ref = f"{entries[0]}:{lineno}"
            if row is None:
                self.count_read()
                yield self.reject(ref, err or "unreadable line")
                continue
            if not any(c.strip() for c in row):
                continue  # blank line (e.g. trailing newline): not a record
            self.count_read()
            if len(row) < ncols:
                if len(row) > col["image"]:
                    short.add(row[col["image"]].strip())
                yield self.reject(ref, f"too few columns ({len(row)} < {ncols})")
                continue
            yield self._study(
                ref, row, col, wcol, scol, mapper, scheme_labels, boxes_by_image, sizes, images, seen
            )
        if hi is not None:
            return  # not the last part: the box rows are checked against every image there
        # a box row on an image that Data_Entry does not list would otherwise vanish
        for index in sorted(set(boxes_by_image) - seen - short):
            for bref in box_refs.get(index, ()):
                yield self.reject_row(bref, f"{index}: box row for an image that {entries[0].name} does not list")

    # ----------------------------------------------------------------------------------------
    def _study(
        self,
        ref: str,
        row: list[str],
        col: dict[str, int],
        wcol: int | None,
        scol: int | None,
        mapper: LabelMapper,
        scheme_labels: list[str],
        boxes_by_image: dict[str, list[tuple[str, list[str], float, float, float, float]]],
        sizes: dict[str, tuple[str, int, int, int, int]],
        images: dict[str, Path],
        seen: set[str],
    ) -> Record:
        index = row[col["image"]].strip()
        if not index:
            return self.reject(ref, "empty Image Index")
        if index in seen:
            return self.reject(ref, f"duplicate Image Index {index}")
        seen.add(index)
        stem = index.rsplit(".", 1)[0]
        pid = row[col["patient"]].strip()
        try:
            fu = int(row[col["followup"]])
            pid_n = int(pid)
        except ValueError:
            return self.reject(ref, f"{index}: non-numeric Follow-up # or Patient ID")

        # labels
        positives = [x.strip() for x in row[col["labels"]].split("|") if x.strip()]
        if not positives:
            return self.reject(ref, f"{index}: empty Finding Labels")
        labels: list[Label] = []
        try:
            for name in positives:
                labels.append(Label(scheme="nih14", name=name, value=1, findings=mapper(name), image_id=index))
        except UnknownLabel as e:
            return self.reject(ref, f"{index}: {e}")
        pos_norm = {_norm(p) for p in positives}
        for name in scheme_labels:
            if _norm(name) not in pos_norm:
                labels.append(Label(scheme="nih14", name=name, value=0, findings=mapper(name), image_id=index))

        # image and size
        meta: dict[str, str] = {"followup": str(fu), "row": ref.rsplit(":", 1)[-1]}
        age = row[col["age"]].strip()
        if age:
            meta["age"] = age.lstrip("0") or "0"
        sex = row[col["sex"]].strip()
        if sex:
            meta["sex"] = sex
        if wcol is not None and wcol + 1 < len(row):
            meta["acquisition_size"] = f"{row[wcol].strip()}x{row[wcol + 1].strip()}"
        if scol is not None and scol + 1 < len(row):
            meta["pixel_spacing_mm"] = f"{row[scol].strip()},{row[scol + 1].strip()}"

        ref_w, ref_h = NIH_REFERENCE_SIZE
        width = height = None
        path: str | None = None
        listed = sizes.get(index)
        if listed is not None:
            fname, ref_w, ref_h, width, height = listed
            f = images.get(fname) or images.get(index) or images.get(stem)
            if images and f is None:
                return self.reject(ref, f"{index}: image {fname} listed in images.csv not found on disk")
        else:
            f = images.get(index) or images.get(stem)
        if f is not None:
            try:
                fw, fh = image_size(f)
            except ValueError as e:
                return self.reject(ref, f"{index}: {e}")
            if width is not None and (fw, fh) != (width, height):
                meta["size_note"] = f"images.csv says {width}x{height}, file header says {fw}x{fh}: file wins"
            width, height = fw, fh
            path = str(f)
        view = row[col["view"]].strip().upper() or None
        resized = width is not None and (width, height) != (ref_w, ref_h)
        image = Image(
            id=index,
            path=path,
            width=width,
            height=height,
            view=view,
            modality="CR",
            # the space the boxes are in: the acquisition (released) size when the file is a resized
            # copy or absent, so boxes can always be normalised (#17: export without the image file)
            original_width=ref_w if resized or width is None else None,
            original_height=ref_h if resized or width is None else None,
        )

        # boxes, rescaled into the stored file's pixels when its size is known
        boxes: list[Box] = []
        sx = (width / ref_w) if width is not None else 1.0
        sy = (height / ref_h) if height is not None else 1.0
        for label, fids, x, y, w, h in boxes_by_image.get(index, ()):
            boxes.append(
                Box(
                    image_id=index,
                    x1=x * sx,
                    y1=y * sy,
                    x2=(x + w) * sx,
                    y2=(y + h) * sy,
                    source="expert",
                    reader="nih",
                    label=fids[0] if fids else None,
                )
            )
            # In the release every box's finding is among the image's labels; if a copy disagrees,
            # say so (localize keeps the box on the finding's absent observation, noting it).
            if _norm(label) not in pos_norm:
                meta["box_label_not_in_labels"] = label
        if width is None and boxes:
            meta["box_space"] = f"{ref_w}x{ref_h} (stored image size unknown, boxes not rescaled)"
        return Study(
            id=f"nih-cxr14:{stem}",
            patient_id=f"nih-cxr14:{pid_n:08d}",
            source=self.name,
            images=[image],
            labels=labels,
            boxes=boxes,
            study_time=f"{fu:04d}",
            meta=meta,
        )

    # ----------------------------------------------------------------------------------------
    def _read_boxes(
        self, tables: list[Path], aliases: dict[str, str], mapper: LabelMapper,
        refs: dict[str, list[str]] | None = None,
    ) -> tuple[dict[str, list[tuple[str, list[str], float, float, float, float]]], list[Record]]:
        out: dict[str, list[tuple[str, list[str], float, float, float, float]]] = {}
        rejects: list[Record] = []
        for t in tables:
            rows = read_csv_rows(t)
            first = next(rows, None)
            if first is None or first[1] is None:
                raise SourceError(f"nih-cxr14: {t}: empty or unreadable header")
            # Malformed header: "Image Index, Finding Label, Bbox [x, y, w, h], , ," — the data is
            # positional, so check the first two names and take columns 2..5 as x, y, w, h.
            h0 = [c.strip().lower() for c in first[1]]
            if len(h0) < 3 or h0[0] != "image index" or not h0[2].startswith("bbox"):
                raise SourceError(f"nih-cxr14: {t}: not a BBox_List table (header {first[1]})")
            for lineno, row, err in rows:
                ref = f"{t}:{lineno}"
                if row is None:
                    rejects.append(self.reject_row(ref, err or "unreadable line"))
                    continue
                if not any(c.strip() for c in row):
                    continue
                if len(row) < 6:
                    rejects.append(self.reject_row(ref, f"box row has {len(row)} cells, needs 6"))
                    continue
                index, label = row[0].strip(), row[1].strip()
                try:
                    x, y, w, h = (fnum(c) for c in row[2:6])
                except ValueError:
                    rejects.append(self.reject_row(ref, f"{index}: non-numeric box {row[2:6]}"))
                    continue
                if w <= 0 or h <= 0:
                    rejects.append(self.reject_row(ref, f"{index}: degenerate box (w={w}, h={h})"))
                    continue
                name = aliases.get(label, label)
                try:
                    fids = mapper(name)
                except UnknownLabel as e:
                    rejects.append(self.reject_row(ref, f"{index}: box {e}"))
                    continue
                out.setdefault(index, []).append((name, fids, x, y, w, h))
                if refs is not None:
                    refs.setdefault(index, []).append(ref)
        # Box rows are not studies: their rejects are reported with stage "source" and the ref of
        # the box row; the study itself is still built from Data_Entry.
        return out, rejects

    def _read_sizes(self, tables: list[Path]) -> tuple[dict[str, tuple[str, int, int, int, int]], list[Record]]:
        out: dict[str, tuple[str, int, int, int, int]] = {}
        rejects: list[Record] = []
        want = {
            "image": ("image_index",),
            "file": ("file",),
            "sw": ("source_width",),
            "sh": ("source_height",),
            "w": ("width",),
            "h": ("height",),
        }
        for t in tables:
            rows = read_csv_rows(t)
            first = next(rows, None)
            if first is None or first[1] is None:
                raise SourceError(f"nih-cxr14: {t}: empty or unreadable header")
            c = header_index(first[1], want, str(t))
            for lineno, row, err in rows:
                if row is None:
                    rejects.append(self.reject_row(f"{t}:{lineno}", err or "unreadable line"))
                    continue
                if not any(x.strip() for x in row):
                    continue
                try:
                    sw, sh, w, h = (int(row[c[k]]) for k in ("sw", "sh", "w", "h"))
                    if min(sw, sh, w, h) <= 0:
                        raise ValueError("a size is not positive")
                    out[row[c["image"]]] = (row[c["file"]], sw, sh, w, h)
                except (ValueError, IndexError) as e:
                    # the image is still used, with the size read from its file (or unknown)
                    rejects.append(self.reject_row(f"{t}:{lineno}", f"malformed images.csv row {row[:6]}: {e}"))
        return out, rejects


def _earlier_images(rows: Iterator[tuple[int, list[str] | None, str | None]], icol: int, ncols: int,
                    seen: set[str], short: set[str]) -> None:
    """The image indices of an earlier part's rows, as reading them would leave them in ``seen``
    and ``short``: a later duplicate is then rejected here as one reader rejects it, and the last
    part knows every listed image (box rows on unlisted images)."""
    for _, row, _ in rows:
        if row is None or not any(c.strip() for c in row):
            continue
        if len(row) < ncols:
            if len(row) > icol:
                short.add(row[icol].strip())
        elif index := row[icol].strip():
            seen.add(index)


def _earlier_images_text(text: str, icol: int, ncols: int, seen: set[str], short: set[str]) -> None:
    """``_earlier_images`` over the text of the earlier parts (header first), split on commas."""
    for line in text.split("\n")[1:]:
        row = line.split(",")
        if len(row) >= ncols:
            if index := row[icol].strip():  # a blank row has an empty index too
                seen.add(index)
        elif len(row) > icol and line.replace(",", "").strip():  # not blank: every cell is whitespace
            short.add(row[icol].strip())


@lru_cache(maxsize=4096)
def _norm(s: str) -> str:
    return "".join(ch for ch in s.lower() if ch.isalnum())
