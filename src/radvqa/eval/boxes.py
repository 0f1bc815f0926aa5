"""Boxes in model outputs -> image pixels; IoU; Hungarian matching.

Formats understood (``box_format``):
- ``pixels``: [x1, y1, x2, y2] in the stored image's pixels (radvqa's own convention);
- ``norm1``: the same, divided by width / height (0-1);
- ``norm1000``: 0-1000 integers, as Qwen-VL / Qwen2-VL emit in ``<box>(x1,y1),(x2,y2)</box>``
  and ``<|box_start|>(x1,y1),(x2,y2)<|box_end|>``;
- ``auto``: box tags are norm1000; otherwise a box whose coordinates are all <= 1 is norm1,
  and one that falls outside the image (when the size is known) but within 0-1000 is
  norm1000; anything else is pixels. Declare the format when you know it: auto is a guess.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from radvqa.geometry import iou, iou_matrix  # the one IoU definition (re-exported: eval.boxes.iou)

FORMATS = ("auto", "pixels", "norm1", "norm1000")

_NUM = r"(-?\d+(?:\.\d+)?)"
_TAG = re.compile(
    r"(?:<box>|<\|box_start\|>)\s*\(?\s*" + _NUM + r"\s*,\s*" + _NUM + r"\s*\)?\s*,?\s*\(?\s*" + _NUM + r"\s*,\s*" + _NUM + r"\s*\)?\s*(?:</box>|<\|box_end\|>)"
)
_LIST = re.compile(r"\[\s*" + _NUM + r"\s*,\s*" + _NUM + r"\s*,\s*" + _NUM + r"\s*,\s*" + _NUM + r"\s*\]")


class BoxError(ValueError):
    pass


def boxes_from_text(text: str) -> tuple[list[list[float]], str | None]:
    """Boxes written in the answer text. Returns (boxes, implied format): tag boxes imply
    norm1000; bracketed lists ([x1, y1, x2, y2], also inside ``{"bbox_2d": [...]}``) imply
    nothing."""
    if not text or ("<" not in text and "[" not in text):
        return [], None
    tags = [[float(v) for v in m] for m in _TAG.findall(text)]
    if tags:
        return tags, "norm1000"
    return [[float(v) for v in m] for m in _LIST.findall(text)], None


def coerce_boxes(raw: Any) -> list[list[float]]:
    """The ``boxes`` field of a prediction: [[x1,y1,x2,y2], ...], a single [x1,y1,x2,y2],
    or dicts with x1..y2 / bbox / bbox_2d. Raises BoxError on anything else."""
    if raw is None:
        return []
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as e:
            raise BoxError(f"boxes field is a string that is not JSON: {raw[:60]!r}") from e
    if isinstance(raw, list) and len(raw) == 4 and all(isinstance(v, (int, float)) for v in raw):
        raw = [raw]
    if not isinstance(raw, list):
        raise BoxError(f"boxes must be a list, got {type(raw).__name__}")
    out: list[list[float]] = []
    for b in raw:
        if isinstance(b, dict):
            if all(k in b for k in ("x1", "y1", "x2", "y2")):
                b = [b["x1"], b["y1"], b["x2"], b["y2"]]
            else:
                b = b.get("bbox_2d", b.get("bbox", b.get("box")))
        if not (isinstance(b, (list, tuple)) and len(b) == 4 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in b)):
            raise BoxError(f"a box must be 4 numbers [x1, y1, x2, y2], got {b!r}")
        out.append([float(v) for v in b])
    return out


def to_pixels(
    boxes: list[list[float]], fmt: str, size: tuple[int, int] | None
) -> tuple[list[list[float]], str | None]:
    """Convert to image pixels, ordered (x1<x2, y1<y2) and clipped to the image.
    Returns (boxes, error); a normalised box without a known image size is an error
    (reported as unparsed), never silently treated as pixels."""
    if fmt not in FORMATS:
        raise BoxError(f"unknown box format {fmt!r}; expected one of {FORMATS}")
    out: list[list[float]] = []
    for b in boxes:
        f = fmt
        if f == "auto":
            if max(b) <= 1.0:
                f = "norm1"
            elif size is not None and (b[2] > size[0] or b[3] > size[1]) and max(b) <= 1000:
                f = "norm1000"
            else:
                f = "pixels"
        if f != "pixels":
            if size is None:
                return [], f"{f} box needs the image size, which is unknown"
            s = 1.0 if f == "norm1" else 1000.0
            b = [b[0] / s * size[0], b[1] / s * size[1], b[2] / s * size[0], b[3] / s * size[1]]
        x1, x2 = sorted((b[0], b[2]))
        y1, y2 = sorted((b[1], b[3]))
        if size is not None:
            x1, x2 = min(max(x1, 0.0), size[0]), min(max(x2, 0.0), size[0])
            y1, y2 = min(max(y1, 0.0), size[1]), min(max(y2, 0.0), size[1])
        out.append([x1, y1, x2, y2])
    return out, None


def hungarian(cost: np.ndarray) -> list[tuple[int, int]]:
    """Minimum-cost assignment for a rectangular cost matrix (rows <-> columns):
    ``scipy.optimize.linear_sum_assignment``. Returns min(n_rows, n_cols) (row, col) pairs, sorted."""
    from scipy.optimize import linear_sum_assignment

    cost = np.asarray(cost, dtype=float)
    if cost.size == 0:
        return []
    rows, cols = linear_sum_assignment(cost)
    return sorted(zip(rows.tolist(), cols.tolist()))


def matched_iou(gold: list[list[float]], pred: list[list[float]]) -> tuple[float, list[float]]:
    """One score per question when gold and/or prediction have several boxes: Hungarian
    matching that maximises total IoU, then the sum of matched IoUs divided by
    max(#gold, #pred), so a missed box and an extra box both cost. Returns (score,
    per-gold-box matched IoUs, 0 for unmatched gold boxes)."""
    if not gold:
        return (1.0 if not pred else 0.0), []
    if not pred:
        return 0.0, [0.0] * len(gold)
    if len(gold) == 1 and len(pred) == 1:
        v = iou(gold[0], pred[0])
        return v, [v]
    if len(gold) * len(pred) <= 64:  # numpy's per-call overhead dominates tiny matrices
        m = [[iou(g, p) for p in pred] for g in gold]
    else:
        m = iou_matrix(gold, pred).tolist()
    pairs = hungarian(-np.asarray(m))
    per_gold = [0.0] * len(gold)
    for r, c in pairs:
        per_gold[r] = float(m[r][c])
    return sum(per_gold) / max(len(gold), len(pred)), per_gold
