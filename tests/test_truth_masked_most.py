"""A masked "most likely" ("most XXXX") is the hedge it was.

OpenI's de-identification blanks words to XXXX; "most XXXX" is "most likely" in every one of the nine
R2Gen train + val sentences that hold it ("Lungs demonstrate left upper lobe airspace disease most XXXX
pneumonia.", CXR245). They were read as statements ("There is bilateral infection", "A calcified
granuloma is seen"); an outside-pool reader (session 12, seed 112) marked "most XXXX represent small
areas of scarring" read "Small scarring is seen". The matching copy of the text now reads "most XXXX"
as "probably" (same length: offsets unchanged; extract/text.py). Train + val: 5 studies change."""

from __future__ import annotations

import pytest

from openi_truth import findings_in
from radvqa.extract.text import lower_same_length


def test_the_matching_copy_keeps_offsets() -> None:
    text = "Airspace disease most XXXX pneumonia. XXXX atelectasis."
    low = lower_same_length(text)
    assert len(low) == len(text) and "probably" in low and "xxxx" not in low


@pytest.mark.parametrize(("text", "sign", "meaning"), [
    ("Left upper lobe airspace disease most XXXX pneumonia.", "lung_opacity", "pneumonia"),
    ("Minimal residual opacities most XXXX represent small areas of scarring.", "lung_opacity", "scarring"),
    ("There is a calcified density in the left mid lung, most XXXX a calcified granuloma.", "calcification",
     "calcified_granuloma"),
])
def test_the_sign_stays_stated_and_its_meaning_is_hedged(ex, text: str, sign: str, meaning: str) -> None:
    got = {(o.finding, o.certainty) for o in findings_in(ex, text)}
    assert (sign, "present") in got, got
    assert (meaning, "uncertain") in got and (meaning, "present") not in got, got


def test_a_plain_most_is_no_hedge(ex) -> None:
    got = {(o.finding, o.certainty) for o in findings_in(ex, "Opacity most prominent at the left base, consistent with pneumonia.")}
    assert ("pneumonia", "present") in got, got
