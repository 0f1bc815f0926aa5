"""Predictions JSONL: load, detect the id / text fields, join to QA rows.

radvqa's own format is ``{"qa_id", "prediction", "boxes"?}``; benchmark answer files keyed
by their own ids (LLaVA-Med: ``question_id``, ``text``) are detected, or named with
``id_field`` / ``text_field``. Every question keeps its place: a question with no
prediction is scored as wrong and listed, never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

_decode = msgspec.json.Decoder().decode  # ~3x faster than json.loads per line

ID_FIELDS = ("qa_id", "question_id", "qid", "id")
TEXT_FIELDS = ("prediction", "text", "answer", "output", "response")
BOX_FIELDS = ("boxes", "pred_boxes", "bbox")


class PredictionError(ValueError):
    pass


@dataclass(slots=True)
class Prediction:
    text: str | None
    boxes: Any = None
    box_format: str | None = None
    image_size: tuple[int, int] | None = None
    error: str | None = None  # what the predicting tool recorded when it got no answer


@dataclass(slots=True)
class Predictions:
    path: str
    id_field: str
    text_field: str
    by_id: dict[str, Prediction]
    lines: int
    blank_lines: int = 0


def _detect(rec: dict[str, Any], wanted: str | None, candidates: tuple[str, ...], what: str, path: str) -> str:
    if wanted:
        if wanted not in rec:
            raise PredictionError(f"{path}: first record has no field {wanted!r} (fields: {sorted(rec)})")
        return wanted
    for c in candidates:
        if c in rec:
            return c
    raise PredictionError(
        f"{path}: cannot find the {what} field among {list(candidates)} (fields: {sorted(rec)}); "
        f"name it with --{what}-field"
    )


def load_predictions(
    path: str | Path, id_field: str | None = None, text_field: str | None = None
) -> Predictions:
    """Parse a JSONL file. Errors (bad JSON, a record without the id, duplicate ids, a
    non-string text) name the line: a prediction file is never half-read silently."""
    path = str(path)
    by_id: dict[str, Prediction] = {}
    idf = txf = None
    n = blank = 0
    typed = None
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            n += 1
            if not line.strip():
                blank += 1
                continue
            if typed is not None:
                # fast path: decode straight into a struct holding only the fields we read
                try:
                    r = typed(line)
                except msgspec.ValidationError as e:
                    raise PredictionError(f"{path}:{lineno}: {e}") from e
                except msgspec.DecodeError as e:
                    raise PredictionError(f"{path}:{lineno}: not JSON ({e})") from e
                key = str(r.id)
                if key in by_id:
                    raise PredictionError(f"{path}:{lineno}: duplicate prediction for id {key!r}")
                size = r.image_size
                by_id[key] = Prediction(
                    text=r.text,
                    boxes=r.boxes if r.boxes is not None else (r.pred_boxes if r.pred_boxes is not None else r.bbox),
                    box_format=r.box_format or r.box_convention,
                    image_size=(int(size[0]), int(size[1])) if isinstance(size, list) and len(size) == 2 else None,
                    error=r.error if isinstance(r.error, str) else None,
                )
                continue
            try:
                rec = _decode(line)
            except msgspec.DecodeError as e:
                raise PredictionError(f"{path}:{lineno}: not JSON ({e})") from e
            if not isinstance(rec, dict):
                raise PredictionError(f"{path}:{lineno}: a line must be a JSON object")
            idf = _detect(rec, id_field, ID_FIELDS, "id", path)
            txf = _detect(rec, text_field, TEXT_FIELDS, "text", path)
            text = rec.get(txf)
            if text is not None and not isinstance(text, str):
                raise PredictionError(f"{path}:{lineno}: {txf!r} must be a string or null, got {type(text).__name__}")
            box_field = next((b for b in BOX_FIELDS if b in rec), None)
            size = rec.get("image_size")
            by_id[str(rec[idf])] = Prediction(
                text=text,
                boxes=rec.get(box_field) if box_field else None,
                box_format=rec.get("box_format") or rec.get("box_convention"),
                image_size=(int(size[0]), int(size[1])) if isinstance(size, list) and len(size) == 2 else None,
                error=rec.get("error") if isinstance(rec.get("error"), str) else None,
            )
            typed = _typed_decoder(idf, txf)
    if idf is None or txf is None:
        raise PredictionError(f"{path}: no predictions in the file")
    return Predictions(path=path, id_field=idf, text_field=txf, by_id=by_id, lines=n, blank_lines=blank)


def _typed_decoder(idf: str, txf: str) -> Any:
    fields = [
        ("id", str | int | float, msgspec.field(name=idf)),
        ("text", str | None, msgspec.field(default=None, name=txf)),
    ]
    for b in BOX_FIELDS:
        if b not in (idf, txf):
            fields.append((b, Any, None))
    fields += [("box_format", str | None, None), ("box_convention", str | None, None), ("image_size", Any, None), ("error", Any, None)]
    cls = msgspec.defstruct("_PredictionLine", fields, kw_only=True)
    return msgspec.json.Decoder(cls).decode


@dataclass(slots=True)
class Joined:
    """Predictions aligned with the dataset's rows (None where missing)."""

    preds: list[Prediction | None]
    key: str  # "qa_id" or "native" (the id after "<source>:")
    matched: int
    missing_ids: list[str]
    extra_ids: list[str] = field(default_factory=list)


def native_id(qa_id: str) -> str:
    return qa_id.split(":", 1)[1] if ":" in qa_id else qa_id


def join(qa_ids: list[str], preds: Predictions) -> Joined:
    """Align by qa_id; when fewer rows match that way than by the benchmark's native id
    (the part of qa_id after "source:", e.g. VQA-RAD's qid), align by the native id."""
    by = preds.by_id
    direct = sum(1 for q in qa_ids if q in by)
    keys, how = qa_ids, "qa_id"
    if direct < min(len(qa_ids), len(by)):
        native = [native_id(q) for q in qa_ids]
        if sum(1 for q in native if q in by) > direct:
            keys, how = native, "native"
    aligned = [by.get(k) for k in keys]
    missing = [q for q, p in zip(qa_ids, aligned) if p is None]
    keyset = set(keys)
    extra = [k for k in by if k not in keyset]
    return Joined(preds=aligned, key=how, matched=len(qa_ids) - len(missing), missing_ids=missing, extra_ids=extra)
