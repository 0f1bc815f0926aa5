"""Quality criteria and grades (A++..D) with named reasons; judge hook failures are counted."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "data" / "generate"))
from helpers import cxr_report_sg, mini_ontology  # noqa: E402

from radvqa.generate import GenerateOptions, Generator  # noqa: E402
from radvqa.model import Box, Observation  # noqa: E402
from radvqa.quality import box_valid, grade_at_least, obs_grade, regrade  # noqa: E402
from radvqa.quality.criteria import A, A_PP, B  # noqa: E402
from radvqa.quality.judge import judge_pass, parse_grade  # noqa: E402

F = {"pleural_effusion": 1}
R = {"left_lung": 1}


def test_obs_criteria():
    o = Observation(id="O1", finding="pleural_effusion", regions=["left_lung"])
    assert obs_grade(o, F, R, "box", 1, 1) == (A_PP, ())
    g, rs = obs_grade(o, F, R, "box", 1, 2)
    assert g == A and rs == ("localization:incomplete->A",)
    g, rs = obs_grade(Observation(id="O1", finding="pleural_effusion"), F, R, "fallback", 1, 1)
    assert g == A and rs == ("localization:fallback->A",)
    # no box at all lowers only rows that ask where (LOCALIZATION_NONE, added by the generator)
    assert obs_grade(Observation(id="O1", finding="pleural_effusion"), F, R, "none", 0, 1) == (A_PP, ())
    g, rs = obs_grade(Observation(id="O1", finding="made_up", regions=["nowhere"]), F, R, "none", 0, 1)
    assert g == A and "entities:unresolved->A" in rs and "regions:unresolved->A" in rs
    g, rs = obs_grade(Observation(id="O1", finding="pleural_effusion", certainty="uncertain"), F, R, "none", 0, 1)
    assert g == B and rs == ("evidence:hedged->B",)
    # negatives are not penalised for having no location
    assert obs_grade(Observation(id="O1", finding="pleural_effusion", certainty="absent"), F, R, "none", 0, 1)[0] == A_PP


def test_box_validity():
    sizes = {"i": (100, 100)}
    assert box_valid(Box(image_id="i", x1=0, y1=0, x2=100, y2=100), sizes)
    assert not box_valid(Box(image_id="i", x1=10, y1=0, x2=5, y2=10), sizes)
    assert not box_valid(Box(image_id="i", x1=0, y1=0, x2=101, y2=10), sizes)
    assert not box_valid(Box(image_id="other", x1=0, y1=0, x2=1, y2=1), sizes)


def test_regrade_catches_bad_box_and_leaked_answer():
    g = Generator(mini_ontology(), GenerateOptions(strategies=("qba",)))
    rows = g.generate(cxr_report_sg())
    sizes = {"openi:CXR1/i1": (1000, 1000), "openi:CXR1/i2": (1000, 1000)}
    for r in rows:  # generated rows pass the row checks unchanged
        assert regrade(r, sizes) == (r.grade, r.grade_reasons)
    r = next(r for r in rows if r.boxes)
    grade, reasons = regrade(r, {k: (10, 10) for k in sizes})
    assert grade == "D" and "boxes:invalid->D" in reasons
    where = next(r for r in rows if r.question_type == "D03_where_is_finding")
    where.question = f"Is it in {where.answer_short}?"
    assert regrade(where, sizes)[0] == "D"


def test_grade_at_least():
    assert grade_at_least("A++", "A") and grade_at_least("A", "A") and not grade_at_least("B", "A")
    assert not grade_at_least(None, "D")


def test_judge_pass_counts_failures_never_silently_ungraded():
    g = Generator(mini_ontology(), GenerateOptions(strategies=("qba",)))
    rows = g.generate(cxr_report_sg())[:6]
    before = [r.grade for r in rows]
    calls = iter(["A++", "C", "garbage", RuntimeError("timeout"), "B", "A"])

    def judge(qa, report):
        x = next(calls)
        if isinstance(x, Exception):
            raise x
        return parse_grade(x) if x != "garbage" else "garbage"

    st = judge_pass(rows, judge, {})
    assert st.judged == 4 and st.failed == 2 and len(st.errors) == 2
    assert rows[1].grade == "C" and "judge:C" in rows[1].grade_reasons
    assert rows[2].grade == before[2] and "judge:failed" in rows[2].grade_reasons
    assert all(r.grade is not None for r in rows)
    assert parse_grade("Grade: A+") == "A+" and parse_grade("B") == "B"


def test_indication_quoting_change_words_is_graded_b():
    import msgspec

    from radvqa.model import Indication

    g = Generator(mini_ontology(), GenerateOptions(strategies=("qba",)))
    sg = cxr_report_sg()
    sg = msgspec.structs.replace(sg, indication=Indication(text="Increased dyspnea, evaluate for effusion",
                                                           evaluate=["pleural_effusion"]))
    [row] = [r for r in g.generate(sg) if r.question_type == "A_indication"]
    assert row.grade == "B" and "change_text:left->B" in row.grade_reasons
    assert row.provenance[0] == "indication: Increased dyspnea, evaluate for effusion"


def test_openai_judge_against_a_local_server():
    """The judge hook speaks the OpenAI chat protocol (a real socket, a server started here)."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from radvqa.quality.judge import openai_judge

    seen = []

    class H(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            out = json.dumps({"choices": [{"message": {"content": "Grade: B"}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *a):  # quiet
            pass

    srv = HTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        g = Generator(mini_ontology(), GenerateOptions(strategies=("qba",)))
        rows = [r for r in g.generate(cxr_report_sg()) if r.grade == "A++"][:2]
        judge = openai_judge(f"http://127.0.0.1:{srv.server_port}/v1", "tiny-judge")
        st = judge_pass(rows, judge, {"openi:CXR1": "There is a small left pleural effusion."})
    finally:
        srv.shutdown()
    assert st.judged == 2 and st.failed == 0 and st.lowered == 2
    assert all(r.grade == "B" and "judge:B" in r.grade_reasons for r in rows)
    assert seen[0]["model"] == "tiny-judge" and seen[0]["temperature"] == 0
    assert "small left pleural effusion" in seen[0]["messages"][0]["content"]
