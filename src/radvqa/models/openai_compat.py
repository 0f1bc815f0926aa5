"""`openai:MODEL` — any OpenAI-compatible chat completions server (vLLM, Ollama, llama.cpp server,
hosted APIs), over plain HTTP from the standard library so the core install stays light.

Images go as base64 data URLs. Each request is retried on 429 / 5xx / connection errors with
exponential backoff, honouring Retry-After. The API key comes from the environment only and never
reaches logs, errors, metadata or the cache key.
"""

from __future__ import annotations

import email.utils
import json
import os
import random
import time
import urllib.error
import urllib.request
from typing import Any
from collections.abc import Callable, Sequence

from radvqa.models.base import AdapterError, Request, Response
from radvqa.models.registry import ADAPTERS

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


def _retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


@ADAPTERS.register("openai")
class OpenAIAdapter:
    default_batch_size = 1

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 256,
        timeout_s: float = 120.0,
        max_retries: int = 5,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 60.0,
        concurrency: int = 4,
        box_convention: str = "pixels",
        extra_body: dict[str, Any] | None = None,
        seed: int | None = None,
    ) -> None:
        if not model:
            raise AdapterError("openai adapter needs a model name: --model openai:MODEL")
        self.model = model
        self.spec = f"openai:{model}"
        url = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        self.base_url = url.rstrip("/")
        if not self.base_url.startswith(("http://", "https://")):
            raise AdapterError(f"--base-url must start with http:// or https://, got {url!r}")
        self.api_key_env = api_key_env or "OPENAI_API_KEY"
        if api_key_env and not os.environ.get(api_key_env):
            # the user named a variable explicitly: an empty one is a mistake worth stopping for
            raise AdapterError(f"environment variable {api_key_env} (from --api-key-env) is not set")
        self._api_key = os.environ.get(self.api_key_env) or None  # may be None for local servers
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.default_concurrency = max(1, concurrency)
        self.box_convention = box_convention
        self.extra_body = dict(extra_body or {})
        self.seed = seed
        self.sleep: Callable[[float], None] = time.sleep  # replaced in tests to record waits
        self._rng = random.Random(0)

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIAdapter(model={self.model!r}, base_url={self.base_url!r})"

    def params(self) -> dict[str, Any]:
        p: dict[str, Any] = {
            "base_url": self.base_url,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "box_convention": self.box_convention,
        }
        if self.seed is not None:
            p["seed"] = self.seed
        if self.extra_body:
            p["extra_body"] = self.extra_body
        return p

    def run_params(self) -> dict[str, Any]:
        """Settings that do not change answers (metadata only, not the cache key)."""
        return {
            "timeout_s": self.timeout_s,
            "max_retries": self.max_retries,
            "api_key_env": self.api_key_env,
            "api_key_set": self._api_key is not None,
        }

    def _body(self, req: Request) -> dict[str, Any]:
        content: list[dict[str, Any]] = [
            {"type": "image_url", "image_url": {"url": img.data_url()}} for img in req.images
        ]
        content.append({"type": "text", "text": req.prompt})
        messages: list[dict[str, Any]] = []
        if req.system:
            messages.append({"role": "system", "content": req.system})
        messages.append({"role": "user", "content": content})
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.seed is not None:
            body["seed"] = self.seed
        body.update(self.extra_body)
        return body

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.backoff_max_s)
        base = min(self.backoff_max_s, self.backoff_base_s * (2**attempt))
        return base * (0.5 + 0.5 * self._rng.random())  # jitter spreads concurrent retries

    def _post(self, body: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None, int]:
        """(response json, error, attempts). Retries transient failures."""
        data = json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        url = f"{self.base_url}/chat/completions"
        last_err = "no attempt made"
        for attempt in range(self.max_retries + 1):
            retry_after: float | None = None
            try:
                req = urllib.request.Request(url, data=data, headers=headers, method="POST")
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    payload = resp.read()
                try:
                    return json.loads(payload), None, attempt + 1
                except json.JSONDecodeError:
                    last_err = f"server returned non-JSON ({payload[:120]!r})"
                    return None, last_err, attempt + 1
            except urllib.error.HTTPError as exc:
                detail = ""
                try:
                    detail = exc.read(300).decode("utf-8", "replace")
                except Exception:
                    pass
                last_err = f"HTTP {exc.code}: {detail.strip()[:200]}"
                if exc.code not in RETRY_STATUS:
                    return None, last_err, attempt + 1  # 400/401/404...: retrying cannot help
                retry_after = _retry_after_seconds(exc.headers.get("Retry-After") if exc.headers else None)
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                reason = getattr(exc, "reason", exc)
                last_err = f"connection error: {reason}"
            if attempt < self.max_retries:
                self.sleep(self._backoff(attempt, retry_after))
        return None, f"{last_err} (after {self.max_retries + 1} attempts)", self.max_retries + 1

    def _one(self, req: Request) -> Response:
        t0 = time.perf_counter()
        payload, err, attempts = self._post(self._body(req))
        latency = time.perf_counter() - t0
        if err is not None or payload is None:
            return Response(text=None, error=err, latency_s=latency, usage={"attempts": attempts})
        try:
            content = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            return Response(
                text=None,
                error=f"unexpected response shape: {json.dumps(payload)[:200]}",
                latency_s=latency,
            )
        if isinstance(content, list):  # some servers return content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        usage = dict(payload.get("usage") or {})
        usage["attempts"] = attempts
        return Response(text=content if content is not None else "", latency_s=latency, usage=usage)

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        # one HTTP request per question; the runner provides concurrency across calls
        return [self._one(r) for r in requests]

    def close(self) -> None:
        pass
