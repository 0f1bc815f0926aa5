"""LLM judge for open answers through an OpenAI-compatible ``/chat/completions`` endpoint.

Versioned prompt (``data/judge_prompt.yaml``), temperature 0, the shared answer cache
(:class:`radvqa.llm.cache.AnswerCache`) keyed by model + prompt version + question + reference +
candidate, so a rerun asks nothing twice; HTTP through the shared :class:`radvqa.llm.ChatClient`. A failed call (HTTP error after retries, timeout, reply without a valid
verdict) is counted as *unjudged* with its reason; it is never given a score.
The API key is read from an environment variable only, and never logged.
"""

from __future__ import annotations

import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from radvqa.llm.cache import AnswerCache, key_of
from radvqa.llm.client import ChatClient


@lru_cache(maxsize=1)
def load_prompt() -> dict[str, Any]:
    data = yaml.safe_load(resources.files("radvqa.eval").joinpath("data/judge_prompt.yaml").read_text("utf-8"))
    for k in ("version", "system", "user", "verdicts"):
        if k not in data:
            raise ValueError(f"judge_prompt.yaml lacks {k!r}")
    return data


@dataclass
class JudgeConfig:
    url: str  # base URL, e.g. http://127.0.0.1:8000/v1
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    cache_dir: str | None = None
    timeout_s: float = 60.0
    retries: int = 2
    concurrency: int = 4


@dataclass(frozen=True, slots=True)
class Verdict:
    score: float | None  # None: unjudged
    verdict: str | None
    error: str | None = None
    cached: bool = False


_VERDICT = re.compile(r'"verdict"\s*:\s*"([a-z_ ]+)"')


class Judge:
    def __init__(self, cfg: JudgeConfig) -> None:
        self.cfg = cfg
        self.prompt = load_prompt()
        self.version = int(self.prompt["version"])
        self._lock = threading.Lock()
        cache_dir = Path(cfg.cache_dir or os.environ.get("RADVQA_CACHE_DIR", Path.home() / ".cache" / "radvqa")) / "judge"
        self.cache = AnswerCache(cache_dir)
        self.client = ChatClient(cfg.url, api_key=os.environ.get(cfg.api_key_env) or None, timeout_s=cfg.timeout_s,
                                 max_retries=cfg.retries, backoff_base_s=0.2, backoff_max_s=2.0)
        self.requests = 0

    def close(self) -> None:
        self.cache.close()
        self.client.close()

    def _key(self, q: str, ref: str, cand: str) -> str:
        return key_of(self.cfg.model, str(self.version), q, ref, cand)

    def _call(self, q: str, ref: str, cand: str) -> str:
        body = {
            "model": self.cfg.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": self.prompt["system"]},
                {"role": "user", "content": self.prompt["user"].format(question=q, reference=ref, candidate=cand)},
            ],
        }
        res = self.client.chat(body)
        with self._lock:
            self.requests += res.attempts
        if res.error is not None or res.content is None:
            raise RuntimeError(res.error or "empty response")
        return res.content

    def judge(self, question: str, reference: str, candidate: str | None) -> Verdict:
        if candidate is None or not candidate.strip():
            return Verdict(None, None, "no prediction")
        k = self._key(question, reference, candidate)
        hit = self.cache.get(k)
        if hit is not None and hit.get("verdict") in self.prompt["verdicts"]:
            return Verdict(float(self.prompt["verdicts"][hit["verdict"]]), hit["verdict"], None, True)
        try:
            content = self._call(question, reference, candidate)
        except RuntimeError as e:
            return Verdict(None, None, str(e))
        m = _VERDICT.search(content.lower())
        v = m.group(1).strip().replace(" ", "_") if m else None
        if v not in self.prompt["verdicts"]:
            return Verdict(None, None, f"no valid verdict in reply: {content[:80]!r}")
        self.cache.put(k, {"verdict": v})
        return Verdict(float(self.prompt["verdicts"][v]), v, None, False)

    def judge_many(self, items: list[tuple[str, str, str | None]]) -> list[Verdict]:
        with ThreadPoolExecutor(max_workers=max(1, self.cfg.concurrency)) as ex:
            return list(ex.map(lambda t: self.judge(*t), items))


def summarize(verdicts: list[Verdict], version: int, model: str) -> dict[str, Any]:
    judged = [v for v in verdicts if v.score is not None]
    errors: dict[str, int] = {}
    for v in verdicts:
        if v.score is None:
            errors[v.error or "?"] = errors.get(v.error or "?", 0) + 1
    return {
        "model": model,
        "prompt_version": version,
        "temperature": 0,
        "questions": len(verdicts),
        "judged": len(judged),
        "unjudged": len(verdicts) - len(judged),
        "unjudged_reasons": errors,
        "from_cache": sum(1 for v in judged if v.cached),
        "score_over_judged": (sum(v.score for v in judged) / len(judged)) if judged else None,  # type: ignore[misc]
        "score_over_all": (sum(v.score for v in judged) / len(verdicts)) if verdicts else None,  # type: ignore[misc]
        "verdicts": {k: sum(1 for v in judged if v.verdict == k) for k in ("correct", "partially_correct", "incorrect")},
    }
