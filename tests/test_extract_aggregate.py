"""Report-level aggregation: one observation per finding + side + regions, conflict rules,
observation -> sentence links, indication capture."""

from __future__ import annotations

import pytest

from radvqa.extract import get_extractor
from radvqa.model import to_json
from radvqa.ontology import load_ontology


@pytest.fixture(scope="module")
def ex():
    return get_extractor("rules", ontology=load_ontology())


def _obs(e, finding):
    return [o for o in e.observations if o.finding == finding]


def test_one_observation_per_finding_side_region_with_all_evidence(ex):
    text = "FINDINGS: Small right pleural effusion.\nIMPRESSION: Small right effusion, new since prior."
    e = ex.extract(text, "s")
    eff = _obs(e, "pleural_effusion")
    assert len(eff) == 1
    o = eff[0]
    assert (o.certainty, o.laterality, o.severity, o.change) == ("present", "right", "small", "new")
    assert [sp.sentence_id for sp in o.evidence] == ["S01", "S02"]
    for sp in o.evidence:
        assert text[sp.start:sp.end] == sp.text
        sent = next(s for s in e.report.sentences if s.id == sp.sentence_id)
        assert sent.start <= sp.start and sp.end <= sent.end
    assert [x.id for x in e.observations] == [f"O{i:02d}" for i in range(1, len(e.observations) + 1)]


def test_sides_stay_separate(ex):
    e = ex.extract("Small left pleural effusion. No right pleural effusion.", "s")
    got = {(o.laterality, o.certainty) for o in _obs(e, "pleural_effusion")}
    assert got == {("left", "present"), ("right", "absent")}


@pytest.mark.parametrize("text, expected", [
    ("FINDINGS: Possible pneumonia. IMPRESSION: Pneumonia.", "present"),
    ("FINDINGS: No pneumonia. IMPRESSION: Possible pneumonia.", "uncertain"),
    ("FINDINGS: Pneumonia. IMPRESSION: No pneumonia.", "present"),
    ("FINDINGS: No pneumonia. IMPRESSION: No evidence of pneumonia.", "absent"),
])
def test_positive_beats_uncertain_beats_negative(ex, text, expected):
    assert [o.certainty for o in _obs(ex.extract(text, "s"), "pneumonia")] == [expected]


def test_implied_negative_never_overrides_an_explicit_statement(ex):
    e = ex.extract("Consolidation is present. IMPRESSION: No acute cardiopulmonary process.", "s")
    assert [o.certainty for o in _obs(e, "consolidation")] == ["present"]
    e = ex.extract("No acute cardiopulmonary process.", "s")
    assert [o.certainty for o in _obs(e, "consolidation")] == ["absent"]


def test_indication_text_and_what_it_asks(ex):
    e = ex.extract("INDICATION: Cough and fever, evaluate for pneumonia.\nFINDINGS: No pneumonia.", "s")
    assert e.indication is not None
    assert e.indication.text == "Cough and fever, evaluate for pneumonia."
    assert "pneumonia" in e.indication.evaluate
    # the indication's hypothetical mention is not an observation; the finding's is
    assert [o.certainty for o in _obs(e, "pneumonia")] == ["absent"]
    assert all(sp.sentence_id == "S01" for sp in e.indication.evidence)


def test_comparison_and_technique_sections_give_no_observations(ex):
    e = ex.extract("COMPARISON: Prior study with pneumonia.\nTECHNIQUE: PA and lateral.\nFINDINGS: Lungs are clear.", "s")
    assert all(o.certainty == "absent" for o in e.observations)
    assert not _obs(e, "pneumonia")


def test_deterministic_and_cache_independent(ex):
    text = "FINDINGS: Small left effusion. No pneumothorax. Heart size is normal. Mild bibasilar atelectasis."
    first = to_json(ex.extract(text, "a"))
    fresh = get_extractor("rules", ontology=load_ontology(), cache_size=1)
    assert to_json(fresh.extract(text, "a")) == first == to_json(ex.extract(text, "a"))


def test_indication_keeps_the_question_not_the_history(ex):
    e = ex.extract("INDICATION:  ___F with history of CHF, now with dyspnea  // ?pna\nFINDINGS: No pneumonia.", "s")
    assert e.indication is not None and e.indication.evaluate == ["pneumonia"]


# ---- QA audit follow-up (issue 3): evidence supports the final certainty ---------------------

def _evidence_sentences(e, o):
    return [sp.sentence_id for sp in o.evidence]


def test_present_observation_never_cites_the_negating_sentence(ex):
    # "free of focal airspace disease" negates an opacity; a later sentence states one
    text = ("FINDINGS: The lungs are free of focal airspace disease. A few bandlike opacities are "
            "present on the lateral view.")
    e = ex.extract(text, "s")
    (o,) = _obs(e, "lung_opacity")
    assert o.certainty == "present"
    assert [sp.text for sp in o.evidence] == ["opacities"]
    assert _evidence_sentences(e, o) == ["S02"]
    assert o.regions == []  # "lungs" was named only by the negating sentence


@pytest.mark.parametrize("text, certainty, cited", [
    ("FINDINGS: No pneumonia. IMPRESSION: Pneumonia.", "present", ["S02"]),
    ("FINDINGS: No pneumonia. IMPRESSION: Possible pneumonia.", "uncertain", ["S02"]),
    ("FINDINGS: Possible pneumonia. IMPRESSION: Pneumonia.", "present", ["S02"]),
    ("FINDINGS: No pneumonia. IMPRESSION: No evidence of pneumonia.", "absent", ["S01", "S02"]),
])
def test_evidence_is_the_mentions_of_the_final_certainty(ex, text, certainty, cited):
    e = ex.extract(text, "s")
    obs = _obs(e, "pneumonia")
    assert {o.certainty for o in obs} == {certainty}
    assert sorted(sid for o in obs for sid in _evidence_sentences(e, o)) == cited


def test_attributes_come_from_supporting_mentions_only(ex):
    e = ex.extract("FINDINGS: No large pleural effusion. IMPRESSION: Small pleural effusion, new.", "s")
    (o,) = _obs(e, "pleural_effusion")
    assert (o.certainty, o.severity, o.change) == ("present", "small", "new")
    assert _evidence_sentences(e, o) == ["S02"]


def test_every_observation_keeps_evidence_and_non_lateralised_findings_have_no_side(ex):
    from pathlib import Path

    from radvqa.extract.inputs import read_reports

    onto = ex.ontology
    n = 0
    for rec in read_reports(Path(__file__).parent / "data" / "extract" / "openi"):
        if not isinstance(rec, tuple):
            continue
        e = ex.extract(rec[1], rec[0])
        for o in e.observations:
            n += 1
            assert o.evidence, (rec[0], o.finding)
            # non-lateralised unless the extraction data says report text gives it a side
            if not onto.findings[o.finding].lateralised and o.finding not in ex.lateralised:
                assert o.laterality is None, (rec[0], o.finding, o.laterality)
    assert n > 500


def test_mediastinal_shift_has_a_direction_not_a_side(ex):
    assert ex.ontology.findings["mediastinal_shift"].lateralised is False
    e = ex.extract("There is mediastinal shift to the right and to the left.", "s")
    assert [o.laterality for o in _obs(e, "mediastinal_shift")] == [None]
