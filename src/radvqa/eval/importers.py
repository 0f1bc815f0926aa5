"""Import existing benchmarks (VQA-RAD, SLAKE) into radvqa's QA layout, so that ``radvqa
eval`` and the baselines run on them exactly as on generated datasets.

Output: OUT/qa/part-00000.parquet (via ``radvqa.io``'s ShardWriter and Arrow schema),
OUT/manifest.json, OUT/rejected.jsonl (one line per input record not imported, with why).

Mapping choices (stated here because they change what the metrics group by):
- ``qa_id`` = "<source>:<benchmark question id>", so answer files keyed by the benchmark's
  own ids join by the part after the colon;
- closed questions get ``answer_short`` (the normalised gold, "yes"/"no"/"left"...); open
  questions have ``answer_short`` = None. The llava-med protocol's closed/open split is
  exactly this;
- ``strategy`` = the benchmark name; ``question_type`` = the benchmark's own type
  (VQA-RAD PRES, POS...; SLAKE content_type); ``regions`` = [organ] (VQA-RAD image_organ,
  SLAKE location), lower case; ``modality`` from SLAKE, None for VQA-RAD (not given).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Iterable

from radvqa.model import QA, Box, Reject, to_builtins

VQA_RAD_FILE = "VQA_RAD Dataset Public.json"
VQA_RAD_TEST = ("test_freeform", "test_para")


class ImportError_(ValueError):
    """Input that cannot be imported at all (wrong path, wrong layout)."""


def _short(answer: str) -> str:
    return " ".join(answer.strip().lower().split())


def _image_size(path: Path) -> tuple[int, int] | None:
    if not path.is_file():
        return None
    from PIL import Image

    with Image.open(path) as im:
        return int(im.width), int(im.height)


# --- VQA-RAD ---------------------------------------------------------------------------

_CASE = re.compile(r"[?&]id=([0-9a-fA-F-]+)")


def _find_vqa_rad(path: Path) -> tuple[Path, Path | None]:
    if path.is_file():
        js = path
        root = path.parent
    else:
        js = path / VQA_RAD_FILE
        root = path
        if not js.is_file():
            cands = sorted(path.glob("*.json"))
            raise ImportError_(f"{path}: no {VQA_RAD_FILE!r} (found: {[c.name for c in cands]})")
    for name in ("images", "VQA_RAD Image Folder"):
        if (root / name).is_dir():
            return js, root / name
    return js, None


def iter_vqa_rad(path: str | Path) -> Iterable[QA | Reject]:
    """VQA-RAD (Lau et al. 2018, CC0): one JSON list. Official test split = phrase_type
    test_freeform + test_para (451 questions: 272 closed, 179 open); everything else is
    train."""
    js, img_dir = _find_vqa_rad(Path(path))
    try:
        data = json.loads(js.read_text("utf-8"))
    except json.JSONDecodeError as e:
        raise ImportError_(f"{js}: not JSON ({e})") from e
    if not isinstance(data, list):
        raise ImportError_(f"{js}: expected a JSON list of questions")
    seen: set[str] = set()
    for i, rec in enumerate(data):
        ref = f"{js.name}[{i}]"
        if not isinstance(rec, dict):
            yield Reject(source="vqa-rad", ref=ref, reason="record is not an object")
            continue
        qid = str(rec.get("qid", "")).strip()
        q = rec.get("question")
        a = rec.get("answer")
        atype = str(rec.get("answer_type", "")).strip().upper()
        img = str(rec.get("image_name", "")).strip()
        problem = _record_problem(qid, seen, q, a, atype, rec.get("answer_type"), img, "image_name")
        if problem:
            yield Reject(source="vqa-rad", ref=f"{ref} qid={qid}", reason=problem)
            continue
        seen.add(qid)
        answer = str(a).strip()
        phrase = str(rec.get("phrase_type", ""))
        stem = img.rsplit(".", 1)[0]
        image_path = ""
        if img_dir is not None and (img_dir / img).is_file():
            image_path = str((img_dir / img).resolve())
        m = _CASE.search(str(rec.get("image_case_url", "")))
        patient = f"vqa-rad:{m.group(1)}" if m else f"vqa-rad:{stem}"
        organ = str(rec.get("image_organ", "")).strip().lower()
        yield QA(
            qa_id=f"vqa-rad:{qid}",
            source="vqa-rad",
            split="test" if phrase in VQA_RAD_TEST else "train",
            patient_id=patient,
            study_id=f"vqa-rad:{stem}",
            strategy="vqa-rad",
            # multi-valued types in one spelling ("PRES, ATTRIB" = "ATTRIB, PRES"): sorted parts
            question_type=", ".join(sorted({t.strip() for t in str(rec.get("question_type", "")).split(",") if t.strip()})),
            # train and test share templates: "test_" marks the split, not a wording
            template_id=f"vqa-rad.{phrase.removeprefix('test_') or 'unknown'}",
            template_version=1,
            question=q.strip(),
            answer=answer,
            image_ids=[stem],
            image_paths=[image_path] if image_path else [img],
            answer_short=_short(answer) if atype == "CLOSED" else None,
            regions=[organ] if organ else [],
            provenance=[f"qid={qid}", f"phrase_type={phrase}", str(rec.get("image_case_url", ""))],
        )


# --- SLAKE -----------------------------------------------------------------------------

SLAKE_SPLITS = {"train.json": "train", "validate.json": "validate", "validation.json": "validate", "test.json": "test"}


def _slake_boxes(img_dir: Path, image_id: str) -> tuple[list[tuple[str, list[float]]], list[str]]:
    """detection.json: [{label: [x, y, w, h]}, ...] in source.jpg pixels -> (label, xyxy)."""
    det = img_dir / "detection.json"
    if not det.is_file():
        return [], []
    problems: list[str] = []
    out: list[tuple[str, list[float]]] = []
    try:
        items = json.loads(det.read_text("utf-8"))
    except json.JSONDecodeError as e:
        return [], [f"{det}: not JSON ({e.msg})"]
    for it in items if isinstance(items, list) else []:
        for label, xywh in (it.items() if isinstance(it, dict) else []):
            if isinstance(xywh, list) and len(xywh) == 4 and all(isinstance(v, (int, float)) for v in xywh) and xywh[2] > 0 and xywh[3] > 0:
                x, y, w, h = (float(v) for v in xywh)
                out.append((str(label), [x, y, x + w, y + h]))
            else:
                problems.append(f"{det}: bad box for {label!r}: {xywh!r}")
    return out, problems


def iter_slake(path: str | Path, lang: str = "en") -> Iterable[QA | Reject]:
    """SLAKE (Liu et al. 2021): split files train.json / validate.json / test.json at the
    root (records: img_id, img_name "xmlab0/source.jpg", question, answer, q_lang,
    location, modality, answer_type, content_type, qid) and per-image folders under imgs/
    with source.jpg, mask.png, detection.json, question.json. Without split files, each
    folder's question.json is read (split "unknown"). Boxes from detection.json are
    attached to questions whose question or answer names the box label."""
    root = Path(path)
    if not root.is_dir():
        raise ImportError_(f"{root}: not a folder (SLAKE is a folder with imgs/ and split JSONs)")
    img_root = root / "imgs" if (root / "imgs").is_dir() else root
    sources: list[tuple[Path, str]] = [(root / f, s) for f, s in SLAKE_SPLITS.items() if (root / f).is_file()]
    if not sources:
        sources = [(q, "unknown") for q in sorted(img_root.glob("*/question.json"))]
    if not sources:
        raise ImportError_(f"{root}: no train/validate/test.json and no imgs/*/question.json")
    seen: set[str] = set()
    box_cache: dict[str, list[tuple[str, list[float]]]] = {}
    for file, split in sources:
        try:
            data = json.loads(file.read_text("utf-8"))
        except json.JSONDecodeError as e:
            yield Reject(source="slake", ref=str(file), reason=f"not JSON ({e.msg})")
            continue
        for i, rec in enumerate(data if isinstance(data, list) else []):
            ref = f"{file.name}[{i}]"
            qid = str(rec.get("qid", "")).strip() if isinstance(rec, dict) else ""
            if not isinstance(rec, dict):
                yield Reject(source="slake", ref=ref, reason="record is not an object")
                continue
            if rec.get("q_lang", "en") != lang:
                yield Reject(source="slake", ref=f"{ref} qid={qid}", reason=f"q_lang {rec.get('q_lang')!r} not selected (--lang {lang})")
                continue
            q, a = rec.get("question"), rec.get("answer")
            atype = str(rec.get("answer_type", "")).strip().upper()
            img_name = str(rec.get("img_name", "")).strip()
            problem = _record_problem(qid, seen, q, a, atype, rec.get("answer_type"), img_name, "img_name")
            if problem:
                yield Reject(source="slake", ref=f"{ref} qid={qid}", reason=problem)
                continue
            seen.add(qid)
            img_path = img_root / img_name
            folder = img_name.split("/")[0]
            if folder not in box_cache:
                found, problems = _slake_boxes(img_path.parent, folder)
                for pr in problems:
                    yield Reject(source="slake", ref=pr.split(":")[0], reason=pr, stage="localize")
                box_cache[folder] = found
            answer = str(a).strip()
            text = (q + " " + answer).lower()
            boxes = [
                Box(image_id=folder, x1=b[0], y1=b[1], x2=b[2], y2=b[3], source="expert", label=lab.lower())
                for lab, b in box_cache[folder]
                if lab.lower() in text
            ]
            loc = str(rec.get("location", "")).strip().lower()
            yield QA(
                qa_id=f"slake:{qid}",
                source="slake",
                split=split,
                patient_id=f"slake:{folder}",
                study_id=f"slake:{folder}",
                strategy="slake",
                question_type=str(rec.get("content_type", "")).strip() or "unknown",
                template_id=f"slake.{rec.get('base_type', 'vqa')}",
                template_version=1,
                question=q.strip(),
                answer=answer,
                image_ids=[folder],
                image_paths=[str(img_path.resolve()) if img_path.is_file() else img_name],
                answer_short=_short(answer) if atype == "CLOSED" else None,
                regions=[loc] if loc else [],
                boxes=boxes,
                modality=str(rec.get("modality", "")).strip() or None,
                provenance=[f"qid={qid}", f"img_name={img_name}"],
            )


IMPORTERS = {"vqa-rad": iter_vqa_rad, "slake": iter_slake}


def write_dataset(out: str | Path, records: Iterable[QA | Reject], source: str, inputs: list[str], options: dict[str, Any]) -> dict[str, Any]:
    """Write the QA layout; returns the manifest. Records are read once (streamed into the
    shard writer) and sorted by nothing: benchmark order is kept."""
    from radvqa import __version__
    from radvqa.io.parquet import ShardWriter, shard_name

    t0 = time.perf_counter()
    out = Path(out)
    fresh = not out.exists() or not any(out.iterdir())
    (out / "qa").mkdir(parents=True, exist_ok=True)
    counts: dict[str, Any] = {"qa": 0, "rejected": 0, "by_split": {}, "closed": 0, "open": 0, "with_boxes": 0}
    try:
        _write_records(out, records, counts, ShardWriter, shard_name)
    except BaseException:
        # a failed import leaves nothing (#17: an empty folder left qa/ and rejected.jsonl)
        import shutil

        if fresh:
            shutil.rmtree(out, ignore_errors=True)
        else:
            shutil.rmtree(out / "qa", ignore_errors=True)
            (out / "rejected.jsonl").unlink(missing_ok=True)
        raise
    manifest = {
        "version": __version__,
        "kind": "imported-benchmark",
        "source": source,
        "inputs": inputs,
        "seed": None,
        "options": options,
        "counts": counts,
        "timings": {"import_s": round(time.perf_counter() - t0, 3)},
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", "utf-8")
    return manifest


def _write_records(out: Path, records: Iterable[QA | Reject], counts: dict[str, Any], ShardWriter: Any, shard_name: Any) -> None:  # noqa: N803
    with ShardWriter(out / "qa" / shard_name(0), "qa") as w, open(out / "rejected.jsonl", "w", encoding="utf-8") as rej:
        for r in records:
            if isinstance(r, Reject):
                rej.write(json.dumps(to_builtins(r), ensure_ascii=False) + "\n")
                counts["rejected"] += 1
                continue
            w.add(r)
            counts["qa"] += 1
            counts["by_split"][r.split] = counts["by_split"].get(r.split, 0) + 1
            counts["closed" if r.answer_short is not None else "open"] += 1
            counts["with_boxes"] += bool(r.boxes)


def _record_problem(qid: str, seen: set[str], q: object, a: object, atype: str, raw_type: object,
                    image: str, image_key: str) -> str | None:
    """Why a benchmark question record (VQA-RAD or SLAKE: same fields) cannot be imported, or None."""
    if not qid:
        return "no qid"
    if qid in seen:
        return f"duplicate qid {qid}"
    if not isinstance(q, str) or not q.strip():
        return "empty question"
    if a is None or not str(a).strip():
        return "empty answer"
    if atype not in ("OPEN", "CLOSED"):
        return f"answer_type {raw_type!r} is neither OPEN nor CLOSED"
    if not image:
        return f"no {image_key}"
    return None
