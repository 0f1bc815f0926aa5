"""The interstitium called prominent is an interstitial opacity (extract patterns.yaml
``interstitium_prominent``).

An outside-pool reader (session 12, seed 117) marked "There is stable prominence of the pulmonary
interstitium" answered "There is no lung opacity" (polarity): the phrase was read as nothing, so
"No focal airspace disease" stood as "no lung opacity". Round 22 had taught the prominent *markings*;
the interstitium itself was missing. No R2Gen train + val report holds the unmasked form (the one
masked form, "Interstitium is XXXX prominent", CXR2162, is left as it was: the blank may be a hedge);
hand-written sentences here."""

from __future__ import annotations

import pytest

from openi_truth import build_rows, findings_in, write_reports


@pytest.mark.parametrize("text", [
    "There is stable prominence of the pulmonary interstitium.",
    "The interstitium is mildly prominent.",
    "Prominent interstitium, possibly due to mild volume overload.",
])
def test_a_prominent_interstitium_is_an_interstitial_opacity(ex, text: str) -> None:
    got = {(o.finding, o.certainty) for o in findings_in(ex, text)}
    assert ("interstitial_opacity", "present") in got, got


@pytest.mark.parametrize("text", ["The interstitium is normal.", "Interstitium is XXXX prominent."])
def test_no_opacity_from_a_normal_or_masked_interstitium(ex, text: str) -> None:
    assert not [o for o in findings_in(ex, text) if o.finding == "interstitial_opacity" and o.certainty == "present"]


def test_no_lung_opacity_denied_beside_it(tmp_path) -> None:
    d = write_reports(tmp_path / "xml", {1: ("Heart size is normal. There is stable prominence of the pulmonary "
                                             "interstitium. No focal airspace disease. No pleural effusion.",
                                             "No acute disease.")})
    rows = build_rows(d, tmp_path / "out", unvouched="omit")
    assert rows
    bad = [r["answer"] for r in rows if r["polarity"] == "negative" and "no lung opacity" in r["answer"].lower()]
    assert not bad, bad
    assert any("interstitial opacity" in r["answer"].lower() for r in rows)
