"""Judge criteria on the A++..D scale (CXR-QBA's LLM-judge criteria, REFERENCE.md §1), applied after
the rule-based grades.

Two layers:

* :class:`CriteriaJudge` -- one request per QA row to an OpenAI-compatible ``/chat/completions``
  endpoint with the versioned prompt ``data/judge_prompt.yaml``: temperature 0, a JSON-schema
  ``response_format`` (dropped for the rest of the run if the server rejects it with HTTP 400), one
  verdict per criterion. Transport and retries are the models area's ``OpenAIAdapter`` (429 / 5xx /
  connection errors, backoff, Retry-After); the on-disk cache is its SQLite ``PredictionCache``, keyed
  by model + prompt version + the exact messages, holding only valid verdicts. A reply that is not
  valid JSON with a known verdict for every criterion is asked once more, then counted as failed.
* ``judge_pass`` / ``openai_judge`` -- the older single-grade hook (kept for programmatic users).

The dataset pass itself (shards, reports, manifest) is :mod:`radvqa.quality.regrade`.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from radvqa.model import GRADES, QA
from radvqa.quality.criteria import GRADE_INDEX

# -- per-criterion judge ---------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgePrompt:
    version: str
    system: str
    user: str
    criteria: dict[str, dict[str, str]]  # criterion -> verdict -> best grade allowed
    questions: dict[str, str]

    def schema(self) -> dict[str, Any]:
        """JSON schema of the reply: one enum-valued string per criterion."""
        return {
            "type": "object",
            "properties": {c: {"type": "string", "enum": list(v)} for c, v in self.criteria.items()},
            "required": list(self.criteria),
            "additionalProperties": False,
        }

    def schema_text(self) -> str:
        items = list(self.criteria.items())
        lines = [f'"{c}": {" | ".join(json.dumps(x) for x in v)}{"," if i < len(items) - 1 else ""}'
                 f'  // {self.questions[c]}' for i, (c, v) in enumerate(items)]
        return "{\n  " + "\n  ".join(lines) + "\n}"


def parse_prompt(data: dict[str, Any]) -> JudgePrompt:
    for k in ("version", "system", "user", "criteria"):
        if k not in data:
            raise ValueError(f"judge prompt lacks {k!r}")
    criteria: dict[str, dict[str, str]] = {}
    questions: dict[str, str] = {}
    for c, spec in data["criteria"].items():
        verdicts = {str(v): str(g) for v, g in (spec.get("verdicts") or {}).items()}
        bad = [g for g in verdicts.values() if g not in GRADE_INDEX]
        if not verdicts or bad:
            raise ValueError(f"judge prompt criterion {c!r}: no verdicts or unknown grades {bad}")
        criteria[str(c)] = verdicts
        questions[str(c)] = str(spec.get("question", c))
    return JudgePrompt(str(data["version"]), str(data["system"]), str(data["user"]), criteria, questions)


@lru_cache(maxsize=1)
def load_prompt() -> JudgePrompt:
    text = resources.files("radvqa.quality").joinpath("data/judge_prompt.yaml").read_text("utf-8")
    return parse_prompt(yaml.safe_load(text))


_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


def _norm(v: Any) -> str:
    return re.sub(r"[\s\-]+", "_", str(v).strip().lower())


def parse_verdicts(content: str, prompt: JudgePrompt) -> dict[str, str]:
    """The reply's JSON object -> {criterion: verdict}; ValueError unless every criterion has a
    known verdict (tolerates a code fence and spaces/hyphens/case in the values)."""
    text = _FENCE.sub("", content.strip())
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError(f"no JSON object in reply {content[:80]!r}")
    try:
        obj = json.loads(text[start:end + 1])
    except ValueError as exc:
        raise ValueError(f"invalid JSON in reply {content[:80]!r}: {exc}") from None
    if not isinstance(obj, dict):
        raise ValueError("reply is not a JSON object")
    out: dict[str, str] = {}
    for c, allowed in prompt.criteria.items():
        v = _norm(obj.get(c, ""))
        if v not in allowed:
            raise ValueError(f"criterion {c!r}: verdict {obj.get(c)!r} not in {sorted(allowed)}")
        out[c] = v
    return out


def verdict_reasons(verdicts: dict[str, str], prompt: JudgePrompt) -> tuple[int, list[str]]:
    """(worst grade index over criteria, reasons ``judge:<criterion>:<verdict>-><grade>``)."""
    worst = 0
    reasons = []
    for c, v in verdicts.items():
        g = prompt.criteria[c][v]
        worst = max(worst, GRADE_INDEX[g])
        reasons.append(f"judge:{c}:{v}->{g}")
    return worst, reasons


@dataclass
class JudgeResult:
    verdicts: dict[str, str] | None
    error: str | None = None
    cached: bool = False


class CriteriaJudge:
    """Thread-safe: ``judge(messages)`` may be called from a pool of ``concurrency`` threads."""

    def __init__(self, base_url: str, model: str, *, cache_dir: str | Path | None = None,
                 api_key_env: str | None = None, timeout_s: float = 120.0, max_retries: int = 4,
                 backoff_base_s: float = 1.0, prompt: JudgePrompt | None = None,
                 max_tokens: int = 200) -> None:
        from radvqa.models.cache import PredictionCache, default_cache_dir
        from radvqa.models.openai_compat import OpenAIAdapter

        self.model = model
        self.prompt = prompt or load_prompt()
        self.adapter = OpenAIAdapter(model, base_url=base_url, api_key_env=api_key_env, temperature=0.0,
                                     max_tokens=max_tokens, timeout_s=timeout_s, max_retries=max_retries,
                                     backoff_base_s=backoff_base_s)
        self.cache = PredictionCache(Path(cache_dir) if cache_dir else default_cache_dir() / "grade-judge")
        self.use_schema = True  # turned off once if the server rejects response_format
        self.max_tokens = max_tokens
        self._lock = threading.Lock()
        self.requests = 0  # HTTP attempts, retries included
        self.cache_hits = 0
        self.errors: dict[str, int] = {}

    def close(self) -> None:
        self.cache.close()

    def messages(self, user: str) -> list[dict[str, str]]:
        system = self.prompt.system.replace("{schema_text}", self.prompt.schema_text())
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def _key(self, messages: list[dict[str, str]]) -> str:
        payload = json.dumps({"model": self.model, "prompt": self.prompt.version, "messages": messages},
                             sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def _body(self, messages: list[dict[str, str]], schema: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "temperature": 0, "max_tokens": self.max_tokens,
                                "messages": messages}
        if schema:
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "radvqa_judge", "strict": True, "schema": self.prompt.schema()}}
        return body

    def _post(self, messages: list[dict[str, str]]) -> tuple[str | None, str | None]:
        schema = self.use_schema
        payload, err, attempts = self.adapter._post(self._body(messages, schema))
        with self._lock:
            self.requests += attempts
        if err and schema and err.startswith("HTTP 400"):
            # a server without structured output: ask in plain JSON mode from now on
            with self._lock:
                self.use_schema = False
            payload, err, attempts = self.adapter._post(self._body(messages, False))
            with self._lock:
                self.requests += attempts
        if err or payload is None:
            return None, err or "empty response"
        try:
            content = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            return None, f"unexpected response shape: {json.dumps(payload)[:160]}"
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return str(content or ""), None

    def judge(self, user: str) -> JudgeResult:
        messages = self.messages(user)
        key = self._key(messages)
        hit = self.cache.get(key)
        if hit is not None and isinstance(hit.get("verdicts"), dict):
            try:
                v = {c: hit["verdicts"][c] for c in self.prompt.criteria}
                with self._lock:
                    self.cache_hits += 1
                return JudgeResult(v, None, True)
            except KeyError:
                pass  # stale entry: ask again
        last = "no attempt"
        for _ in range(2):  # invalid JSON is asked once more, then the row fails
            content, err = self._post(messages)
            if err is not None:
                return self._fail(f"http: {err}")
            try:
                verdicts = parse_verdicts(content or "", self.prompt)
            except ValueError as exc:
                last = str(exc)
                continue
            self.cache.put(key, {"verdicts": verdicts})
            return JudgeResult(verdicts)
        return self._fail(f"invalid reply: {last}")

    def _fail(self, msg: str) -> JudgeResult:
        kind = msg.split(":", 1)[0]
        with self._lock:
            self.errors[kind] = self.errors.get(kind, 0) + 1
        return JudgeResult(None, msg)


# -- older single-grade hook ------------------------------------------------------------------------

PROMPT_VERSION = "judge-1"
PROMPT = (
    "You grade a question-answer pair generated from a radiology report. Report:\n{report}\n\n"
    "Question: {question}\nAnswer: {answer}\n\n"
    "Grade on this scale: A++ (entailed by the report, relevant, complete, clear), A+, A, "
    "B (not inferable from the report or incomplete), C (misleading), D (contradicts the report). "
    "Reply with the grade only."
)
Judge = Callable[[QA, str], str]


@dataclass
class JudgeStats:
    judged: int = 0
    failed: int = 0
    lowered: int = 0
    errors: list[str] = field(default_factory=list)


def judge_pass(rows: Iterable[QA], judge: Judge, reports: dict[str, str]) -> JudgeStats:
    """Grade rows in place with ``judge``; ``reports``: study id -> report text."""
    st = JudgeStats()
    for qa in rows:
        try:
            g = judge(qa, reports.get(qa.study_id, ""))
            if g not in GRADE_INDEX:
                raise ValueError(f"unparseable judge grade {g!r}")
        except Exception as exc:  # noqa: BLE001 - any failure is counted, never fatal
            st.failed += 1
            if len(st.errors) < 20:
                st.errors.append(f"{qa.qa_id}: {exc}")
            qa.grade_reasons = [*qa.grade_reasons, "judge:failed"]
            continue
        st.judged += 1
        rule = GRADE_INDEX.get(qa.grade or "A++", 0)
        if GRADE_INDEX[g] > rule:
            st.lowered += 1
            qa.grade = g
        qa.grade_reasons = [*qa.grade_reasons, f"judge:{g}"]
    return st


_GRADE_RE = re.compile(r"A\+\+|A\+|\b[ABCD]\b")


def parse_grade(text: str) -> str:
    m = _GRADE_RE.search(text.strip())
    if not m:
        raise ValueError(f"no grade in judge reply {text[:80]!r}")
    return m.group(0)


def openai_judge(base_url: str, model: str, api_key: str | None = None, timeout: float = 60.0) -> Judge:
    """A single-grade judge over an OpenAI-compatible chat endpoint (transport: ``OpenAIAdapter``).
    ``api_key`` is ignored if given: keys come from ``OPENAI_API_KEY`` as everywhere else."""
    from radvqa.models.openai_compat import OpenAIAdapter

    adapter = OpenAIAdapter(model, base_url=base_url, timeout_s=timeout, max_retries=2, backoff_base_s=0.2)

    def judge(qa: QA, report: str) -> str:
        body = {"model": model, "temperature": 0, "max_tokens": 8, "messages": [
            {"role": "user", "content": PROMPT.format(report=report, question=qa.question, answer=qa.answer)}]}
        payload, err, _ = adapter._post(body)
        if err or payload is None:
            raise RuntimeError(err or "empty response")
        return parse_grade(str(payload["choices"][0]["message"]["content"]))

    return judge


__all__ = ["GRADES", "PROMPT_VERSION", "CriteriaJudge", "Judge", "JudgePrompt", "JudgeResult", "JudgeStats",
           "judge_pass", "load_prompt", "openai_judge", "parse_grade", "parse_prompt", "parse_verdicts",
           "verdict_reasons"]
