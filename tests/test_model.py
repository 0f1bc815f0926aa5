"""IR round trips: JSON and builtins (the Arrow path is tested in test_io)."""

from __future__ import annotations

import msgspec
import pytest

from radvqa.model import (
    QA,
    AnswerPart,
    Box,
    Image,
    Indication,
    Observation,
    Report,
    SceneGraph,
    Section,
    Sentence,
    Span,
    Study,
    Label,
    from_builtins,
    from_json,
    to_builtins,
    to_json,
)


def _scene_graph() -> SceneGraph:
    text = "FINDINGS: Small left pleural effusion. No pneumothorax."
    box = Box(image_id="i1", x1=10.5, y1=20.0, x2=110.0, y2=220.0, source="expert", reader="R1", label="pleural_effusion")
    return SceneGraph(
        study_id="openi:CXR1",
        patient_id="CXR1",
        source="openi",
        images=[Image(id="i1", path="a.png", width=448, height=448, view="PA", original_width=1024, original_height=1024)],
        report=Report(
            text=text,
            sections=[Section(name="FINDINGS", start=10, end=len(text))],
            sentences=[
                Sentence(id="S01", section="FINDINGS", start=10, end=38, text=text[10:38]),
                Sentence(id="S02", section="FINDINGS", start=39, end=len(text), text=text[39:]),
            ],
        ),
        indication=Indication(text="dyspnea", evaluate=["pneumonia"]),
        observations=[
            Observation(
                id="O01",
                finding="pleural_effusion",
                certainty="present",
                laterality="left",
                regions=["left_costophrenic_angle"],
                severity="small",
                evidence=[Span(start=10, end=38, text=text[10:38], sentence_id="S01")],
                boxes=[box],
            ),
            Observation(id="O02", finding="pneumothorax", certainty="absent"),
        ],
        region_boxes=[Box(image_id="i1", x1=0, y1=0, x2=200, y2=300, source="region", label="left_lung")],
        meta={"k": "v"},
    )


def test_scene_graph_json_round_trip() -> None:
    sg = _scene_graph()
    assert from_json(to_json(sg), SceneGraph) == sg
    assert from_builtins(to_builtins(sg), SceneGraph) == sg


def test_builtins_have_every_field() -> None:
    # Arrow conversion relies on a stable key set: defaults are never omitted.
    d = to_builtins(Observation(id="O1", finding="x"))
    assert set(d) == set(Observation.__struct_fields__)
    assert d["regions"] == [] and d["laterality"] is None


def test_qa_round_trip_with_parts_and_boxes() -> None:
    b = Box(image_id="i1", x1=1, y1=2, x2=3, y2=4)
    qa = QA(
        qa_id="q1", source="s", split="train", patient_id="p", study_id="s:1", strategy="qba",
        question_type="D02_has_finding", template_id="qba.D02_has_finding", template_version=1,
        question="Is there a pleural effusion?", answer="Yes, there is a small left pleural effusion.",
        answer_short="yes", polarity="positive", findings=["pleural_effusion"],
        answer_parts=[AnswerPart(part_type="main", text="Yes.", boxes=[b], findings=["pleural_effusion"])],
        boxes=[b], grade="A++", provenance=["S01"],
    )
    assert from_json(to_json(qa), QA) == qa
    assert from_builtins(to_builtins(qa), QA) == qa
    assert b.area() == 4.0 and b.as_list() == [1, 2, 3, 4]


def test_study_with_labels_round_trip() -> None:
    st = Study(id="nih:1", patient_id="1", source="nih-cxr14",
               labels=[Label(scheme="nih14", name="Effusion", value=1, findings=["pleural_effusion"])])
    assert from_json(to_json(st), Study) == st


def test_decoding_rejects_wrong_types() -> None:
    with pytest.raises(msgspec.ValidationError):
        from_json(b'{"id": "O1", "finding": 3}', Observation)
