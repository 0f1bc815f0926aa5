"""Session 15: what four fresh readers of the session-14 code found (seeds 174-177), fixed from R2Gen
train reports that show it (tests/data/openi_session15, README there) or from sentences written here
(never copied from a test or outside report).

1. A list answer of a scope where the report states a positive that no row states ("Describe the
   bones. Scoliosis is seen." beside an unread "Exaggerated kyphosis", CXR2935; "What is seen in the
   pleura? There is a small right pleural effusion." beside the pneumothorax, CXR465) was kept with
   grade B (completeness:finding_not_stated). Readers marked 44 of 245 such list rows wrong (seeds
   142-173): it reads as the full list. ``--incomplete-lists omit`` (the default) says and takes
   them back (qba.py ``_take_back``); the yes/no questions of the scope stay, and the manifest
   counts the rows withheld (``rows_withheld``). ``--incomplete-lists grade`` keeps them, grade B.
2. "Metastatic disease" offered for a bone's lesion was a lung tumour ("There is lucency involving
   the lateral aspect of the left clavicle. Metastatic disease cannot be excluded." -> "Is there any
   lung tumor? Possibly.", an outside reader): placed in a bone (or right after a sentence placing
   a finding in one) it is a bone lesion (finding_places.yaml ``placed_becomes``).
3. "Gastrostomy is noted" read no device: "Are there any support devices in this image? No." (an
   outside reader): a gastrostomy is an enteric tube (ontology synonym, as "tracheostomy" is a
   tracheostomy tube).
4. A known lung cancer in the indication with a report silent about the tumour was "The study does
   not show what the indication asks about. There is no lung tumor." (an outside reader; CXR1058,
   R2Gen train, says so beside "Innumerable bilateral lung nodules"): qba.yaml
   ``indication_silent_not_absent``.
5. A pleural finding the report places in a lung zone ("Small right apical pneumothorax": the right
   apical zone) left the pleura normal: "Describe the pleura. Nothing abnormal is seen in the
   pleura." (A++) beside "Does this image show any pleural abnormality? Yes." (hand-written, after
   CXR465, R2Gen train, whose pleura list left the pneumothorax out): qba.yaml ``subcategory_home``.
6. "followup pneumonia" beside an unchanged right upper lobe cavitation was "There is no finding that
   answers the indication. There is no pneumonia." (an outside reader; hand-written here): a cavity
   may be the infection's (qba.yaml ``indication_suspects``).
7. An indication about a device it does not name ("XXXX XXXX placement", the device masked) was
   answered with the findings alone ("The study shows cardiomegaly.", the catheter left out: outside
   readers of seeds 120 and 180) or, with the catheter alone, "The study does not show what the
   indication asks about"; "PICC line placement" beside a jugular catheter was "No peripherally
   inserted central catheter is seen". Hand-written (qba.yaml ``indication_device_words``,
   ``indication_suspect_subcategories``).
8. "H/O SARCOIDOSIS" beside "Stable bilateral hilar adenopathy" was "There is no finding that answers
   the indication. No sarcoidosis is seen." (an outside reader, seed 185; hand-written here):
   sarcoidosis is a known diagnosis the film shows by its signs (qba.yaml ``indication_suspects``,
   ``indication_silent_not_absent``).
9. A change word before a coordinated group reached only its first member: "Resolving pulmonary
   interstitial edema and pulmonary venous hypertension" said the venous hypertension as current
   (an outside reader, seed 189; seeds 145 and 153 on that study); "pulmonary venous engorgement"
   was read as nothing (attributes.yaml ``shared_change``: improved and worsened only; ontology
   synonyms). Hand-written. Once read, the engorgement left "Describe the hila. Nothing abnormal is
   seen in the hila." (CXR2673, CXR2919, R2Gen train): the pulmonary vessels run through the hila
   (qba.yaml ``region_projections``).
10. "worse" comparing the sides was a change over time: "Bibasilar airspace disease, left worse
   right" was "It is worse than on the prior study." with no prior study (outside readers of seeds
   192 and 193; the reading dates from session 14's change details). attributes.yaml ``ignore``.
   Hand-written.
11. An indication naming a cancer of an organ outside the chest was denied by silence: "Prostate
   cancer" was "There is no finding that answers the indication. There is no prostate lesion."
   (CXR3606, R2Gen train; readers of seeds 180 and 195 noted "no prostate lesion" and "no pancreatic
   lesion" on a chest film): qba.yaml ``indication_silent_categories``. Hand-written here. So is how
   the study was made: "... portable ... tubes and lines" was answered "No portable technique is
   seen." (CXR3334, R2Gen train).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openi_truth import WITH_INDICATION, build_rows, findings_in, rows_of, write_reports

DATA = Path(__file__).parent / "data" / "openi_session15"
LISTS = ("A_indication", "B01_describe_all", "B02_describe_abnormal", "B08_describe_subcat",
         "B09_describe_abnormal_subcat", "B12_describe_device", "C01_describe_region",
         "C02_describe_abnormal_region", "C07_describe_device_region")
INCOMPLETE = "completeness:finding_not_stated->B"

# hand-written reports (INDICATION, FINDINGS, IMPRESSION): not copies of any report
HAND = {
    15001: ("Melanoma.", "The lungs are clear. There is lucency involving the lateral aspect of the left clavicle. "
            "Metastatic disease cannot be excluded.", "Left clavicle lucency."),
    15002: ("Pain.", "Lucent lesion in the right sixth rib, concerning for metastatic disease. The lungs are clear.",
            "Rib lesion."),
    15003: ("Pre-op.", "The heart size is normal. The lungs are clear. Gastrostomy is noted.", "Clear lungs."),
    15004: ("XXXX-year-old woman with lung cancer, shortness of breath.",
            "The left lung is clear. There is a large right pleural effusion. No pneumothorax.",
            "Large right pleural effusion."),
    15005: ("Cough.", "Multiple pulmonary nodules. Metastatic disease cannot be excluded.", "Nodules."),
    15007: ("Followup pneumonia.", "Left lung clear. Heart size normal.",
            "No change right upper lobe volume loss and fibrosis. No change right upper lobe cavitation."),
    15008: ("XXXX XXXX placement.", "Right internal jugular catheter with tip in the upper SVC. Heart size is mildly "
            "enlarged. The lungs are clear.", "Mild cardiomegaly."),
    15009: ("PICC line placement.", "Right internal jugular catheter with tip in the upper SVC. Heart size is normal. "
            "The lungs are clear.", "No acute disease."),
    15010: ("XXXX XXXX placement.", "Heart size is normal. The lungs are clear.", "No acute disease."),
    15011: ("H/O SARCOIDOSIS", "Heart size is normal. The hila remain enlarged and unchanged. No effusion.",
            "Stable bilateral hilar adenopathy."),
    15012: ("Dyspnea.", "The heart is enlarged. In the interval, pulmonary venous engorgement has developed. No effusion.",
            "Cardiomegaly with central pulmonary vascular congestion."),
    15013: ("Prostate cancer.", "Heart size is normal. The lungs are clear. No effusion.", "No acute disease."),
    15014: ("Hypoxia. History: portable check of tubes and lines.",
            "Left internal jugular catheter tip in the mid SVC. Heart size is normal. The lungs are clear.",
            "No acute disease."),
    15006: ("Chest pain.", "Small right apical pneumothorax. No pleural effusion. Heart size is normal.",
            "Small right pneumothorax."),
}


def _build(tmp: Path, mode: str) -> tuple[list[dict], dict]:
    folder = write_reports(tmp / "in", HAND, WITH_INDICATION, copies=DATA)
    rows = build_rows(folder, tmp / "out", unvouched="omit", extra=("--cap-scale", "40"), incomplete_lists=mode)
    counts = json.loads((tmp / "out" / "manifest.json").read_text(encoding="utf-8"))["counts"]
    return rows, counts


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], dict]:
    """Every question the generator has (caps x40), the default --incomplete-lists omit."""
    return _build(tmp_path_factory.mktemp("s15"), "omit")


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], dict]:
    return _build(tmp_path_factory.mktemp("s15g"), "grade")


def _lists_about(rows: list[dict], n: int, words: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(r["question"], r["answer"]) for r in rows_of(rows, n)
            if r["question_type"] in LISTS and any(w in r["question"].lower() for w in words)]


def test_no_incomplete_list_is_generated(built: tuple[list[dict], dict]) -> None:
    rows, counts = built
    bad = [(r["study_id"], r["question"], r["answer"]) for r in rows
           if r["question_type"] in LISTS and INCOMPLETE in r["grade_reasons"]]
    assert bad == []
    assert counts["rows_withheld"].get("incomplete_list", 0) > 0


@pytest.mark.parametrize(("n", "words", "yes_no"), [
    (2935, ("bones", "bony thorax"), "Is the appearance of the bony thorax abnormal?"),
    (465, ("pleura",), "Is the appearance of the pleura abnormal?"),
])
def test_the_incomplete_lists_are_withheld_and_the_leads_stay(built: tuple[list[dict], dict], n: int,
                                                               words: tuple[str, ...], yes_no: str) -> None:
    rows, _ = built
    assert _lists_about(rows, n, words) == []
    # the scope's yes/no question is still asked: "abnormal" is true either way
    assert any(r["question"] == yes_no and r["answer"].startswith("Yes") for r in rows_of(rows, n))


def test_grade_mode_keeps_them_graded_and_the_manifest_counts_what_omit_withholds(
        built: tuple[list[dict], dict], graded: tuple[list[dict], dict]) -> None:
    rows, counts = built
    g_rows, g_counts = graded
    assert _lists_about(g_rows, 2935, ("bones",)) == [("Describe the bones in this study.", "Scoliosis is seen."),
                                                        ("Describe any abnormal findings of the bones.",
                                                         "Scoliosis is seen.")]
    kept = {(r["qa_id"], r["answer"]) for r in rows}
    extra = [r for r in g_rows if (r["qa_id"], r["answer"]) not in kept]
    # the grade build holds every row of the default one, and the rows it adds are the lists the
    # default withheld as incomplete, each graded so
    assert len(g_rows) == len(rows) + len(extra)
    assert {(r["qa_id"], r["answer"]) for r in g_rows} >= kept
    assert len(extra) == counts["rows_withheld"]["incomplete_list"]
    assert all(r["question_type"] in LISTS for r in extra)
    assert "incomplete_list" not in g_counts["rows_withheld"]
    assert g_counts["rows_withheld"].get("unsaid_list") == counts["rows_withheld"].get("unsaid_list")


@pytest.mark.parametrize(("text", "side", "region"), [
    ("There is lucency involving the lateral aspect of the left clavicle. Metastatic disease cannot be excluded.",
     "left", "left_clavicle"),
    ("Lucent lesion in the right sixth rib, concerning for metastatic disease.", "right", "ribs"),
])
def test_a_metastasis_of_a_bone_is_a_bone_lesion(ex, text: str, side: str, region: str) -> None:
    obs = findings_in(ex, text)
    assert [o.finding for o in obs] == ["bone_lesion"]
    assert obs[0].certainty == "present" and obs[0].laterality == side and region in obs[0].regions


def test_a_metastasis_of_the_lungs_stays_one(ex) -> None:
    obs = findings_in(ex, "Multiple pulmonary nodules. Metastatic disease cannot be excluded.")
    assert ("metastasis", "uncertain") in {(o.finding, o.certainty) for o in obs}


@pytest.mark.parametrize("n", [15001, 15002])
def test_no_lung_tumor_for_a_bone_metastasis(built: tuple[list[dict], dict], n: int) -> None:
    rows, _ = built
    said = [(r["question"], r["answer"]) for r in rows_of(rows, n)
            if r["polarity"] == "positive" and ("tumor" in r["answer"].lower() or "metasta" in r["answer"].lower())]
    assert said == []
    # (nor is any "no" said of a tumour: the report names metastatic disease; the bone lesions
    # themselves are left unsaid here, words of their sentences being read nowhere: round 10)
    assert not any(r["polarity"] == "negative" and "tumor" in r["answer"].lower() for r in rows_of(rows, n))


def test_a_gastrostomy_is_a_device(built: tuple[list[dict], dict]) -> None:
    rows, _ = built
    answers = {r["question"]: r["answer"] for r in rows_of(rows, 15003)}
    assert answers["Are there any support devices in this image?"].startswith("Yes")
    assert not any(r["question_type"] in ("B12_describe_device", "B13_has_devices") and r["polarity"] == "negative"
                   for r in rows_of(rows, 15003))


def test_a_known_lung_cancer_is_not_denied_by_silence(built: tuple[list[dict], dict]) -> None:
    rows, _ = built
    said = [r["answer"] for r in rows_of(rows, 15004) if r["question_type"] == "A_indication"]
    assert not any("tumor" in a.lower() for a in said), said


@pytest.fixture(scope="module")
def ex():
    from radvqa.extract.rules import RulesExtractor
    from radvqa.ontology import load_ontology

    return RulesExtractor(load_ontology())


def test_a_pneumothorax_of_a_lung_zone_lies_in_the_pleura(built: tuple[list[dict], dict]) -> None:
    rows, _ = built
    about = [(r["question"], r["answer"], r["polarity"]) for r in rows_of(rows, 15006)
             if r["question_type"][:3] in ("C01", "C02", "C03", "C04")
             and any(f" {p}{e}" in r["question"] for p in ("pleura", "right pleura") for e in "?.")]
    assert about and all(pol == "positive" and "pneumothorax" in a for _, a, pol in about), about


def test_no_implied_no_pneumonia_beside_a_cavity(built: tuple[list[dict], dict]) -> None:
    rows, _ = built
    said = [r["answer"] for r in rows_of(rows, 15007) if r["question_type"] == "A_indication"]
    assert not any("no pneumonia" in a.lower() or "does not show" in a.lower() or "no finding" in a.lower()
                   for a in said), said


def test_an_indication_about_a_masked_device_is_answered_with_it(built: tuple[list[dict], dict]) -> None:
    rows, _ = built
    said = [r["answer"] for r in rows_of(rows, 15008) if r["question_type"] == "A_indication"]
    assert said and all("jugular" in a and "cardiomegaly" in a for a in said), said
    # a named line the report does not name is not denied beside another line
    assert not [r["answer"] for r in rows if r["study_id"] == "openi:CXR15009" and r["question_type"] == "A_indication"
                and "no peripherally inserted" in r["answer"].lower()]
    # no device stated: nothing is said of the placement ("does not show" would deny what silence does not)
    assert not [r for r in rows if r["study_id"] == "openi:CXR15010" and r["question_type"] == "A_indication"]


def test_a_known_sarcoidosis_is_not_denied_beside_hilar_adenopathy(built: tuple[list[dict], dict]) -> None:
    rows, _ = built
    said = [r["answer"] for r in rows_of(rows, 15011) if r["question_type"] == "A_indication"]
    assert not any("no sarcoidosis" in a.lower() or "no finding" in a.lower() or "does not show" in a.lower()
                   for a in said), said


@pytest.mark.parametrize(("text", "want"), [
    ("Resolving pulmonary interstitial edema and pulmonary venous hypertension.",
     {("interstitial_edema", "improved"), ("vascular_congestion", "improved")}),
    ("Improving right lower lobe atelectasis and effusion.", {("atelectasis", "improved"), ("pleural_effusion", "improved")}),
    # a member's own change stays; a negated member takes none; "stable" is not shared
    ("Improving atelectasis and new right effusion.", {("atelectasis", "improved"), ("pleural_effusion", "new")}),
    ("Resolving pneumonia and no effusion.", {("pneumonia", "improved"), ("pleural_effusion", None)}),
    ("Stable cardiomegaly and mild pulmonary edema.", {("cardiomegaly", "unchanged"), ("pulmonary_edema", None)}),
])
def test_a_change_before_a_coordinated_group_is_every_members(ex, text: str, want: set) -> None:
    assert {(o.finding, o.change) for o in findings_in(ex, text)} == want


def test_pulmonary_venous_engorgement_is_read(ex) -> None:
    got = {(o.finding, o.certainty) for o in findings_in(ex, "Pulmonary venous engorgement has resolved.")}
    assert got == {("vascular_congestion", "absent")}


def test_a_vascular_congestion_keeps_the_hila_from_normal(built: tuple[list[dict], dict]) -> None:
    rows, _ = built
    bad = [(r["question"], r["answer"]) for r in rows_of(rows, 15012)
           if r["polarity"] == "negative" and r["question_type"][:3] in ("C01", "C02", "C03", "C04")
           and "hila" in r["question"]]
    assert bad == []
    # (the vasculature itself is asked and answered with the congestion)
    assert any("congestion" in r["answer"] for r in rows_of(rows, 15012) if r["polarity"] == "positive")


@pytest.mark.parametrize("text", ["Bibasilar airspace disease, left worse right.",
                                  "Bibasilar opacities, worse on the left.",
                                  "Bilateral effusions, right worse than left."])
def test_worse_between_the_sides_is_no_change(ex, text: str) -> None:
    assert [(o.finding, o.change) for o in findings_in(ex, text) if o.change] == []


def test_worse_over_time_stays(ex) -> None:
    assert {o.change for o in findings_in(ex, "The left pleural effusion is worse.")} == {"worsened"}


def test_an_organ_outside_the_chest_is_not_denied(built: tuple[list[dict], dict]) -> None:
    rows, _ = built
    said = [r["answer"] for r in rows if r["study_id"] == "openi:CXR15013"]
    assert said and not any("prostate" in a.lower() for a in said), [a for a in said if "prostate" in a.lower()]


def test_a_portable_study_named_by_the_indication_is_not_denied(built: tuple[list[dict], dict]) -> None:
    rows, _ = built
    said = [r["answer"] for r in rows_of(rows, 15014) if r["question_type"] == "A_indication"]
    assert said and not any("portable" in a.lower() for a in said), said
