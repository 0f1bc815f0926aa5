"""RadImageNet-VQA tasks on chest X-ray labels (generate/rin_chest.py): no option, and no "no"
question, is ever a finding the study has or may have."""

from __future__ import annotations

from collections import Counter

import pytest

from radvqa.generate.engine import GenerateOptions, Generator
from radvqa.model import Image, Observation, SceneGraph
from radvqa.ontology import load_ontology


@pytest.fixture(scope="module")
def gen() -> Generator:
    return Generator(load_ontology(), GenerateOptions(strategies=("rin",)))


def _sg(i: int, obs: list[Observation], **kw) -> SceneGraph:
    return SceneGraph(study_id=f"nih-cxr14:{i}", patient_id=f"p{i}", source="nih-cxr14", modality="CR",
                      images=[Image(id=f"im{i}", path=f"im{i}.png", width=448, height=448, view="PA")],
                      observations=obs, **kw)


def _obs(k: int, fid: str, cert: str, source: str = "label") -> Observation:
    return Observation(id=f"O{k:02d}", finding=fid, certainty=cert, source=source, from_report=source == "report")


def test_distractors_never_a_finding_the_study_has(gen: Generator) -> None:
    """Labels: nodule present, pneumonia uncertain, every other NIH label negative; the report
    states atelectasis (a label negative). Lung-group options may only be the other negatives."""
    v = gen.vocab
    strat = gen.strategies[0]
    lungs = [f for f in strat.chest.pool["nih14"] if strat.chest.group[f] == "lungs"]
    has = {"nodule", "pneumonia", "atelectasis", *v.fancestors["nodule"], *v.fancestors["pneumonia"],
           *v.fancestors["atelectasis"], *v.fdescendants.get("nodule", ()), *v.fdescendants.get("pneumonia", ())}
    allowed = {v.finding_name(f) for f in lungs if f not in has}
    assert len(allowed) >= 2
    seen_options: Counter[str] = Counter()
    letters: Counter[str] = Counter()
    for i in range(300):
        obs = [_obs(1, "nodule", "present"), _obs(2, "pneumonia", "uncertain"), _obs(3, "atelectasis", "absent"),
               _obs(4, "pneumothorax", "absent"), _obs(5, "atelectasis", "present", source="report")]
        rows = gen.generate(_sg(i, obs))
        by = {r.question_type: r for r in rows}
        # no abnormality question on labels the report contradicts? here labels are positive: asked
        assert by["abnormality"].answer_short == "yes"
        mc = by["pathology_mc"]
        assert mc.choices is not None and len(mc.choices) == 4
        assert mc.choices[ord(mc.answer_short) - 65] == "nodule"
        letters[mc.answer_short] += 1
        for o in mc.choices:
            if o in ("nodule", "no pathology seen"):
                continue
            assert o in allowed, (o, mc.question)
            seen_options[o] += 1
        neg = by["pathology_closed_neg"]
        assert neg.answer_short == "no" and neg.findings[0] not in has
        assert by["pathology_closed_pos"].findings == ["nodule"]
    assert set(seen_options) == allowed  # every allowed negative is used, nothing else
    assert set(letters) == set("ABCD") and min(letters.values()) > 40


def test_normal_study_and_ambiguous_study(gen: Generator) -> None:
    v = gen.vocab
    # labels say "No Finding": abnormality no, free of pathology yes, MC options from one region group
    normal = gen.generate(_sg(1, [_obs(1, "pneumothorax", "absent")], meta={"no_finding_label": "nih14"}))
    by = {(r.question_type, r.answer_short): r for r in normal}
    assert ("abnormality", "no") in by and ("pathology_closed_pos", "yes") in by
    mcs = [r for r in normal if r.question_type == "pathology_mc"]
    if mcs:
        opts = [o for o in mcs[0].choices if o != "no pathology seen"]
        fids = {f for f in v.fname if v.finding_name(f) in opts}
        assert len({gen.strategies[0].chest.group[f] for f in fids}) == 1
        assert mcs[0].choices[ord(mcs[0].answer_short) - 65] == "no pathology seen"
    # labels normal but the report states a finding: nothing truthful to ask about abnormality
    amb = gen.generate(_sg(2, [_obs(1, "cardiomegaly", "present", source="report")], meta={"no_finding_label": "nih14"}))
    assert not [r for r in amb if r.strategy == "rin"]
    # a source without a configured label scheme, or no labels at all: rin does not apply
    assert not gen.generate(_sg(3, [_obs(1, "cardiomegaly", "present", source="report")]))


def test_a_label_beside_its_more_specific_label_is_not_named_twice() -> None:
    """OpenI MeSH "Aorta/enlarged" and "Aorta, Thoracic/tortuous" on one study were answered
    "... aortic enlargement, bone lesion and tortuous aorta" (the audit's duplicate check, #13)."""
    from radvqa.quality.audit import Family, check_row
    import msgspec

    onto = load_ontology()
    g = Generator(onto, GenerateOptions(strategies=("rin",)))
    assert "aortic_enlargement" in g.vocab.fancestors["tortuous_aorta"]
    obs = [_obs(1, "aortic_enlargement", "present"), _obs(2, "tortuous_aorta", "present")]
    rows = g.generate(_sg(1, obs))
    assert rows
    fam = Family(onto)
    for r in rows:
        assert "aortic_enlargement" not in r.findings, r.answer
        assert "duplicate_statement" not in check_row(msgspec.to_builtins(r), fam), r.answer
