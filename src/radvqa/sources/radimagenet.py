"""RadImageNet (Mei et al., Radiology: AI 2022): CT, MR and US slices by modality/anatomy/pathology.

Two inputs:
- the folder tree as distributed: ``<root>/<modality>/<anatomy>/<pathology>/<file>.png``
  (e.g. ``radiology_ai/MR/knee/acl_pathology/knee001234.png``); a folder is recognised as the
  modality level by its name (CT, MR, US, any case);
- a CSV listing (e.g. ``RadiologyAI_train.csv``) with a path column (``filename``/``path``/``image``)
  whose last four parts are modality/anatomy/pathology/file; an optional ``split`` column. Files are
  resolved against the given image folders when any are given (missing -> Reject).

Study = one image (RadImageNet has no study or patient ids): ``radimagenet:<modality>/<anatomy>/
<pathology>/<stem>``. ``Image.modality`` = CT/MR/US; ``Study.anatomy`` = the ontology anatomy id
when the ontology knows the folder name, else the folder name lower-cased (noted in meta).

Label (scheme ``radimagenet``): the pathology folder, looked up as ``anatomy/pathology`` then as
``pathology``; ``normal`` maps to no finding. A pathology the scheme does not know rejects the image.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from radvqa.model import Image, Label, Study
from radvqa.sources.base import (
    LabelMapper,
    Record,
    Source,
    SourceError,
    UnknownLabel,
    image_size,
    read_csv_rows,
    walk_files,
)

MODALITIES = {"ct": "CT", "mr": "MR", "mri": "MR", "us": "US"}
_IMG = (".png", ".jpg", ".jpeg")


class RadImageNetSource(Source):
    name = "radimagenet"
    description = "RadImageNet: modality/anatomy/pathology/*.png folders, or a CSV listing"

    def _records(self, inputs: list[Path], onto: Any, limit: int | None) -> Iterator[Record]:
        mapper = LabelMapper(onto, "radimagenet")
        csvs = [p for p in inputs if p.is_file() and p.suffix.lower() == ".csv"]
        dirs = [p for p in inputs if p.is_dir()]
        if csvs:
            for t in csvs:
                yield from self._from_csv(t, dirs, onto, mapper)
            return
        found = False
        for f in walk_files(dirs):
            if f.suffix.lower() not in _IMG:
                continue
            parts = f.parts
            if len(parts) < 4 or parts[-4].lower() not in MODALITIES:
                continue
            found = True
            yield self._study(str(f), parts[-4], parts[-3], parts[-2], f, None, onto, mapper)
        if not found:
            raise SourceError("radimagenet: no <CT|MR|US>/<anatomy>/<pathology>/*.png files and no CSV listing in the inputs")

    def _from_csv(self, t: Path, dirs: list[Path], onto: Any, mapper: LabelMapper) -> Iterator[Record]:
        rows = read_csv_rows(t)
        first = next(rows, None)
        if first is None or first[1] is None:
            raise SourceError(f"radimagenet: {t}: empty or unreadable header")
        low = [h.strip().lower() for h in first[1]]
        pcol = next((low.index(n) for n in ("filename", "path", "image", "file") if n in low), None)
        if pcol is None:
            raise SourceError(f"radimagenet: {t}: no filename/path/image column (header {first[1]})")
        scol = low.index("split") if "split" in low else None
        for lineno, row, err in rows:
            ref = f"{t}:{lineno}"
            if row is None:
                yield self.reject(ref, err or "unreadable line")
                continue
            if not any(x.strip() for x in row):
                continue
            if len(row) != len(low):
                yield self.reject(ref, f"{len(row)} cells, header has {len(low)}")
                continue
            rel = row[pcol].strip().replace("\\", "/")
            parts = rel.split("/")
            if len(parts) < 4 or parts[-4].lower() not in MODALITIES:
                yield self.reject(ref, f"path {rel!r} is not <CT|MR|US>/<anatomy>/<pathology>/<file>")
                continue
            f: Path | None = None
            if dirs:
                cands = [d / rel for d in dirs] + [d / "/".join(parts[-4:]) for d in dirs]
                f = next((c for c in cands if c.is_file()), None)
                if f is None:
                    yield self.reject(ref, f"image {rel} not found")
                    continue
            yield self._study(ref, parts[-4], parts[-3], parts[-2], f, row[scol].strip() if scol is not None else None, onto, mapper, stem=Path(parts[-1]).stem)

    def _study(
        self,
        ref: str,
        modality: str,
        anatomy: str,
        pathology: str,
        f: Path | None,
        split: str | None,
        onto: Any,
        mapper: LabelMapper,
        stem: str | None = None,
    ) -> Record:
        mod = MODALITIES[modality.lower()]
        stem = stem or (f.stem if f is not None else "")
        try:
            try:
                fids = mapper(f"{anatomy}/{pathology}")
                name = f"{anatomy}/{pathology}"
            except UnknownLabel:
                fids = mapper(pathology)
                name = pathology
        except UnknownLabel as e:
            return self.reject(ref, f"{modality}/{anatomy}/{pathology}: {e}")
        w = h = None
        if f is not None:
            try:
                w, h = image_size(f)
            except ValueError as e:
                return self.reject(ref, str(e))
        meta: dict[str, str] = {"pathology": pathology}
        anat = None
        by_syn = getattr(onto, "anatomy_by_synonym", None)
        a = by_syn(anatomy) if by_syn is not None else None
        if a is not None:
            anat = a.id
        else:
            anat = anatomy.lower()
            meta["anatomy_note"] = f"anatomy {anatomy!r} not in the ontology"
        key = f"{mod}/{anatomy}/{pathology}/{stem}"
        iid = f"{mod}/{anatomy}/{pathology}/{f.name if f is not None else stem}"
        return Study(
            id=f"radimagenet:{key}",
            patient_id=f"radimagenet:{key}",
            source=self.name,
            images=[Image(id=iid, path=str(f) if f is not None else None, width=w, height=h, modality=mod)],
            labels=[Label(scheme="radimagenet", name=name, value=1, findings=fids, image_id=iid)],
            split=split or None,
            anatomy=anat,
            meta=meta,
        )
