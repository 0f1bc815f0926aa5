"""Issue 13, round 13: the wrong-row classes the seed-84/85 hand audits of the R2Gen train+val
reports still found (tests/data/audit/openi_r2gen_trainval_marked_seed8[45].csv), and classes
described from a validation pool (checked here on hand-written sentences only):

- a qualified negative ("no large pleural effusions") vouches for no normal region, subcategory
  or finding unless the answer says it with its qualifier (generate/qba.py _carrying_qualified);
- "lumpectomy" and "breast surgery" are no mastectomy (ontology synonyms);
- "no significant change in X or Y" lists X and Y, present and unchanged: no alternatives
  (extract/data/context.yaml ``alternatives.list_heads``);
- bronchiectasis is never placed in the trachea ("tubular airway ectasia"; finding_places.yaml);
- "paratracheal soft tissue" is the upper mediastinum, not the chest wall's soft tissues;
- a bare "Acute osseous abnormality." (the template's "No" lost) states nothing, keeps the bones
  from "normal" and gets no implied "no fracture" (patterns.yaml ``exclusions``, unvouched.yaml
  ``general_negatives``);
- "volume overload" is no heart failure (ontology synonyms);
- "No X, <sign> concerning for / compatible with <diagnosis>": the negation does not reach past the
  comma into a statement of its own (extract/data/context.yaml ``negation_breaks``);
- "left breast and axilla": the left axilla, not "the axillae" (generate/facts.py);
- a finding placed only in the upper abdomen is no finding of the lung fields
  (templates/common.yaml ``region_subcategories``).

Real reports: tests/data/openi_issue13r13 (unmodified R2Gen train/val XMLs, README there)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from radvqa.extract.rules import RulesExtractor
from radvqa.ontology import load_ontology
from openi_truth import REGION, SUBCAT, build_rows, findings_in, observations_of, rows_of, scene_graph

DATA = Path(__file__).parent / "data" / "openi_issue13r13"


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    return build_rows(DATA, tmp_path_factory.mktemp("r13") / "out", unvouched="omit")


def _read(ex: RulesExtractor, text: str) -> list[tuple]:
    return [(o.finding, o.certainty, o.laterality, tuple(o.regions)) for o in findings_in(ex, text)]


# ---- the audited reports -----------------------------------------------------------------------

def test_838_no_large_effusion_is_no_normal_pleura_without_its_qualifier(rows: list[dict]) -> None:
    got = rows_of(rows, 838)
    for r in got:
        if r["question_type"] in REGION + SUBCAT and r["polarity"] == "negative":
            q, a = r["question"].lower(), r["answer"].lower()
            if "pleura" in q:
                assert "no large pleural effusion" in a, (r["question"], r["answer"])
            if "lung fields" in q or "lungs" in q:
                assert "no significant pulmonary edema" in a, (r["question"], r["answer"])
    assert not [r for r in got if r["question"] == "What abnormalities are seen in the pleura?"]
    assert any("no pneumothorax" in r["answer"].lower() for r in got)  # plain negatives stay


def test_979_lumpectomy_clips_are_no_mastectomy(rows: list[dict]) -> None:
    for r in rows_of(rows, 979):
        assert "mastectomy" not in r["answer"].lower(), r["answer"]
    assert any("hyperinflation" in r["answer"].lower() for r in rows_of(rows, 979))


def test_2448_no_significant_change_in_pneumothorax_or_fluid_states_both(rows: list[dict]) -> None:
    got = rows_of(rows, 2448)
    for r in got:
        assert "cannot be excluded" not in r["answer"] and "may be present" not in r["answer"], r["answer"]
    # (either wording of the statement: the draws move when other facts of the study do)
    assert any(re.search(r"a right pneumothorax is seen|there is a right pneumothorax", r["answer"].lower()) for r in got)
    assert any(re.search(r"pleural effusion is seen|there is a (?:\w+ )*pleural effusion", r["answer"].lower()) for r in got)


def test_983_bronchiectasis_is_not_in_the_trachea(rows: list[dict], ex: RulesExtractor) -> None:
    bron = observations_of(ex, DATA / "983.xml", "bronchiectasis")
    assert bron and all(o.regions == ["right_middle_lobe"] for o in bron), bron
    assert all("place:trachea" in o.dropped for o in bron if "S05" in {e.sentence_id for e in o.evidence})
    # (the merged reading also cites S10's unread "XXXX postinfectious/postinflammatory": round 10
    # leaves it unstated, so no row may place it anywhere wrong)
    for r in rows_of(rows, 983):
        assert "trachea" not in r["answer"].lower(), r["answer"]


def test_3096_paratracheal_soft_tissue_is_mediastinal(rows: list[dict]) -> None:
    lad = [r for r in rows_of(rows, 3096) if "lymphadenopathy" in r["answer"].lower()]
    assert lad
    for r in lad:
        assert "soft tissues" not in r["answer"].lower() and "soft_tissues" not in r["regions"], r["answer"]
    assert any("upper mediastinum" in r["answer"].lower() for r in lad)


def test_1220_bare_acute_osseous_abnormality_says_nothing_of_the_bones(rows: list[dict]) -> None:
    for r in rows_of(rows, 1220):
        a, q = r["answer"].lower(), r["question"].lower()
        assert "bone lesion" not in a and "no fracture" not in a, r["answer"]
        if r["question_type"] in REGION + SUBCAT:
            assert not re.search(r"\b(?:bones?|bony|ribs?|spine|bony thorax)\b", q), (r["question"], r["answer"])


def test_551_findings_compatible_with_emphysema_after_a_negation_are_stated(rows: list[dict],
                                                                             ex: RulesExtractor) -> None:
    emph = observations_of(ex, DATA / "551.xml", "emphysema")
    assert emph and all(o.certainty == "present" for o in emph), emph
    got = rows_of(rows, 551)
    assert any("emphysema" in r["answer"].lower() and r["polarity"] == "positive" for r in got)
    assert not any("no emphysema" in r["answer"].lower() for r in got)


# ---- hand-written sentences ---------------------------------------------------------------------

def test_a_diagnosis_after_a_comma_escapes_the_negation_before_it(ex: RulesExtractor) -> None:
    got = {g[:2] for g in _read(ex, "No focal consolidation, enlarged pulmonary arteries concerning for "
                                    "pulmonary arterial hypertension.")}
    assert got == {("consolidation", "absent"), ("enlarged_pulmonary_artery", "present"),
                   ("pulmonary_hypertension", "uncertain")}, got
    # a list word in the phrase: still one negated list; no comma: the negation reaches on
    got = {g[:2] for g in _read(ex, "No pleural effusion, pneumothorax or findings suspicious for pneumonia.")}
    assert ("pneumothorax", "absent") in got, got
    got = {g[:2] for g in _read(ex, "No focal consolidation to suggest pneumonia.")}
    assert got == {("consolidation", "absent"), ("pneumonia", "absent")}, got
    got = {g[:2] for g in _read(ex, "No consolidation, effusion, or pneumothorax.")}
    assert {c for _, c in got} == {"absent"}, got


def test_change_in_a_list_is_no_alternative(ex: RulesExtractor) -> None:
    for s in ("No significant change in right pneumothorax or pleural fluid.",
              "No change in the right pleural effusion or pneumothorax.",
              "No interval change in left pleural effusion or pneumothorax."):
        got = _read(ex, s)
        assert {f for f, *_ in got} == {"pneumothorax", "pleural_effusion"}, got
        assert all(c == "present" for _, c, *_ in got), (s, got)
    # alternatives elsewhere stay hedged
    got = _read(ex, "Stable opacity, which may represent atelectasis or pneumonia.")
    assert ("atelectasis", "uncertain") in {(f, c) for f, c, *_ in got}
    got = _read(ex, "Right basilar atelectasis or pneumonia.")
    assert {c for f, c, *_ in got if f in ("atelectasis", "pneumonia")} == {"uncertain"}, got


def test_breast_conserving_surgery_is_no_mastectomy(ex: RulesExtractor) -> None:
    for s in ("Right chest wall surgical clips, compatible with prior lumpectomy.",
              "Configuration of breast shadows suggests prior right lumpectomy.", "Prior breast surgery."):
        assert "mastectomy" not in {f for f, *_ in _read(ex, s)}, s
    assert ("mastectomy", "present", "left") in {g[:3] for g in _read(ex, "Status post left mastectomy.")}


def test_places_bronchiectasis_and_paratracheal_soft_tissue(ex: RulesExtractor) -> None:
    got = _read(ex, "Reticular opacities in the right middle lobe with tubular airway ectasia, "
                    "compatible with bronchiectasis.")
    bron = [g for g in got if g[0] == "bronchiectasis"]
    assert bron and all("trachea" not in g[3] for g in bron), got
    got = _read(ex, "Mild right paratracheal soft tissue may be secondary to lymphadenopathy.")
    assert [g[3] for g in got if g[0] == "lymphadenopathy"] == [("upper_mediastinum",)], got
    # the chest wall's soft tissues stay where they were
    got = _read(ex, "Soft tissue swelling of the left chest wall.")
    assert any("left_chest_wall" in g[3] for g in got), got


def test_bare_acute_bone_template_reads_nothing_but_the_negated_one_stays(ex: RulesExtractor) -> None:
    for s in ("Acute osseous abnormality.", "Acute bony abnormality.", "Acute bone abnormalities."):
        assert _read(ex, s) == [], s
    for s in ("No acute osseous abnormality.", "No acute bony abnormality.", "There are no acute osseous abnormalities.",
              "Negative for acute bone abnormality.", "No evidence of acute osseous abnormality.",
              "Mild degenerative change without acute bony abnormality."):
        assert ("fracture", "absent") in {g[:2] for g in _read(ex, s)}, s
    # a bone lesion named otherwise is still read
    assert ("bone_lesion", "present") in {g[:2] for g in _read(ex, "Osseous abnormality of the left humerus.")}


def test_volume_overload_is_no_heart_failure(ex: RulesExtractor) -> None:
    for s in ("Overall, findings of mild volume overload.", "Fluid overload."):
        assert "heart_failure" not in {f for f, *_ in _read(ex, s)}, s
    assert ("heart_failure", "present") in {g[:2] for g in _read(ex, "Findings of congestive heart failure.")}


def _obs(oid: str, finding: str, sentences: list[str], i: int, words: str, certainty: str = "absent",
         regions: tuple[str, ...] = (), laterality: str | None = None, qualifier: str | None = None):
    from radvqa.model import Observation, Span
    start = sum(len(s) + 1 for s in sentences[:i]) + sentences[i].index(words)
    return Observation(id=oid, finding=finding, certainty=certainty, regions=list(regions), laterality=laterality,
                       qualifier=qualifier,
                       evidence=[Span(start=start, end=start + len(words), text=words, sentence_id=f"S{i + 1:02d}")])


def test_qualified_negative_vouches_for_no_normal_region_without_its_qualifier(gen) -> None:
    """Property over draws: beside "No large pleural effusion" (a qualified negative) no negative
    region or subcategory row speaks for the pleura (or a region holding it). Round 13 let one
    stand where it said the qualified negative itself; round 16 (CXR1456, seed 93) calls the
    pleura never normal there (tests/test_truth_r16.py). A plain "No pleural effusion" still lets
    them be called normal."""
    s = ["No large pleural effusion.", "No pneumothorax.", "Heart size is normal.", "Lungs are clear."]
    v = gen.vocab
    # (the pleura and its parts; "the chest" is the study's convention: "normal" beside a
    # qualified negative, as the study-level answers)
    pleura = {"pleura", *(r for r in v.rname if "pleura" in v.rancestors.get(r, ()))}
    n_asked = 0
    for k in range(12):
        obs = [_obs("O1", "pleural_effusion", s, 0, "large pleural effusion", "uncertain", ("pleura",),
                    qualifier="large"),
               _obs("O2", "pneumothorax", s, 1, "pneumothorax"), _obs("O3", "cardiomegaly", s, 2, "Heart size is normal"),
               _obs("O4", "lung_opacity", s, 3, "Lungs are clear", regions=("lungs",))]
        for r in gen.generate(scene_graph(obs, s, study_id=f"openi:Q{k}")):
            if r.question_type in REGION + SUBCAT:
                n_asked += 1
                if r.polarity == "negative":
                    assert not pleura.intersection(r.regions), (r.question, r.answer)
    assert n_asked  # (other regions are still asked)
    plain = [_obs("O1", "pleural_effusion", ["No pleural effusion."], 0, "pleural effusion", regions=("pleura",))]
    said = [r.question_type for k in range(12) for r in gen.generate(
        scene_graph(plain, ["No pleural effusion."], study_id=f"openi:R{k}"))
        if r.question_type in REGION and "pleura" in r.regions and r.polarity == "negative"]
    assert "C02_describe_abnormal_region" in said  # (the control: a plain negative still vouches)


def test_side_of_a_coordinated_region_is_kept(gen) -> None:
    s = ["Surgical clips in the left breast and axilla."]
    obs = [_obs("O1", "surgical_clips", s, 0, "Surgical clips", "present", ("left_breast", "axillae"), "left")]
    rows = list(gen.generate(scene_graph(obs, s)))
    located = [r.answer for r in rows if "clips" in r.answer.lower() and " in the " in r.answer]
    assert located
    for a in located:
        assert "axillae" not in a and "the breasts" not in a, a
        assert "left axilla" in a and "left breast" in a, a
    # a region of the other side keeps the unsided one as it was
    s = ["Clips in the right breast and the axillae."]
    obs = [_obs("O1", "surgical_clips", s, 0, "Clips", "present", ("right_breast", "left_axilla", "axillae"), "right")]
    f = __import__("radvqa.generate.facts", fromlist=["_sided_parts"])
    assert f._sided_parts(gen.vocab, ["right_breast", "left_axilla", "axillae"], "right") == \
        ["right_breast", "left_axilla", "axillae"]


def test_a_finding_of_the_upper_abdomen_is_no_lung_field_finding() -> None:
    # (by default round 10's U4 leaves a lung-field finding in a sentence naming the spleen
    # unstated; with --unvouched keep it is stated, under the upper abdomen)
    from radvqa.generate import GenerateOptions
    from radvqa.generate.engine import Generator
    gen = Generator(load_ontology(), GenerateOptions(strategies=("qba",), unvouched="keep"))
    s = ["Calcified granulomas in the spleen.", "Heart size is normal."]
    obs = [_obs("O1", "calcified_granuloma", s, 0, "Calcified granulomas", "present", ("left_upper_quadrant",), "left"),
           _obs("O2", "cardiomegaly", s, 1, "Heart size is normal")]
    n = 0
    for k in range(6):
        for r in gen.generate(scene_graph(obs, s, study_id=f"openi:A{k}")):
            if "granuloma" in r.answer.lower():
                n += 1
                assert "lung fields" not in r.question.lower(), (r.question, r.answer)
            if r.question_type in SUBCAT and "lung fields" in r.question.lower():
                assert r.polarity != "positive", (r.question, r.answer)
    assert n  # still stated (B01-B04, regions)
