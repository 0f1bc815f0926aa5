"""Issue 13, round 17: the classes the session-11 train+val readers (seeds 91, 95) still found
(tests/data/audit/openi_r2gen_trainval_marked_seed9*.csv; docs/generation.md "Round 17"):

- a finding stated plainly in one sentence is not hedged because another sentence offers it as
  one of alternatives ("Left perihilar scarring is noted ... Mild left-sided scarring/subsegmental
  atelectasis"; extract/rules.py ``_hedges`` OFFERED, extract/aggregate.py ``offered``), unless a
  de-identification mask stands before every plain statement or the alternatives are causes
  offered for what is seen (CXR1112);
- a negative the report limits to the rest of the lungs ("The remaining lungs are clear") is not
  said beside a finding it leaves open there ("superimposed infection cannot be entirely
  excluded"; templates/common.yaml ``limited_negative_words``, ``open_finding_forms``;
  generate/facts.py ``_open_beside``);
- "possibly old fractures" is never a plain present fracture (right on main: regression only);
- a lung called clear alone beside a pneumothorax does not make the lung fields normal (right on
  main since round 15: regression only);
- mediastinal soft tissue explained as adenopathy, or a retrocardiac density explained as a hiatal
  hernia, is no lung opacity (CXR2614 right on main; CXR3564: extract/data/context.yaml
  ``explained_away.cues`` "compatible", extract/sentences.py ``_JOINED``);
- an ectatic aorta is a dilated aorta, not a tortuous one (extract/data/patterns.yaml
  ``aorta_ectatic``).

Real reports: tests/data/openi_issue13r17 (unmodified R2Gen train XMLs, README there)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from radvqa.extract.rules import RulesExtractor
from radvqa.extract.sentences import sentence_spans
from openi_truth import REGION, SUBCAT, build_rows, observations_of, rows_of, scene_graph

DATA = Path(__file__).parent / "data" / "openi_issue13r17"
HEDGED = ("may be present", "cannot be excluded", "possibl", "the finding is uncertain")


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    # the default build (--unvouched omit), as the readers' samples
    return build_rows(DATA, tmp_path_factory.mktemp("r17") / "out", unvouched="omit")


def _certainties(ex: RulesExtractor, text: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    e = ex.extract(text)
    assert e.error is None
    for o in e.observations:
        out.setdefault(o.finding, set()).add(o.certainty)
    return out


def _obs(oid: str, finding: str, sentences: list[str], i: int, words: str, certainty: str = "absent",
         regions: tuple[str, ...] = (), laterality: str | None = None):
    from radvqa.model import Observation, Span
    start = sum(len(s) + 1 for s in sentences[:i]) + sentences[i].index(words)
    return Observation(id=oid, finding=finding, certainty=certainty, regions=list(regions), laterality=laterality,
                       source="report",
                       evidence=[Span(start=start, end=start + len(words), text=words, sentence_id=f"S{i + 1:02d}")])


# ---- 1. a plain statement is not hedged by another sentence's alternatives -------------------

def test_534_scarring_noted_plainly_is_not_hedged_by_the_impressions_slash(rows: list[dict], ex) -> None:
    # "Left perihilar scarring is noted in the upper lobe." + IMPRESSION "Mild left-sided
    # scarring/subsegmental atelectasis." (seed 95): main said "Mild left scarring may be present"
    scar = observations_of(ex, DATA / "534.xml", "scarring")
    assert [(o.certainty, o.laterality) for o in scar] == [("present", "left")]
    # the other side of the slash stays hedged: its plain statement follows a mask ("Streaky
    # opacities ... XXXX reflect mild subsegmental atelectasis": the mask may be "likely")
    assert {o.certainty for o in observations_of(ex, DATA / "534.xml", "linear_atelectasis")} == {"uncertain"}
    stated = 0
    for r in rows_of(rows, 534):
        a = r["answer"].lower()
        for s in re.split(r"(?<=\.) ", a):
            if "scarring" in s and not s.startswith(("no ", "there is no")):
                assert not re.search(r"possib\w* (?:mild )?(?:left )?scarring|scarring (?:may be|cannot be)", s) \
                    and "finding is uncertain" not in a, (r["question"], r["answer"])
                stated += "scarring is seen" in s or "there is left scarring" in s
            if "atelectasis" in s and "is in" not in s and "located" not in s and not s.startswith("no "):
                assert any(h in s for h in HEDGED), (r["question"], r["answer"])
    assert stated


@pytest.mark.parametrize("text,finding,certainty", [
    # the plain statement wins, the slash's other side stays hedged
    ("FINDINGS: Left perihilar scarring is noted in the upper lobe. "
     "IMPRESSION: Mild left-sided scarring/subsegmental atelectasis.", "scarring", "present"),
    ("FINDINGS: Left perihilar scarring is noted in the upper lobe. "
     "IMPRESSION: Mild left-sided scarring/subsegmental atelectasis.", "linear_atelectasis", "uncertain"),
    ("FINDINGS: There is right basilar atelectasis. IMPRESSION: Right basilar atelectasis or pneumonia.",
     "atelectasis", "present"),
    ("FINDINGS: There is right basilar atelectasis. IMPRESSION: Right basilar atelectasis or pneumonia.",
     "pneumonia", "uncertain"),
    # controls: a hedge cue of its own still hedges ("possible ... or")
    ("FINDINGS: Left perihilar scarring is noted. IMPRESSION: Possible left scarring or atelectasis.",
     "scarring", "uncertain"),
    # a cause offered for what is seen still hedges (CXR1112, R2Gen train)
    ("FINDINGS: There is moderate cardiomegaly identified. IMPRESSION: Moderate increase in size of the "
     "cardiac silhouette. Unclear whether this is secondary to cardiomegaly or pericardial effusion.",
     "cardiomegaly", "uncertain"),
    # a mask before every plain statement: the alternatives still hedge (CXR822, R2Gen train)
    ("FINDINGS: There are persistent XXXX bilateral lower lobe opacities, XXXX subsegmental atelectasis and "
     "scarring. IMPRESSION: Bibasilar subsegmental atelectasis or scarring.", "scarring", "uncertain"),
])
def test_alternatives_hedge_no_plain_statement_of_another_sentence(ex, text, finding, certainty) -> None:
    assert _certainties(ex, text).get(finding) == {certainty}


# ---- 2. "the remaining lungs are clear" beside a finding left open ----------------------------

def test_3190_remaining_lungs_clear_is_no_consolidation_beside_possible_infection(rows: list[dict]) -> None:
    # "vague right suprahilar density ... superimposed infection cannot be entirely excluded. The
    # remaining lungs are clear." (seed 91): main said "Describe the lungs. ... There is no
    # consolidation."
    got = rows_of(rows, 3190)
    for r in got:
        assert "consolidation" not in r["answer"].lower(), (r["question"], r["answer"])
        assert "consolidation" not in r["question"].lower(), (r["question"], r["answer"])
    # the lungs are still described (the atelectasis the report states)
    assert any(r["question_type"] in REGION + SUBCAT and "atelectasis" in r["answer"] for r in got)


def _said(gen, s: list[str], obs: list, sid: str, words: str) -> int:
    return sum(words in r.answer.lower() for r in gen.generate(scene_graph(obs, s, study_id=sid)))


def test_a_limited_negative_is_not_said_beside_a_hedge_it_may_be(gen) -> None:
    s = ["Right upper lobe density, superimposed infection cannot be excluded.", "The remaining lungs are clear."]
    limited, plain = 0, 0
    for k in range(12):
        obs = [_obs("O1", "lung_opacity", s, 0, "density", "present", ("right_upper_lobe",), "right"),
               _obs("O2", "infection", s, 0, "infection", "uncertain"),
               _obs("O3", "consolidation", s, 1, "lungs are clear", regions=("lungs",)),
               _obs("O4", "pulmonary_edema", s, 1, "lungs are clear", regions=("lungs",))]
        limited += _said(gen, s, obs, f"openi:L17{k}", "no consolidation")
        # control: "The lungs are clear" (not limited) still says it
        s2 = [s[0], "The lungs are clear."]
        obs2 = obs[:2] + [_obs("O3", "consolidation", s2, 1, "lungs are clear", regions=("lungs",)),
                          _obs("O4", "pulmonary_edema", s2, 1, "lungs are clear", regions=("lungs",))]
        plain += _said(gen, s2, obs2, f"openi:L17{k}", "no consolidation")
    assert limited == 0 and plain
    # an infiltrate left open the same way
    s3 = ["Left basilar opacity, atelectasis versus infiltrate.", "Lungs are otherwise clear."]
    said = 0
    for k in range(12):
        obs = [_obs("O1", "lung_opacity", s3, 0, "opacity", "present", ("left_lower_lung_zone",), "left"),
               _obs("O2", "infiltration", s3, 0, "infiltrate", "uncertain", ("left_lower_lung_zone",), "left"),
               _obs("O3", "consolidation", s3, 1, "Lungs are otherwise clear", regions=("lungs",))]
        said += _said(gen, s3, obs, f"openi:I17{k}", "no consolidation")
    assert said == 0


# ---- 3. possibly old fractures -----------------------------------------------------------------

def test_3865_possibly_old_rib_fractures_are_never_plain_fractures(rows: list[dict]) -> None:
    # "Bilateral rib deformities are noted, possibly old fractures." (seed 91, an older build):
    # "Bilateral rib fractures are seen"
    n = 0
    for r in rows_of(rows, 3865):
        for s in re.split(r"(?<=\.) ", r["answer"].lower()):
            if "fracture" in s and not s.startswith(("no ", "there is no", "there are no")):
                n += 1
                assert any(h in s for h in HEDGED) or "old" in s or "healed" in s, (r["question"], r["answer"])
    assert n


# ---- 4. one clear lung beside a pneumothorax -----------------------------------------------------

def test_1339_one_clear_lung_beside_a_pneumothorax_is_no_normal_lung_field(rows: list[dict]) -> None:
    # "Small 3.3 mm right-sided pneumothorax ... Left lung is clear." (seed 91, an older build):
    # "The appearance of the lung fields is normal"
    for r in rows_of(rows, 1339):
        q, a = r["question"].lower(), r["answer"].lower()
        if r["polarity"] == "negative" and ("lung field" in q or "the lungs" in q or "right lung" in q):
            raise AssertionError((r["question"], r["answer"]))
        assert "lung fields is normal" not in a and "appearance of the lungs is normal" not in a, a


# ---- 5. mediastinal soft tissue and a hernia are no lung opacity ---------------------------------

def test_2614_and_3564_explained_densities_are_no_lung_opacity(rows: list[dict], ex) -> None:
    # "Prominent right paratracheal opacities XXXX representing adenopathy ... Clear lungs" (seeds
    # 72, 91, an older build) and "There is an retrocardiac density compatible hiatal hernia"
    # (CXR3564, R2Gen train; main: "There is left lung opacity")
    for n in (2614, 3564):
        assert observations_of(ex, DATA / f"{n}.xml", "lung_opacity") == [] or all(
            o.certainty == "absent" for o in observations_of(ex, DATA / f"{n}.xml", "lung_opacity"))
        for r in rows_of(rows, n):
            a = r["answer"].lower()
            assert not re.search(r"(there is|is seen)[^.]*lung opacity|lung opacity is seen|lung opacity is in",
                                 a) or "no " in a.split("lung opacity")[0][-20:], (r["question"], r["answer"])
            if r["polarity"] == "positive":
                assert "lung opacity" not in a, (r["question"], r["answer"])
    # the surgical clips of the sentence joined to it ("mediastinum.There is") are still stated
    assert any("surgical clips" in r["answer"].lower() and r["polarity"] == "positive" for r in rows_of(rows, 3564))


def test_a_period_without_its_space_before_the_next_sentence_ends_the_sentence() -> None:
    t = "Surgical clips overlying the superior mediastinum.There is a retrocardiac density. Lungs clear bilaterally.The heart is normal."
    assert [t[a:b] for a, b in sentence_spans(t)] == [
        "Surgical clips overlying the superior mediastinum.", "There is a retrocardiac density.",
        "Lungs clear bilaterally.", "The heart is normal."]
    # decimals and abbreviations are no such join
    t = "Nodule measures 3.3 cm. Dr.The XXXX was notified."
    assert [t[a:b] for a, b in sentence_spans(t)][0] == "Nodule measures 3.3 cm."


# ---- 6. an ectatic aorta is a dilated aorta ------------------------------------------------------

def test_1933_and_1600_ectatic_aorta_is_aortic_enlargement_not_tortuosity(rows: list[dict], ex) -> None:
    # "Aorta is ectatic." (CXR1933), "Thoracic aorta is mildly ectatic, stable." (CXR1600; seeds
    # 41, 95 accepted "A tortuous aorta is seen" by the ectasia/tortuosity precedent)
    for n in (1933, 1600):
        assert observations_of(ex, DATA / f"{n}.xml", "tortuous_aorta") == []
        assert [o.certainty for o in observations_of(ex, DATA / f"{n}.xml", "aortic_enlargement")] == ["present"]
        got = rows_of(rows, n)
        for r in got:
            assert "tortuous" not in r["answer"].lower(), (r["question"], r["answer"])
        assert any("aortic enlargement is seen" in r["answer"].lower() for r in got)


@pytest.mark.parametrize("text,finding", [
    ("Aorta is ectatic.", "aortic_enlargement"),
    ("The thoracic aorta is mildly ectatic.", "aortic_enlargement"),
    ("The aorta is ectatic and atherosclerotic but stable.", "aortic_enlargement"),
    # controls
    ("The aorta is tortuous.", "tortuous_aorta"),
    ("Tortuous and ectatic aorta.", "tortuous_aorta"),
])
def test_ectatic_and_tortuous_aorta_in_hand_written_sentences(ex, text, finding) -> None:
    got = {o.finding for o in ex.extract("FINDINGS: " + text).observations if "aort" in o.finding}
    assert finding in got and (finding == "tortuous_aorta" or "tortuous_aorta" not in got), got


def test_peribronchial_cuffing_is_bronchial_wall_thickening_not_edema(ex: RulesExtractor) -> None:
    """"Peribronchial cuffing" is a sign of the bronchial walls whatever its cause (edema, small
    airways disease, bronchiolitis): it was read as interstitial edema, which CXR1506 (R2Gen train:
    "... peribronchial cuffing suggestive of volume overload versus viral bronchiolitis") does not
    state. Found by the test-split readers (seeds 96, 97: "most suggestive of infectious or reactive
    small airways disease" answered "There is interstitial edema"); the fix is the ontology's."""
    for text in ("FINDINGS: Increased peribronchial cuffing. IMPRESSION: Small airways disease.",
                 "FINDINGS: Streaky perihilar opacities with peribronchial cuffing."):
        got = _certainties(ex, text)
        assert got.get("bronchial_wall_thickening") == {"present"}, got
        assert "interstitial_edema" not in got and "pulmonary_edema" not in got, got
    # the edema's own words still read as edema
    got = _certainties(ex, "FINDINGS: Kerley B lines and interstitial edema.")
    assert got.get("interstitial_edema") == {"present"}, got


def test_a_list_of_positives_beside_a_finding_no_row_states_is_graded_incomplete(gen) -> None:
    """Session 11 (the test readers' "main finding left out" rows): an answer listing a scope's
    positives while the report states something positive there that no row states (here a reading
    the unvouched check hides: an opacity "due to" something the extractor did not read) is true
    sentence by sentence but not all there is: graded B with ``completeness:finding_not_stated``.
    The same list with nothing left unstated keeps its grade."""
    plain = ["There is a small left pleural effusion."]
    both = plain + ["Right basilar opacity likely due to overlying soft tissue."]
    eff = _obs("O1", "pleural_effusion", plain, 0, "pleural effusion", "present", ("left_costophrenic_angle",), "left")
    opa = _obs("O2", "lung_opacity", both, 1, "opacity", "present", ("right_lower_lung_zone",), "right")

    def lists(sentences: list[str], obs: list, sid: str) -> dict[str, list]:
        out: dict[str, list] = {}
        for r in gen.generate(scene_graph(obs, sentences, study_id=sid)):
            if r.question_type in ("B02_describe_abnormal", "B03_is_abnormal") and r.polarity == "positive":
                out.setdefault(r.question_type, []).append(r)
        return out

    alone = lists(plain, [eff], "openi:L17a")
    assert alone and all("completeness" not in x for rs in alone.values() for r in rs for x in r.grade_reasons)
    hidden = lists(both, [eff, opa], "openi:L17b")
    assert hidden, "the effusion is still listed"
    for rs in hidden.values():
        for r in rs:
            assert "opacity" not in r.answer.lower()  # the hidden reading is not stated ...
            assert "completeness:finding_not_stated->B" in r.grade_reasons and r.grade in ("B", "C"), r


@pytest.mark.parametrize("text, want", [
    # R2Gen train CXR398 / CXR960 / CXR2588 (and the outside readers' CXR1216, seed 99): a disclaimer
    # about what radiographs show, read as present fractures
    ("No acute osseous injury demonstrated. Please note that fractures may not be demonstrated and "
     "consider additional imaging as clinically indicated.", set()),
    ("Please note that nondisplaced fractures may not be demonstrated.", set()),
    # a fracture stated beside the disclaimer is still stated
    ("Acute right rib fracture. Additional nondisplaced fractures may not be visualized.", {"rib_fracture"}),
])
def test_fractures_may_not_be_demonstrated_is_no_fracture(ex: RulesExtractor, text: str, want: set) -> None:
    got = _certainties(ex, "FINDINGS: " + text)
    stated = {k for k, v in got.items() if "fracture" in k and v & {"present", "uncertain"}}
    assert stated == want, got


def test_a_findings_own_answer_beside_an_unstated_reading_of_it_is_graded_incomplete(gen) -> None:
    """The outside readers' CXR124 (seed 99): "Describe the pleural effusion: A small right pleural
    effusion is seen." beside a large left effusion left unstated (a hidden reading). The answer about
    the finding is true but not all the report says of it: B, ``completeness:finding_not_stated``."""
    s = ["There is a small right pleural effusion.", "Left pleural effusion likely due to overlying soft tissue."]
    right = _obs("O1", "pleural_effusion", s, 0, "pleural effusion", "present", ("right_costophrenic_angle",), "right")
    left = _obs("O2", "pleural_effusion", s, 1, "pleural effusion", "present", ("left_costophrenic_angle",), "left")
    for obs, incomplete in (([right], False), ([right, left], True)):
        rows = [r for r in gen.generate(scene_graph(obs, s if incomplete else s[:1], study_id=f"openi:F17{len(obs)}"))
                if r.question_type in ("D01_describe_finding", "D02_has_finding") and "pleural effusion" in r.question
                and r.polarity == "positive"]
        assert rows
        for r in rows:
            assert "left" not in r.answer.lower()  # the hidden reading is not stated
            assert ("completeness:finding_not_stated->B" in r.grade_reasons) == incomplete, r


def test_a_hidden_reading_of_a_sentence_a_listed_positive_rests_on_leaves_the_list_complete(gen) -> None:
    """A hidden reading whose every sentence a stated positive rests on ("Calcific density in the
    right lung apex, compatible with calcified granuloma": the calcification beside the granuloma
    said, full OpenI CXR1491) leaves nothing of the report unsaid: the list is not graded incomplete.
    The same reading in a sentence of its own still makes it incomplete."""
    # (the lists graded incomplete are withheld by default since session 15: kept here to read them)
    from radvqa.generate import GenerateOptions
    from radvqa.generate.engine import Generator
    from radvqa.ontology import load_ontology

    gen = Generator(load_ontology(), GenerateOptions(strategies=("qba",), incomplete_lists="grade"))
    one = ["Calcific density in the right lung apex, compatible with calcified granuloma."]
    two = ["Calcified granuloma in the right lung apex.", "Calcific density in the left lung base, likely due to overlying soft tissue."]
    for sentences, incomplete in ((one, False), (two, True)):
        gran = _obs("O1", "calcified_granuloma", sentences, 0, "alcified granuloma", "present", ("right_apical_zone",), "right")
        words = "Calcific density"
        calc = _obs("O2", "calcification", sentences, len(sentences) - 1, words, "present",
                    ("right_apical_zone",) if not incomplete else ("left_lower_lung_zone",), "right" if not incomplete else "left")
        rows = [r for r in gen.generate(scene_graph([gran, calc], sentences, study_id=f"openi:G17{len(sentences)}"))
                if r.question_type == "B02_describe_abnormal" and r.polarity == "positive"]
        assert rows and all("granuloma" in r.answer for r in rows)
        hidden_said = any("calcification" in r.answer.lower() for r in rows)
        for r in rows:
            flagged = "completeness:finding_not_stated->B" in r.grade_reasons
            # (when the calcification is stated, nothing is left unsaid either)
            assert flagged == (incomplete and not hidden_said), (r.answer, r.grade_reasons)
