"""`openai:MODEL` — any OpenAI-compatible chat completions server (vLLM, Ollama, llama.cpp server,
hosted APIs), through the shared client :class:`radvqa.llm.client.ChatClient` (the ``openai``
package: retries on 429 / 5xx / connection errors with backoff honouring Retry-After, a deadline on
the whole response, no redirects, secrets redacted from every error).

Images go as base64 data URLs. The API key comes from the environment only and never reaches logs,
errors, metadata or the cache key; ``--base-url`` is written with any ``user:password@`` masked.
"""

from __future__ import annotations

import os
import time
from typing import Any
from collections.abc import Sequence

from radvqa.llm.client import ChatClient, redact_url
from radvqa.models.base import AdapterError, Request, Response
from radvqa.models.registry import ADAPTERS


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
            raise AdapterError(f"--base-url must start with http:// or https://, got {redact_url(url)!r}")
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
        self.client = ChatClient(self.base_url, api_key=self._api_key, timeout_s=timeout_s,
                                 max_retries=max_retries, backoff_base_s=backoff_base_s,
                                 backoff_max_s=backoff_max_s)

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIAdapter(model={self.model!r}, base_url={redact_url(self.base_url)!r})"

    def params(self) -> dict[str, Any]:
        p: dict[str, Any] = {
            "base_url": redact_url(self.base_url),
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

    def _post(self, body: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None, int]:
        """(response json, error, attempts) -- kept for callers that build their own body."""
        res = self.client.chat(body)
        return (res.payload if res.error is None else None), res.error, res.attempts

    def _one(self, req: Request) -> Response:
        t0 = time.perf_counter()
        res = self.client.chat(self._body(req))
        latency = time.perf_counter() - t0
        usage = dict(res.usage)
        usage["attempts"] = res.attempts
        if res.error is not None or res.content is None:
            return Response(text=None, error=res.error or "empty response", latency_s=latency, usage=usage)
        return Response(text=res.content, latency_s=latency, usage=usage)

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        # one HTTP request per question; the runner provides concurrency across calls
        return [self._one(r) for r in requests]

    def close(self) -> None:
        self.client.close()
