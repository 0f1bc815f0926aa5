"""#17: one IoU function for every stage, and Hungarian matching from scipy (not hand-written)."""

from __future__ import annotations

import itertools

import numpy as np

from radvqa.model import Box


def test_one_iou_definition_everywhere() -> None:
    import radvqa.eval.boxes as eb
    import radvqa.geometry as g
    from radvqa.localize.boxes import iou as loc_iou

    assert eb.iou is g.iou and eb.iou_matrix is g.iou_matrix
    rng = np.random.default_rng(0)
    for _ in range(200):
        a = sorted(rng.uniform(0, 100, 2)), sorted(rng.uniform(0, 100, 2))
        b = sorted(rng.uniform(0, 100, 2)), sorted(rng.uniform(0, 100, 2))
        ba = [a[0][0], a[1][0], a[0][1], a[1][1]]
        bb = [b[0][0], b[1][0], b[0][1], b[1][1]]
        v = g.iou(ba, bb)
        assert loc_iou(Box(image_id="i", x1=ba[0], y1=ba[1], x2=ba[2], y2=ba[3]),
                       Box(image_id="i", x1=bb[0], y1=bb[1], x2=bb[2], y2=bb[3])) == v
        assert abs(g.iou_matrix([ba], [bb])[0, 0] - v) < 1e-12
    assert g.iou([0, 0, 10, 10], [5, 0, 15, 10]) == 50 / 150


def test_hungarian_is_scipy_and_optimal() -> None:
    import inspect

    from radvqa.eval.boxes import hungarian

    assert "linear_sum_assignment" in inspect.getsource(hungarian)
    rng = np.random.default_rng(1)
    for n, m in ((3, 5), (5, 3), (4, 4)):
        c = rng.uniform(0, 1, (n, m))
        pairs = hungarian(c)
        best = min(sum(c[i, j] for i, j in zip(rows, perm))
                   for rows in [range(n)] if n <= m for perm in itertools.permutations(range(m), n)) if n <= m else \
            min(sum(c[i, j] for i, j in zip(perm, range(m))) for perm in itertools.permutations(range(n), m))
        assert len(pairs) == min(n, m) and abs(sum(c[i, j] for i, j in pairs) - best) < 1e-9
