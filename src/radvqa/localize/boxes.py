"""Box geometry: IoU, bounds checks against the stored image size, and reader fusion.

Bounds rule (``check_box``): a box must have ``x1 < x2`` and ``y1 < y2`` with sides of at least
``min_side_px``; when the image size is known it is intersected with ``[0, W] x [0, H]``:
- entirely inside: kept as is;
- partly outside with at least ``min_inside_fraction`` of its area inside: clipped, and noted;
- otherwise (fully outside, mostly outside, or degenerate after clipping): rejected with a reason.
When the size is unknown the box is kept unchecked apart from its own geometry.

Fusion rule (``fuse_boxes``): boxes are grouped by (image, finding label). In a group drawn by at
least ``min_readers`` distinct readers, boxes are visited in a fixed order (reader, x1, y1, x2, y2)
and each joins the existing cluster whose current mean box it overlaps most, provided that IoU is at
least ``iou_threshold`` and the cluster has no box from the same reader yet (one reader never
agrees with himself); otherwise it starts a new cluster. Each cluster becomes one box whose
coordinates are the mean of its members, ``source="expert_fused"`` and ``reader`` = the sorted
member readers joined by ``+`` (so consumers can keep only clusters with 2 or more readers).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import yaml

from radvqa.geometry import iou as geometry_iou
from radvqa.model import Box


@dataclass(frozen=True)
class LocalizeParams:
    iou_threshold: float = 0.4
    min_readers: int = 2
    min_inside_fraction: float = 0.5
    min_side_px: float = 1.0


@lru_cache(maxsize=1)
def load_params() -> LocalizeParams:
    text = resources.files("radvqa.localize").joinpath("data/localize.yaml").read_text("utf-8")
    d = yaml.safe_load(text)
    return LocalizeParams(
        iou_threshold=float(d["fusion"]["iou_threshold"]),
        min_readers=int(d["fusion"]["min_readers"]),
        min_inside_fraction=float(d["bounds"]["min_inside_fraction"]),
        min_side_px=float(d["bounds"]["min_side_px"]),
    )


def iou(a: Box, b: Box) -> float:
    """IoU of two Boxes: ``radvqa.geometry.iou``, the one definition eval scores with too."""
    return geometry_iou((a.x1, a.y1, a.x2, a.y2), (b.x1, b.y1, b.x2, b.y2))


def check_box(
    box: Box, width: int | None, height: int | None, params: LocalizeParams | None = None
) -> tuple[Box | None, str | None]:
    """(box to keep, note) or (None, reason). The note is set when the box was clipped."""
    p = params or load_params()
    if not (box.x2 - box.x1 >= p.min_side_px and box.y2 - box.y1 >= p.min_side_px):
        return None, f"degenerate box {_fmt(box)}"
    if width is None or height is None:
        return box, None
    if box.x1 >= 0 and box.y1 >= 0 and box.x2 <= width and box.y2 <= height:
        return box, None
    cx1, cy1 = max(0.0, box.x1), max(0.0, box.y1)
    cx2, cy2 = min(float(width), box.x2), min(float(height), box.y2)
    if cx2 - cx1 <= 0 or cy2 - cy1 <= 0:
        return None, f"box {_fmt(box)} entirely outside the {width}x{height} image"
    inside = (cx2 - cx1) * (cy2 - cy1) / box.area()
    if inside < p.min_inside_fraction:
        return None, f"box {_fmt(box)} mostly outside the {width}x{height} image ({inside:.0%} inside)"
    if cx2 - cx1 < p.min_side_px or cy2 - cy1 < p.min_side_px:
        return None, f"box {_fmt(box)} degenerate after clipping to the {width}x{height} image"
    clipped = Box(
        image_id=box.image_id, x1=cx1, y1=cy1, x2=cx2, y2=cy2, source=box.source, reader=box.reader, label=box.label
    )
    return clipped, f"clipped {_fmt(box)} to {width}x{height} ({inside:.0%} inside)"


def fuse_boxes(boxes: list[Box], params: LocalizeParams | None = None) -> list[Box]:
    """Fused boxes (see module docstring) for every (image, label) group with enough readers."""
    p = params or load_params()
    groups: dict[tuple[str, str | None], list[Box]] = {}
    for b in boxes:
        if b.source != "expert":
            continue
        groups.setdefault((b.image_id, b.label), []).append(b)
    out: list[Box] = []
    for key in sorted(groups, key=lambda k: (k[0], k[1] or "")):
        group = groups[key]
        readers = {b.reader or "" for b in group}
        if len(readers) < p.min_readers:
            continue
        clusters: list[list[Box]] = []
        means: list[Box] = []
        for b in sorted(group, key=lambda b: (b.reader or "", b.x1, b.y1, b.x2, b.y2)):
            best, best_iou = -1, p.iou_threshold
            for i, (members, m) in enumerate(zip(clusters, means)):
                if any((x.reader or "") == (b.reader or "") for x in members):
                    continue
                v = iou(b, m)
                if v >= best_iou and (best < 0 or v > best_iou):
                    best, best_iou = i, v
            if best < 0:
                clusters.append([b])
                means.append(b)
            else:
                clusters[best].append(b)
                means[best] = _mean(clusters[best])
        for members, m in zip(clusters, means):
            out.append(
                Box(
                    image_id=m.image_id,
                    x1=m.x1,
                    y1=m.y1,
                    x2=m.x2,
                    y2=m.y2,
                    source="expert_fused",
                    reader="+".join(sorted(x.reader or "?" for x in members)),
                    label=key[1],
                )
            )
    return out


def _mean(bs: list[Box]) -> Box:
    n = len(bs)
    return Box(
        image_id=bs[0].image_id,
        x1=sum(b.x1 for b in bs) / n,
        y1=sum(b.y1 for b in bs) / n,
        x2=sum(b.x2 for b in bs) / n,
        y2=sum(b.y2 for b in bs) / n,
        source="expert_fused",
        label=bs[0].label,
    )


def _fmt(b: Box) -> str:
    return f"[{b.x1:.1f}, {b.y1:.1f}, {b.x2:.1f}, {b.y2:.1f}] on {b.image_id}"
