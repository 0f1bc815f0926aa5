"""benchmarks/imagenome_gold.py on the hand-made Chest ImaGenome gold fixture (tests/data/imagenome_gold):
the box and attribute scores equal the values worked out by hand in that folder's README."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
FIX = Path(__file__).parent / "data" / "imagenome_gold"
sys.path.insert(0, str(ROOT / "benchmarks"))
import imagenome_gold as ig  # noqa: E402


@pytest.fixture(scope="module")
def result():
    return ig.run(FIX, FIX / "mimic")


def test_gold_boxes_read_by_column_name():
    rows = ig.read_gold_boxes(FIX / "gold_dataset" / ig.GOLD_BOXES)
    rl = next(r for r in rows if r["bbox_name"] == "right lung")
    # original_x1, original_x2, original_y1, original_y2 in the file: (x1, y1, x2, y2) here
    assert rl["image_id"] == "g1111111-aaaaaaaa-bbbbbbbb-cccccccc-dddddddd" and rl["box"] == (200, 300, 1100, 1900)


def test_box_scores(result):
    b = result["boxes"]
    assert b["gold_images"] == 2 and b["scene_graphs_found"] == 1
    o = b["overall"]
    assert (o["gold"], o["matched"], o["coverage"]) == (4, 3, 0.75)
    assert o["mean_iou"] == round((880 / 900 + 0.6 + 0.6) / 3, 4)
    assert (o["iou_ge_0.5"], o["iou_ge_0.75"]) == (1.0, round(1 / 3, 4))
    assert b["per_region"]["right lung"]["mean_iou"] == round(880 / 900, 4)
    assert b["per_region"]["left lung"]["matched"] == 0


def test_attribute_scores(result):
    a = result["attributes"]
    assert a["studies"] == 1 and a["studies_without_report"] == 1  # study 52000002 has no report
    assert a["gold_rows_not_comparable"] == 1 and a["not_comparable_attributes"] == {"made-up attribute": 1}
    reg, st = a["region_level"], a["study_level"]
    # region level: atelectasis @ right lower lung zone and enlarged cardiac silhouette @ cardiac
    # silhouette found; "no pleural effusion" has no region in the report, the gold puts it on both lungs
    assert (reg["all"]["tp"], reg["all"]["fp"], reg["all"]["fn"]) == (2, 0, 2)
    assert (reg["no"]["tp"], reg["no"]["fn"]) == (0, 2)
    # study level: pneumonia is only in the indication (not a finding of the report), so missed
    assert (st["all"]["tp"], st["all"]["fp"], st["all"]["fn"]) == (3, 0, 1)
    assert st["yes"]["f1"] == 0.8 and st["no"]["f1"] == 1.0
    assert st["per_category"]["disease"]["fn"] == 1


def test_uncertain_as_no_changes_nothing_certain():
    r = ig.run(FIX, FIX / "mimic", uncertain_as=0)
    assert r["attributes"]["study_level"]["all"]["tp"] == 3 and r["attributes"]["uncertain_as"] == "no"


def test_cli_prints_scores(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["imagenome_gold.py", "--imagenome", str(FIX), "--mimic", str(FIX / "mimic"),
                                      "--json", str(tmp_path / "r.json")])
    ig.main()
    assert "coverage 0.75, mean IoU 0.7259" in capsys.readouterr().out and (tmp_path / "r.json").exists()
    monkeypatch.setattr(sys, "argv", ["imagenome_gold.py", "--imagenome", str(tmp_path / "none")])
    with pytest.raises(SystemExit, match="not found"):
        ig.main()
