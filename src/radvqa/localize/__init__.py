"""radvqa.localize: scene graphs from a study and its report extraction (observations from the
report and from labels; expert boxes per reader and fused; region boxes). See ``graph`` and
``boxes`` for the rules."""

from __future__ import annotations

from radvqa.localize.boxes import LocalizeParams, check_box, fuse_boxes, iou, load_params
from radvqa.localize.graph import build_scene_graph

__all__ = ["LocalizeParams", "build_scene_graph", "check_box", "fuse_boxes", "iou", "load_params"]
