"""Optional judge pass on the same A++..D scale (CXR-QBA's LLM-judge criteria: entailment against the
report, relevance, completeness, clarity), applied after rule-based grading.

A judge is any callable ``(qa, report_text) -> grade string``; ``openai_judge`` builds one that
asks an OpenAI-compatible ``/chat/completions`` endpoint (temperature 0, versioned prompt). A row's
final grade is the worse of its rule grade and the judge grade. A failure (exception, timeout,
unparseable reply) keeps the rule grade, adds ``judge:failed`` to the reasons and is counted --
a row is never silently left ungraded.
"""

from __future__ import annotations

import json
import re
import urllib.request
from dataclasses import dataclass, field
from typing import Callable, Iterable

from radvqa.model import GRADES, QA
from radvqa.quality.criteria import GRADE_INDEX

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
    """A judge calling an OpenAI-compatible chat endpoint (vLLM, Ollama, llama.cpp server, hosted)."""
    url = base_url.rstrip("/") + "/chat/completions"

    def judge(qa: QA, report: str) -> str:
        body = json.dumps({
            "model": model, "temperature": 0, "max_tokens": 8,
            "messages": [{"role": "user", "content": PROMPT.format(report=report, question=qa.question,
                                                                    answer=qa.answer)}],
        }).encode()
        req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json",
                                                              **({"Authorization": f"Bearer {api_key}"} if api_key else {})})
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - user-given endpoint
            data = json.loads(resp.read())
        return parse_grade(data["choices"][0]["message"]["content"])

    return judge


__all__ = ["GRADES", "PROMPT_VERSION", "Judge", "JudgeStats", "judge_pass", "openai_judge", "parse_grade"]
