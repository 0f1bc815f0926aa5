"""Template engine: the packaged templates load; broken template files fail with a clear message."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent / "data" / "generate"))
from helpers import mini_ontology  # noqa: E402

from radvqa.generate import GenerateOptions, Generator, TemplateError  # noqa: E402
from radvqa.generate import qba  # noqa: E402
from radvqa.generate.templates import Op, check_unique, load_family, parse_family  # noqa: E402

QBA_TYPES = [
    "A_indication", "B01_describe_all", "B02_describe_abnormal", "B03_is_abnormal", "B04_is_normal",
    "B08_describe_subcat", "B09_describe_abnormal_subcat", "B10_is_abnormal_subcat", "B11_is_normal_subcat",
    "B12_describe_device", "B13_has_devices", "B14_describe_acquisition", "B15_describe_artifacts",
    "B16_has_artifacts", "C01_describe_region", "C02_describe_abnormal_region", "C03_is_abnormal_region",
    "C04_is_normal_region", "C07_describe_device_region", "C08_has_device_region", "D01_describe_finding",
    "D02_has_finding", "D03_where_is_finding", "D04_how_severe_is_finding", "D05_describe_device",
    "D06_has_device", "D07_where_is_device",
]

SPECS = {"has": Op(frozenset({"present", "absent"}), frozenset({"phrase"}), frozenset({"finding"}))}


def _doc(**tpl_over) -> dict:
    tpl = {"id": "fam.has", "version": 1, "scope": "finding", "op": "has", "slots": {"finding": "finding"},
           "questions": ["Is there {finding}?", "Does it show {finding}?"],
           "answers": {"present": ["Yes, {phrase}."], "absent": ["No."]}}
    tpl.update(tpl_over)
    return {"family": "fam", "version": 1, "templates": [tpl]}


def _parse(doc: dict):
    return parse_family(doc, "test.yaml", SPECS, {})


def test_packaged_templates_load_with_all_27_qba_types():
    gen = Generator(mini_ontology(), GenerateOptions())
    ids = set(gen.templates)
    assert {f"qba.{t}" for t in QBA_TYPES} <= ids
    assert len([i for i in ids if i.startswith("qba.")]) == 27
    assert {f"vindr.{t}" for t in ("where", "what", "is_there", "how_many", "which", "yes_no")} <= ids
    assert {f"rin.{t}" for t in ("abnormality", "anatomy_open", "anatomy_closed_pos", "anatomy_closed_neg",
                                 "anatomy_mc", "pathology_open", "pathology_closed_pos",
                                 "pathology_closed_neg", "pathology_mc")} <= ids
    assert {"diff.what_changed", "diff.new_findings", "diff.resolved_findings"} <= ids
    for t in gen.templates.values():
        assert t.version >= 1 and t.questions and t.family == t.id.split(".")[0]
    # every qba template is an (operation, scope) pair of the tables
    qts = [t for t in gen.templates.values() if t.family == "qba"]
    assert all(t.op in qba.OPS and t.scope in qba.SCOPES and t.scope in qba.OPS[t.op].scopes for t in qts)
    # the four operations B01-B04 / B08-B11 / C01-C04 share, over the three scopes
    grid = {(t.scope, t.op) for t in qts}
    for scope in ("study", "subcategory", "region"):
        for op in ("describe", "describe_abnormal", "is_abnormal", "is_normal"):
            assert (scope, op) in grid


def test_valid_minimal_family_parses():
    fam = _parse(_doc())
    t = fam.templates["has"]
    assert t.id == "fam.has" and t.slots == {"finding": "finding"} and len(t.questions) == 2


@pytest.mark.parametrize("over, msg", [
    ({"questions": ["Is there {organ}?"]}, "unknown slot"),
    ({"questions": ["Is there anything?"]}, "does not use slot"),
    ({"slots": {"finding": "colour"}}, "unknown type"),
    ({"answers": {"present": ["Yes."], "absent": ["No."], "uncertain": ["Maybe."]}}, "unused wording"),
    ({"answers": {"present": ["Yes."]}}, "missing key"),
    ({"answers": {"present": ["Yes, {size}."], "absent": ["No."]}}, "unknown slot/variable"),
    ({"answers": {True: ["Yes."], "absent": ["No."]}}, "quote the key"),
    ({"id": "other.has"}, "must be 'fam.<question_type>'"),
    ({"op": "nope"}, "unknown op 'nope'"),
    ({"op": None}, "unknown op None"),
    ({"scope": "region"}, "works over scope(s) ['finding'], not 'region'"),
    ({"version": 0}, "version"),
    ({"questions": ["Is there {finding}?", "Is there {finding}?"]}, "duplicate wording"),
    ({"constraints": ["be_nice"]}, "unknown constraint"),
    ({"parts": ["details"]}, "must include main"),
    ({"colour": "red"}, "unknown key"),
    ({"questions": ["Is there {finding:>10}?"]}, "format spec"),
])
def test_broken_template_rejected_with_message(over, msg):
    with pytest.raises(TemplateError) as ei:
        _parse(_doc(**over))
    assert msg in str(ei.value)
    assert "test.yaml" in str(ei.value)


def test_duplicate_id_in_one_file_and_across_files(tmp_path):
    doc = _doc()
    doc["templates"].append(dict(doc["templates"][0]))
    with pytest.raises(TemplateError, match="duplicate template id 'fam.has'"):
        _parse(doc)
    p1, p2 = tmp_path / "a.yaml", tmp_path / "b.yaml"
    p1.write_text(yaml.safe_dump(_doc()))
    p2.write_text(yaml.safe_dump(_doc()))
    fams = [load_family(p1, SPECS, {}), load_family(p2, SPECS, {})]
    with pytest.raises(TemplateError, match="duplicate template id 'fam.has' in .*b.yaml"):
        check_unique(fams)


def test_unused_phrase_key_and_bad_yaml(tmp_path):
    doc = _doc()
    doc["phrases"] = {"leftover": ["text"]}
    with pytest.raises(TemplateError, match="phrases.leftover: unused wording"):
        _parse(doc)
    bad = tmp_path / "bad.yaml"
    bad.write_text("family: [unclosed")
    with pytest.raises(TemplateError, match="not valid YAML"):
        load_family(bad, SPECS, {})


def test_template_dir_override_is_validated(tmp_path):
    """A user's template folder replaces a packaged family and goes through the same checks."""
    src = Path(__file__).parents[1] / "src" / "radvqa" / "generate" / "templates" / "vindr.yaml"
    data = yaml.safe_load(src.read_text())
    data["templates"][0]["questions"].append("Where is it?")  # does not use the finding slot
    (tmp_path / "vindr.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(TemplateError, match="does not use slot"):
        Generator(mini_ontology(), GenerateOptions(template_dir=str(tmp_path)))
