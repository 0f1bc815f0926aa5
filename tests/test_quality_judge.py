"""`radvqa grade`: the per-criterion judge pass over a built dataset, against a local
OpenAI-compatible server started here on loopback (127.0.0.1) (real sockets, http.server in a thread)."""

from __future__ import annotations

import json
import shutil
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")

from typer.testing import CliRunner  # noqa: E402

from radvqa.io import read_qa, read_scene_graphs  # noqa: E402
from radvqa.io.validate import validate  # noqa: E402
from radvqa.quality.judge import CriteriaJudge, load_prompt, parse_verdicts  # noqa: E402
from radvqa.quality.regrade import GradeError, grade_dataset  # noqa: E402

ALL_GOOD = {"entailment": "aligned", "relevance": "relevant", "completeness": "complete",
            "question_clarity": "clear", "answer_clarity": "clear"}


class FakeJudge:
    """Canned replies: rows whose question names a pneumothorax are 'contradicting' (-> D), rows
    naming an effusion 'incomplete' (-> B), everything else all-good. ``script`` overrides the next
    replies: an int is an HTTP status, a str a raw message content."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.script: list[int | str] = []
        self.garbage = False
        self.reject_schema = False
        self.lock = threading.Lock()
        judge = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with judge.lock:
                    judge.bodies.append(body)
                    step = judge.script.pop(0) if judge.script else None
                if isinstance(step, int):
                    return self._send(step, {"error": {"message": "server busy"}})
                if judge.reject_schema and "response_format" in body:
                    return self._send(400, {"error": {"message": "response_format not supported"}})
                user = body["messages"][-1]["content"]
                q = user.split("Question: ", 1)[1].split("\n", 1)[0].lower()
                v = dict(ALL_GOOD)
                if "pneumothorax" in q:
                    v["entailment"] = "contradicting"
                elif "effusion" in q:
                    v["completeness"] = "incomplete"
                content = step if isinstance(step, str) else ("{not json" if judge.garbage else json.dumps(v))
                self._send(200, {"choices": [{"message": {"role": "assistant", "content": content}}]})

            def _send(self, code, obj):
                out = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *a):  # quiet
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.srv.server_port}/v1"


@pytest.fixture
def server():
    s = FakeJudge()
    yield s
    s.srv.shutdown()
    s.srv.server_close()


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    from radvqa.run import build

    from radvqa.generate import GenerateOptions

    out = tmp_path_factory.mktemp("judge") / "built"
    # the sample's rows as before round 10 (--unvouched keep): the first 300 rows the judge reads
    # then hold pneumothorax and effusion questions, whose grades the fake judge lowers
    build(out=str(out), shard_studies=16, generate=GenerateOptions(unvouched="keep"))
    return out


def _copy(built: Path, tmp_path: Path) -> Path:
    d = tmp_path / "ds"
    shutil.copytree(built, d)
    return d


@pytest.fixture(autouse=True)
def _no_card(monkeypatch):
    """Redrawing the dataset card's plot (matplotlib) costs about a second per pass."""
    import radvqa.io.card as card

    monkeypatch.setattr(card, "write_plot", lambda out, counts: None)


def _judge(server: FakeJudge, tmp_path: Path, **kw) -> CriteriaJudge:
    j = CriteriaJudge(server.url, "tiny-judge", cache_dir=tmp_path / "cache", backoff_base_s=0.01, **kw)
    return j


def test_pass_lowers_grades_as_mapped_and_counts_add_up(built, tmp_path, server):
    src = _copy(built, tmp_path)
    before = read_qa(src)
    sgs = {s.study_id: s for s in read_scene_graphs(src)}
    out = tmp_path / "graded"
    j = _judge(server, tmp_path)
    sec = grade_dataset(src, j, out, limit=300, concurrency=4)
    after = read_qa(out)
    # same rows, same order, same schema
    assert [q.qa_id for q in after] == [q.qa_id for q in before]
    no_report = {q.qa_id for q in before if sgs[q.study_id].report is None}
    assert no_report, "the sample has label-only studies"
    assert sec["not_applicable"] == len(no_report)
    # rows whose prompt is byte-identical to an earlier row's (same report, question and answer) are
    # answered from the cache: every judged row is either a request or a cache hit
    assert sec["judged"] == 300 and sec["failed"] == 0
    assert sec["requests"] == len(server.bodies) and sec["requests"] + sec["from_cache"] == 300
    assert sec["requests"] >= 290
    assert sec["rows"] == len(before) == sec["judged"] + sec["failed"] + sec["not_applicable"] + sec["not_judged_limit"]
    assert sum(sec["grades_before"].values()) == sum(sec["grades_after"].values()) == len(before)
    lowered = 0
    for b, a in zip(before, after):
        if a.qa_id in no_report:
            assert a.grade == b.grade and a.grade_reasons == [*b.grade_reasons, "judge:not_applicable"]
            continue
        judged = [r for r in a.grade_reasons if r.startswith("judge:")]
        if not judged:
            assert a.grade == b.grade  # beyond --limit: untouched
            continue
        assert len(judged) == 5 and a.grade_reasons[:len(b.grade_reasons)] == b.grade_reasons
        q = a.question.lower()
        if "pneumothorax" in q:
            assert a.grade == "D" and "judge:entailment:contradicting->D" in judged
        elif "effusion" in q:
            assert a.grade == ("B" if b.grade in ("A++", "A+", "A", "B") else b.grade)
            assert "judge:completeness:incomplete->B" in judged
        else:
            assert a.grade == b.grade and "judge:entailment:aligned->A++" in judged
        lowered += a.grade != b.grade
    assert sec["lowered"] == lowered > 0
    # the requests: model, temperature 0, schema, the report with the cited sentences marked
    body = server.bodies[0]
    assert body["model"] == "tiny-judge" and body["temperature"] == 0
    assert body["response_format"]["type"] == "json_schema"
    assert set(body["response_format"]["json_schema"]["schema"]["required"]) == set(ALL_GOOD)
    first = next(q for q in after if any(r.startswith("judge:entailment") for r in q.grade_reasons))
    # concurrency 4: requests arrive in any order; one of them is this row's, with its report
    sg = sgs[first.study_id]
    cited = [p.split(": ", 1)[1] for p in first.provenance if p[:1] == "S" and p[1:3].isdigit()]
    assert cited

    def is_this_row(u: str) -> bool:
        return (f"Question: {first.question}\nAnswer: {first.answer}\n" in u
                and all(s.text in u for s in sg.report.sentences) and all(f"[[{c}]]" in u for c in cited))

    assert any(is_this_row(b["messages"][-1]["content"]) for b in server.bodies)
    # manifest section and a valid dataset
    m = json.loads((out / "manifest.json").read_text())
    assert m["judge"]["model"] == "tiny-judge" and m["judge"]["prompt_version"] == load_prompt().version
    assert m["counts"]["grades"] == sec["grades_after"]
    assert json.loads((src / "manifest.json").read_text()).get("judge") is None  # source untouched
    rep = validate(out)
    assert rep.ok, rep.errors


def test_500_then_ok_is_retried(built, tmp_path, server):
    src = _copy(built, tmp_path)
    server.script = [500, 503]
    sec = grade_dataset(src, _judge(server, tmp_path), tmp_path / "o", limit=3, concurrency=1)
    assert sec["judged"] == 3 and sec["failed"] == 0 and sec["requests"] == 5 == len(server.bodies)


def test_http_errors_after_retries_and_garbage_json_count_as_failed(built, tmp_path, server):
    src = _copy(built, tmp_path)
    server.garbage = True
    sec = grade_dataset(src, _judge(server, tmp_path), None, limit=4, concurrency=2)  # in place
    assert sec["failed"] == 4 and sec["judged"] == 0 and sec["lowered"] == 0
    assert len(server.bodies) == 8  # each asked once more after the invalid reply
    assert sec["failure_reasons"] == {"invalid reply": 4}
    rows = read_qa(src)
    failed = [q for q in rows if "judge:failed" in q.grade_reasons]
    assert len(failed) == 4 and all(q.grade is not None for q in failed)
    assert validate(src).ok
    # HTTP 500 on every attempt: failed after max_retries + 1 attempts, rule grade kept
    server.garbage = False
    server.script = [500] * 3
    j = _judge(server, tmp_path / "c2", max_retries=2)
    res = j.judge("Question: x\nAnswer: y")
    assert res.verdicts is None and res.error.startswith("http: HTTP 500") and j.requests == 3


def test_cache_hit_sends_no_second_request(built, tmp_path, server):
    src = _copy(built, tmp_path)
    s1 = grade_dataset(src, _judge(server, tmp_path), tmp_path / "o1", limit=10)
    n = len(server.bodies)
    assert n == 10 and s1["from_cache"] == 0
    s2 = grade_dataset(src, _judge(server, tmp_path), tmp_path / "o2", limit=10)
    assert len(server.bodies) == n and s2["from_cache"] == 10 and s2["requests"] == 0
    assert [q.grade_reasons for q in read_qa(tmp_path / "o1")] == [q.grade_reasons for q in read_qa(tmp_path / "o2")]


def test_server_without_json_schema_falls_back_to_plain_json(built, tmp_path, server):
    src = _copy(built, tmp_path)
    server.reject_schema = True
    j = _judge(server, tmp_path)
    sec = grade_dataset(src, j, tmp_path / "o", limit=3, concurrency=1)
    assert sec["judged"] == 3 and not j.use_schema
    assert "response_format" in server.bodies[0] and "response_format" not in server.bodies[-1]


def test_resume_finishes_without_judging_twice(built, tmp_path, server):
    src = _copy(built, tmp_path)
    out = tmp_path / "o"
    grade_dataset(src, _judge(server, tmp_path), out, limit=5)
    with pytest.raises(GradeError, match="--resume"):
        grade_dataset(src, _judge(server, tmp_path), out)
    other = CriteriaJudge(server.url, "other-model", cache_dir=tmp_path / "cache")
    with pytest.raises(GradeError, match="earlier pass used"):
        grade_dataset(src, other, out, resume=True)
    n = len(server.bodies)
    sec = grade_dataset(src, _judge(server, tmp_path), out, limit=20, resume=True)
    assert sec["judged"] == 25 and sec["from_cache"] == 0  # the first 5 rows are kept, not re-asked
    assert len(server.bodies) == n + 20
    rows = read_qa(out)
    assert all(sum(r.startswith("judge:entailment") for r in q.grade_reasons) <= 1 for q in rows)
    assert validate(out).ok


def test_parse_verdicts_is_strict_but_tolerant_of_fences_and_case():
    p = load_prompt()
    v = parse_verdicts('```json\n{"entailment": "Not inferable", "relevance": "relevant", "completeness": '
                       '"misleading-incomplete", "question_clarity": "clear", "answer_clarity": "minor issues"}\n```', p)
    assert v["entailment"] == "not_inferable" and v["completeness"] == "misleading_incomplete"
    with pytest.raises(ValueError):
        parse_verdicts('{"entailment": "aligned"}', p)  # criteria missing
    with pytest.raises(ValueError):
        parse_verdicts('{"entailment": "great", "relevance": "relevant", "completeness": "complete", '
                       '"question_clarity": "clear", "answer_clarity": "clear"}', p)


def test_cli_grade_in_place_then_validate(built, tmp_path, server):
    from radvqa.cli import app

    src = _copy(built, tmp_path)
    r = CliRunner().invoke(app, ["grade", str(src), "--judge-url", server.url, "--judge-model", "tiny-judge",
                                 "--limit", "8", "--cache-dir", str(tmp_path / "cache"), "--json"])
    assert r.exit_code == 0, r.output
    sec = json.loads(r.stdout[r.stdout.index("{"):])
    assert sec["judged"] == 8 and sec["requests"] == 8
    grades = Counter(q.grade for q in read_qa(src))
    assert dict(grades) == sec["grades_after"]
    v = CliRunner().invoke(app, ["validate", str(src)])
    assert v.exit_code == 0, v.output
    bad = CliRunner().invoke(app, ["grade", str(tmp_path / "nope"), "--judge-url", server.url,
                                   "--judge-model", "m", "--cache-dir", str(tmp_path / "cache")])
    assert bad.exit_code == 1 and "not found" in bad.output


def test_in_place_rerun_after_crash_never_judges_a_row_twice(built, tmp_path, server):
    """A crash between a shard's rename and the progress write: the rows already carry judge
    reasons, so --resume counts them from their reasons instead of asking again."""
    from radvqa.run.worker import state_dir

    src = _copy(built, tmp_path)
    first = grade_dataset(src, _judge(server, tmp_path), None, limit=7)
    (state_dir(src) / "judge.json").unlink()  # as if killed before the progress file was written
    n = len(server.bodies)
    sec = grade_dataset(src, _judge(server, tmp_path), None, limit=0, resume=True)
    assert len(server.bodies) == n  # nothing asked again
    assert sec["judged"] == first["judged"] == 7 and sec["not_applicable"] == first["not_applicable"]
    assert sec["grades_before"] == first["grades_before"] and sec["grades_after"] == first["grades_after"]
    rows = read_qa(src)
    assert all(q.grade_reasons.count("judge:not_applicable") <= 1 for q in rows)
