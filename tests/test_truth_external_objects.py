"""Objects outside the patient (piercings, nipple rings, jewelry) are an artifact of the image.

A test-pool reader of session 13 (seed 127) marked "Is this study abnormal? Yes. Bilateral foreign
bodies are seen." for a normal study with nipple jewelry. The ontology's foreign body took the
piercings as synonyms, and a foreign body is an abnormal device (a retained or aspirated one is);
the same on R2Gen train (CXR1786, CXR664, tests/data/openi_session13). They are now
``external_object`` (TECHNICAL / ARTIFACT): said by the artifact questions, never abnormal, never a
support device; a "foreign body" the report names as a piercing in brackets is that object."""

from __future__ import annotations

from pathlib import Path

import pytest

from openi_truth import build_rows, findings_in, rows_of

DATA = Path(__file__).parent / "data" / "openi_session13"


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    return build_rows(DATA, tmp_path_factory.mktemp("s13") / "out", unvouched="omit")


@pytest.mark.parametrize("n", [1786, 664])
def test_a_piercing_makes_no_study_abnormal(rows: list[dict], n: int) -> None:
    for r in rows_of(rows, n):
        a = r["answer"].lower()
        assert "foreign bod" not in a, (r["question"], r["answer"])
        if r["question_type"] in ("B03_is_abnormal", "B04_is_normal", "B12_describe_device", "B13_has_devices"):
            assert "external object" not in a, (r["question"], r["answer"])


def test_the_artifact_questions_say_it(rows: list[dict]) -> None:
    arts = [r for r in rows_of(rows, 1786) if r["question_type"] in ("B15_describe_artifacts", "B16_has_artifacts")]
    assert arts and all("left external object" in r["answer"].lower() for r in arts), arts


@pytest.mark.parametrize(("text", "finding"), [
    ("Right nipple ring noted.", "external_object"),
    ("Foreign body over the right chest (nipple ring).", "external_object"),
    ("Metallic foreign body in the right upper quadrant.", "foreign_body"),
])
def test_which_objects_are_external(ex, text: str, finding: str) -> None:
    got = {o.finding for o in findings_in(ex, text)}
    assert finding in got and not ({"external_object", "foreign_body"} - {finding}) & got, got
