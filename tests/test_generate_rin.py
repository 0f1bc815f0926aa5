"""rin strategy (RadImageNet-style CT / MR tasks): answer style, MC options and letters, same-anatomy
same-modality distractors, closed +/- balance and polarity; on the mini ontology, on the packaged
ontology with hand-made CT / MR scene graphs, and on the bundled RadImageNet fixture build."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "data" / "generate"))
from helpers import mini_ontology, rin_sg  # noqa: E402

from radvqa.generate import GenerateOptions, Generator  # noqa: E402
from radvqa.generate.templates import TemplateError  # noqa: E402
from radvqa.generate.vocab import Vocab  # noqa: E402
from radvqa.ontology import load_ontology  # noqa: E402

ROOT = Path(__file__).parent
MODALITY_FIXTURE = ROOT / "data" / "generate" / "rin_modality"
TYPES = {"abnormality", "anatomy_open", "anatomy_closed_pos", "anatomy_closed_neg", "anatomy_mc",
         "pathology_open", "pathology_closed_pos", "pathology_closed_neg", "pathology_mc"}
KNEE = {"anterior cruciate ligament tear", "meniscal tear", "bone contusion", "joint effusion",
        "cartilage lesion", "no pathology seen"}
# one sentence frame per task (the style fix: no "D) knee." next to "The answer is B: knee.")
STYLE = {
    "abnormality": r"^(Yes, this \S+ image shows an abnormality: .+|No, this \S+ image shows no abnormality)\.$",
    "anatomy_open": r"^This \S+ image shows the .+\.$",
    "anatomy_closed_pos": r"^Yes, this \S+ image shows the .+\.$",
    "anatomy_closed_neg": r"^No, this \S+ image shows the .+, not the .+\.$",
    "anatomy_mc": r"^The answer is [ABCD]: this \S+ image shows the .+\.$",
    "pathology_open": r"^This \S+ image of the .+ shows .+\.$",
    "pathology_closed_pos": r"^Yes, this \S+ image (of the .+ )?shows .+\.$",
    "pathology_closed_neg": r"^No, this \S+ image shows .+\.$",
    "pathology_mc": r"^The answer is [ABCD]: this \S+ image shows .+\.$",
}


def _mini_rows(n: int = 800) -> list:
    g = Generator(mini_ontology(), GenerateOptions(strategies=("rin",)))
    rows = []
    paths = ["acl_tear", "meniscal_tear", None, "bone_contusion"]
    for i in range(n):
        rows += g.generate(rin_sg(study_id=f"radimagenet:MR/knee/{i}.png", pathology=paths[i % 4]))
    return rows


def _chi2_uniform(counts: Counter, keys: str = "ABCD") -> float:
    n = sum(counts[k] for k in keys)
    e = n / len(keys)
    return sum((counts[k] - e) ** 2 / e for k in keys)


def test_all_tasks_present_answers_right_and_one_style_per_task():
    rows = _mini_rows(8)
    assert {r.question_type for r in rows} == TYPES
    for r in rows:
        assert re.match(STYLE[r.question_type], r.answer), (r.question_type, r.answer)
        assert r.answer[0].isupper() and r.answer.endswith(".")
        if r.question_type == "anatomy_open":
            assert r.answer_short == "knee" and "knee" not in r.question
        if r.question_type == "anatomy_closed_pos":
            assert r.answer_short == "yes" and "knee" in r.question and r.polarity == "positive"
        if r.question_type == "anatomy_closed_neg":
            assert r.answer_short == "no" and "knee" not in r.question and r.polarity == "negative"
        if r.question_type == "pathology_closed_pos":
            assert r.answer_short == "yes" and r.polarity == "positive"
        if r.question_type == "pathology_closed_neg":
            assert r.answer_short == "no" and r.polarity == "negative"
        if r.question_type == "pathology_open":
            assert r.answer_short == (r.answer_parts[0].tag if r.findings else "no pathology seen")
        if r.question_type.endswith("_mc"):
            assert r.answer_short in "ABCD" and len(r.answer_short) == 1
    normal = [r for r in rows if r.question_type == "abnormality" and r.answer_short == "no"]
    assert normal and all(r.polarity == "negative" and not r.findings for r in normal)


def test_closed_yes_no_balanced_per_task():
    rows = _mini_rows(200)
    for task in ("anatomy", "pathology"):
        c = Counter(r.answer_short for r in rows if r.question_type.startswith(f"{task}_closed"))
        assert c["yes"] == c["no"] > 0, (task, c)
        pol = Counter(r.polarity for r in rows if r.question_type.startswith(f"{task}_closed"))
        assert pol["positive"] == c["yes"] and pol["negative"] == c["no"]
    # a normal image's closed+ is about being free of pathology, answered yes
    npos = [r for r in rows if r.question_type == "pathology_closed_pos" and not r.findings]
    assert npos and all(r.template_id == "rin.pathology_closed_pos_normal" for r in npos)
    assert all("no pathology" in r.answer for r in npos)


def test_mc_letters_uniform_options_distinct_same_anatomy():
    rows = _mini_rows()
    mc = [r for r in rows if r.question_type in ("anatomy_mc", "pathology_mc")]
    assert len(mc) > 1000
    for kind in ("anatomy_mc", "pathology_mc"):
        sub = [r for r in mc if r.question_type == kind]
        c = Counter(r.answer_short for r in sub)
        assert set(c) == {"A", "B", "C", "D"}
        assert _chi2_uniform(c) < 16.27, (kind, c)  # chi-square, 3 dof, p = 0.001
        for letter in "ABCD":
            assert abs(c[letter] / len(sub) - 0.25) <= 0.05, (kind, c)
    for r in mc:
        assert r.choices and len(r.choices) == 4 and len(set(r.choices)) == 4
        correct = r.choices["ABCD".index(r.answer_short)]
        assert r.answer.startswith(f"The answer is {r.answer_short}:")
        for letter, opt in zip("ABCD", r.choices):
            assert f"{letter}) {opt[:1].upper()}{opt[1:]}" in r.question
        if r.question_type == "pathology_mc":
            assert set(r.choices) <= KNEE  # distractors from the same anatomy
            assert "no pathology seen" in r.choices
            if r.findings == ["acl_tear"]:
                assert correct == "anterior cruciate ligament tear" and correct in r.answer
            if not r.findings:
                assert correct == "no pathology seen" and r.answer.endswith("shows no pathology.")
        else:
            assert correct == "knee" and correct in r.answer


def test_vocab_reads_anatomy_pathologies():
    v = Vocab(mini_ontology())
    assert v.anatomy_pathologies["knee"] == ("acl_tear", "bone_contusion", "cartilage_lesion", "joint_effusion",
                                             "meniscal_tear")
    assert "MR" in v.amodalities["knee"]


def test_rin_does_not_apply_to_chest_reports():
    from helpers import cxr_report_sg
    g = Generator(mini_ontology(), GenerateOptions(strategies=("rin",)))
    assert g.generate(cxr_report_sg()) == []


# ---- packaged ontology, hand-made CT / MR scene graphs ------------------------------------------

@pytest.fixture(scope="module")
def onto():
    return load_ontology()


def _gen(onto, template_dir: Path | None = None) -> Generator:
    tdir = str(template_dir) if template_dir else None
    return Generator(onto, GenerateOptions(strategies=("rin",), template_dir=tdir))


def _study(mod: str, anat: str, path: str | None, i: int):
    return rin_sg(study_id=f"radimagenet:{mod}/{anat}/{path or 'normal'}/{i}", anatomy=anat, pathology=path,
                  modality=mod)


def _strategy(g: Generator):
    return next(s for s in g.strategies if s.name == "rin")


def test_pools_built_once_per_modality_and_anatomy(onto):
    s = _strategy(_gen(onto))
    knee = set(s.pathology_pool("MR", "knee"))
    assert {"acl_pathology", "meniscal_abnormality"} <= knee and "liver_lesion" not in knee
    lung = set(s.pathology_pool("CT", "lung"))
    assert "nodule" in lung and not lung & knee
    assert s.pool_origin[("MR", "abdomen_pelvis")] == "config" and s.pool_origin[("CT", "lung")] == "config"
    # not in the ontology nor config yet: falls back to the anatomy (reported, see rin.yaml)
    assert s.pool_origin[("CT", "abdomen_pelvis")] == "anatomy"


def test_anatomy_mc_distractors_same_modality(onto):
    g = _gen(onto)
    v = g.vocab
    mr = {a for a in v.aname if "MR" in v.amodalities[a]}
    ct = {a for a in v.aname if "CT" in v.amodalities[a]}
    for i in range(60):
        for mod, anat, path in (("MR", "knee", "acl_pathology"), ("MR", "brain", None), ("CT", "lung", "nodule"),
                                ("CT", "abdomen_pelvis", "liver_lesion")):
            rows = g.generate(_study(mod, anat, path, i))
            (mc,) = [r for r in rows if r.question_type == "anatomy_mc"]
            ids = {a for a in v.aname if v.anatomy_name(a) in mc.choices}
            assert len(ids) == 4 and anat in ids
            if mod == "MR":
                assert ids <= mr, (mod, anat, ids)
            else:  # CT has only two other anatomies: both are always offered, the rest are CT/MR regions
                assert ct - {anat} <= ids and not ids & {"thyroid", "breast", "kidney"}
            (neg,) = [r for r in rows if r.question_type == "anatomy_closed_neg"]
            asked = [a for a in v.aname if f" the {v.anatomy_name(a)}?" in neg.question or
                     f"the {v.anatomy_name(a)} shown" in neg.question]
            assert asked and all(mod in v.amodalities[a] for a in asked)


def test_pathology_distractors_same_anatomy_and_modality(onto):
    # the fixture lists a CT abdomen/pelvis label set; MR abdomen keeps the scheme's MR labels
    g = _gen(onto, MODALITY_FIXTURE)
    s = _strategy(g)
    v = g.vocab
    ct_abd = {v.finding_name(f) for f in s.pathology_pool("CT", "abdomen_pelvis")}
    mr_abd = {v.finding_name(f) for f in s.pathology_pool("MR", "abdomen_pelvis")}
    assert len(ct_abd) == 5 and len(mr_abd) > 15 and ct_abd < mr_abd
    seen_mr_only = False
    for i in range(150):
        for mod, path in (("CT", "liver_lesion"), ("CT", None), ("MR", "liver_lesion"), ("MR", None)):
            rows = g.generate(_study(mod, "abdomen_pelvis", path, i))
            pool = ct_abd if mod == "CT" else mr_abd
            (mc,) = [r for r in rows if r.question_type == "pathology_mc"]
            assert set(mc.choices) - {"no pathology seen"} <= pool and "no pathology seen" in mc.choices
            assert len(set(mc.choices)) == 4
            if path is None:
                assert mc.choices["ABCD".index(mc.answer_short)] == "no pathology seen"
            seen_mr_only |= mod == "MR" and bool(set(mc.choices) - ct_abd - {"no pathology seen"})
            (neg,) = [r for r in rows if r.question_type == "pathology_closed_neg"]
            assert any(f" {p} in " in neg.question or f" any {p}?" in neg.question for p in pool)
    assert seen_mr_only  # MR questions do draw MR-only labels


def test_bad_modality_label_is_a_clear_error(onto, tmp_path):
    text = (MODALITY_FIXTURE / "rin.yaml").read_text().replace("renal_lesion,", "renal_lesionn,")
    (tmp_path / "rin.yaml").write_text(text)
    with pytest.raises(TemplateError, match="renal_lesionn"):
        _gen(onto, tmp_path)


def test_deterministic_for_same_seed(onto):
    a = [r.question + r.answer for r in _gen(onto).generate(_study("MR", "hip", "labral_pathology", 7))]
    b = [r.question + r.answer for r in _gen(onto).generate(_study("MR", "hip", "labral_pathology", 7))]
    assert a == b and len(a) == 9


# ---- the bundled RadImageNet fixture, end to end --------------------------------------------------

def test_fixture_build(tmp_path):
    import pyarrow.parquet as pq

    out = tmp_path / "rin"
    src = ROOT / "data" / "sources" / "radimagenet" / "radiology_ai"
    subprocess.run([sys.executable, "-m", "radvqa", "build", "radimagenet", "--input", str(src), "--out", str(out)],
                   check=True, capture_output=True)
    rows = [r for f in sorted((out / "qa").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert {r["question_type"] for r in rows} == TYPES
    assert len({r["study_id"] for r in rows}) == 9 and len({r["qa_id"] for r in rows}) == len(rows)
    for r in rows:
        assert re.match(STYLE[r["question_type"]], r["answer"]), r["answer"]
        if r["question_type"].endswith("_mc"):
            assert len(r["choices"]) == 4 and len(set(r["choices"])) == 4
            assert r["answer_short"] in ("A", "B", "C", "D")
        if "_closed_" in r["question_type"]:
            assert r["polarity"] == ("positive" if r["answer_short"] == "yes" else "negative")
    for task in ("anatomy", "pathology"):
        c = Counter(r["answer_short"] for r in rows if r["question_type"].startswith(f"{task}_closed"))
        assert c["yes"] == c["no"] == 9
    normal = [r for r in rows if r["question_type"] == "pathology_mc" and "/normal/" in r["study_id"]]
    assert len(normal) == 2
    assert all(r["choices"]["ABCD".index(r["answer_short"])] == "no pathology seen" for r in normal)
    ct_mc = [r for r in rows if r["question_type"] == "anatomy_mc" and r["study_id"].startswith("radimagenet:CT/")]
    assert ct_mc and all({"brain", "lung", "abdomen and pelvis"} <= set(r["choices"]) for r in ct_mc)


def test_single_pathology_anatomy_asks_no_unpaired_closed_question():
    # the mini ontology's shoulder has one pathology: no distractor, so neither closed question
    # (an unpaired closed+ would tilt the yes/no balance) nor a pathology MC
    g = Generator(mini_ontology(), GenerateOptions(strategies=("rin",)))
    rows = g.generate(rin_sg(study_id="radimagenet:MR/shoulder/rct/1", anatomy="shoulder",
                             pathology="rotator_cuff_tear"))
    types = {r.question_type for r in rows}
    assert not types & {"pathology_closed_pos", "pathology_closed_neg", "pathology_mc"}
    assert {"abnormality", "pathology_open", "anatomy_closed_pos", "anatomy_closed_neg"} <= types
    # a normal shoulder can still be asked about that one pathology (no), paired with its closed+;
    # a 4-option MC would need three distractors
    rows = g.generate(rin_sg(study_id="radimagenet:MR/shoulder/normal/1", anatomy="shoulder", pathology=None))
    c = Counter(r.answer_short for r in rows if r.question_type.startswith("pathology_closed"))
    assert c == Counter({"yes": 1, "no": 1})
    assert "pathology_mc" not in {r.question_type for r in rows}
