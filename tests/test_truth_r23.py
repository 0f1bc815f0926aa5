"""Issue 13, round 23: four classes of wrong rows that readers found on reports outside train + val;
the same patterns found in R2Gen train (classes 1 and 4) or written by hand (classes 2 and 3).

1. "Otherwise clear" denied what the stated finding is: "Right upper lobe airspace disease
   consistent with pneumonia ... The lungs are otherwise clear." -> "Right pneumonia is seen ...
   There is no consolidation." (CXR3069, CXR3108). A negative the report limits to the rest of the
   lungs (common.yaml ``limited_negative_words``) is not said beside a stated finding it is
   (``open_finding_forms``: a pneumonia is a consolidation on the film; generate/facts.py
   ``_open_beside``).
2. "Presumably" / "presumed" / "presumptive" were no hedges: "Stable lingular nodule, presumably
   granuloma" -> "There is a left granuloma." They hedge what follows as "probably" does
   (context.yaml ``uncertainty_pre``); the nodule before them stays stated. Hand-written only.
3. "Concerning findings for X", "worrisome for X" were no hedges: "Concerning findings for fibrosis
   in the bases" -> "Pulmonary fibrosis is seen." (context.yaml ``uncertainty_pre``). Hand-written only.
4. A stated opacity lost to its hedged cause: the opacity, left unsaid by round 10's unvouched
   readings, and "Is there any lung opacity? Possibly." answered from the hedged pneumonia or
   atelectasis (CXR233, CXR2909). A finding the report states present in a reading left unsaid is
   no longer asked from its hedged kinds (generate/qba.py ``_Findings.about``); and the words of "in
   the appropriate / correct clinical setting" are read (quality/data/unvouched.yaml), so the opacity
   stays stated beside the hedged pneumonia (CXR2585, CXR332).

Real reports: tests/data/openi_issue13r23 (unmodified R2Gen train XMLs, README there)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from openi_truth import build_rows, findings_in, rows_of, scene_graph, write_reports

DATA = Path(__file__).parent / "data" / "openi_issue13r23"

# an uncertain lead: what "Is there any X?" answers for a hedged X
HEDGED_LEAD = re.compile(r"^(Possibly|This cannot be excluded|It cannot be excluded|Maybe|The finding is uncertain)")
DENIES_CONSOLIDATION = re.compile(r"\bno (focal )?consolidation\b|consolidation is not seen", re.I)

# hand-written reports (numbers far from any OpenI report's)
HAND = {
    # class 1: a lobar pneumonia beside "otherwise clear"
    90001: ("Heart size is normal. Left lower lobe pneumonia. Lungs otherwise clear. No pneumothorax.",
            "Left lower lobe pneumonia."),
    # class 1 control: a nodule is no consolidation: "otherwise clear" still denies one
    90002: ("Heart size is normal. Small right upper lobe nodule. Lungs otherwise clear. No pneumothorax.",
            "Small right upper lobe nodule."),
    # class 2
    90003: ("Heart size is normal. Stable lingular nodule, presumably granuloma. No pleural effusion.",
            "No acute disease."),
    # class 3
    90004: ("Heart size is normal. Concerning findings for fibrosis in the bases. No pleural effusion.",
            "Findings worrisome for pulmonary fibrosis."),
    # class 4: the opacity stated outright, its cause hedged in its clinical setting
    90005: ("Heart size is normal. Patchy right upper lobe opacities, concerning for pneumonia in the appropriate "
            "clinical setting. No pleural effusion.", "Right upper lobe opacities, possibly pneumonia."),
}


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    # the default build (--unvouched omit): class 4 is what it leaves unsaid
    return build_rows(DATA, tmp_path_factory.mktemp("r23") / "out", unvouched="omit")


@pytest.fixture(scope="module")
def hand_rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    d = write_reports(tmp_path_factory.mktemp("r23h") / "xml", HAND)
    return build_rows(d, d.parent / "out", unvouched="omit")


def _about(rows: list[dict], word: str) -> list[dict]:
    """The finding questions (D01/D02) that name ``word``."""
    return [r for r in rows if r["question_type"] in ("D01_describe_finding", "D02_has_finding")
            and word in r["question"].lower()]


# ---- 1. "otherwise clear" beside a stated pneumonia ---------------------------------------------

@pytest.mark.parametrize("n", [3069, 3108])
def test_otherwise_clear_does_not_deny_the_consolidation_a_pneumonia_is(rows: list[dict], n: int) -> None:
    got = rows_of(rows, n)
    said = [(r["question"], r["answer"]) for r in got if DENIES_CONSOLIDATION.search(r["answer"])]
    assert not said, said
    # no "Is there any consolidation? No."
    assert not [r for r in _about(got, "consolidation") if r["answer"].startswith("No")]
    # the pneumonia is still stated, with its lobe
    assert any("pneumonia" in r["answer"] and ("lower lobe" in r["answer"] or "upper lobe" in r["answer"])
               for r in got if r["question_type"] == "B01_describe_all")


def test_hand_written_lobar_pneumonia_beside_otherwise_clear(hand_rows: list[dict]) -> None:
    got = rows_of(hand_rows, 90001)
    said = [(r["question"], r["answer"]) for r in got if DENIES_CONSOLIDATION.search(r["answer"])]
    assert not said, said
    assert any("left pneumonia" in r["answer"].lower() for r in got)
    # control: beside a nodule, "otherwise clear" still says there is no consolidation
    assert any(DENIES_CONSOLIDATION.search(r["answer"]) for r in rows_of(hand_rows, 90002))


def test_a_limited_negative_beside_a_stated_pneumonia_unit(gen) -> None:
    from radvqa.model import Observation, Span

    s = ["Left lower lobe pneumonia.", "The lungs are otherwise clear."]

    def obs(oid: str, finding: str, i: int, words: str, certainty: str, regions: list[str], side: str | None):
        start = sum(len(x) + 1 for x in s[:i]) + s[i].index(words)
        return Observation(id=oid, finding=finding, certainty=certainty, regions=regions, laterality=side,
                           source="report", evidence=[Span(start=start, end=start + len(words), text=words,
                                                           sentence_id=f"S{i + 1:02d}")])

    said = 0
    for k in range(8):
        o = [obs("O1", "pneumonia", 0, "pneumonia", "present", ["left_lower_lobe"], "left"),
             obs("O2", "consolidation", 1, "lungs are otherwise clear", "absent", ["lungs"], None),
             obs("O3", "pulmonary_edema", 1, "lungs are otherwise clear", "absent", ["lungs"], None)]
        rs = gen.generate(scene_graph(o, s, study_id=f"openi:P23{k}"))
        said += sum(bool(DENIES_CONSOLIDATION.search(r.answer)) for r in rs)
        assert any("no pulmonary edema" in r.answer.lower() for r in rs)  # the other negatives stay
    assert said == 0


# ---- 2. "presumably granuloma" ------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "Stable lingular nodule, presumably granuloma.",
    "Stable lingular nodule, presumed granuloma.",
    "Stable lingular nodule, presumptive granuloma.",
])
def test_a_presumed_nature_is_a_hedge_the_nodule_stays_stated(ex, text: str) -> None:
    got = {(o.finding, o.certainty) for o in findings_in(ex, text)}
    assert ("nodule", "present") in got, got
    assert ("granuloma", "uncertain") in got and ("granuloma", "present") not in got, got


def test_presumed_pneumonia_and_the_probably_control(ex) -> None:
    got = [(o.finding, o.certainty) for o in findings_in(ex, "Presumed right lower lobe pneumonia.")]
    assert got == [("pneumonia", "uncertain")], got
    # as "probably" already read
    got = {(o.finding, o.certainty) for o in findings_in(ex, "Stable lingular nodule, probably granuloma.")}
    assert got == {("nodule", "present"), ("granuloma", "uncertain")}, got


def test_hand_written_presumed_granuloma_rows(hand_rows: list[dict]) -> None:
    got = rows_of(hand_rows, 90003)
    stated = [r["answer"] for r in got if re.search(r"there is a (left )?granuloma|granuloma is seen", r["answer"], re.I)]
    assert not stated, stated
    assert any(re.search(r"granuloma (cannot be excluded|may be present)", r["answer"]) for r in got)
    assert any(re.search(r"nodule is seen|there is a left nodule", r["answer"], re.I) for r in got)


# ---- 3. "concerning findings for", "worrisome for" ----------------------------------------------

@pytest.mark.parametrize("text,finding", [
    ("Concerning findings for fibrosis in the bases.", "pulmonary_fibrosis"),
    ("Findings worrisome for pneumonia.", "pneumonia"),
    ("Worrisome for pneumonia in the left base.", "pneumonia"),
    ("Suspicious findings for metastatic disease.", "metastasis"),
])
def test_concerning_and_worrisome_findings_for_hedge(ex, text: str, finding: str) -> None:
    got = [(o.finding, o.certainty) for o in findings_in(ex, text)]
    assert got == [(finding, "uncertain")], got


def test_worrisome_for_keeps_the_stated_sign_and_a_negation(ex) -> None:
    got = {(o.finding, o.certainty) for o in findings_in(ex, "Left base opacity worrisome for pneumonia.")}
    assert got == {("lung_opacity", "present"), ("pneumonia", "uncertain")}, got
    got = [(o.finding, o.certainty) for o in findings_in(ex, "No findings worrisome for pneumonia.")]
    assert got == [("pneumonia", "absent")], got


def test_hand_written_concerning_findings_for_fibrosis_rows(hand_rows: list[dict]) -> None:
    got = rows_of(hand_rows, 90004)
    stated = [r["answer"] for r in got if re.search(r"fibrosis is seen|there is (pulmonary )?fibrosis", r["answer"], re.I)]
    assert not stated, stated
    assert any("fibrosis cannot be excluded" in r["answer"] or "fibrosis may be present" in r["answer"] for r in got)


# ---- 4. a stated opacity beside its hedged cause ------------------------------------------------

@pytest.mark.parametrize("n,words", [(233, ("lung opacity", "atelectasis", "scarring")), (2909, ("lung opacity",))])
def test_a_finding_stated_present_is_never_asked_possibly(rows: list[dict], n: int, words: tuple[str, ...]) -> None:
    # 233: "XXXX densities in the left base, small focal XXXX opacity in the right base ... densities in
    # left base may be compatible with scarring or subsegmental atelectasis ... in part to atelectasis";
    # "Biapical pleuroparenchymal irregularities most compatible with scarring".
    # 2909: "Patchy airspace disease in the left lingula ... Pneumonia is in the differential."
    got = rows_of(rows, n)
    for w in words:
        # (the subsegmental atelectasis itself is hedged: "Is there any linear atelectasis?
        # Possibly." is right)
        hedged = [(r["question"], r["answer"]) for r in _about(got, w)
                  if "linear atelectasis" not in r["question"] and HEDGED_LEAD.match(r["answer"])]
        assert not hedged, hedged
    # the study is still asked about what the report hedges
    assert any(HEDGED_LEAD.match(r["answer"]) for r in got if r["question_type"] == "D02_has_finding")


@pytest.mark.parametrize("n,place,cause", [(2585, "right middle lobe", "pneumonia cannot be excluded"),
                                           (332, "left lower lobe", "pneumonia may be present")])
def test_the_opacity_stays_stated_beside_a_pneumonia_in_its_clinical_setting(rows: list[dict], n: int, place: str,
                                                                             cause: str) -> None:
    got = rows_of(rows, n)
    asked = [r for r in _about(got, "lung opacity") if r["question_type"] == "D02_has_finding"]
    assert asked and all(r["answer"].startswith("Yes") and place in r["answer"] for r in asked), \
        [r["answer"] for r in asked]
    assert any(cause in r["answer"] for r in got)
    # the pneumonia is never stated outright
    assert not [r["answer"] for r in got if re.search(r"(left|right) pneumonia is seen|there is (left |right )?pneumonia",
                                                      r["answer"], re.I)]


def test_hand_written_patchy_opacities_concerning_for_pneumonia(hand_rows: list[dict], ex) -> None:
    got = {(o.finding, o.certainty, o.laterality) for o in findings_in(ex, HAND[90005][0])}
    assert ("lung_opacity", "present", "right") in got and ("pneumonia", "uncertain", "right") in got, got
    rs = rows_of(hand_rows, 90005)
    opac = _about(rs, "lung opacity")
    assert opac and not [r["answer"] for r in opac if HEDGED_LEAD.match(r["answer"])]
    assert any(r["answer"].startswith("Yes") and "right upper lobe" in r["answer"] for r in opac
               if r["question_type"] == "D02_has_finding") or \
        any("right lung opacity is seen" in r["answer"].lower() and "right upper lobe" in r["answer"] for r in opac)
    assert not [r["answer"] for r in rs if re.search(r"right pneumonia is seen|there is right pneumonia", r["answer"], re.I)]


# ---- session 12: a diagnosis offered "in the appropriate clinical setting" is hedged -------------

@pytest.mark.parametrize("text", [
    "There is an infiltrate in the right lower lobe. In the appropriate clinical setting this appearance is compatible with pneumonia.",
    "Left basilar opacity. In the correct clinical setting, this is consistent with pneumonia.",
])
def test_a_diagnosis_on_a_clinical_condition_is_not_stated(ex, text: str) -> None:
    got = findings_in(ex, text)
    assert [o.certainty for o in got if o.finding == "pneumonia"] == ["uncertain"], [(o.finding, o.certainty) for o in got]
    # the opacity before it stays stated
    assert any(o.certainty == "present" and o.finding in ("infiltration", "lung_opacity") for o in got)
