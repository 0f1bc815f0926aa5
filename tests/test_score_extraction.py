"""`radvqa score-extraction`: radvqa's extractor against RadGraph / RadGraph2 gold graphs.
Fixtures: tests/data/radgraph (hand-made by make_fixture.py there; real layout, invented text).
Every expected count below was worked out by hand from the fixture's entities."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from radvqa.cli import app
from radvqa.eval.radgraph import GoldError, TermMapper, gold_observations, read_gold, score
from radvqa.extract import get_extractor
from radvqa.ontology import load_ontology

FIX = Path(__file__).parent / "data" / "radgraph"


@pytest.fixture(scope="module")
def mapper() -> TermMapper:
    onto = load_ontology()
    return TermMapper(get_extractor("rules", ontology=onto), onto)


def _gold(name: str, mapper: TermMapper, labeler: str = "labeler_1") -> dict[str, list[tuple]]:
    out = {}
    for rid, text, ents in read_gold(FIX / name, labeler):
        u: Counter[str] = Counter()
        out[rid] = [(g.finding, g.certainty, g.laterality, g.change) for g in gold_observations(text, ents, mapper, u)]
        out[rid + "#unmapped"] = dict(u)
    return out


def test_gold_entities_become_observations(mapper: TermMapper) -> None:
    g = _gold("train.json", mapper)
    # "small" modifies "effusion", "left" modifies "pleural": one left effusion, not three findings
    assert g["p10/p10000001/s50000001.txt"] == [
        ("pleural_effusion", "present", "left", None),
        ("cardiomegaly", "present", None, None),  # "enlarged" located_at "heart"
        ("pneumothorax", "absent", None, None),
        ("lung_opacity", "absent", None, None),  # "clear" (OBS-DP) located_at "lungs" states a normal
    ]
    assert g["p10/p10000002/s50000002.txt"] == [("consolidation", "uncertain", "right", None)]
    # "process" names no finding: listed, not dropped
    assert g["p10/p10000002/s50000002.txt#unmapped"] == {"process": 1}
    assert g["p10/p10000003/s50000003.txt"] == [("endotracheal_tube", "present", None, None), ("pulmonary_edema", "present", None, None)]


def test_radgraph2_change_labels_both_spellings(mapper: TermMapper) -> None:
    g = _gold("radgraph2_train.json", mapper)["p10/p10000004/s50000004.txt"]
    assert g == [
        ("pleural_effusion", "present", "left", "worsened"),  # CHAN-WOR (code spelling)
        ("atelectasis", "present", "right", "improved"),  # CHAN-CON-IMP (paper spelling)
        ("cardiomegaly", "present", None, "unchanged"),  # CHAN-NC
    ]


def test_scores_with_denominators() -> None:
    res = score(FIX / "radgraph2_train.json", "radgraph2")
    assert res["levels"]["finding+change"] == {"tp": 3, "fp": 0, "fn": 0, "precision": 1.0, "recall": 1.0, "f1": 1.0, "predicted": 3, "gold": 3}
    res = score(FIX / "train.json")
    assert (res["gold_observation_entities"], res["gold_entities_mapped"]) == (11, 10)
    pos = res["levels_positive"]["finding+certainty"]
    assert (pos["tp"], pos["fp"], pos["fn"]) == (5, 0, 0)
    # the extractor expands "lungs are clear" / "no acute cardiopulmonary process" into implied
    # negatives that the gold does not annotate: precision over all certainties is lower
    assert res["levels"]["finding"]["fp"] > 0 and res["levels"]["finding"]["fn"] == 0
    # test.json: labeler_2 reads the consolidation as definite; the extractor keeps "possible"
    l2 = score(FIX / "test.json", labeler="labeler_2")["levels_positive"]
    assert (l2["finding"]["tp"], l2["finding+certainty"]["tp"]) == (1, 0)
    l1 = score(FIX / "test.json", labeler="labeler_1")["levels_positive"]
    assert l1["finding+certainty"]["tp"] == 1


def test_predictions_file_and_cli(tmp_path: Path) -> None:
    # a predictions file that says nothing for one report: scored as predicting nothing
    preds = tmp_path / "sg.jsonl"
    preds.write_text(json.dumps({"study_id": "p10/p10000003/s50000003.txt", "observations": [
        {"id": "O01", "finding": "endotracheal_tube", "certainty": "present"}]}) + "\n")
    out = tmp_path / "r.json"
    r = CliRunner().invoke(app, ["score-extraction", "--gold", str(FIX / "train.json"), "--pred", str(preds), "--json", str(out)])
    assert r.exit_code == 0, r.output
    assert "unmapped gold terms: process (1)" in r.output
    res = json.loads(out.read_text())
    assert len(res["reports_without_prediction"]) == 2
    assert res["levels"]["finding"]["tp"] == 1 and res["levels"]["finding"]["fp"] == 0
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    r = CliRunner().invoke(app, ["score-extraction", "--gold", str(bad)])
    assert r.exit_code != 0 and "expected an object" in r.output
    with pytest.raises(GoldError, match="unknown format"):
        score(FIX / "train.json", "brat")
    with pytest.raises(GoldError, match="not Lunguage.csv"):
        score(Path(__file__).parent / "data" / "cxr_align" / "README.md", "lunguage")


def test_import_cxr_align(tmp_path: Path) -> None:
    """CXR-Align as multiple choice: the original report among its negated and omitted versions."""
    import pyarrow.parquet as pq

    from radvqa.eval.cxralign import import_cxr_align

    fix = Path(__file__).parent / "data" / "cxr_align"
    m = import_cxr_align(fix, tmp_path / "o")
    assert (m["counts"]["qa"], m["counts"]["rejected"]) == (13, 2)  # 15 cases in
    rows = pq.read_table(tmp_path / "o" / "qa").to_pylist()
    for r in rows:
        assert r["choices"][ord(r["answer_short"]) - ord("A")] == r["answer"]  # the letter points at the original
        assert len(set(r["choices"])) == len(r["choices"])
    two = next(r for r in rows if r["qa_id"].endswith("two-only"))
    assert len(two["choices"]) == 2 and two["findings"] == ["atelectasis"]
    # positions spread over the letters (12 three-option cases), same for the same seed
    letters = [r["answer_short"] for r in rows if len(r["choices"]) == 3]
    assert len(set(letters)) == 3
    again = import_cxr_align(fix, tmp_path / "o2")
    assert again["counts"] == m["counts"]
    assert [r["answer_short"] for r in pq.read_table(tmp_path / "o2" / "qa").to_pylist()] == [r["answer_short"] for r in rows]
    r = CliRunner().invoke(app, ["import", "cxr-align", str(fix / "cxr-align.json"), "--out", str(tmp_path / "o3")])
    assert r.exit_code == 0 and "13 questions, 2 rejected" in r.output


def test_lunguage_rows(mapper: TermMapper) -> None:
    from radvqa.eval.radgraph import read_lunguage

    u: Counter[str] = Counter()
    got = {rid: (n, [(g.finding, g.certainty, g.laterality, g.change) for g in gold])
           for rid, _, n, gold in read_lunguage(Path(__file__).parent / "data" / "lunguage" / "Lunguage.csv", mapper, u)}
    # history and patient-info rows are not findings; "zebra sign" names nothing: listed
    assert got["s50000001"] == (3, [("pleural_effusion", "present", "left", "worsened"), ("pneumothorax", "absent", None, None),
                                    ("pneumonia", "uncertain", "left", None)])
    assert got["s50000002"] == (3, [("cardiomegaly", "present", None, "unchanged"), ("picc", "present", "right", None)])
    assert u == {"zebra sign": 1}
    res = score(Path(__file__).parent / "data" / "lunguage" / "Lunguage.csv", "lunguage")
    assert res["levels_positive"]["finding+certainty"]["tp"] == 4
    assert res["levels"]["finding+change"]["tp"] == 2  # "possibly increased" = worsened class; "unchanged"
