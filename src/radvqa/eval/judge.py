"""LLM judge for open answers through an OpenAI-compatible ``/chat/completions`` endpoint.

Versioned prompt (``data/judge_prompt.yaml``), temperature 0, an on-disk cache (SQLite)
keyed by model + prompt version + question + reference + candidate, so a rerun asks
nothing twice. A failed call (HTTP error after retries, timeout, reply without a valid
verdict) is counted as *unjudged* with its reason; it is never given a score.
The API key is read from an environment variable only, and never logged.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml


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
        cache_dir.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(cache_dir / "judge.sqlite"), check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, verdict TEXT NOT NULL)")
        self._db.commit()
        self.requests = 0

    def close(self) -> None:
        self._db.close()

    def _key(self, q: str, ref: str, cand: str) -> str:
        h = hashlib.sha256()
        for part in (self.cfg.model, str(self.version), q, ref, cand):
            h.update(part.encode("utf-8"))
            h.update(b"\x00")
        return h.hexdigest()

    def _call(self, q: str, ref: str, cand: str) -> str:
        body = {
            "model": self.cfg.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": self.prompt["system"]},
                {"role": "user", "content": self.prompt["user"].format(question=q, reference=ref, candidate=cand)},
            ],
        }
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.cfg.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url = self.cfg.url.rstrip("/") + "/chat/completions"
        last = "no attempt"
        for attempt in range(self.cfg.retries + 1):
            req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
            try:
                with self._lock:
                    self.requests += 1
                with urllib.request.urlopen(req, timeout=self.cfg.timeout_s) as resp:
                    data = json.loads(resp.read().decode("utf-8"))
                return str(data["choices"][0]["message"]["content"])
            except urllib.error.HTTPError as e:
                last = f"HTTP {e.code}"
                if e.code not in (429, 500, 502, 503, 504):
                    break
            except (urllib.error.URLError, TimeoutError, OSError) as e:
                last = f"connection error: {getattr(e, 'reason', e)}"
            except (KeyError, IndexError, ValueError) as e:
                last = f"malformed response: {e}"
                break
            time.sleep(min(0.2 * 2**attempt, 2.0))
        raise RuntimeError(last)

    def judge(self, question: str, reference: str, candidate: str | None) -> Verdict:
        if candidate is None or not candidate.strip():
            return Verdict(None, None, "no prediction")
        k = self._key(question, reference, candidate)
        with self._lock:
            row = self._db.execute("SELECT verdict FROM verdicts WHERE key=?", (k,)).fetchone()
        if row:
            return Verdict(float(self.prompt["verdicts"][row[0]]), row[0], None, True)
        try:
            content = self._call(question, reference, candidate)
        except RuntimeError as e:
            return Verdict(None, None, str(e))
        m = _VERDICT.search(content.lower())
        v = m.group(1).strip().replace(" ", "_") if m else None
        if v not in self.prompt["verdicts"]:
            return Verdict(None, None, f"no valid verdict in reply: {content[:80]!r}")
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO verdicts VALUES (?, ?)", (k, v))
            self._db.commit()
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
