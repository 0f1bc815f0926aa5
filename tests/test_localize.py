"""Scene graphs: label observations (majority over readers), box checks, reader fusion, regions."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from radvqa.localize import build_scene_graph, check_box, fuse_boxes, iou
from radvqa.model import Box, Extraction, Image, Label, Observation, Report, Study
from radvqa.sources import get_source

DATA = Path(__file__).parent / "data" / "sources"


@pytest.fixture(scope="module")
def onto():
    try:
        from radvqa.ontology import load_ontology

        return load_ontology()
    except Exception:
        sys.path.insert(0, str(DATA))
        from stub_ontology import StubOntology

        return StubOntology()


def _study(**kw):
    base = dict(id="t:1", patient_id="t:p1", source="t", images=[Image(id="im", width=100, height=80)])
    base.update(kw)
    return Study(**base)


def test_real_nih_boxes_inside_448_images(onto):
    n_boxes = 0
    for s in get_source("nih-cxr14").iter_records([DATA.parents[1].parent / "src/radvqa/data/sample/nih-cxr14"], ontology=onto):
        sg, rejects = build_scene_graph(s, None, ontology=onto)
        assert rejects == []
        for o in sg.observations:
            for b in o.boxes:
                im = next(i for i in sg.images if i.id == b.image_id)
                assert (im.width, im.height) == (448, 448)
                assert 0 <= b.x1 < b.x2 <= 448 and 0 <= b.y1 < b.y2 <= 448
                assert b.label == o.finding and o.certainty == "present" and o.source == "label"
                n_boxes += 1
        # every label became an observation; NIH has one reader, so no fused boxes
        assert {o.finding for o in sg.observations} == {f for lab in s.labels for f in lab.findings}
        assert all(b.source == "expert" for o in sg.observations for b in o.boxes)
    assert n_boxes == 34


def test_label_majority_over_readers_and_uncertain_kept():
    labels = [
        # 2 of 3 readers positive -> present
        Label(scheme="vindr", name="A", value=1, findings=["a"], reader="R1"),
        Label(scheme="vindr", name="A", value=1, findings=["a"], reader="R2"),
        Label(scheme="vindr", name="A", value=0, findings=["a"], reader="R3"),
        # 1 of 3 -> absent
        Label(scheme="vindr", name="B", value=1, findings=["b"], reader="R1"),
        Label(scheme="vindr", name="B", value=0, findings=["b"], reader="R2"),
        Label(scheme="vindr", name="B", value=0, findings=["b"], reader="R3"),
        # single reader uncertain stays uncertain
        Label(scheme="chexpert14", name="C", value=-1, findings=["c"]),
        # tie between two readers -> uncertain
        Label(scheme="x", name="D", value=1, findings=["d"], reader="R1"),
        Label(scheme="x", name="D", value=0, findings=["d"], reader="R2"),
        # no finding
        Label(scheme="nih14", name="No Finding", value=1, findings=[]),
    ]
    sg, rejects = build_scene_graph(_study(labels=labels), None)
    assert rejects == []
    got = {o.finding: o.certainty for o in sg.observations}
    assert got == {"a": "present", "b": "absent", "c": "uncertain", "d": "uncertain"}
    assert all(o.source == "label" and not o.from_report for o in sg.observations)
    assert [o.id for o in sg.observations] == ["O01", "O02", "O03", "O04"]
    assert sg.meta["no_finding_label"] == "nih14"


def test_bad_label_value_is_rejected():
    sg, rejects = build_scene_graph(_study(labels=[Label(scheme="s", name="A", value=7, findings=["a"])]), None)
    assert sg.observations == [] and len(rejects) == 1 and rejects[0].stage == "localize"


def test_fusion_three_readers():
    b = lambda r, x1, y1, x2, y2, lab="nodule": Box(image_id="im", x1=x1, y1=y1, x2=x2, y2=y2, reader=r, label=lab)  # noqa: E731
    boxes = [
        b("R1", 10, 10, 30, 30),
        b("R2", 12, 12, 32, 32),
        b("R3", 11, 9, 29, 31),
        b("R2", 60, 60, 70, 70),  # only R2 saw this one
        b("R1", 61, 10, 62, 11, "mass"),  # other finding, one reader: no fusion for mass
    ]
    fused = fuse_boxes(boxes)
    assert len(fused) == 2
    big = next(f for f in fused if f.x1 < 50)
    assert big.reader == "R1+R2+R3" and big.source == "expert_fused" and big.label == "nodule"
    assert (big.x1, big.y1, big.x2, big.y2) == pytest.approx((11, 31 / 3, 91 / 3, 31))
    lone = next(f for f in fused if f.x1 >= 50)
    assert lone.reader == "R2" and lone.as_list() == [60, 60, 70, 70]
    # one reader's two overlapping boxes never fuse with each other
    same = fuse_boxes([b("R1", 0, 0, 10, 10), b("R1", 1, 1, 11, 11), b("R2", 50, 50, 60, 60)])
    assert sorted(f.reader for f in same) == ["R1", "R1", "R2"]
    # deterministic whatever the input order
    assert fuse_boxes(boxes[::-1]) == fused


def test_box_checks_clip_and_reject():
    ok, note = check_box(Box(image_id="im", x1=-2, y1=5, x2=50, y2=60), 100, 80)
    assert ok is not None and ok.x1 == 0 and "clipped" in note
    assert check_box(Box(image_id="im", x1=200, y1=5, x2=250, y2=60), 100, 80)[0] is None
    assert "mostly outside" in check_box(Box(image_id="im", x1=90, y1=5, x2=150, y2=60), 100, 80)[1]
    assert "degenerate" in check_box(Box(image_id="im", x1=5, y1=5, x2=5, y2=60), 100, 80)[1]
    assert check_box(Box(image_id="im", x1=500, y1=5, x2=600, y2=60), None, None)[0] is not None
    assert iou(Box(image_id="i", x1=0, y1=0, x2=2, y2=2), Box(image_id="i", x1=1, y1=0, x2=3, y2=2)) == pytest.approx(1 / 3)


def test_boxes_attached_rejected_and_box_only_observation():
    labels = [Label(scheme="s", name="N", value=1, findings=["nodule"])]
    boxes = [
        Box(image_id="im", x1=10, y1=10, x2=20, y2=20, reader="R1", label="nodule"),
        Box(image_id="im", x1=11, y1=10, x2=21, y2=20, reader="R2", label="nodule"),
        Box(image_id="im", x1=95, y1=10, x2=105, y2=20, reader="R1", label="nodule"),  # clipped (50%)
        Box(image_id="im", x1=300, y1=10, x2=320, y2=20, reader="R1", label="nodule"),  # outside
        Box(image_id="other", x1=1, y1=1, x2=2, y2=2, reader="R1", label="nodule"),  # unknown image
        Box(image_id="im", x1=1, y1=1, x2=9, y2=9, reader="R1", label="mass"),  # no mass observation
    ]
    ext = Extraction(
        report=Report(text="Nodule. No nodule."),
        observations=[
            Observation(id="O01", finding="nodule", certainty="present"),
            Observation(id="O02", finding="nodule", certainty="absent"),
        ],
    )
    sg, rejects = build_scene_graph(_study(labels=labels, boxes=boxes), ext)
    assert len(rejects) == 2 and all(r.stage == "localize" and r.ref.startswith("t:1") for r in rejects)
    assert "entirely outside" in rejects[0].reason and "unknown image" in rejects[1].reason
    obs = {o.id: o for o in sg.observations}
    assert len(obs["O01"].boxes) == 5  # 3 expert + 2 fused clusters (the clipped box is alone)
    assert obs["O02"].boxes == []  # absent observation gets no box
    assert ext.observations[0].boxes == []  # the caller's extraction is not modified
    # the positive label agrees with the report's present nodule: no second observation
    assert not any(o.source == "label" for o in sg.observations)
    assert sg.meta["labels_agreeing_with_report"] == "nodule"
    mass = next(o for o in sg.observations if o.finding == "mass")
    assert mass.source == "box" and mass.certainty == "present" and len(mass.boxes) == 1
    assert "clipped" in sg.meta["box_notes"]
    assert all(0 <= b.x1 < b.x2 <= 100 for o in sg.observations for b in o.boxes)


def test_region_boxes_by_region_and_ancestor(onto):
    sys.path.insert(0, str(DATA))
    from stub_ontology import StubOntology

    stub = StubOntology()
    ext = Extraction(
        report=Report(text="x"),
        observations=[
            Observation(id="O01", finding="opacity", regions=["left_lower_lung_zone"]),
            Observation(id="O02", finding="effusion", regions=["right_lung"]),
        ],
    )
    rb = [
        Box(image_id="im", x1=50, y1=0, x2=100, y2=80, source="region", label="left_lung"),
        Box(image_id="im", x1=0, y1=0, x2=500, y2=80, source="region", label="right_lung"),  # mostly out
    ]
    sg, rejects = build_scene_graph(_study(region_boxes=rb), ext, ontology=stub)
    assert len(rejects) == 1 and "mostly outside" in rejects[0].reason
    assert [b.label for b in sg.region_boxes] == ["left_lung"]
    o1, o2 = sg.observations
    assert [b.label for b in o1.boxes] == ["left_lung"]  # nearest boxed ancestor
    assert o2.boxes == []


def test_scene_graph_carries_study_fields():
    s = _study(report_text="FINDINGS: ok", split="train", study_time="0003", meta={"k": "v"})
    sg, _ = build_scene_graph(s, None)
    assert (sg.study_id, sg.patient_id, sg.split, sg.study_time, sg.prior_study_id) == ("t:1", "t:p1", "train", "0003", None)
    assert sg.report.text == "FINDINGS: ok" and sg.meta == {"k": "v"} and sg.extractor is None


def test_label_agreeing_with_report_makes_no_second_observation() -> None:
    from radvqa.model import Extraction, Label, Observation, Report, Study
    from radvqa.localize import build_scene_graph
    from radvqa.ontology import load_ontology

    onto = load_ontology()
    study = Study(
        id="openi:X", patient_id="X", source="openi", report_text="FINDINGS: Cardiomegaly.",
        labels=[Label(scheme="openi_mesh", name="Cardiomegaly", value=1, findings=["cardiomegaly"]),
                Label(scheme="openi_mesh", name="Scoliosis", value=1, findings=["scoliosis"])],
    )
    ex = Extraction(report=Report(text=study.report_text or ""),
                    observations=[Observation(id="O01", finding="cardiomegaly", certainty="present")])
    sg, rejects = build_scene_graph(study, ex, ontology=onto)
    assert not rejects
    assert [o.finding for o in sg.observations if o.finding == "cardiomegaly"] == ["cardiomegaly"]
    assert {o.finding for o in sg.observations} == {"cardiomegaly", "scoliosis"}  # a new label still counts
    assert sg.meta["labels_agreeing_with_report"] == "cardiomegaly"
