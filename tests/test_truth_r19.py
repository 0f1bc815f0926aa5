"""Issue 13, round 19: five classes of wrong rows found in R2Gen train reports by earlier helpers.

1. A broken sternotomy wire read as a bone fracture ("There is a fracture of superior sternotomy
   XXXX", CXR2181; CXR901; "The most caudal XXXX sternotomy XXXX is fractured", CXR1619), and a
   catheter's fracture read the same way (CXR2112): extraction patterns read the whole phrase as
   the device (data/patterns.yaml ``sternotomy_wire_fracture``, ``catheter_fracture*``).
2. A displacement read as a size ("humeral neck fracture ... with 5 mm displacement of the distal
   fragment", CXR650): a measurement bound to a displacement, distraction, separation, offset
   (attributes.yaml ``not_lesion_size``) is no size.
3. Two lesions stated as one ("Two nodules ... measuring 13 mm and one measuring 16 mm",
   CXR1329): a mention given two sizes, a counted mention ("two nodules") in a sentence stating two
   sizes, and mentions of one observation that give two sizes give none (attributes.py, aggregate.py).
4. "Correlate clinically as to XXXX or symptoms of infection" read as infection present (CXR1840,
   val): a hypothetical cue (context.yaml).
5. "Prior anterior cervical fusion" (CXR2039) was hardware placed nowhere, and the spine was asked
   "Are there any devices in the spine? No": the fusion's name places it in the cervical spine
   (attributes.yaml ``region``), and a device the report places nowhere leaves the parts of its
   default regions without a "no device" answer (generate/qba.py ``_Regions``).

Real reports: tests/data/openi_issue13r19 (unmodified R2Gen train/val XMLs, README there)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from openi_truth import build_rows, findings_in, observations_of, rows_of, scene_graph

DATA = Path(__file__).parent / "data" / "openi_issue13r19"
FRACTURES = ("fracture", "rib_fracture", "clavicle_fracture", "vertebral_fracture", "humeral_fracture",
             "scapular_fracture", "sternal_fracture")


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    # --unvouched keep: every row a construction makes (the default build leaves some unsaid)
    return build_rows(DATA, tmp_path_factory.mktemp("r19") / "out", unvouched="keep")


def _report_fractures(ex, n: int) -> list:
    """The fracture observations extractor ``ex`` reads in the report text of CXR<n>."""
    return [o for f in FRACTURES for o in observations_of(ex, DATA / f"{n}.xml", f) if o.certainty != "absent"]


# (``ex``, the rules extractor, and ``gen``, the qba generator: tests/conftest.py)

# ---- 1. a broken sternotomy wire or catheter is no bone fracture -----------------------------------

@pytest.mark.parametrize("n", [2181, 901, 1619])
def test_a_broken_sternotomy_wire_is_no_fracture(rows: list[dict], ex, n: int) -> None:
    assert not _report_fractures(ex, n)
    assert observations_of(ex, DATA / f"{n}.xml", "sternotomy")
    stated = [r for r in rows_of(rows, n) if re.search(r"(?<!no )fracture (is|are) seen|there (is|are) (a )?fracture|"
                                                      r"fracture may|fracture cannot", r["answer"].lower())]
    assert not stated, [(r["question"], r["answer"]) for r in stated]
    assert any("sternotomy" in r["answer"].lower() for r in rows_of(rows, n))


def test_hand_written_wire_fractures_and_a_rib_fracture_beside_wires(ex) -> None:
    for t in ("Fractured XXXX sternotomy XXXX, without evidence of complication.",
              "Stable XXXX sternotomy XXXX with fracture of the superior-most sternotomy XXXX.",
              "Fracture of the superior sternotomy wire.", "The sternal wires are broken."):
        got = findings_in(ex, t)
        assert not [o for o in got if o.finding in FRACTURES], (t, got)
        assert any(o.finding == "sternotomy" and o.certainty == "present" for o in got), (t, got)
    # a bone fracture beside intact wires is still a fracture
    got = findings_in(ex, "There is a fracture of the left 5th rib. Sternotomy wires are intact.")
    assert any(o.finding in FRACTURES and o.certainty == "present" for o in got), got


def test_2112_a_catheter_fracture_is_no_bone_fracture(rows: list[dict], ex) -> None:
    # "Left central venous catheter fracture at the level of the overlap of the clavicle and first
    # rib": main read a fracture of the clavicles and ribs
    assert not _report_fractures(ex, 2112)
    cvc = observations_of(ex, DATA / "2112.xml", "central_venous_catheter")
    assert cvc and all(o.certainty == "present" for o in cvc)
    assert not [r for r in rows_of(rows, 2112) if "fracture" in r["answer"].lower()]


# ---- 2. a displacement is no size --------------------------------------------------------------------

def test_650_a_fragments_displacement_is_no_size_of_the_fracture(rows: list[dict], ex) -> None:
    # "Obliquely oriented left humeral neck fracture, transverse, with 5 mm displacement of the
    # distal fragment": main said the fracture "measures 5 mm"
    obs = observations_of(ex, DATA / "650.xml", "humeral_fracture")
    assert obs and all(o.size_mm is None for o in obs), obs
    assert not [r for r in rows_of(rows, 650) if "5 mm" in r["answer"] or "measures" in r["answer"].lower()]
    assert any("humeral fracture" in r["answer"].lower() for r in rows_of(rows, 650))


def test_hand_written_displacements_and_a_lesions_own_size(ex) -> None:
    for t in ("Clavicle fracture displaced by approximately 1 cm.",
              "Right clavicle fracture with 8 mm of distraction.",
              "Acromioclavicular separation of 12 mm with a right clavicle fracture."):
        assert all(o.size_mm is None for o in findings_in(ex, t)), t
    # a lesion's own size stays, two dimensions of one lesion are one size
    assert [o.size_mm for o in findings_in(ex, "A 5 mm nodule in the right upper lobe.") if o.finding == "nodule"] == [5.0]
    got = [o.size_mm for o in findings_in(ex, "Rounded mass in the right middle lobe measures 4.6 cm x 3.7 cm.")
           if o.finding == "mass"]
    assert got == [46.0], got


# ---- 3. two lesions, two sizes: no size ---------------------------------------------------------------

def test_1329_two_nodules_of_two_sizes_give_the_nodule_no_size(rows: list[dict], ex) -> None:
    # "Two nodules are noted in the right XXXX XXXX measuring 13 mm and one measuring 16 mm in
    # diameter.": main said "There is a right nodule ... It measures 13 mm."
    obs = [o for o in observations_of(ex, DATA / "1329.xml", "nodule") if o.certainty == "present"]
    assert obs and all(o.size_mm is None for o in obs), obs
    assert not [r for r in rows_of(rows, 1329) if re.search(r"\b1[36] mm\b|measures", r["answer"])]
    assert any("nodule" in r["answer"].lower() for r in rows_of(rows, 1329))


def test_hand_written_two_sizes(ex) -> None:
    for t in ("Two nodules measuring 13 mm and 16 mm.", "2 nodules of 5 mm and 8 mm in the left lung.",
              "A 7 mm nodule in the right upper lobe. The nodule in the right upper lobe measures 12 mm."):
        got = [o for o in findings_in(ex, t) if o.finding == "nodule"]
        assert got and all(o.size_mm is None for o in got), (t, got)
    # one size for each of two findings, one size for counted lesions of one size
    got = {o.finding: o.size_mm for o in findings_in(ex, "A 3 cm mass in the right upper lobe and a 2 cm nodule in the left lower lobe.")}
    assert got.get("mass") == 30.0 and got.get("nodule") == 20.0, got
    assert [o.size_mm for o in findings_in(ex, "Two 5 mm nodules in the left lung.")] == [5.0]


# ---- 4. a clinical-correlation clause states nothing -----------------------------------------------

def test_1840_correlate_clinically_as_to_symptoms_of_infection_is_no_infection(rows: list[dict], ex) -> None:
    assert not [o for o in observations_of(ex, DATA / "1840.xml", "infection") if o.certainty != "absent"]
    assert not [r for r in rows_of(rows, 1840) if "infection" in r["answer"].lower()]
    assert any("opacity" in r["answer"].lower() for r in rows_of(rows, 1840))


# ---- 5. a spinal fusion is a device in the spine -------------------------------------------------------

_NO_DEVICE = re.compile(r"^(no\b|there are no devices|no devices)", re.I)


def _no_device_in(rows: list[dict], n: int, place: str) -> list[dict]:
    return [r for r in rows_of(rows, n) if r["question_type"] in ("C07_describe_device_region", "C08_has_device_region")
            and place in r["question"].lower() and _NO_DEVICE.match(r["answer"])]


def test_2039_a_cervical_fusion_is_a_device_in_the_spine(rows: list[dict], ex) -> None:
    hw = observations_of(ex, DATA / "2039.xml", "orthopedic_hardware")
    assert hw and all("cervical_spine" in o.regions for o in hw), hw
    assert not _no_device_in(rows, 2039, "spine")
    assert not _no_device_in(rows, 2039, "bony thorax")


def test_an_unplaced_device_leaves_its_default_regions_parts_without_a_no(gen) -> None:
    # orthopedic hardware that the report places nowhere lies somewhere in the bony thorax (its
    # default region): "no device in the spine / ribs / thoracic spine" is unknown
    from radvqa.model import Observation, Span
    s = ["Orthopedic hardware is present.", "The lungs are clear."]
    ev = [Span(start=0, end=19, text="Orthopedic hardware", sentence_id="S01")]
    obs = [Observation(id="O1", finding="orthopedic_hardware", certainty="present", source="report", evidence=ev)]
    inside = ("spine", "ribs", "sternum", "clavicle", "scapula", "bony thorax")
    seen, wrong = 0, []
    for k in range(40):
        for r in gen.generate(scene_graph(obs, s, study_id=f"openi:R19d{k}")):
            if r.question_type in ("C07_describe_device_region", "C08_has_device_region"):
                seen += 1
                q = r.question.lower()
                if any(p in q for p in inside) and _NO_DEVICE.match(r.answer):
                    wrong.append((r.question, r.answer))
    assert seen
    assert not wrong, wrong[:5]


@pytest.mark.parametrize("text, finding, temporal", [
    # still healing is not healed (the outside readers' CXR1661, seed 101: "Healing scapular fracture"
    # -> "It is described as healed"; R2Gen train: "healing left sided rib fractures")
    ("Interval development of healing left sided rib fractures.", "rib_fracture", "healing"),
    ("Healing scapular fracture.", "scapular_fracture", "healing"),
    ("Healed right rib fractures.", "rib_fracture", "healed"),
    # two ages offered state neither
    ("Deformities of the left 7th and 8th ribs, possibly healing or old fractures.", "fracture", None),
])
def test_healing_is_not_healed(ex, text: str, finding: str, temporal: str | None) -> None:
    obs = [o for o in ex.extract("FINDINGS: " + text).observations if o.finding == finding]
    assert obs and {o.temporal for o in obs} == {temporal}, [(o.finding, o.temporal) for o in obs]
