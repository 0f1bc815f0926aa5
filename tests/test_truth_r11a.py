"""Issue 13, round 11a: no "normal" claim beside a findings/impression sentence that states
something abnormal the extractor read nothing positive from, or that negates a normal ("Lung
parenchyma is not clear"). quality/unvouched.py ``normal_blocks`` (data: quality/data/unvouched.yaml
``normal_blocks``), generate/qba.py ``Study._block_unread``.

Real reports: tests/data/openi_issue13r11a (unmodified R2Gen train XMLs, README there); the
sentence rule is also checked on hand-written sentences, with sentences it must leave alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from radvqa.model import Observation, Span
from radvqa.quality import unvouched as uv
from openi_truth import REGION, SUBCAT, build_rows, rows_of, scene_graph

DATA = Path(__file__).parent / "data" / "openi_issue13r11a"

# templates whose negative answers call the study, a region or a subcategory normal
STUDY = ("B01_describe_all", "B02_describe_abnormal", "B03_is_abnormal", "B04_is_normal")


def _obs(oid: str, finding: str, sentences: list[str], i: int, words: str, certainty: str = "absent") -> Observation:
    start = sum(len(s) + 1 for s in sentences[:i]) + sentences[i].index(words)
    return Observation(id=oid, finding=finding, certainty=certainty,
                       evidence=[Span(start=start, end=start + len(words), text=words, sentence_id=f"S{i + 1:02d}")])


def _blocks(sentences: list[str], obs: list[Observation] | None = None) -> list[tuple[str, str, str, bool]]:
    got = uv.normal_blocks(uv.Unvouched(), scene_graph(obs or [], sentences))
    return [(b.sentence_id, b.why, b.words, b.outside) for b in got]


def test_unread_abnormal_sentences_block() -> None:
    # the held-out classes, in hand-written words: prominence / increase of lung markings
    s = ["Slight basilar prominence of lung markings, likely chronic inflammatory change.",
         "Chronic increased pulmonary markings without change.",
         "Stable prominence of the pulmonary interstitium."]
    got = _blocks(s)
    assert [b[:2] for b in got] == [("S01", "unread_sentence"), ("S02", "unread_sentence"), ("S03", "unread_sentence")]
    assert "prominence" in got[0][2] and "markings" in got[1][2]
    assert not any(b[3] for b in got)


def test_negated_normal_blocks() -> None:
    s = ["Lung parenchyma is not clear.", "The mediastinum is not entirely normal.",
         "The bony elements are not remarkable."]  # "not remarkable" is unremarkable: no block
    got = _blocks(s)
    assert [b[:3] for b in got] == [("S01", "negated_normal", "not clear"),
                                    ("S02", "negated_normal", "not entirely normal")]


def test_negated_normal_is_no_normal_statement() -> None:
    # the extractor reads no negative from a negated normal (while "Lungs are clear." gives several)
    from radvqa.extract.rules import RulesExtractor

    ex = RulesExtractor()
    assert not ex.extract("FINDINGS: Lung parenchyma is not clear.").observations
    assert not ex.extract("FINDINGS: The lungs are not entirely clear.").observations
    assert any(o.certainty == "absent" for o in ex.extract("FINDINGS: Lungs are clear.").observations)


def test_harmless_sentences_do_not_block() -> None:
    s = ["No acute disease.",  # every unread word negated
         "Specifically, no evidence of focal consolidation, pneumothorax, or pleural effusion.",
         "The XXXX examination consists of frontal and lateral radiographs of the chest.",
         "Heart size and pulmonary vascular engorgement appear within limits of normal.",  # normal statement
         "Recommend followup chest radiograph to document resolution.",  # a recommendation
         "Stable as compared to earlier study.",
         "Lungs are clear."]
    obs = [_obs("O1", "consolidation", s, 1, "focal consolidation"), _obs("O2", "lung_opacity", s, 6, "Lungs are clear")]
    assert _blocks(s, obs) == []


def test_sentence_with_a_positive_reading_is_left_to_round_10() -> None:
    # the positive is vouched for or omitted by round 10's criteria, which block its family
    s = ["Mild prominence of the mediastinum with cardiomegaly."]
    assert _blocks(s, [_obs("O1", "cardiomegaly", s, 0, "cardiomegaly", "present")]) == []
    assert _blocks(s)  # without it the sentence is unread


def test_outside_chest_and_run_on_sentences() -> None:
    s = ["Left knee: Severe medial compartment degenerative changes.",
         "Chronic appearing interstitial markings The lungs are normally inflated and clear."]
    got = _blocks(s, [_obs("O1", "lung_opacity", s, 1, "lungs are normally inflated and clear")])
    assert [(b[0], b[3]) for b in got] == [("S01", True), ("S02", False)]  # the run-on's first clause counts
    assert got[1][2] == "markings"


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], dict, str]:
    out = tmp_path_factory.mktemp("r11a") / "out"
    got = build_rows(DATA, out, unvouched="omit")
    return (got, json.loads((out / "manifest.json").read_text())["counts"],
            (out / "README.md").read_text(encoding="utf-8"))


def _normal_claims(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["polarity"] == "negative" and r["question_type"] in STUDY + REGION + SUBCAT]


def test_real_reports_counted_and_no_lung_normal(rows) -> None:
    got, counts, card = rows
    # every one of the five reports holds a blocking sentence (README), but CXR2817's "coarse
    # interstitial lung markings" is read since round 22 (an interstitial opacity, which keeps the
    # lungs and the study from normal itself)
    assert counts["normal_claims_blocked"] == {"unread_sentence": 4}
    assert "| studies with normal claims withheld | studies | share |" in card
    assert "| unread_sentence | 4 | 100.0% |" in card
    lungs = {"lungs", "right_lung", "left_lung", "lung_apices", "lung_bases", "right_upper_lung_zone"}
    for n in (3398, 2817, 1519, 218):
        for r in _normal_claims(rows_of(got, n)):
            assert r["question_type"] not in STUDY, r["answer"]
            assert not lungs.intersection(r["regions"]), (n, r["question"], r["answer"])
            assert "lung fields" not in r["question"], (n, r["question"], r["answer"])
    # CXR3398 (main said "Is the appearance of the lung apices normal? Yes."): the negatives the
    # report states stay ("The lungs are normally inflated and clear" -> no consolidation)
    assert not any("lung apices" in r["question"] and r["polarity"] == "negative" and "device" not in r["question_type"]
                   for r in rows_of(got, 3398))
    assert any(r["question_type"] == "D02_has_finding" and r["polarity"] == "negative" for r in rows_of(got, 3398))
    # CXR3966 (knee sentences): the study is never normal, and nothing stops a lung region being
    assert not any(r["question_type"] in STUDY for r in _normal_claims(rows_of(got, 3966)))


def test_no_normal_region_beside_a_blocking_sentence() -> None:
    """Property over hand-written reports (each class x each place): for every blocking sentence,
    no generated row calls the study normal, nor any region overlapping the sentence's place (the
    lungs where it names none), nor gives the lungs' general implied negative; the negative the
    report states ("No pneumothorax") stays."""
    from radvqa.generate import GenerateOptions
    from radvqa.generate.engine import Generator
    from radvqa.ontology import load_ontology

    gen = Generator(load_ontology(), GenerateOptions(strategies=("qba",)))
    v = gen.vocab

    def overlapping(r: str) -> set[str]:
        parts = {r, *v.rdescendants.get(r, ())} if hasattr(v, "rdescendants") else {r}
        parts |= {d for d in v.rname if r in v.rancestors.get(d, ())}
        return parts | {a for d in parts for a in v.rancestors.get(d, ())}

    places = {"": "lungs", " in the right upper lobe": "right_upper_lobe", " of the mediastinum": "mediastinum"}
    heads = ["Chronic increased markings", "Stable prominence of the markings", "Mild crowding",
             "The parenchyma is not clear"]
    n_neg = 0
    for i, head in enumerate(heads):
        for j, (where, place) in enumerate(places.items()):
            s = ["Lungs are clear.", "No pneumothorax.", f"{head}{where}.", "Heart size is normal."]
            obs = [_obs("O1", "lung_opacity", s, 0, "Lungs are clear"), _obs("O2", "pneumothorax", s, 1, "pneumothorax"),
                   _obs("O3", "cardiomegaly", s, 3, "Heart size is normal")]
            sg = scene_graph(obs, s, study_id=f"openi:T{i}{j}")
            assert len(uv.normal_blocks(gen.unvouched, sg)) == 1, (head, where)
            # "the parenchyma" names the lungs itself
            blocked = overlapping("lungs" if "parenchyma" in head else place)
            got = gen.generate(sg)
            for r in got:
                if r.polarity != "negative" or "device" in r.question_type or "artifact" in r.question.lower():
                    continue
                n_neg += 1
                assert r.question_type not in STUDY, (head, where, r.answer)
                if r.question_type in REGION:
                    assert not blocked.intersection(r.regions), (head, where, r.question, r.answer)
                if r.question_type in SUBCAT and place != "mediastinum" or "parenchyma" in head:
                    assert "lung fields" not in r.question, (head, where, r.question)
                if r.question_type in ("D01_describe_finding", "D02_has_finding") and place == "lungs":
                    # the general negatives the report does not state ("Lungs are clear" states
                    # lung_opacity absent, so only the implied ones are checked)
                    assert not {"interstitial_opacity", "infiltration", "lung_lesion"}.intersection(r.findings), r.answer
    assert n_neg > 50
