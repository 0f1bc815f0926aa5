"""RadImageNet (Mei et al., Radiology: AI 2022): CT, MR and US slices by modality/anatomy/pathology.

Two inputs:
- the folder tree as distributed: ``<root>/<modality>/<anatomy>/<pathology>/<file>.png``
  (e.g. ``radiology_ai/MR/knee/acl_pathology/knee001234.png``); a folder is recognised as the
  modality level by its name (CT, MR, US, any case). Once the tree is recognised, an image lying
  elsewhere under the inputs is a Reject (never skipped silently). The release's ultrasound part is
  ``US/<organ class>/<file>`` (one level shorter): those classes name the organ imaged, not a
  pathology, so there is no label to map and a "no pathology" answer would be a guess; each such
  image is a Reject saying so (RadImageNet-VQA keeps CT and MR only). A ``US/<anatomy>/<pathology>``
  tree is read like CT/MR;
- a CSV listing (e.g. ``RadiologyAI_train.csv``) with a path column (``filename``/``path``/``image``)
  whose last four parts are modality/anatomy/pathology/file; an optional ``split`` column. Files are
  resolved against the given image folders when any are given (missing -> Reject).

Study = one image (RadImageNet has no study or patient ids): ``radimagenet:<modality>/<anatomy>/
<pathology>/<stem>``. ``Image.modality`` = CT/MR/US.

Ontology (``radvqa.ontology``): the anatomy folder ("af", "abd", "knee", ...) resolves through the
anatomies' synonyms; ``Study.anatomy`` is that anatomy id ("ankle_foot", "abdomen_pelvis"). A folder
that names no ontology anatomy rejects the image. A modality the anatomy is not listed for is kept,
with ``meta["modality_note"]``.

Label (scheme ``radimagenet``, value 1, per image): ``name`` = the folder code as shipped
(``"af/achilles_pathology_"``), ``meta["label"]`` = the scheme key (``"ankle_foot/achilles_pathology"``),
``findings`` = ``Ontology.map_code("radimagenet", (anatomy, pathology))``. Normal images
(``is_normal_label``) have ``findings == []``; the ``normal`` folder of an anatomy the scheme has no
labels for (the US anatomies) is normal too, noted in ``meta["label_note"]``. Any other pathology
the scheme does not know for that anatomy rejects the image.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from radvqa.model import Image, Label, Reject, Study
from radvqa.sources.tables import Layout, recognise_tables
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
from radvqa.sources import SOURCES

MODALITIES = {"ct": "CT", "mr": "MR", "mri": "MR", "us": "US"}
_IMG = (".png", ".jpg", ".jpeg")
US_REASON = ("US/{cls}/: RadImageNet's ultrasound classes name an organ, not a pathology: no label to map "
             "(not used; RadImageNet-VQA keeps CT and MR)")


def _us_organ(parts: tuple[str, ...] | list[str]) -> bool:
    """``US/<organ class>/<file>``: the release's ultrasound layout, one level shorter than CT/MR."""
    return len(parts) >= 3 and parts[-3].lower() == "us" and (len(parts) < 4 or parts[-4].lower() not in MODALITIES)


_LAYOUTS = [Layout("listing", "RadImageNet CSV listing", (), any_of=("filename", "path", "image", "file"))]


@SOURCES.register("radimagenet")
class RadImageNetSource(Source):
    name = "radimagenet"
    counts_reads = True
    description = "RadImageNet: modality/anatomy/pathology/*.png folders, or a CSV listing"

    def _records(self, inputs: list[Path], onto: Any, limit: int | None) -> Iterator[Record]:
        mapper = LabelMapper(onto, "radimagenet")
        # a listing named explicitly, under any name, plain or gzip (folders are walked for images)
        csvs = recognise_tables(self, [p for p in inputs if p.is_file()], _LAYOUTS)["listing"]
        dirs = [p for p in inputs if p.is_dir()]
        if csvs:
            for t in csvs:
                yield from self._from_csv(t, dirs, onto, mapper)
            return
        found = False
        strays: list[Path] = []
        for f in walk_files(dirs):
            if f.suffix.lower() not in _IMG:
                continue
            self.count_read()  # one image file = one record (a study, a reject, or a stray)
            parts = f.parts
            if _us_organ(parts):
                found = True
                yield self.reject(f, US_REASON.format(cls=parts[-2]))
                continue
            if len(parts) < 4 or parts[-4].lower() not in MODALITIES:
                strays.append(f)  # an image outside the layout: a Reject once the tree is recognised
                continue
            found = True
            yield self._study(str(f), parts[-4], parts[-3], parts[-2], f, None, onto, mapper)
        if found:
            for f in strays:
                yield self.reject(f, "image not under <CT|MR|US>/<anatomy>/<pathology>/")
        else:
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
        for item in self.table_rows(rows, len(low), t):
            self.count_read()  # one listing row = one image = one record
            if isinstance(item, Reject):
                yield item
                continue
            ref, _, row = item
            rel = row[pcol].strip().replace("\\", "/")
            parts = rel.split("/")
            if _us_organ(parts):
                yield self.reject(ref, US_REASON.format(cls=parts[-2]))
                continue
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
        code = f"{modality}/{anatomy}/{pathology}"
        meta: dict[str, str] = {"pathology": pathology}
        anat = _anatomy(onto, anatomy)
        if anat is None:
            # the label would be a guess too (pathology names repeat across anatomies): reject
            return self.reject(ref, f"{code}: anatomy folder {anatomy!r} is not an ontology anatomy")
        aid = anat.id
        mods = tuple(getattr(anat, "modalities", ()) or ())
        if mods and mod not in mods:
            meta["modality_note"] = f"{mod} not among the ontology's modalities of {aid} ({', '.join(mods)})"
        key = f"{aid}/{_path_key(pathology)}"
        try:
            fids = _map(onto, mapper, anatomy, pathology, key)
            normal = _is_normal(onto, key)
        except UnknownLabel:
            if _path_key(pathology) != "normal":
                return self.reject(ref, f"{code}: pathology {pathology!r} is not a radimagenet label of anatomy {aid}")
            # "normal" is a class in every RadImageNet anatomy; the scheme lists it only where it
            # has pathology labels too (CT/MR), so US normals are still normal, not unknown
            fids, normal = [], True
            meta["label_note"] = f"{key} not in the radimagenet scheme; folder 'normal' read as no finding"
        if normal:
            fids = []
        meta["label"] = key
        w = h = None
        if f is not None:
            try:
                w, h = image_size(f)
            except ValueError as e:
                return self.reject(ref, str(e))
        sid = f"{mod}/{anatomy}/{pathology}/{stem}"
        iid = f"{mod}/{anatomy}/{pathology}/{f.name if f is not None else stem}"
        return Study(
            id=f"radimagenet:{sid}",
            patient_id=f"radimagenet:{sid}",
            source=self.name,
            images=[Image(id=iid, path=str(f) if f is not None else None, width=w, height=h, modality=mod)],
            # name: the folder code as shipped ("af/achilles_pathology_"); the scheme key is in meta
            labels=[Label(scheme="radimagenet", name=f"{anatomy}/{pathology}", value=1, findings=fids, image_id=iid)],
            split=split or None,
            anatomy=aid,
            meta=meta,
        )


def _path_key(pathology: str) -> str:
    # the scheme's spelling of a pathology folder: lower case, "_" for blanks, no trailing "_"
    # (folders such as "achilles_pathology_" and "Plantar_plate_tear" exist in the release)
    return "_".join(pathology.lower().replace("-", " ").split()).strip("_")


def _anatomy(onto: Any, folder: str) -> Any:
    """The ontology anatomy a folder names ("af", "abd", "knee"), or None."""
    by_syn = getattr(onto, "anatomy_by_synonym", None)
    if by_syn is not None:
        return by_syn(folder) or by_syn(folder.replace("_", " "))
    # an ontology copy without anatomies (test stubs): the folder name stands in for the id
    return _PlainAnatomy(folder.lower())


class _PlainAnatomy:
    def __init__(self, aid: str) -> None:
        self.id = aid
        self.modalities: tuple[str, ...] = ()


def _map(onto: Any, mapper: LabelMapper, anatomy: str, pathology: str, key: str) -> list[str]:
    map_code = getattr(onto, "map_code", None)
    if map_code is not None:
        try:
            return list(map_code("radimagenet", (anatomy, pathology)))
        except KeyError:
            raise UnknownLabel("radimagenet", f"{anatomy}/{pathology}") from None
    return mapper(key)


def _is_normal(onto: Any, key: str) -> bool:
    is_normal = getattr(onto, "is_normal_label", None)
    if is_normal is not None:
        return bool(is_normal("radimagenet", key))
    return key.rsplit("/", 1)[-1] == "normal"
