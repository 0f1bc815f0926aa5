"""``radvqa export DATASET --format llava|jsonl|qba-json|coco``: the built dataset in other tools' layouts.

Common to all: ``--split S`` keeps one split; the output is written under a temporary name and
renamed on success (a failed export leaves nothing, an earlier one intact); a side file beside a
single-file output is named after it (``llava.json`` -> ``llava.info.json``).

- ``jsonl``: one QA row per line, every column (``radvqa.model.QA`` as JSON).
- ``llava``: LLaVA conversation records (``id``, ``image``, ``conversations`` human/gpt) as one
  JSON array (what LLaVA's and LLaMA-Factory's loaders ``json.load``); JSON Lines with ``--jsonl``
  or a ``.jsonl`` destination. Image key convention: always ``image``, a path string for one image,
  a list of paths for several (LLaVA-NeXT / OneVision); absent on text-only records. Rows without an
  image file are skipped and counted (``skipped_no_image``) unless ``--keep-imageless``. Boxes are
  written into the answer text in a declared format (``<ref>LABEL</ref><box>[x1, y1, x2, y2]</box>``)
  with coordinates normalised to 0..1000 of the image size (``norm1000``, default; integers), to
  0..1 (``norm1``, 3 decimals) or in the stored image's pixels (``pixels``); without the file the
  size the boxes are in (``original_width``/``height``, NIH: 1024x1024) is used. The structured
  boxes (pixels) are kept in each record's ``boxes`` field too.
- ``qba-json``: CXR-QBA study documents (``{"patient_id", "study_id", "split", "questions":
  [{question_id, question_type, question_strategy, question, obs_ids, answers: [{answer_type
  main_answer | details | related_information, text, name_tag, regions, obs_entities, positiveness,
  modifiers, localization: {image_id: {bboxes}}}], question_quality: {overall}}]}``), one JSON Lines
  file per split (``qa_<split>.jsonl``, ``scene_graphs_<split>.jsonl``); ``--per-study`` writes the
  released layout instead, ``qa/p{NN}/{patient}/{study}.qa.json`` and
  ``scene_data/p{NN}/{patient}/{study}.scene_graph.json`` (``p{NN}``: a stable bucket of the patient id).
- ``coco``: one JSON file (``--out x.json``; a folder gets ``instances.json``) with images, categories
  (finding ids; region ids with ``--include-regions``) and one annotation per distinct box (``bbox`` =
  [x, y, w, h] pixels). Images without a file are skipped and counted unless ``--keep-imageless``.

All exports stream the shards (rows of a study are contiguous inside a shard).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec

from radvqa.io.parquet import iter_objects
from radvqa.model import QA, SceneGraph

FORMATS = ("llava", "jsonl", "qba-json", "coco")
INFO_NAME = "export_info.json"  # inside a folder export (qba-json); single files get NAME.info.json
BOX_FORMATS = ("norm1000", "norm1", "pixels")
_PART_NAMES = {"main": "main_answer", "details": "details", "related": "related_information"}


def _safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", s).strip("_") or "_"


def _bucket(patient_id: str) -> str:
    return f"p{int.from_bytes(hashlib.blake2b(patient_id.encode(), digest_size=4).digest(), 'big') % 100:02d}"


def _image_sizes(out: Path) -> dict[tuple[str, str], tuple[int | None, int | None]]:
    import pyarrow.parquet as pq

    from radvqa.io.parquet import shard_files

    sizes: dict[tuple[str, str], tuple[int | None, int | None]] = {}
    for f in shard_files(out, "scene_graphs"):
        t = pq.read_table(f, columns=["study_id", "images"])
        for sid, ims in zip(t.column("study_id").to_pylist(), t.column("images").to_pylist()):
            for im in ims or []:
                # a stored file's size, else the space the boxes were left in (NIH without its file: 1024x1024)
                w, h = im.get("width"), im.get("height")
                if not w or not h:
                    w, h = im.get("original_width"), im.get("original_height")
                sizes[(sid, im["id"])] = (w, h)
    return sizes


def _box_text(b: Any, fmt: str, size: tuple[int | None, int | None] | None) -> str:
    coords = [b.x1, b.y1, b.x2, b.y2]
    if fmt == "pixels":
        vals = [str(round(v)) for v in coords]
    else:
        if not size or not size[0] or not size[1]:
            raise ValueError(f"box on image {b.image_id!r}: image size unknown, cannot normalise (use --box-format pixels)")
        w, h = float(size[0]), float(size[1])
        rel = [coords[0] / w, coords[1] / h, coords[2] / w, coords[3] / h]
        vals = [str(min(999, max(0, int(v * 1000)))) for v in rel] if fmt == "norm1000" else [f"{min(1.0, max(0.0, v)):.3f}" for v in rel]
    label = b.label or "box"
    return f"<ref>{label}</ref><box>[{', '.join(vals)}]</box>"


def llava_record(q: QA, box_format: str = "norm1000", sizes: dict[tuple[str, str], Any] | None = None,
                 image_root: str | None = None) -> dict[str, Any]:
    # an image without a file ("") is no image: no <image> token, no path (text-only record)
    paths = [(f"{image_root.rstrip('/')}/{p}" if image_root and not p.startswith("/") else p) for p in q.image_paths if p]
    prompt = "<image>\n" * len(paths) + q.question
    if q.choices:
        prompt += "\nOptions: " + " ".join(f"{chr(65 + i)}. {c}" for i, c in enumerate(q.choices))
    answer = q.answer
    if q.boxes:
        idx = {im: i + 1 for i, im in enumerate(q.image_ids)}
        parts = []
        for b in q.boxes:
            sz = (sizes or {}).get((q.study_id, b.image_id))
            if sz is None and q.reference_study_id:  # diff questions box the earlier study's image
                sz = (sizes or {}).get((q.reference_study_id, b.image_id))
            t = _box_text(b, box_format, sz)
            parts.append(t if len(q.image_ids) <= 1 else f"{t} (image {idx.get(b.image_id, '?')})")
        answer += "\nBoxes: " + " ".join(parts)
    rec: dict[str, Any] = {"id": q.qa_id}
    if len(paths) == 1:
        rec["image"] = paths[0]
    elif paths:
        rec["image"] = paths  # one key: a list for several images (LLaVA-NeXT / OneVision)
    rec["conversations"] = [{"from": "human", "value": prompt}, {"from": "gpt", "value": answer}]
    rec["boxes"] = [{"image_id": b.image_id, "bbox": [b.x1, b.y1, b.x2, b.y2], "label": b.label, "source": b.source} for b in q.boxes]
    rec["meta"] = {"study_id": q.study_id, "patient_id": q.patient_id, "split": q.split, "strategy": q.strategy,
                   "question_type": q.question_type, "answer_short": q.answer_short, "grade": q.grade}
    return rec


def _loc(boxes: list[Any]) -> dict[str, Any]:
    loc: dict[str, Any] = {}
    for b in boxes:
        loc.setdefault(b.image_id, {"bboxes": []})["bboxes"].append([b.x1, b.y1, b.x2, b.y2])
    return loc


def qba_question(q: QA) -> dict[str, Any]:
    answers = []
    for i, p in enumerate(q.answer_parts):
        mods = [["severity", p.severity]] if p.severity else []
        pos = None
        if p.certainty == "present":
            pos = "pos"
        elif p.certainty == "absent":
            pos = "neg"
        elif p.certainty == "uncertain":
            pos = "uncertain"
        answers.append({
            "answer_id": i, "answer_type": _PART_NAMES.get(p.part_type, p.part_type), "level": p.level,
            "text": p.text, "name_tag": p.tag, "regions": list(p.regions), "obs_entities": list(p.findings),
            "laterality": p.laterality, "certainty": p.certainty, "positiveness": pos, "modifiers": mods,
            "localization": _loc(p.boxes),
        })
    if not answers:
        answers.append({"answer_id": 0, "answer_type": "main_answer", "level": 0, "text": q.answer, "name_tag": None,
                        "regions": list(q.regions), "obs_entities": list(q.findings), "laterality": None, "certainty": None,
                        "positiveness": {"positive": "pos", "negative": "neg"}.get(q.polarity or ""), "modifiers": [],
                        "localization": _loc(q.boxes)})
    return {
        "question_id": q.qa_id, "question_type": q.question_type, "question_strategy": q.strategy,
        "template_id": q.template_id, "template_version": q.template_version, "question": q.question,
        "obs_ids": [s for s in q.provenance if re.fullmatch(r"O\d+", s)],
        "answers": answers, "answer_short": q.answer_short, "choices": q.choices,
        "question_quality": {"overall": q.grade, "reasons": list(q.grade_reasons)},
        "split": q.split, "image_ids": list(q.image_ids),
    }


def _by_study(qas: Iterator[QA]) -> Iterator[tuple[str, str, list[QA]]]:
    cur: list[QA] = []
    for q in qas:
        if cur and q.study_id != cur[0].study_id:
            yield cur[0].patient_id, cur[0].study_id, cur
            cur = []
        cur.append(q)
    if cur:
        yield cur[0].patient_id, cur[0].study_id, cur


def manifest_image_roots(out: Path) -> list[str]:
    """The build's ``image_roots`` (stored image paths are relative to the first that holds them)."""
    try:
        m = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    roots = m.get("image_roots") if isinstance(m, dict) else None
    return [r for r in roots if isinstance(r, str)] if isinstance(roots, list) else []


class _Absolute:
    """Relative stored path -> absolute path under the first image root where the file exists."""

    def __init__(self, roots: list[str]) -> None:
        self.roots = roots
        self._memo: dict[str, str] = {}

    def __call__(self, p: str) -> str:
        if not p or p.startswith("/") or not self.roots:
            return p
        got = self._memo.get(p)
        if got is None:
            got = next((f"{r}/{p}" for r in self.roots if (Path(r) / p).exists()), f"{self.roots[0]}/{p}")
            self._memo[p] = got
        return got


@contextmanager
def _staged(dest: Path, is_dir: bool = False) -> Iterator[Path]:
    """Write under a temporary name beside ``dest``; rename onto ``dest`` only when the block ends
    without an error, so a failed export leaves no partial file (and an earlier export intact)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    if is_dir:
        if dest.exists() and not (dest / INFO_NAME).exists():
            raise FileExistsError(f"{dest} exists and is not a radvqa export: choose another --out")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise
    if is_dir and dest.exists():
        shutil.rmtree(dest)
    os.replace(tmp, dest)


def info_path(dest: Path) -> Path:
    """The side file of a single-file export, beside it and named after it (llava.json ->
    llava.info.json)."""
    name = dest.name
    for suffix in (".jsonl", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return dest.with_name(name + ".info.json")


def _has_image(paths: Any) -> bool:
    """Every image of the row has its file (one rule for stats, export and predict: a comparison
    row whose earlier image is missing is not a two-image record)."""
    return bool(paths) and all(bool(p) for p in paths)


def export(out: Path | str, fmt: str, dest: Path | str | None = None, box_format: str = "norm1000",
           image_root: str | None = None, include_regions: bool = False,
           absolute_images: bool = False, split: str | None = None, keep_imageless: bool = False,
           jsonl: bool = False, per_study: bool = False) -> dict[str, Any]:
    """Write the export; returns {"path": ..., "records": n, "skipped_no_image": k, ...}.

    Image paths are written as stored (relative to the manifest's ``image_roots``, which the info
    file and the COCO ``info`` repeat); ``image_root`` prefixes relative ones (llava);
    ``absolute_images`` resolves them through ``image_roots`` (llava, coco). ``split`` keeps one
    split. Rows (COCO: images) without an image file are skipped and counted unless
    ``keep_imageless`` (llava, coco; jsonl and qba-json keep every row: they carry no pixels).
    Every file is written under a temporary name and renamed on success."""
    out = Path(out)
    roots = manifest_image_roots(out)
    absolute = _Absolute(roots) if absolute_images else None
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r} (one of {', '.join(FORMATS)})")
    if box_format not in BOX_FORMATS:
        raise ValueError(f"unknown box format {box_format!r} (one of {', '.join(BOX_FORMATS)})")
    if not (out / "qa").is_dir():
        raise FileNotFoundError(f"{out}/qa not found: is {out} a radvqa build output?")
    sfx = f"_{_safe(split)}" if split else ""
    default = {"llava": f"export/llava{sfx}.json{'l' if jsonl else ''}", "jsonl": f"export/qa{sfx}.jsonl",
               "qba-json": f"export/qba{sfx}", "coco": f"export/coco{sfx}.json"}
    dest = Path(dest) if dest else out / default[fmt]
    enc = msgspec.json.Encoder()
    n = skipped = 0

    def rows() -> Iterator[QA]:
        for q in iter_objects(out, "qa"):
            if split is None or q.split == split:
                yield q

    if fmt == "jsonl":
        with _staged(dest) as tmp, open(tmp, "wb") as f:
            for q in rows():
                f.write(enc.encode(q) + b"\n")
                n += 1
        return {"path": str(dest), "records": n, "split": split}
    if fmt == "llava":
        jsonl = jsonl or dest.name.lower().endswith(".jsonl")  # the name asks for JSON Lines
        sizes = _image_sizes(out) if box_format != "pixels" else None
        with _staged(dest) as tmp, open(tmp, "wb") as f:
            # LLaVA's loader reads a JSON array (json.load); JSON Lines on request (--jsonl)
            f.write(b"" if jsonl else b"[")
            for q in rows():
                if not keep_imageless and not _has_image(q.image_paths):
                    skipped += 1
                    continue
                if absolute is not None:
                    q.image_paths = [absolute(p) for p in q.image_paths]
                rec = enc.encode(llava_record(q, box_format, sizes, image_root))
                f.write(rec + b"\n" if jsonl else (b"\n" if n == 0 else b",\n") + rec)
                n += 1
            f.write(b"" if jsonl else b"\n]\n")
        info = {
            "format": "llava", "layout": "JSON Lines (one record a line)" if jsonl else "one JSON array",
            "records": n, "skipped_no_image": skipped, "split": split, "box_format": box_format,
            "image_key": "'image': a path string for one image, a list of paths for several (LLaVA-NeXT/OneVision); "
                         "absent on text-only records (--keep-imageless)",
            "box_syntax": "<ref>LABEL</ref><box>[x1, y1, x2, y2]</box>, appended to the answer after 'Boxes: '",
            "box_units": {"norm1000": "integers 0..999: coordinate / image size * 1000",
                          "norm1": "0..1 with 3 decimals: coordinate / image size",
                          "pixels": "pixels of the stored image file"}[box_format],
            "multi_image": "with several images each box is followed by (image K), K = position in 'image' (1-based)",
            "image_roots": roots,
            "image_paths": ("absolute" if absolute is not None else f"prefixed with {image_root}" if image_root
                            else "relative to the first of image_roots that holds the file (absolute when under none)"),
        }
        with _staged(info_path(dest)) as tmp:
            tmp.write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
        return {"path": str(dest), "records": n, "skipped_no_image": skipped, "box_format": box_format,
                "info": str(info_path(dest)), "split": split}
    if fmt == "qba-json":
        return _qba(out, dest, rows(), split, per_study, enc)
    # coco
    cdest = dest if dest.name.lower().endswith(".json") else dest / "instances.json"
    return _coco(out, cdest, include_regions, roots, absolute, split=split, keep_imageless=keep_imageless)


def _qba(out: Path, dest: Path, qas: Iterator[QA], split: str | None, per_study: bool, enc: Any) -> dict[str, Any]:
    """CXR-QBA documents: one JSON Lines file per split (``qa_<split>.jsonl``, a study a line, and
    ``scene_graphs_<split>.jsonl``), or with ``per_study`` the released one-file-per-study tree."""
    n = studies = n_sg = 0
    files: dict[str, Any] = {}
    with _staged(dest, is_dir=True) as tmp:
        try:
            def sink(kind: str, sp: str | None) -> Any:
                key = f"{kind}_{_safe(sp or 'none')}.jsonl"
                f = files.get(key)
                if f is None:
                    f = files[key] = open(tmp / key, "wb")
                return f

            for pid, sid, qs in _by_study(qas):
                doc = {"patient_id": pid, "study_id": sid, "split": qs[0].split, "questions": [qba_question(q) for q in qs]}
                if per_study:
                    d = tmp / "qa" / _bucket(pid) / _safe(pid)
                    d.mkdir(parents=True, exist_ok=True)
                    (d / f"{_safe(sid)}.qa.json").write_bytes(enc.encode(doc))
                else:
                    sink("qa", qs[0].split).write(enc.encode(doc) + b"\n")
                studies += 1
                n += len(qs)
            for sg in iter_objects(out, "scene_graphs"):
                if split is not None and sg.split != split:
                    continue
                if per_study:
                    d = tmp / "scene_data" / _bucket(sg.patient_id) / _safe(sg.patient_id)
                    d.mkdir(parents=True, exist_ok=True)
                    (d / f"{_safe(sg.study_id)}.scene_graph.json").write_bytes(enc.encode(sg))
                else:
                    sink("scene_graphs", sg.split).write(enc.encode(sg) + b"\n")
                n_sg += 1
        finally:
            for f in files.values():
                f.close()
        info = {"format": "qba-json", "layout": "per-study files" if per_study else "one JSON Lines file per split",
                "records": n, "studies": studies, "scene_graphs": n_sg, "split": split, "files": sorted(files)}
        (tmp / INFO_NAME).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    return {"path": str(dest), "records": n, "studies": studies, "scene_graphs": n_sg, "files": sorted(files)}


def _coco(out: Path, dest: Path, include_regions: bool, roots: list[str] | None = None,
          absolute: _Absolute | None = None, split: str | None = None, keep_imageless: bool = False) -> dict[str, Any]:
    images: list[dict[str, Any]] = []
    skipped = 0
    anns: list[tuple[str, dict[str, Any]]] = []
    cat_kind: dict[str, str] = {}
    for sg in iter_objects(out, "scene_graphs"):
        assert isinstance(sg, SceneGraph)
        if split is not None and sg.split != split:
            continue
        ids: dict[str, int] = {}
        for im in sg.images:
            if not im.path and not keep_imageless:
                skipped += 1  # no file: nothing a detector could train on
                continue
            ids[im.id] = len(images) + 1
            images.append({"id": len(images) + 1, "file_name": (absolute(im.path or "") if absolute else im.path or ""), "width": im.width, "height": im.height,
                           "radvqa_image_id": im.id, "study_id": sg.study_id, "patient_id": sg.patient_id,
                           "split": sg.split, "view": im.view})
        seen: set[tuple[Any, ...]] = set()
        cand = [(b, "finding", o.finding if not b.label else b.label, o.certainty) for o in sg.observations for b in o.boxes]
        if include_regions:
            cand += [(b, "region", b.label or "region", None) for b in sg.region_boxes]
        for b, kind, label, certainty in cand:
            if b.image_id not in ids:
                continue
            if kind == "finding" and certainty not in (None, "present", "uncertain"):
                continue
            key = (b.image_id, b.x1, b.y1, b.x2, b.y2, label, b.reader, b.source)
            if key in seen:
                continue
            seen.add(key)
            cat_kind.setdefault(label, kind)
            w, h = b.x2 - b.x1, b.y2 - b.y1
            anns.append((label, {"image_id": ids[b.image_id], "bbox": [b.x1, b.y1, w, h], "area": w * h, "iscrowd": 0,
                                 "source": b.source, "reader": b.reader, "study_id": sg.study_id}))
    cats = sorted(cat_kind)
    cat_id = {c: i + 1 for i, c in enumerate(cats)}
    annotations = []
    for i, (label, a) in enumerate(anns):
        annotations.append({"id": i + 1, "category_id": cat_id[label], **a})
    doc = {
        "info": {"description": f"radvqa boxes from {out.name}", "version": "1",
                 # relative file_name values are relative to the first of these holding the file
                 "image_roots": list(roots or [])},
        "images": images,
        "categories": [{"id": cat_id[c], "name": c, "supercategory": cat_kind[c]} for c in cats],
        "annotations": annotations,
    }
    with _staged(dest) as tmp:
        tmp.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    return {"path": str(dest), "records": len(annotations), "images": len(images), "categories": len(cats),
            "skipped_no_image": skipped, "split": split}
