"""Issue 13, round 10: generic criteria for positive readings the extractor made only in part
(quality/unvouched.py, quality/data/unvouched.yaml) and the ``--unvouched omit|keep`` policy.

Real reports: tests/data/openi_issue13r10 (unmodified R2Gen train/val XMLs, README there); every
criterion is also checked on hand-written sentences, with a sentence it must leave alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from radvqa.generate import GenerateOptions
from radvqa.model import Observation, Span
from radvqa.ontology import load_ontology
from radvqa.generate.vocab import Vocab
from radvqa.quality import unvouched as uv
from openi_truth import build_rows, rows_of, scene_graph

DATA = Path(__file__).parent / "data" / "openi_issue13r10"


@pytest.fixture(scope="module")
def vocab() -> Vocab:
    return Vocab(load_ontology())


def _severity(level: str) -> tuple[str, ...]:
    return (level,)


def _obs(oid: str, finding: str, sentences: list[str], i: int, words: str, certainty: str = "present",
         side: str | None = None, severity: str | None = None) -> Observation:
    """An observation whose mention is ``words`` in sentence ``i`` (offsets as scene_graph lays
    the sentences out: one space between them)."""
    start = sum(len(s) + 1 for s in sentences[:i]) + sentences[i].index(words)
    return Observation(id=oid, finding=finding, certainty=certainty, laterality=side, severity=severity,
                       evidence=[Span(start=start, end=start + len(words), text=words, sentence_id=f"S{i + 1:02d}")])


def _reasons(vocab: Vocab, sentences: list[str], obs: list[Observation], crit=None) -> dict[str, list[str]]:
    u = crit or uv.Unvouched()
    got = u.study(scene_graph(obs, sentences), vocab.fsub, _severity, vocab.fname)
    return {oid: [r for _, r in rs] for oid, rs in got.items()}


def test_read_sentence_is_vouched_for(vocab: Vocab) -> None:
    s = ["Stable mild cardiomegaly is again noted.", "Small right pleural effusion."]
    obs = [_obs("O1", "cardiomegaly", s, 0, "cardiomegaly", severity="mild"),
           _obs("O2", "pleural_effusion", s, 1, "pleural effusion", side="right", severity="small")]
    assert _reasons(vocab, s, obs) == {}


def test_unread_words_named(vocab: Vocab) -> None:
    # "crowding" is no word any vocabulary of the extractor reads around a mention
    s = ["Low lung volumes with bronchovascular crowding."]
    got = _reasons(vocab, s, [_obs("O1", "low_lung_volumes", s, 0, "Low lung volumes")])
    assert got == {"O1": ["evidence:unread(crowding)->C"]}
    # a finding word counts as read only inside a mention of this sentence: "opacity" unmatched
    s = ["Hazy opacity at the right base."]
    got = _reasons(vocab, s, [_obs("O1", "pleural_effusion", s, 0, "right base", side="right")])
    assert got == {"O1": ["evidence:unread(opacity)->C"]}  # "hazy" is a texture word: read


def test_negatives_are_not_graded(vocab: Vocab) -> None:
    s = ["No crowding or effusion."]
    assert _reasons(vocab, s, [_obs("O1", "pleural_effusion", s, 0, "effusion", certainty="absent")]) == {}


def test_explained_cue(vocab: Vocab) -> None:
    s = ["Right basilar opacity due to overlying soft tissue."]
    got = _reasons(vocab, s, [_obs("O1", "lung_opacity", s, 0, "opacity", side="right")])
    assert "evidence:explained(due to)->C" in got["O1"]
    # the cause is a finding the extractor read: no explaining away
    s = ["Left basilar opacity due to atelectasis."]
    got = _reasons(vocab, s, [_obs("O1", "lung_opacity", s, 0, "opacity", side="left"),
                              _obs("O2", "atelectasis", s, 0, "atelectasis", side="left")])
    assert not any("explained" in r for rs in got.values() for r in rs)
    # a comparison is no cause ("unchanged from prior examinations")
    s = ["Small calcified granuloma unchanged from prior examinations."]
    got = _reasons(vocab, s, [_obs("O1", "calcified_granuloma", s, 0, "calcified granuloma", severity="small")])
    assert got == {}


def test_mixed_sides(vocab: Vocab) -> None:
    s = ["Surgical clips in the right neck and left mediastinum."]
    got = _reasons(vocab, s, [_obs("O1", "surgical_clips", s, 0, "Surgical clips", side="right")])
    assert "evidence:mixed_sides(left right)->C" in got["O1"]
    s = ["Surgical clips in the right neck."]
    assert _reasons(vocab, s, [_obs("O1", "surgical_clips", s, 0, "Surgical clips", side="right")]) == {}


def test_other_body_part(vocab: Vocab) -> None:
    s = ["Nodular density projecting over the right shoulder."]
    got = _reasons(vocab, s, [_obs("O1", "nodule", s, 0, "Nodular density", side="right")])
    assert "evidence:other_part(shoulder)->C" in got["O1"]
    # a bone finding may lie there
    s = ["Degenerative changes of the right shoulder."]
    assert _reasons(vocab, s, [_obs("O1", "degenerative_changes", s, 0, "Degenerative changes", side="right")]) == {}


def test_detached_severity(vocab: Vocab) -> None:
    s = ["Large hiatal hernia is again seen in the mediastinum with new left basilar atelectasis."]
    obs = [_obs("O1", "hiatal_hernia", s, 0, "hiatal hernia", severity="large"),
           _obs("O2", "atelectasis", s, 0, "atelectasis", side="left", severity="large")]
    got = _reasons(vocab, s, obs)
    assert got == {"O2": ["evidence:detached(large)->C"]}
    # near its own mention in one of its sentences: its own
    s2 = s + ["Large left basilar atelectasis."]
    obs[1] = Observation(id="O2", finding="atelectasis", laterality="left", severity="large",
                         evidence=obs[1].evidence + _obs("x", "atelectasis", s2, 1, "atelectasis").evidence)
    assert _reasons(vocab, s2, obs) == {}


def test_slash_alternatives(vocab: Vocab) -> None:
    s = ["Scarring/atelectasis at the left base."]
    got = _reasons(vocab, s, [_obs("O1", "atelectasis", s, 0, "atelectasis", side="left")])
    assert "evidence:slash(scarring/atelectasis)->C" in got["O1"]
    # read as the alternative it is (uncertain): nothing to add
    assert _reasons(vocab, s, [_obs("O1", "atelectasis", s, 0, "atelectasis", certainty="uncertain", side="left"),
                               _obs("O2", "scarring", s, 0, "Scarring", certainty="uncertain", side="left")]) == {}


def test_criteria_switched_in_data(vocab: Vocab, monkeypatch: pytest.MonkeyPatch) -> None:
    # U8 (a sign the ontology maps to a finding) is measured but off in the packaged data
    s = ["Peribronchial cuffing also noted."]
    obs = [_obs("O1", "interstitial_edema", s, 0, "Peribronchial cuffing")]
    assert uv.load_config()["criteria"]["inferred"] == "off"
    assert _reasons(vocab, s, obs) == {}
    cfg = dict(uv.load_config())
    cfg["criteria"] = {**cfg["criteria"], "inferred": "C"}
    monkeypatch.setattr(uv, "load_config", lambda: cfg)
    assert _reasons(vocab, s, obs) == {"O1": ["evidence:inferred(peribronchial cuffing)->C"]}
    cfg["criteria"] = {"bogus": "C"}
    with pytest.raises(ValueError, match="unknown criterion 'bogus'"):
        uv.Unvouched()


def test_option_checked() -> None:
    with pytest.raises(ValueError, match="unvouched must be one of"):
        GenerateOptions(unvouched="drop").check()


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], list[dict]]:
    """The folder built with the default (omit) and with --unvouched keep (audit 0 for both)."""
    from typer.testing import CliRunner

    from radvqa.cli import app
    import pyarrow.parquet as pq

    omit = build_rows(DATA, tmp_path_factory.mktemp("omit") / "out", unvouched="omit")
    out = tmp_path_factory.mktemp("keep") / "out"
    res = CliRunner().invoke(app, ["build", "openi", "--input", str(DATA), "--out", str(out), "-q",
                                   "--unvouched", "keep"])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(app, ["audit", str(out)])
    assert res.exit_code == 0, res.output
    keep = [r for f in sorted((out / "qa").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    return omit, keep


def test_real_reports_keep_states_with_reason(builds) -> None:
    _, keep = builds
    cases = {
        # "Prominent right perihilar density consistent with lymphadenopathy, previously partially
        # demonstrated XXXX abdomen and pelvis XXXX" -> "There is right lung opacity" (round 14:
        # "pelvis" is a never-chest word too; round 15: the density "consistent with
        # lymphadenopathy" is the node, no lung opacity: the lymphadenopathy carries the reason)
        726: ("lymphadenopathy", "evidence:other_part(abdomen pelvis)->C"),
        # "Asymmetric right medial apical opacity which may be attributable to the sternoclavicular joint"
        123: ("right lung opacity", "evidence:explained(attributable to)->C"),
        # "A right internal jugular XXXX this catheter has been exchanged for a large XXXX left
        # internal jugular central venous catheter"
        1936: ("left central venous catheter", "evidence:mixed_sides(left right)->C"),
        # "mild aortic ectasia/tortuosity" -> "There is a tortuous aorta" (round 26: the slash names
        # one finding twice, unvouched.yaml ``slash_same``: no U6; the sentence's "bilateral hilar
        # fullness nonspecific in appearance" still leaves a word unread)
        867: ("tortuous aorta", "evidence:unread(nonspecific)->C"),
        # "Spondylosis of the midthoracic spine with large anterior osteophyte formations"
        3960: ("degenerative changes of the spine", "evidence:unread(midthoracic formations)->C"),
    }
    for n, (said, why) in cases.items():
        rows = [r for r in rows_of(keep, n) if r["polarity"] == "positive" and said in r["answer"].lower()]
        assert rows, n
        assert all(r["grade"] == "C" and why in r["grade_reasons"] for r in rows), (n, rows[0]["grade_reasons"])


def test_real_reports_omit_blocks_the_family(builds) -> None:
    omit, keep = builds
    for n, said in ((726, "lymphadenopathy"), (123, "right lung opacity"), (867, "tortuous aorta")):
        assert any(said in r["answer"].lower() for r in rows_of(keep, n))
        assert not any(said in r["answer"].lower() for r in rows_of(omit, n)), n
    # CXR726's lungs are neither called normal nor free of opacity, the study not normal
    for r in rows_of(omit, 726):
        low = r["answer"].lower()
        assert "no lung opacity" not in low and "lung fields is normal" not in low, r["answer"]
        assert not (r["question_type"] in ("B03_is_abnormal", "B04_is_normal") and "normal" in low
                    and "abnormal" not in low), r["answer"]
    # a plainly read finding stays: CXR197's granuloma "unchanged from prior examinations"
    assert any("calcified granuloma" in r["answer"].lower() and r["polarity"] == "positive"
               for r in rows_of(omit, 197))
