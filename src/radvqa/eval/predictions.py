"""Predictions JSONL: load, detect the id / text fields, join to QA rows.

radvqa's own format is ``{"qa_id", "prediction", "boxes"?}``; benchmark answer files keyed
by their own ids (LLaVA-Med: ``question_id``, ``text``) are detected, or named with
``id_field`` / ``text_field``. Every question keeps its place: a question with no
prediction is scored as wrong and listed, never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

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


class PredictionStore(Mapping[str, Prediction]):
    """id -> Prediction, stored as columns: the id's row number, the texts, and the rarer
    extras (boxes, box format, image size, error) only for records that have them. A
    Prediction object per record (plus its dict slot) was ~250 bytes a record; this keeps a
    million-line file at about the size of its ids and texts. Objects are built on access."""

    __slots__ = ("index", "texts", "extras", "_pool")

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.texts: list[str | None] = []
        self.extras: dict[int, tuple[Any, str | None, tuple[int, int] | None, str | None]] = {}
        self._pool: dict[str, str] = {}

    def add(self, key: str, p: Prediction) -> None:
        i = len(self.texts)
        self.index[key] = i
        self.texts.append(self.add_text(p.text))
        if p.boxes is not None or p.box_format is not None or p.image_size is not None or p.error is not None:
            self.extras[i] = (p.boxes, p.box_format, p.image_size, p.error)

    def add_text(self, text: str | None) -> str | None:
        """Share repeated outputs ("Yes.", "B"): the decoder makes a new str per line."""
        if text is None or len(text) > 64:
            return text
        hit = self._pool.get(text)
        if hit is None:
            if len(self._pool) < 65_536:
                self._pool[text] = text
            return text
        return hit

    def drop_index(self) -> None:
        """Forget id -> position once rows are joined (Aligned reads by position); lookups
        by id fail after this."""
        self.index = {}
        self._pool = {}

    def at(self, i: int) -> Prediction:
        ex = self.extras.get(i)
        return Prediction(self.texts[i]) if ex is None else Prediction(self.texts[i], *ex)

    def __getitem__(self, key: str) -> Prediction:
        return self.at(self.index[key])

    def __contains__(self, key: object) -> bool:
        return key in self.index

    def __iter__(self) -> Iterator[str]:
        return iter(self.index)

    def __len__(self) -> int:
        return len(self.index)


class Aligned(Sequence[Optional[Prediction]]):
    """Predictions in dataset row order: the store's row per question (-1: none), as an
    int32 array; Prediction objects are built when a row is read."""

    def __init__(self, store: PredictionStore, pos: Any) -> None:
        self.store = store
        self.pos = pos

    def __len__(self) -> int:
        return len(self.pos)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        j = int(self.pos[i])
        return None if j < 0 else self.store.at(j)

    def __iter__(self) -> Iterator[Prediction | None]:
        at = self.store.at
        for j in self.pos.tolist():
            yield None if j < 0 else at(j)

    def texts(self) -> list[str | None]:
        t = self.store.texts
        return [None if j < 0 else t[j] for j in self.pos.tolist()]


@dataclass(slots=True)
class Predictions:
    path: str
    id_field: str
    text_field: str
    by_id: PredictionStore
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
    by_id = PredictionStore()
    index, texts, extras, pool = by_id.index, by_id.texts, by_id.extras, by_id._pool
    head = RecordsHead()
    for lineno, key, t, extra in iter_records(path, id_field, text_field, head):
        if key in index:
            raise PredictionError(f"{path}:{lineno}: duplicate prediction for id {key!r}")
        # straight into the store's columns (the hot loop of a million-line file)
        i = len(texts)
        index[key] = i
        if t is not None and len(t) <= 64:
            t = pool.setdefault(t, t) if len(pool) < 65_536 else pool.get(t, t)
        texts.append(t)
        if extra is not None:
            extras[i] = extra
    return Predictions(path=path, id_field=head.id_field, text_field=head.text_field, by_id=by_id, lines=head.lines,
                       blank_lines=head.blank_lines)


@dataclass(slots=True)
class RecordsHead:
    """What ``iter_records`` learnt about the file: the detected fields and the line counts
    (filled as it reads; complete once it is exhausted)."""

    id_field: str = ""
    text_field: str = ""
    lines: int = 0
    blank_lines: int = 0
    first_id: str | None = None


def iter_records(path: str, id_field: str | None, text_field: str | None, head: RecordsHead) -> Iterator[tuple[int, str, str | None, Any]]:
    """(line number, id, text, extras or None) of each record, in file order; extras is
    (boxes, box format, image size, error) when any is set. Every malformed line raises a
    PredictionError naming it; duplicate ids are the caller's to catch."""
    idf = txf = None
    n = blank = 0
    typed = None
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            n += 1
            head.lines = n
            if not line.strip():
                blank += 1
                head.blank_lines = blank
                continue
            if typed is not None:
                # fast path: decode straight into a struct holding only the fields we read
                try:
                    r = typed(line)
                except msgspec.ValidationError as e:
                    raise PredictionError(f"{path}:{lineno}: {e}") from e
                except msgspec.DecodeError as e:
                    raise PredictionError(f"{path}:{lineno}: not JSON ({e})") from e
                except UnicodeDecodeError as e:
                    raise PredictionError(f"{path}:{lineno}: not UTF-8 text ({e.reason} at byte {e.start})") from None
                key = r.id if type(r.id) is str else str(r.id)
                boxes = r.boxes if r.boxes is not None else (r.pred_boxes if r.pred_boxes is not None else r.bbox)
                size, err, fmt = r.image_size, r.error, r.box_format or r.box_convention
                if boxes is not None or size is not None or err is not None or fmt is not None:
                    yield lineno, key, r.text, (boxes, fmt, _image_size(size, path, lineno), err if isinstance(err, str) else None)
                else:
                    yield lineno, key, r.text, None
                continue
            try:
                rec = _decode(line)
            except msgspec.DecodeError as e:
                raise PredictionError(f"{path}:{lineno}: not JSON ({e})") from e
            except UnicodeDecodeError as e:
                raise PredictionError(f"{path}:{lineno}: not UTF-8 text ({e.reason} at byte {e.start})") from None
            if not isinstance(rec, dict):
                raise PredictionError(f"{path}:{lineno}: a line must be a JSON object")
            idf = _detect(rec, id_field, ID_FIELDS, "id", path)
            txf = _detect(rec, text_field, TEXT_FIELDS, "text", path)
            head.id_field, head.text_field = idf, txf
            text = rec.get(txf)
            if text is not None and not isinstance(text, str):
                raise PredictionError(f"{path}:{lineno}: {txf!r} must be a string or null, got {type(text).__name__}")
            box_field = next((b for b in BOX_FIELDS if b in rec), None)
            p = Prediction(
                text=text,
                boxes=rec.get(box_field) if box_field else None,
                box_format=rec.get("box_format") or rec.get("box_convention"),
                image_size=_image_size(rec.get("image_size"), path, lineno),
                error=rec.get("error") if isinstance(rec.get("error"), str) else None,
            )
            head.first_id = str(rec[idf])
            has_extra = p.boxes is not None or p.box_format is not None or p.image_size is not None or p.error is not None
            yield lineno, head.first_id, text, ((p.boxes, p.box_format, p.image_size, p.error) if has_extra else None)
            typed = _typed_decoder(idf, txf)
    if idf is None or txf is None:
        raise PredictionError(f"{path}: no predictions in the file")


def _image_size(size: Any, path: str, lineno: int) -> tuple[int, int] | None:
    """``image_size`` as (width, height); a value that is not two positive numbers names the line."""
    if size is None:
        return None
    if (isinstance(size, list) and len(size) == 2
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in size)
            and all(0 < x < 1 << 20 for x in size)):
        return int(size[0]), int(size[1])
    raise PredictionError(f"{path}:{lineno}: image_size must be [width, height] in pixels, got {str(size)[:60]}")


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

    preds: Sequence[Prediction | None]  # Aligned: built per row on access
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
    import numpy as np

    index = by.index if isinstance(by, PredictionStore) else None
    if index is None:  # a plain dict of Prediction objects
        store = PredictionStore()
        for k, p in by.items():
            store.add(k, p)
        index = store.index
    else:
        store = by
    get = index.get
    pos = np.fromiter((get(k, -1) for k in keys), dtype=np.int32, count=len(keys))
    miss = np.flatnonzero(pos < 0).tolist()
    missing = [qa_ids[i] for i in miss]
    keyset = set(keys)
    extra = [k for k in by if k not in keyset]
    return Joined(preds=Aligned(store, pos), key=how, matched=len(qa_ids) - len(missing), missing_ids=missing, extra_ids=extra)
