"""Box geometry shared by every stage: the one IoU definition (localize's reader fusion, eval's
grounding scores). Boxes are ``[x1, y1, x2, y2]`` in pixels, x1 < x2, y1 < y2."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def iou(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection over union of two boxes; 0 when they do not overlap (or a box is empty)."""
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    if iw <= 0 or ih <= 0:
        return 0.0
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def iou_matrix(gold: Sequence[Sequence[float]], pred: Sequence[Sequence[float]]) -> np.ndarray:
    """IoU of every gold box (rows) with every predicted box (columns), vectorised; same values as
    ``iou`` pair by pair."""
    g = np.asarray(gold, dtype=float).reshape(-1, 4)
    p = np.asarray(pred, dtype=float).reshape(-1, 4)
    ix1 = np.maximum(g[:, None, 0], p[None, :, 0])
    iy1 = np.maximum(g[:, None, 1], p[None, :, 1])
    ix2 = np.minimum(g[:, None, 2], p[None, :, 2])
    iy2 = np.minimum(g[:, None, 3], p[None, :, 3])
    inter = np.clip(ix2 - ix1, 0, None) * np.clip(iy2 - iy1, 0, None)
    ga = (g[:, 2] - g[:, 0]) * (g[:, 3] - g[:, 1])
    pa = (p[:, 2] - p[:, 0]) * (p[:, 3] - p[:, 1])
    union = ga[:, None] + pa[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / union, 0.0)
