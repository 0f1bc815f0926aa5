"""Sections, sentences with offsets, and bad input that must never crash the extractor."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from radvqa.extract import get_extractor
from radvqa.extract.sections import split_sections
from radvqa.extract.sentences import split_sentences
from radvqa.model import to_json
from radvqa.ontology import load_ontology

MIMIC = """                                 FINAL REPORT
 EXAMINATION:  CHEST (PA AND LAT)

 INDICATION:  ___ year old woman with cough  // eval for pna

 TECHNIQUE:  Chest PA and lateral

 COMPARISON:  ___

 FINDINGS:

 There is a 3.5 cm nodule in the right upper lobe, e.g. near the apex.  Dr. ___ was
 notified at 10:30 a.m. by phone.  No pleural effusion
 
 Heart size normal

 IMPRESSION:

 1. Right upper lobe nodule. 2. No effusion.
 3. XXXX stable.
"""


@pytest.fixture(scope="module")
def ex():
    return get_extractor("rules", ontology=load_ontology())


def _sentences(text):
    out = []
    for sec in split_sections(text):
        out.extend(split_sentences(text, sec.start, sec.end, sec.name, len(out) + 1))
    return out


def test_mimic_sections_and_offsets():
    secs = split_sections(MIMIC)
    assert [s.name for s in secs] == ["BODY", "EXAMINATION", "INDICATION", "TECHNIQUE", "COMPARISON", "FINDINGS", "IMPRESSION"]
    imp = secs[-1]
    assert MIMIC[imp.start:imp.end].strip().startswith("1. Right upper lobe nodule.")


def test_sentences_keep_offsets_and_handle_abbreviations_decimals_lists():
    sents = _sentences(MIMIC)
    for s in sents:
        assert MIMIC[s.start:s.end] == s.text
    texts = [s.text for s in sents]
    assert "There is a 3.5 cm nodule in the right upper lobe, e.g. near the apex." in texts
    assert "Dr. ___ was\n notified at 10:30 a.m. by phone." in texts
    # missing punctuation: blank line ends the sentence
    assert "No pleural effusion" in texts and "Heart size normal" in texts
    # numbered list items are sentences without their numbers
    assert ["Right upper lobe nodule.", "No effusion.", "XXXX stable."] == [s.text for s in sents if s.section == "IMPRESSION"]
    assert [s.id for s in sents] == [f"S{i:02d}" for i in range(1, len(sents) + 1)]


def test_openi_style_flat_headers():
    t = "COMPARISON: None.\nINDICATION: XXXX-year-old male, chest pain.\nFINDINGS: The heart is normal. IMPRESSION: Normal chest."
    assert [s.name for s in split_sections(t)] == ["COMPARISON", "INDICATION", "FINDINGS", "IMPRESSION"]


def test_no_headers_is_body(ex):
    e = ex.extract("Small right pleural effusion. No pneumothorax.", "x")
    assert [s.section for s in e.report.sentences] == ["BODY", "BODY"]
    assert {(o.finding, o.certainty) for o in e.observations} >= {("pleural_effusion", "present"), ("pneumothorax", "absent")}


@pytest.mark.parametrize("bad, reason", [
    ("", "empty"),
    ("   \n\t  ", "white space"),
    (b"\x00\x01\x02binary\x00" * 20, "binary"),
    (b"FINDINGS: \xff\xfe no effusion", "UTF-8"),
    ("x" * 1_000_001, "too long"),
    (None, "no report text"),
    (12345, "must be str"),
    ("\x01\x02\x03\x04\x05\x06 abc \x07\x08", "binary"),
])
def test_bad_input_gives_an_error_not_an_exception(ex, bad, reason):
    e = ex.extract(bad, "bad")
    assert e.error is not None and reason in e.error
    assert e.observations == []
    to_json(e)  # still serialisable


def test_one_megabyte_of_report_like_text_does_not_crash(ex):
    text = ("Small left pleural effusion. No pneumothorax. " * 25_000)[:1_000_000]
    e = get_extractor("rules", ontology=load_ontology(), max_chars=2_000_000).extract(text, "big")
    assert e.error is None and any(o.finding == "pleural_effusion" for o in e.observations)
    assert ex.extract(text, "big").error is not None  # default limit: a clear reason instead


def test_bytes_input_is_decoded(ex):
    e = ex.extract("FINDINGS: No pneumothorax.".encode(), "b")
    assert e.error is None and e.observations[0].certainty == "absent"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400) | st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_property_arbitrary_text_never_raises_and_offsets_are_valid(ex, text):
    e = ex.extract(text, "p")
    # extract() turns an exception into an ``error`` field: a crash shows up there, not as a raise
    assert not (e.error or "").startswith("extraction failed"), e.error
    if e.error is None:
        for s in e.report.sentences:
            assert e.report.text[s.start:s.end] == s.text
        for o in e.observations:
            assert o.certainty in ("present", "absent", "uncertain")
            for sp in o.evidence:
                assert e.report.text[sp.start:sp.end] == sp.text
    to_json(e)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["No", "small", "left", "pleural effusion", "pneumothorax", ".", ",", "but", "cannot exclude",
                                 "is not seen", "FINDINGS:", "\n", "3.5 cm", "XXXX", "___", "heart size is normal", "1."]),
                max_size=40).map(" ".join))
def test_property_report_like_text_is_deterministic(ex, text):
    assert to_json(ex.extract(text, "p")) == to_json(ex.extract(text, "p"))
