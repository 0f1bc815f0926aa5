"""NIH-14, second round (#12, h12f): the extractor's own errors among the R2Gen train+val
disagreements with the OpenI MeSH gold, each fixed by its construction. Every test holds the real
train/val sentence (report id and split in its comment) and hand-written sentences of the same
construction; the test split was not read."""

from __future__ import annotations

import pytest

from radvqa.extract.sentences import sentence_spans
from nih14_fixtures import commit, keep, labeler, onto  # noqa: F401 (pytest fixtures)


def _obs(ex, text):
    return {(o.finding, o.certainty, o.qualifier) for o in ex.extract(text, "t").observations}


def _certs(ex, text, finding):
    return {o.certainty for o in ex.extract(text, "t").observations if o.finding == finding}


# --- "no other X": denies what the report did not name, not X -----------------------------------

def test_no_other_fractures_is_no_present_fracture(keep):
    # CXR2885 (train): "no other" was a pseudo cue, so the last sentence stated a fracture, and
    # present beat the hedged rib fracture at report level
    text = ("IMPRESSION: Acute obliquely oriented lucency through the right 12th posterior rib, concerning for "
            "acute fracture. Recommend correlation with side of XXXX tenderness. No other fractures are XXXX "
            "identified.")
    assert "present" not in _certs(keep, text, "fracture")
    assert ("fracture", "uncertain", "other") in _obs(keep, text)


def test_no_other_list_is_qualified_not_alternatives(keep, commit, labeler):
    # CXR728 (train): read as the alternatives "infiltrates or masses" (uncertain; present under
    # hedges="commit", an Infiltration the MeSH gold does not have)
    text = ("FINDINGS: In the interval, a 2 cm diameter nodule has developed in the posterior segment of the left "
            "lower lobe. No other infiltrates or masses in the lungs.")
    obs = _obs(keep, text)
    assert ("infiltration", "uncertain", "other") in obs and ("mass", "uncertain", "other") in obs
    assert ("nodule", "present", None) in obs
    assert labeler.label(commit.extract(text, "t"))["Infiltration"] == -1
    assert labeler.label(commit.extract(text, "t"))["Mass"] == -1


@pytest.mark.parametrize("text, finding", [
    ("Right lower lobe nodule. No additional nodules are seen.", "nodule"),
    ("Left 5th rib fracture. No further fractures.", "rib_fracture"),
])
def test_no_other_beside_the_stated_one_keeps_it_present(keep, text, finding):
    assert "present" in _certs(keep, text, finding)


def test_no_other_alone_renders_its_qualifier(keep):
    assert _obs(keep, "No other focal consolidation.") == {("consolidation", "uncertain", "other")}
    # a plain negative is untouched
    assert ("consolidation", "absent", None) in _obs(keep, "No focal consolidation.")


# --- a past disease marked old labels nothing ---------------------------------------------------

def test_previous_active_tuberculosis_pneumonia_is_no_pneumonia_label(keep, labeler):
    # CXR1160 (train), MeSH "Tuberculosis/lung/healed", no Pneumonia: the extractor marks both old
    # (round 14) and the QA generator leaves them unsaid; the labels counted them
    text = ("IMPRESSION: Stable left upper lobe collapse associated with parenchymal scarring and pleural "
            "thickening. Findings consistent with previous active pulmonary tuberculosis pneumonia.")
    e = keep.extract(text, "t")
    assert {o.temporal for o in e.observations if o.finding in ("pneumonia", "tuberculosis")} == {"old"}
    lab = labeler.label(e)
    assert lab["Pneumonia"] is None
    assert lab["Atelectasis"] == 1  # the collapse still counts


@pytest.mark.parametrize("text", ["IMPRESSION: Right lower lobe pneumonia.",
                                  "IMPRESSION: Old granulomatous disease. New right lower lobe pneumonia."])
def test_a_current_pneumonia_still_labels(keep, labeler, text):
    assert labeler.label(keep.extract(text, "t"))["Pneumonia"] == 1


# --- pleural fluid or thickening: an alternative in both hedge modes -----------------------------

@pytest.mark.parametrize("text", [
    # CXR3451 (val)
    "FINDINGS: A small right-sided pleural effusion versus thickening.",
    # CXR2817 (train)
    "FINDINGS: Peripheral opacity along the right mid lung XXXX reflects scar or a small amount of loculated "
    "pleural fluid or thickening.",
    "FINDINGS: Small left effusion or thickening.",
])
def test_fluid_or_thickening_is_hedged_by_default_and_committed_under_commit(keep, commit, labeler, text):
    assert _certs(keep, text, "pleural_thickening") == {"uncertain"}
    assert labeler.label(keep.extract(text, "t"))["Pleural_Thickening"] == -1
    # hedges="commit" commits every alternative (the fluid was committed, the thickening was not)
    assert _certs(commit, text, "pleural_thickening") == {"present"}
    lab = labeler.label(commit.extract(text, "t"))
    assert lab["Pleural_Thickening"] == 1 and lab["Effusion"] == 1


# --- a sentence whose period was left out ---------------------------------------------------------

def test_clips_before_a_missing_period_are_not_denied(keep, labeler):
    # CXR82 (train): "within normal limits" of the next statement denied the clips
    text = ("FINDINGS: No airspace disease, effusion or noncalcified nodule. Normal heart size and mediastinum. "
            "Left axillary surgical clips unchanged Visualized XXXX of the chest XXXX are within normal limits.")
    obs = _obs(keep, text)
    assert ("surgical_clips", "present", None) in obs
    assert labeler.label(keep.extract(text, "t"))["No Finding"] == 0


def test_a_missing_period_does_not_carry_attributes_over(keep):
    # CXR3398 (train): "stable" described the clear lungs ("no lung opacity, unchanged")
    e = keep.extract("FINDINGS: Right upper lobe granuloma, stable The lungs are normally inflated and clear.", "t")
    assert [o.change for o in e.observations if o.finding == "granuloma"] == ["unchanged"]
    assert all(o.change is None for o in e.observations if o.certainty == "absent")


@pytest.mark.parametrize("text, n", [
    ("Chronic appearing interstitial markings The lungs are normally inflated and clear.", 2),  # CXR322 (train)
    ("Heart size normal. There is no effusion There is no pneumothorax.", 3),
    # openers left out (they read the same uncut): "Normal chest No evidence of tuberculosis" (CXR1573)
    ("Normal chest No evidence of tuberculosis", 1),
    # capitalised words that stand inside sentences do not cut
    ("Cardiomediastinal silhouette is within normal limits of size In appearance.", 1),  # CXR934 (train)
    ("Views of the Left hip show degenerative change.", 1),
    ("XXXX The lungs are clear.", 1),  # a capital before: no sign of a missing period
    ("The Heart is normal.", 1),
])
def test_sentence_openers_after_a_missing_period(text, n):
    assert len(sentence_spans(text)) == n


# --- a body-part heading with its list number ---------------------------------------------------

def test_hand_heading_with_list_number_switches_the_chest_off(keep, labeler):
    # CXR1350 (train), MeSH normal: the hand's scaphoid fracture was read as a chest fracture
    text = ("FINDINGS: Chest. No focal consolidation. No visualized pneumothorax. The heart size is normal. Hand. "
            "There is also cortical and trabecular irregularity through the XXXX of the scaphoid. IMPRESSION: "
            "Hand 1. Minimally displaced fracture through the XXXX of the scaphoid. 2. Lucency through the base of "
            "the fourth metacarpal. Chest 1. No acute cardiopulmonary findings.")
    obs = _obs(keep, text)
    assert not any(f == "fracture" for f, _, _ in obs)
    assert labeler.label(keep.extract(text, "t"))["No Finding"] == 1


def test_chest_heading_with_list_number_switches_it_back_on(keep):
    text = "IMPRESSION: Left knee 1. Joint effusion. Chest 2. Small right pleural effusion."
    assert _certs(keep, text, "pleural_effusion") == {"present"}


# --- DISH is its own finding -------------------------------------------------------------------

def test_hedged_dish_does_not_hedge_the_stated_osteophytes(keep, labeler, onto):
    # CXR3755 (train), MeSH "Osteophyte/thoracic vertebrae/multiple": one id for both made the
    # stated syndesmophytes uncertain, and the report "normal"
    text = ("FINDINGS: No pleural effusion or pneumothorax. Bridging syndesmophytes are noted throughout visualized "
            "thoracolumbar spine. This could indicate diffuse idiopathic skeletal hyperostosis. This is similar to "
            "prior imaging.")
    obs = _obs(keep, text)
    assert ("degenerative_spine", "present", None) in obs
    assert ("diffuse_idiopathic_skeletal_hyperostosis", "uncertain", None) in obs
    assert "degenerative_spine" in onto.ancestors("diffuse_idiopathic_skeletal_hyperostosis")
    assert labeler.label(keep.extract(text, "t"))["No Finding"] == 0


def test_stated_dish_is_present(keep):
    # train: "DISH of the thoracic spine is noted."
    assert ("diffuse_idiopathic_skeletal_hyperostosis", "present", None) in _obs(
        keep, "FINDINGS: DISH of the thoracic spine is noted.")


def test_abbreviation_in_parentheses_keeps_the_hedge(keep):
    # CXR1808 (train): the "(" terminator cut the hedge off, and "(DISH)" read as a plain DISH
    text = ("FINDINGS: Multilevel flowing anterior thoracic spine osteophytes, which could represent changes of "
            "diffuse idiopathic skeletal hyperostosis (DISH).")
    obs = _obs(keep, text)
    assert ("degenerative_spine", "present", None) in obs
    assert ("diffuse_idiopathic_skeletal_hyperostosis", "uncertain", None) in obs
    assert not any(f == "diffuse_idiopathic_skeletal_hyperostosis" and c == "present" for f, c, _ in obs)
    assert _obs(keep, "Possible chronic obstructive pulmonary disease (COPD).") == {("copd", "uncertain", None)}
    assert _obs(keep, "No pneumothorax (PTX).") == {("pneumothorax", "absent", None)}
    # a parenthesis naming another finding is read on its own
    assert ("copd", "present", None) in _obs(keep, "Possible pneumonia. Emphysema (COPD).")


@pytest.mark.parametrize("text", [
    # CXR3755 (train): "in the lumbar spine" was half of what the report says
    "FINDINGS: Bridging syndesmophytes are noted throughout visualized thoracolumbar spine.",
    # CXR3092 (train)
    "FINDINGS: Levoscoliosis of the thoracolumbar spine is present.",
    # CXR3129 (train)
    "FINDINGS: There is severe degenerative change at the thoracolumbar junction with mild anterior wedging at "
    "approximately T12.",
])
def test_thoracolumbar_is_the_spine_not_the_lumbar_spine(keep, text):
    obs = [o for o in keep.extract(text, "t").observations if o.certainty == "present"]
    assert obs and all("lumbar_spine" not in o.regions for o in obs)
    assert any("spine" in o.regions for o in obs)


def test_a_period_after_a_dangling_word_ends_no_sentence(keep):
    # CXR650 (train): "active tuberculosis." stood as a sentence of its own, and 20 QA rows said
    # "There is tuberculosis"
    text = ("FINDINGS: Limited evaluation of the aorto iliac stent. No cavitary lesion to suggest. active "
            "tuberculosis. Large hiatal hernia. IMPRESSION: 2. No cavitary lung changes to suggest active tuberculosis.")
    assert _certs(keep, text, "tuberculosis") == {"absent"}
    assert len(sentence_spans("No cavitary lesion to suggest. active tuberculosis. Large hiatal hernia.")) == 2
    # a lower-case sentence after any other word is a sentence ("No pleural effusions or
    # pneumothoraces. heart size is normal.", train)
    assert len(sentence_spans("No pleural effusions or pneumothoraces. heart size is normal.")) == 2
    assert len(sentence_spans("Clear lungs. cardiomegaly.")) == 2


def test_a_lobe_that_was_consolidated_is_no_consolidation_now(keep, labeler):
    # CXR744 (train), MeSH "Opacity/lung/apex/right" only: the consolidation of an outside CT
    text = ("FINDINGS: Right upper lobe area of dense opacity is seen in the medial right apex. On a previous outside "
            "XXXX scan (XXXX), the right upper lobe was consolidated. Comparison to the XXXX XXXX from that exam "
            "shows this opacity to have decreased.")
    e = keep.extract(text, "t")
    assert not any(o.finding == "consolidation" for o in e.observations)
    assert any(o.finding == "lung_opacity" and o.certainty == "present" for o in e.observations)
    assert labeler.label(e)["Consolidation"] is None
    # the present tense still states it
    assert _certs(keep, "The right lower lobe is consolidated.", "consolidation") == {"present"}


def test_a_masked_word_before_the_conclusion_does_not_make_it_plain(keep, labeler):
    # CXR2372 (train), MeSH "Opacity/lung/right" only: the mask ate the conclusion's hedge, and a
    # plain conclusion decides a finding stated both ways
    text = ("FINDINGS: Bandlike opacities are present in the right lung. Appearance suggest atelectasis. No "
            "pneumothorax or pleural effusion is seen. IMPRESSION: Bandlike opacities in the right lung. "
            "Appearance XXXX atelectasis.")
    assert _certs(keep, text, "atelectasis") == {"uncertain"}
    assert labeler.label(keep.extract(text, "t"))["Atelectasis"] == -1
    # an unmasked plain conclusion still decides (hand audit #13, CXR163)
    text = "FINDINGS: Appearance suggests atelectasis. IMPRESSION: Atelectasis."
    assert _certs(keep, text, "atelectasis") == {"present"}
    # a mask alone hedges nothing
    assert _certs(keep, "IMPRESSION: Appearance XXXX atelectasis.", "atelectasis") == {"present"}
