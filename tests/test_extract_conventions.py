"""Issue #12 conventions of the rules extractor: alternatives, qualified negatives, scope, sides,
chest only, look-alike words (tests/data/extract/conventions.yaml), an accuracy floor on the
hand-annotated development gold (tests/data/extraction_gold/dev.jsonl), and #20's linear time."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml

from radvqa.extract import get_extractor
from radvqa.extract.gold import load_gold, score_gold
from radvqa.ontology import load_ontology

HERE = Path(__file__).parent
DATA = yaml.safe_load((HERE / "data" / "extract" / "conventions.yaml").read_text())
KEYS = {"lat": "laterality", "reg": "regions", "sev": "severity", "size": "size_mm", "chg": "change",
        "qual": "qualifier", "tmp": "temporal"}
OPENI = Path(os.environ.get("RADVQA_OPENI_REPORTS", "/work/shared/data/iu-xray/NLMCXR_reports.tgz"))


@pytest.fixture(scope="module")
def onto():
    return load_ontology()


@pytest.fixture(scope="module")
def ex(onto):
    return get_extractor("rules", ontology=onto)


def _ok(o, certainty: str, attrs: dict[str, str]) -> bool:
    if o.certainty != certainty:
        return False
    for k, v in attrs.items():
        got = getattr(o, KEYS[k])
        if k == "qual":
            v = v.replace("_", " ")
        if v == "none":
            if got not in (None, []):
                return False
        elif k == "reg":
            if v not in got:
                return False
        elif k == "size":
            if got is None or abs(got - float(v)) > 1e-6:
                return False
        elif got != v:
            return False
    return True


def check(e, expected: str) -> None:
    assert e.error is None, e.error
    got = [(o.finding, o.certainty, o.laterality, o.severity, o.size_mm, o.change, o.temporal, o.qualifier)
           for o in e.observations]
    if expected.strip() == "-":
        assert e.observations == [], got
        return
    for item in expected.split(";"):
        item = item.strip()
        if item.startswith("!"):
            assert all(o.finding != item[1:] for o in e.observations), (item, got)
            continue
        head, *kv = item.split()
        finding, certainty = head.split(":")
        attrs = dict(x.split("=", 1) for x in kv)
        assert any(_ok(o, certainty, attrs) for o in e.observations if o.finding == finding), (item, got)


def test_table_is_big_enough():
    rows = DATA["rows"]
    assert len(rows) >= 60
    topics = {r[0] for r in rows}
    assert {"alternative", "qualifier", "scope", "side"} <= topics
    # every example of the issue is a regression row from its real report
    assert len(DATA["regressions"]) >= 18


@pytest.mark.parametrize("topic, text, expected", DATA["rows"], ids=[f"{i:02d}-{r[0]}" for i, r in enumerate(DATA["rows"])])
def test_sentence(ex, topic, text, expected):
    check(ex.extract(text, "t"), expected)


@pytest.mark.parametrize("rid, text, expected", DATA["regressions"], ids=[r[0] for r in DATA["regressions"]])
def test_issue_example(ex, rid, text, expected):
    check(ex.extract("FINDINGS: " + text, rid), expected)


@pytest.mark.parametrize("case", DATA["reports"], ids=[r["id"] for r in DATA["reports"]])
def test_only_the_chest_of_a_combined_report(ex, case):
    check(ex.extract(case["text"], case["id"]), case["expected"])


@pytest.mark.skipif(not OPENI.exists(), reason=f"OpenI reports not at {OPENI} (set RADVQA_OPENI_REPORTS)")
def test_regression_sentences_are_real_report_text():
    from radvqa.extract.inputs import read_reports

    want = {r[0]: r[1] for r in DATA["regressions"]}
    found = {rec[0]: rec[1] for rec in read_reports(OPENI) if isinstance(rec, tuple) and rec[0] in want}
    missing = [rid for rid, s in want.items() if rid not in found or s not in " ".join(found[rid].split())]
    assert not missing, missing


def test_qualifier_is_in_the_rules_data_and_uncertain(ex):
    # the documented list of qualifiers lives in the rules data (context.yaml `qualifiers`)
    assert {"large", "definite", "significant", "displaced", "typical findings of", "gross"} <= set(ex.qualifiers.values())
    for o in ex.extract("No large pleural effusion. No focal consolidation.", "q").observations:
        assert (o.qualifier is None) == (o.certainty != "uncertain")


# ---- accuracy floor on the development gold (tuned on it; the held-out test gold is not used here)
# The issue's targets (side accuracy 0.969 on the 140-report dev set since per-side statements and
# sides in another clause are read; README).
FLOOR = {"recall": 0.95, "positive_precision": 0.93, "certainty_accuracy": 0.95, "side_accuracy": 0.95}


def test_accuracy_floor_on_the_development_gold(onto, ex):
    records = load_gold(HERE / "data" / "extraction_gold" / "dev.jsonl")
    assert len(records) >= 100 and all(r["split"] in ("train", "val") for r in records)
    s = score_gold(records, ex.extract, onto, ex.qualifiers).summary()
    low = {k: round(s[k], 3) for k, floor in FLOOR.items() if s[k] < floor}
    assert not low, (low, s["counts"])
    assert s["overclaim_rate"] <= 0.03, s["counts"]


def test_gold_scoring_counts_an_overclaim_and_a_wrong_side(onto):
    """The scorer itself: a fake extractor that says present + left where the gold says
    uncertain + right is an overclaim and a side error, and an ancestor id still matches."""
    from radvqa.model import Extraction, Observation, Report

    rec = {"report_id": "r", "split": "train", "text": "x", "observations": [
        {"finding": "linear_atelectasis", "certainty": "uncertain", "qualifier": None, "laterality": "right",
         "severity": None, "change": None, "temporal": None, "evidence": "x"}]}

    def fake(text, rid):
        return Extraction(report=Report(text=text), extractor="fake", observations=[
            Observation(id="O01", finding="atelectasis", certainty="present", laterality="left")])

    s = score_gold([rec], fake, onto)
    assert (s.matched, s.overclaim, s.not_present, s.side_ok, s.side_n, s.cert_ok) == (1, 1, 1, 0, 1, 0)
    assert s.positive_precision == 1.0  # the finding is in the gold (not absent there)


# ---- #20: linear time, and a clear reason beyond the longest sentence ------------------------
def _per_kchar(ex, n: int) -> float:
    text = ("pleural effusion " * (n // 17 + 1))[:n]
    best = float("inf")
    for _ in range(5):  # CPU time, best of 5: wall time on a shared CI machine measures the neighbours
        t = time.process_time()
        e = ex.extract(text, "long")
        best = min(best, time.process_time() - t)
    assert e.error is None, e.error
    return best / (n / 1000)


def test_extraction_time_per_character_is_flat(onto):
    ex = get_extractor("rules", ontology=onto, cache_size=0)
    small, big = _per_kchar(ex, 2_000), _per_kchar(ex, 16_000)
    # quadratic would be 8x; allow noise of a shared machine
    assert big < 3 * small + 1e-3, (small, big)


def test_a_sentence_beyond_the_limit_is_rejected_with_a_reason(onto):
    ex = get_extractor("rules", ontology=onto, max_sentence_chars=5_000)
    e = ex.extract("FINDINGS: " + "pleural effusion " * 400, "s")
    assert e.error is not None and "sentence too long" in e.error and e.observations == []
    ok = ex.extract("FINDINGS: " + "Small left pleural effusion. " * 400, "s")  # long report, short sentences
    assert ok.error is None and ok.observations


def test_a_key_given_twice_in_the_rules_data_is_an_error():
    # YAML keeps the last of two equal keys: a second `low_lung_volumes:` under `phrases` once
    # dropped the first list of phrases without a word
    import yaml as _yaml

    from radvqa.extract._data import _NoDuplicates

    with pytest.raises(ValueError, match="given twice"):
        _yaml.load("phrases:\n  a: [x]\n  a: [y]\n", Loader=_NoDuplicates)
    assert _yaml.load("phrases:\n  a: [x]\n  b: [y]\n", Loader=_NoDuplicates) == {"phrases": {"a": ["x"], "b": ["y"]}}
