"""Issue 13, round 31: classes of wrong rows readers found on reports outside R2Gen train + val,
fixed from the train + val reports that show them (tests/data/openi_issue13r31, README there) or,
where train + val has none, from sentences written here (never copied from those reports).

1. A coordinated "bilateral" given to the wrong member ("Small bilateral pleural effusions and
   pleural thickening versus loculated pleural fluid along the lateral aspect of the right upper
   lobe"; "Blunting of both costophrenic angles, right greater than left, with pleural thickening
   versus loculated fluid ..."): both were bilateral pleural thickening. An alternative pair after a
   member of another side is one thing at the place after it (attributes.py ``_share_locations``,
   ``alt_after``), and a side set off by commas before ", with" / ", and" is the phrase before it
   (attributes.py ``_SET_OFF_BEFORE``). Hand-written only.
2. A hedged cause's sign stated as the cause ("rib deformities, perhaps due to fractures as well"
   was "A right rib fracture is seen"): patterns.yaml ``rib_deformity_possible_fracture`` takes
   "perhaps / possibly / may be due to / related to / secondary to / from". Hand-written only (a
   bare "rib deformity" stays a rib fracture, MARKING.md's accepted convention).
3. A severity and a place of two coordinated kinds of opacity given to one reading ("diffusely
   increased interstitial and mild patchy airspace opacities" was "Mild lung opacity ... in the
   lung interstitium"): "interstitial and (...) airspace / alveolar opacities" is two readings, an
   interstitial opacity of its own (patterns.yaml ``interstitial_coordinated_opacity``). Train +
   val: CXR4 (val), CXR3455 (train), "diffuse bilateral interstitial and alveolar opacities", where
   the interstitial reading was lost."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from openi_truth import build_rows, findings_in, observations_of, rows_of, write_reports

DATA = Path(__file__).parent / "data" / "openi_issue13r31"
FRACTURES = ("fracture", "rib_fracture")

# hand-written reports (FINDINGS, IMPRESSION): not copies of any report
HAND = {
    31001: ("Heart size is normal. Small bilateral pleural effusions and pleural thickening versus loculated "
            "pleural fluid along the lateral aspect of the left upper lobe. No pneumothorax.",
            "Bilateral effusions."),
    31002: ("Heart size is normal. There are lateral mid left rib deformities, possibly due to fractures. "
            "The lungs are clear.",
            "No acute disease."),
    31003: ("Heart size is normal. There are diffusely increased interstitial and mild patchy airspace "
            "opacities. No effusion.",
            "Interstitial and airspace opacities."),
}


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    # --unvouched keep: every row a construction makes (the default build leaves some unsaid)
    return build_rows(DATA, tmp_path_factory.mktemp("r31") / "out", unvouched="keep")


@pytest.fixture(scope="module")
def hand_rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    folder = write_reports(tmp_path_factory.mktemp("r31h") / "in", HAND)
    return build_rows(folder, tmp_path_factory.mktemp("r31h") / "out", unvouched="keep")


def _said(rows: list[dict], n: int, pattern: str) -> list[tuple[str, str]]:
    pat = re.compile(pattern, re.I)
    return [(r["question"], r["answer"]) for r in rows_of(rows, n) if pat.search(r["answer"])]


def _one(obs: list, finding: str):  # noqa: ANN202 - an Observation
    got = [o for o in obs if o.finding == finding]
    assert len(got) == 1, obs
    return got[0]


# (``ex``, the rules extractor, and ``gen``, the qba generator: tests/conftest.py)

# ---- 1. the group's "bilateral" is not the alternative's side ---------------------------------------

@pytest.mark.parametrize("text, side", [
    ("Small bilateral pleural effusions and pleural thickening versus loculated pleural fluid along the "
     "lateral aspect of the right upper lobe.", "right"),
    ("Small bilateral pleural effusions and pleural thickening versus loculated pleural fluid along the "
     "lateral aspect of the left upper lobe.", "left"),
    ("Blunting of both costophrenic angles, right greater than left, with pleural thickening versus "
     "loculated fluid along the lateral right upper lobe.", "right"),
])
def test_hand_written_alternative_keeps_its_own_side(ex, text: str, side: str) -> None:
    obs = findings_in(ex, text)
    assert _one(obs, "pleural_thickening").laterality == side, obs


@pytest.mark.parametrize("text, finding, side", [
    # the group's side still reaches a member with nothing else ("both": not an alternative)
    ("Bilateral pleural effusions and pleural thickening.", "pleural_thickening", "bilateral"),
    # round 27's form
    ("There is pleural thickening versus loculated fluid along the periphery of the left upper lobe.",
     "pleural_thickening", "left"),
    # the set-off side of the first phrase stays its own
    ("Blunting of both costophrenic angles, right greater than left, with pleural thickening versus "
     "loculated fluid along the lateral right upper lobe.", "blunted_costophrenic_angle", "bilateral"),
    # a set-off side that opens the next phrase (no coordination after it) is that phrase's
    ("Diffuse, right greater than left, interstitial opacities.", "interstitial_opacity", "bilateral"),
])
def test_sides_that_stay(ex, text: str, finding: str, side: str) -> None:
    assert _one(findings_in(ex, text), finding).laterality == side


def test_hand_written_rows_say_no_bilateral_thickening(hand_rows: list[dict]) -> None:
    assert not _said(hand_rows, 31001, r"bilateral pleural thickening")
    assert _said(hand_rows, 31001, r"left pleural thickening")
    assert _said(hand_rows, 31001, r"bilateral pleural effusion")


# ---- 2. a rib deformity whose cause is hedged states no fracture -------------------------------------

@pytest.mark.parametrize("text", [
    "There are lateral mid right rib deformities, perhaps due to fractures as well.",
    "Left rib deformity, possibly due to old fracture.",
    "Right rib deformities, which may be related to prior fractures.",
    "Bilateral rib deformities are noted, possibly secondary to fractures.",
])
def test_hand_written_hedged_cause_hedges_the_fracture(ex, text: str) -> None:
    obs = [o for o in findings_in(ex, text) if o.finding in FRACTURES]
    assert obs, text
    assert all(o.certainty == "uncertain" for o in obs), obs


def test_a_bare_rib_deformity_stays(ex) -> None:
    # MARKING.md: "rib deformities, healed" -> healed rib fractures is an accepted reading
    obs = findings_in(ex, "Old right-sided rib deformities are noted.")
    assert _one(obs, "rib_fracture").certainty == "present"


def test_hand_written_rows_state_no_rib_fracture(hand_rows: list[dict]) -> None:
    assert not _said(hand_rows, 31002, r"(?<!no )fractures? (is|are) seen|there (is|are) (an? )?(\w+ )*fractures?\b")
    assert _said(hand_rows, 31002, r"rib fractures? (cannot be excluded|may be present)|possible .*rib fracture")


# ---- 3. "interstitial and (mild) airspace opacities" are two readings --------------------------------

def test_hand_written_coordinated_kinds_are_two_readings(ex) -> None:
    obs = findings_in(ex, "There are diffusely increased interstitial and mild patchy airspace opacities.")
    inter = _one(obs, "interstitial_opacity")
    air = _one(obs, "lung_opacity")
    assert inter.severity is None and inter.regions == ["lung_interstitium"], obs
    assert air.severity == "mild" and "lung_interstitium" not in air.regions, obs


def test_hand_written_rows_give_mild_to_the_airspace_reading(hand_rows: list[dict]) -> None:
    assert not _said(hand_rows, 31003, r"mild (lung|interstitial) opacity[^.]*\. (the lung opacity|it) is (in|located in) the lung interstitium")
    assert not _said(hand_rows, 31003, r"mild interstitial opacity")
    assert _said(hand_rows, 31003, r"interstitial opacity")


@pytest.mark.parametrize("n", [4, 3455])
def test_interstitial_and_alveolar_opacities_are_both_read(ex, rows: list[dict], n: int) -> None:
    path = DATA / f"{n}.xml"
    assert [o for o in observations_of(ex, path, "interstitial_opacity") if o.certainty == "present"]
    assert [o for o in observations_of(ex, path, "alveolar_opacity") if o.certainty == "present"]
    assert _said(rows, n, r"interstitial opacity (is seen|\.)|there is an interstitial opacity")
