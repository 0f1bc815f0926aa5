"""Find boxes in model output text and map them to pixels of the stored image (the contract)."""

from __future__ import annotations

import re

_NUM = r"-?\d+(?:\.\d+)?"
# [x1, y1, x2, y2] / (x1, y1, x2, y2)
_BRACKET = re.compile(rf"[\[(]\s*({_NUM})\s*,\s*({_NUM})\s*,\s*({_NUM})\s*,\s*({_NUM})\s*[\])]")
# Qwen2-VL grounding: <|box_start|>(x1,y1),(x2,y2)<|box_end|>, and plain "(x1,y1),(x2,y2)"
_PAIRS = re.compile(rf"\(\s*({_NUM})\s*,\s*({_NUM})\s*\)\s*,?\s*\(\s*({_NUM})\s*,\s*({_NUM})\s*\)")


def find_boxes(text: str | None) -> list[list[float]]:
    """Every 4-number box written in the text, in order, as the model wrote it."""
    if not text:
        return []
    found: list[tuple[int, list[float]]] = []
    spans: list[tuple[int, int]] = []
    for rx in (_PAIRS, _BRACKET):
        for m in rx.finditer(text):
            if any(m.start() < e and s < m.end() for s, e in spans):
                continue  # "(1,2),(3,4)" must not also be read as part of another match
            spans.append((m.start(), m.end()))
            found.append((m.start(), [float(g) for g in m.groups()]))
    return [b for _, b in sorted(found, key=lambda t: t[0])]


def to_stored_pixels(
    boxes: list[list[float]],
    convention: str,
    seen_size: tuple[int, int],
    stored_size: tuple[int, int],
) -> list[list[float]]:
    """Map boxes from the model's convention to stored-image pixels; reorder corners, clip to the
    image, drop boxes with no area (they cannot be scored and would break IoU)."""
    sw, sh = stored_size
    if convention == "pixels":
        fx, fy = sw / seen_size[0], sh / seen_size[1]
    elif convention == "norm1000":
        fx, fy = sw / 1000.0, sh / 1000.0
    elif convention == "norm1":
        fx, fy = float(sw), float(sh)
    else:
        raise ValueError(f"unknown box convention {convention!r}")
    out: list[list[float]] = []
    for x1, y1, x2, y2 in boxes:
        a, b = sorted((x1 * fx, x2 * fx))
        c, d = sorted((y1 * fy, y2 * fy))
        a, b = max(0.0, min(a, sw)), max(0.0, min(b, sw))
        c, d = max(0.0, min(c, sh)), max(0.0, min(d, sh))
        if b > a and d > c:
            out.append([round(a, 2), round(c, 2), round(b, 2), round(d, 2)])
    return out
