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
