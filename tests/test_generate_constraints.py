"""Question types as data and constraints that run: a new question type added in YAML only (an
existing scope x operation) generates rows; every template constraint drops the rows it names and
only those; typed config blocks reject misspelt keys."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent / "data" / "generate"))
from helpers import cxr_report_sg, mini_ontology, normal_report_sg  # noqa: E402

from radvqa.generate import GenerateOptions, Generator, TemplateError  # noqa: E402
from radvqa.generate.constraints import (CONSTRAINTS, Candidate, answer_not_in_question,  # noqa: E402
                                         distinct_options, non_degenerate)
from radvqa.generate.engine import StudyCtx  # noqa: E402
from radvqa.model import Observation  # noqa: E402
from radvqa.ontology import load_ontology  # noqa: E402

PACKAGED = Path(__file__).parents[1] / "src" / "radvqa" / "generate" / "templates"


def _family(name: str) -> dict:
    return yaml.safe_load((PACKAGED / f"{name}.yaml").read_text())


def _write(tmp_path: Path, name: str, data: dict) -> str:
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return str(tmp_path)


def _tpl(data: dict, tid: str) -> dict:
    return next(t for t in data["templates"] if t["id"] == tid)


# --- a new question type in YAML only ---------------------------------------------------------------

ARTIFACT_REGION = {
    "id": "qba.C09_has_artifact_region", "version": 1, "scope": "region", "op": "has_artifacts",
    "slots": {"region": "region"},
    "questions": ["Is any imaging artifact projected over the {region}?",
                  "Does an artifact overlie the {region}?"],
    "answers": {"yes": ["Yes."], "no": ["No, no artifact overlies the {region}."]},
    "parts": ["main", "details"], "cap": 4, "answer_short": "yesno",
}


def _with_artifact(sg):
    nipple = Observation(id="O06", finding="nipple_shadow", certainty="present", laterality="left",
                         regions=["left_lung"], boxes=[b for b in sg.region_boxes if b.label == "left_lung"])
    return msgspec.structs.replace(sg, observations=[*sg.observations, nipple])


def test_new_question_type_from_yaml_only(tmp_path):
    """"Is there an artifact over REGION?": the region scope and the has_artifacts operation exist
    (B16 asks it of the study); one YAML entry makes the new type, no Python."""
    data = _family("qba")
    data["templates"].append(ARTIFACT_REGION)
    onto = load_ontology()
    opts = dict(strategies=("qba",), seed=0)
    g = Generator(onto, GenerateOptions(template_dir=_write(tmp_path, "qba", data), **opts))
    rows = g.generate(_with_artifact(cxr_report_sg()))
    new = [r for r in rows if r.template_id == "qba.C09_has_artifact_region"]
    assert new and all(r.question_type == "C09_has_artifact_region" for r in new)
    yes = [r for r in new if r.answer_short == "yes"]
    no = [r for r in new if r.answer_short == "no"]
    # the nipple shadow lies in the left lung (and so in every region containing it): "yes" there
    where = {"left_lung", *g.vocab.rancestors["left_lung"]}
    assert "left_lung" in {r.regions[0] for r in yes} and all(r.regions[0] in where for r in yes)
    assert all(r.findings == ["nipple_shadow"] and r.boxes and r.polarity == "positive" for r in yes)
    # other regions: a plain "no" resting on the report's silence (implied negative: grade B)
    assert no and all(r.regions[0] not in where and r.grade == "B" for r in no)
    assert all(r.answer.startswith("No, no artifact overlies the ") for r in no)
    # the packaged types are untouched by the addition
    base = Generator(onto, GenerateOptions(**opts)).generate(_with_artifact(cxr_report_sg()))
    assert [r.qa_id for r in rows if r.template_id != ARTIFACT_REGION["id"]] == [r.qa_id for r in base]


def test_scope_an_operation_does_not_work_over_is_a_load_error(tmp_path):
    data = _family("qba")
    data["templates"].append({**ARTIFACT_REGION, "scope": "finding"})
    with pytest.raises(TemplateError, match="op 'has_artifacts' works over scope"):
        Generator(mini_ontology(), GenerateOptions(template_dir=_write(tmp_path, "qba", data)))


# --- constraints: each function -------------------------------------------------------------------

def _c(question="Where is the effusion?", short=None, choices=None, wordings=("x",), parts=None):
    return Candidate(question, short, choices, wordings, parts)


def test_answer_not_in_question():
    assert not answer_not_in_question(_c("Where is the degenerative change of the spine?", "the spine"))
    assert answer_not_in_question(_c("Where is the endotracheal tube?", "the trachea"))  # whole words only
    assert answer_not_in_question(_c("Is there a nodule?", "no"))  # "no" is not leaked by "nodule"
    assert answer_not_in_question(_c("Where is the effusion?", None))
    # options are part of a multiple-choice question by design; a letter names an option
    mc = "Which region? A) Knee B) Brain C) Spine D) Hip"
    assert answer_not_in_question(_c(mc, "knee", choices=["knee", "brain", "spine", "hip"]))
    assert answer_not_in_question(_c(mc, "A", choices=["knee", "brain", "spine", "hip"]))
    assert not answer_not_in_question(_c("Is the knee shown? A) yes B) no", "knee", choices=["yes", "no"]))


def test_non_degenerate():
    assert not non_degenerate(_c(short="  "))
    assert not non_degenerate(_c(wordings=("",), parts=[]))  # nothing would be said
    assert non_degenerate(_c(wordings=("",), parts=["a part"]))
    assert non_degenerate(_c(short="small", wordings=("It is {severity}.",)))


def test_distinct_options():
    assert distinct_options(_c(short="B", choices=["knee", "brain", "spine", "hip"]))
    assert not distinct_options(_c(short="B", choices=["knee", "Knee", "spine", "hip"]))
    assert not distinct_options(_c(short="A", choices=["knee"]))
    assert not distinct_options(_c(short="E", choices=["knee", "brain", "spine", "hip"]))
    assert not distinct_options(_c(short="A", choices=None))


def test_constraint_table_is_what_templates_may_name():
    assert set(CONSTRAINTS) == {"answer_not_in_question", "non_degenerate", "distinct_options"}
    packaged = set()
    for name in ("qba", "vindr", "rin", "diff"):
        for t in _family(name)["templates"]:
            packaged.update(t.get("constraints") or ())
    assert packaged == set(CONSTRAINTS)  # every constraint is used, none is unknown


# --- constraints: enforced in the shared render-and-emit step ----------------------------------------

def _types(rows, tid):
    return [r for r in rows if r.template_id == tid]


def test_answer_not_in_question_drops_only_leaking_rows(tmp_path):
    """D04 asks the severity; a wording that names it gives the answer away. With the constraint
    those rows go; without it they are emitted."""
    data = _family("qba")
    d04 = _tpl(data, "qba.D04_how_severe_is_finding")
    d04["questions"] = ["Is the {finding} small or large?"]
    sg = cxr_report_sg()
    kept = Generator(mini_ontology(), GenerateOptions(strategies=("qba",),
                                                      template_dir=_write(tmp_path, "qba", data))).generate(sg)
    shorts = {r.answer_short for r in _types(kept, d04["id"])}
    assert shorts and "small" not in shorts and "mild" in shorts  # the small effusion's row dropped
    d04["constraints"] = ["non_degenerate"]
    leaky = Generator(mini_ontology(), GenerateOptions(strategies=("qba",),
                                                       template_dir=_write(tmp_path, "qba", data))).generate(sg)
    assert "small" in {r.answer_short for r in _types(leaky, d04["id"])}


def test_non_degenerate_drops_empty_answers(tmp_path):
    """A "no devices" answer whose wording is empty says nothing: dropped under non_degenerate."""
    data = _family("qba")
    b12 = _tpl(data, "qba.B12_describe_device")
    b12["answers"]["none"] = [""]
    sg = normal_report_sg()
    plain = Generator(mini_ontology(), GenerateOptions(strategies=("qba",),
                                                       template_dir=_write(tmp_path, "qba", data))).generate(sg)
    [empty] = _types(plain, b12["id"])
    assert empty.answer == ""
    b12["constraints"] = ["non_degenerate"]
    checked = Generator(mini_ontology(), GenerateOptions(strategies=("qba",),
                                                         template_dir=_write(tmp_path, "qba", data))).generate(sg)
    assert _types(checked, b12["id"]) == []
    assert len(checked) == len(plain) - 1


def test_distinct_options_drops_repeated_options():
    g = Generator(mini_ontology(), GenerateOptions(strategies=("rin",)))
    tpl = g.templates["rin.anatomy_mc"]
    assert "distinct_options" in tpl.constraints
    ctx = StudyCtx(g, cxr_report_sg(), "train")
    slots = {"modality": "MRI", "options": "A) Knee B) Knee C) Hip D) Brain"}
    lv = {"letter": "A", "option": "knee"}
    assert not ctx.render_emit(tpl, 0, slots, "x", "answer", lv, [], (0, ()), ["p"], short="A",
                               choices=["knee", "knee", "hip", "brain"])
    assert ctx.rows == []
    assert ctx.render_emit(tpl, 0, slots, "x", "answer", lv, [], (0, ()), ["p"], short="A",
                           choices=["knee", "spine", "hip", "brain"])
    assert len(ctx.rows) == 1 and ctx.rows[0].choices == ["knee", "spine", "hip", "brain"]


def test_unknown_constraint_is_a_load_error(tmp_path):
    data = _family("vindr")
    data["templates"][0]["constraints"] = ["answer_not_in_questoin"]
    with pytest.raises(TemplateError, match=r"unknown constraint\(s\) \['answer_not_in_questoin'\]"):
        Generator(mini_ontology(), GenerateOptions(template_dir=_write(tmp_path, "vindr", data)))


# --- typed config ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name, key, value", [
    ("qba", "finding_negative", 3),  # misspelt finding_negatives: no silent fallback to the default
    ("vindr", "lung_fraction", 0.5),
    ("rin", "modality", ["CT"]),
    ("diff", "label_source", ["nih-cxr14"]),
    ("common", "mass_noun", ["edema"]),
])
def test_misspelt_config_key_is_a_load_error(tmp_path, name, key, value):
    data = _family(name)
    data["config"][key] = value
    with pytest.raises(TemplateError, match=f"{name}.yaml: config: .*{key}"):
        Generator(mini_ontology(), GenerateOptions(template_dir=_write(tmp_path, name, data)))


def test_config_value_of_the_wrong_type_is_a_load_error(tmp_path):
    data = _family("qba")
    data["config"]["max_related"] = "two"
    with pytest.raises(TemplateError, match=r"config: Expected `int`, got `str` - at `\$.max_related`"):
        Generator(mini_ontology(), GenerateOptions(template_dir=_write(tmp_path, "qba", data)))

