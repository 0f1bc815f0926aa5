"""The generator's speed shortcuts give exactly what the plain code paths give: cached implied
negatives vs ``build_fact``, prototype rows vs full ``QA`` construction, cached balance counts vs
the arithmetic, cached finding words across studies."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).parent / "data" / "generate"))
from helpers import cxr_report_sg, mini_ontology, normal_report_sg  # noqa: E402

from radvqa.generate import GenerateOptions, Generator, make_qa_id  # noqa: E402
from radvqa.generate.engine import StudyCtx  # noqa: E402
from radvqa.generate.facts import Fact, build_fact, implied_negative  # noqa: E402
from radvqa.model import AnswerPart, Observation, to_json  # noqa: E402


@pytest.fixture(scope="module")
def gen() -> Generator:
    return Generator(mini_ontology(), GenerateOptions(strategies=("qba",)))


def _same_fact(a: Fact, b: Fact) -> None:
    for slot in Fact.__slots__:
        va, vb = getattr(a, slot), getattr(b, slot)
        assert va == vb, slot


@pytest.mark.parametrize("boxes", [True, False])
def test_implied_negative_equals_build_fact(gen, boxes):
    sg = cxr_report_sg(region_boxes=boxes)
    for fid in sorted(gen.vocab.fname):
        # two contexts of one study: same seeded streams, so the same wording draw
        c1, c2 = StudyCtx(gen, sg, "train"), StudyCtx(gen, sg, "train")
        fast = implied_negative(c1, fid)
        plain = build_fact(c2, Observation(id="", finding=fid, certainty="absent", source="default",
                                           from_report=False), implied=True)
        _same_fact(fast, plain)
        assert c1.rng.random() == c2.rng.random()  # the stream advanced alike
    # a second study reuses the cache and still gets its own boxes and lists
    a = implied_negative(StudyCtx(gen, cxr_report_sg(region_boxes=True), "train"), "pneumothorax")
    b = implied_negative(StudyCtx(gen, cxr_report_sg(region_boxes=False), "train"), "pneumothorax")
    assert a.boxes and not b.boxes
    assert a.main.boxes is a.boxes and a.regions is not b.regions


def test_fact_words_cache_does_not_leak_between_studies(gen):
    obs = Observation(id="O1", finding="pleural_effusion", certainty="present", laterality="bilateral",
                      severity="small")
    sg = normal_report_sg()
    f1 = build_fact(StudyCtx(gen, sg, "train"), obs)
    f2 = build_fact(StudyCtx(gen, sg, "train"), obs)  # served from Generator.fact_words
    _same_fact(f1, f2)
    assert f1.phrase == "small bilateral pleural effusions" and f1.be == "are"
    neg = build_fact(StudyCtx(gen, sg, "train"), msgspec.structs.replace(obs, certainty="absent"))
    assert neg.tag.startswith("no ") and neg.phrase != f1.phrase  # absent: not pluralised


def test_prototype_rows_equal_full_construction(gen):
    sg = cxr_report_sg()
    tpl = gen.templates["qba.D02_has_finding"]
    part = AnswerPart(part_type="main", text="There is a small effusion.", tag="pleural effusion")
    rows = []
    for force_plain in (False, True):
        ctx = StudyCtx(gen, sg, "train")
        for i in range(3):  # the second and third rows reuse the prototype and the hash prefix
            # a ``pair`` (no reference, the study's own images) forces the full construction
            ctx.render_emit(tpl, i, {"finding": "X"}, f"slot{i}", "present", {"phrase": "x", "location": "y"},
                            [part], (0, ()), ["S01: x"], short="yes", polarity="positive",
                            findings=["pleural_effusion"], regions=["left_lung"],
                            pair=(None, ctx.image_ids, ctx.image_paths) if force_plain else None)
        rows.append(ctx.rows)
    fast, plain = rows
    assert [to_json(r) for r in fast] == [to_json(r) for r in plain]
    assert fast[2].qa_id == make_qa_id(sg.study_id, tpl.id, "slot2", 2)
    assert fast[0] is not fast[1] and fast[1].question_type == "D02_has_finding"


def test_balance_counts_cached_equal_computed(gen):
    strat = gen.strategies[0]
    tpl = gen.templates["qba.D02_has_finding"]
    for cap in (None, 1, 3, 6):
        for npos in range(4):
            for nneg in range(4):
                for ns in range(3):
                    pos, neg, smp = list(range(npos)), list(range(10, 10 + nneg)), list(range(20, 20 + ns))
                    got = strat._balance(pos, neg, cap, tpl, smp)
                    again = strat._balance(pos, neg, cap, tpl, smp)  # from the cache
                    a, b, c = strat._balance_counts(npos, nneg, ns, cap, tpl)
                    assert got == again == pos[:a] + neg[:b] + smp[:c]
                    if cap is not None:
                        assert len(got) <= cap


# kept wordings (engine.fill / StudyCtx.emit, facts.build_fact's statement) and the one-pass
# unnamed-finding scan: the same text as filling every wording afresh -------------------------

def test_fill_equals_format_map():
    from radvqa.generate.engine import fill

    slots = {"finding": "pleural effusion", "region": "left lung"}
    lvars = {"list": "a nodule", "n": "1", "region": "right lung"}  # lvars win over slots
    for w in ("Yes.", "Braces {{kept}}.", "Is there any {finding}?", "{finding} in the {region}?",
              "{list} ({n}) in the {region}; {finding}.", "{finding}, {finding} again"):
        for _ in range(2):  # the first fills, the second is kept
            assert fill(w, slots, lvars) == w.format_map({**slots, **lvars})
            if "{list}" not in w:
                assert fill(w, slots) == w.format_map(slots)
    assert fill("{finding}", {"finding": "nodule"}) == "nodule"  # another value, another entry
    with pytest.raises(KeyError):
        fill("{missing}", slots, lvars)


class _NoKeep(dict):
    """A cache that keeps nothing: every wording is filled afresh (the plain path)."""

    def __setitem__(self, key, value):
        pass


def _synthetic_studies(onto, n):
    import importlib.util
    import random

    spec = importlib.util.spec_from_file_location("bench_generate", Path(__file__).parent.parent / "benchmarks"
                                                  / "generate.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rng = random.Random(7)
    chest, devices = bench._findings(onto)
    regions = sorted(onto.regions)
    return [bench.report_sg(i, onto, rng, chest, devices, regions) for i in range(n)]


def test_kept_wordings_give_the_plain_rows(monkeypatch):
    from radvqa.generate import engine
    from radvqa.ontology import load_ontology

    onto = load_ontology()
    studies = _synthetic_studies(onto, 60)
    enc = msgspec.json.Encoder()

    def rows(keep: bool) -> list[bytes]:
        g = Generator(onto, GenerateOptions(seed=3))
        if not keep:
            g.fact_texts = _NoKeep()
        return [enc.encode(r) for sg in studies for r in g.generate(sg)]

    monkeypatch.setattr(engine, "_FILLED", _NoKeep())
    plain = rows(False)
    monkeypatch.setattr(engine, "_FILLED", {})
    first = rows(True)   # fills and keeps
    again = rows(True)   # a new generator: the statements refilled, the row wordings kept
    assert len(plain) > 1000
    assert first == plain and again == plain


def test_unnamed_scan_reads_every_observed_sentence_once():
    # the one pass finds the unnamed findings and the past operation wherever they stand among
    # the observed sentences, and reads nothing of a section it does not observe (INDICATION)
    from radvqa.generate.unnamed import UnnamedFindings
    from radvqa.model import Report, Sentence
    from radvqa.ontology import load_ontology

    un = UnnamedFindings(Generator(load_ontology()).vocab)
    texts = ["Irregularity of the right fifth and sixth ribs.", "No rib irregularity.",
             "Prior cholecystectomy.", "Lungs are clear.", "Stable postsurgical change of the left clavicle."]
    ribs, _, _ = un.scan(Report(text=texts[0], sentences=[Sentence(id="S1", section="FINDINGS", start=0,
                                                                   end=len(texts[0]), text=texts[0])]))
    clavicle = {"clavicle", "clavicles", "left_clavicle"}
    for k in range(len(texts)):
        order = texts[k:] + texts[:k]
        for section in ("FINDINGS", "IMPRESSION", "INDICATION"):
            sents = [Sentence(id=f"S{i}", section=section, start=0, end=len(t), text=t) for i, t in enumerate(order)]
            subs, regs, op = un.scan(Report(text=" ".join(order), sentences=sents))
            if section == "INDICATION":
                assert (subs, regs, op) == (set(), set(), False)
            else:
                assert "ribs" in regs and regs & clavicle and subs == ribs | {"BONE"} and op is True
    assert un.scan(None) == (set(), set(), False)


def test_kept_fact_statements_follow_every_word():
    # the kept statement changes with the side, place, certainty and finding: each built twice
    # (filled, then kept) equals the statement filled afresh
    from radvqa.ontology import load_ontology

    onto = load_ontology()
    kept, plain = Generator(onto), Generator(onto)
    plain.fact_texts = _NoKeep()
    sg = normal_report_sg()
    seen = set()
    for fid in ("pneumothorax", "pleural_effusion", "nodule"):
        for side in (None, "left", "right", "bilateral"):
            for regions in ([], ["left_apical_zone"], ["right_lung"]):
                for c in ("absent", "present", "uncertain"):
                    obs = Observation(id="O1", finding=fid, certainty=c, regions=regions, laterality=side)
                    for _ in range(2):
                        a = build_fact(StudyCtx(kept, sg, "train"), obs).main.text
                        b = build_fact(StudyCtx(plain, sg, "train"), obs).main.text
                        assert a == b
                    seen.add(a)
    assert "There is no left pneumothorax in the left apical zone." in seen
    assert "There is no left pneumothorax." in seen and len(seen) > 30
