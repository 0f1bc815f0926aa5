"""The generator on real data: the package's bundled sample (unmodified OpenI reports, NIH
ChestX-ray14 labels, boxes and follow-ups; see src/radvqa/data/sample/PROVENANCE) through the real
ontology, sources, extractor and localizer -- the acceptance checks of issue 5 at small scale."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from radvqa.generate import GenerateOptions, Generator
from radvqa.model import Study
from radvqa.splits import check_leakage


@pytest.fixture(scope="module")
def built():
    try:
        from radvqa.extract import get_extractor
        from radvqa.localize import build_scene_graph
        from radvqa.ontology import load_ontology
        from radvqa.sources import get_source, sample_inputs

        onto = load_ontology()
        recs = list(get_source("sample").iter_records(sample_inputs(), ontology=onto))
    except Exception as exc:  # another area not ready: say so instead of failing this area's tests
        pytest.skip(f"pipeline stages not available: {exc}")
    ex = get_extractor("rules", ontology=onto)
    sgs = []
    for st in recs:
        if isinstance(st, Study):
            e = ex.extract(st.report_text, st.id) if st.report_text else None
            sg, _ = build_scene_graph(st, e, ontology=onto)
            if sg is not None:
                sgs.append(sg)
    by_patient = defaultdict(list)
    for sg in sgs:
        by_patient[sg.patient_id].append(sg)
    gen = Generator(onto, GenerateOptions(seed=0))
    rows = []
    for pid in sorted(by_patient):
        prev = None
        for sg in sorted(by_patient[pid], key=lambda s: (s.study_time is None, s.study_time or "", s.study_id)):
            prior = prev if (prev is not None and prev.study_time and sg.study_time
                             and prev.study_time < sg.study_time) else None
            rows += gen.generate(sg, prior)
            prev = sg
    return onto, sgs, rows, gen


def test_acceptance_on_the_bundled_sample(built):
    onto, sgs, rows, gen = built
    assert rows
    assert len({r.qa_id for r in rows}) == len(rows)
    qba = [r for r in rows if r.strategy == "qba"]
    assert len({r.question_type for r in qba}) >= 25
    assert sum(len(r.answer_parts) > 1 for r in qba) / len(qba) >= 0.2
    vindr = [r for r in rows if r.strategy == "vindr"]
    assert {r.question_type for r in vindr} == {"where", "what", "is_there", "how_many", "which", "yes_no"}
    assert abs(sum(r.polarity == "positive" for r in vindr) / len(vindr) - 0.417) <= 0.06
    diff = [r for r in rows if r.strategy == "diff"]
    assert diff and all(r.reference_study_id for r in diff)
    check_leakage((r.patient_id, r.image_ids, r.split) for r in rows)
    assert not gen.take_rejects()


def test_rows_agree_with_their_scene_graph(built):
    onto, sgs, rows, gen = built
    by_id = {sg.study_id: sg for sg in sgs}
    for r in rows:
        sg = by_id[r.study_id]
        sizes = {im.id: (im.width, im.height) for im in sg.images}
        if r.reference_study_id:
            sizes.update({im.id: (im.width, im.height) for im in by_id[r.reference_study_id].images})
        for b in r.boxes:  # boxes lie inside the stored image they name
            w, h = sizes[b.image_id]
            assert 0 <= b.x1 < b.x2 and 0 <= b.y1 < b.y2
            assert w is None or b.x2 <= w + 1e-6
            assert h is None or b.y2 <= h + 1e-6
        if r.template_id in ("qba.D02_has_finding", "vindr.is_there"):
            fid = r.findings[0]
            # (a present reading the extractor made only in part is not stated: --unvouched omit)
            unvouched = gen.unvouched.study(sg, gen.vocab.fsub, gen.severity_words, gen.vocab.fname) \
                if gen.options.unvouched == "omit" else {}
            present = any(o.finding == fid and o.certainty == "present" and o.id not in unvouched
                          for o in sg.observations)
            assert (r.answer_short == "yes") == present, (r.study_id, r.question, r.answer)
        assert r.grade in ("A++", "A+", "A", "B", "C", "D") and r.provenance


def test_grade_distribution_has_reasons(built):
    _, _, rows, _ = built
    c = Counter(r.grade for r in rows)
    assert c["A++"] > 0
    assert all(r.grade_reasons for r in rows if r.grade != "A++")
