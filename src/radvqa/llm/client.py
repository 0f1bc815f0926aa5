"""The one OpenAI-compatible chat-completions client, on the maintained ``openai`` package.

Used by predict (``models/openai_compat.py``), the LLM extractor (``extract/llm.py``) and both
judges (``eval/judge.py``, ``quality/judge.py``). What it guarantees, whoever calls it:

- retries (408 / 409 / 429 / 5xx / connection errors / timeouts) are the ``openai`` client's, with
  our backoff base so tests and local servers need not wait seconds; ``Retry-After`` is honoured;
- ``timeout_s`` bounds each attempt's WHOLE response (status line to last body byte): a server that
  drips a byte per second is cut off, which a per-read socket timeout alone never does;
- redirects are never followed (a 302 would otherwise carry ``Authorization`` to another origin);
- error texts never carry a secret: the API key, ``Bearer`` tokens and ``user:password@`` in URLs
  are masked (``redact``) before anything is returned, written or logged;
- the reply's ``content`` must be text (or a list of text parts); anything else is an error line,
  never an exception in the caller.
"""

from __future__ import annotations

import importlib
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import openai

# openai 1.x is built on httpx, newer releases on httpx2: take whichever it uses, so our hooks
# raise the exception type its retry loop understands.
_httpx: Any = importlib.import_module(
    next(c for c in openai.DefaultHttpxClient.__mro__ if c.__name__ == "Client").__module__.split(".")[0])

_BEARER = re.compile(r"(?i)(bearer\s+)[^\s\"',;]+")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")
_KEYLIKE = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}")


def redact(text: str, secrets: tuple[str | None, ...] = ()) -> str:
    """``text`` without the given secrets, bearer tokens, URL credentials or ``sk-`` keys."""
    for s in secrets:
        if s and len(s) >= 4:  # a 1-3 character "secret" would mask ordinary words
            text = text.replace(s, "***")
    text = _BEARER.sub(r"\1***", text)
    text = _USERINFO.sub(r"\1***@", text)
    return _KEYLIKE.sub("sk-***", text)


def redact_url(url: str) -> str:
    """The URL without ``user:password@`` (kept as ``***@``) and without a query string (which
    may hold ``?api_key=``)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@dataclass
class ChatResult:
    content: str | None  # the reply text; None on error
    error: str | None = None  # one line, secrets removed
    attempts: int = 0  # HTTP attempts made, retries included
    usage: dict[str, Any] = field(default_factory=dict)
    payload: dict[str, Any] | None = None  # the decoded JSON reply


class _Deadline(threading.local):
    at: float = float("inf")
    attempts: int = 0


class _RetryingOpenAI(openai.OpenAI):
    """``openai.OpenAI`` whose backoff base is ours (the package's is fixed at 0.5 s)."""

    backoff_base_s: float = 0.5
    backoff_max_s: float = 60.0
    waits: list[float]

    def _calculate_retry_timeout(self, remaining_retries: int, options: Any, response_headers: Any = None) -> float:
        retry_after = self._parse_retry_after_header(response_headers)
        if retry_after is not None and 0 < retry_after <= self.backoff_max_s:
            wait = float(retry_after)
        else:
            n = max(0, self.max_retries - remaining_retries)
            wait = min(self.backoff_max_s, self.backoff_base_s * 2.0**n)
        self.waits.append(wait)
        return wait


class ChatClient:
    """Thread-safe; one instance per (server, key, settings)."""

    def __init__(self, base_url: str, *, api_key: str | None = None, timeout_s: float = 120.0,
                 max_retries: int = 4, backoff_base_s: float = 0.5, backoff_max_s: float = 60.0) -> None:
        url = base_url.rstrip("/")
        if url.endswith("/chat/completions"):
            url = url[: -len("/chat/completions")]
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"base URL must start with http:// or https://, got {redact_url(base_url)!r}")
        self.base_url = url
        self.timeout_s = float(timeout_s)
        self.max_retries = max(0, int(max_retries))
        self._secrets = (api_key, urlsplit(url).password, urlsplit(url).username)
        self._local = _Deadline()
        http = openai.DefaultHttpxClient(
            follow_redirects=False,  # never carry the key to another origin (or anywhere else)
            timeout=_httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 10.0)),
            event_hooks={"request": [self._on_request], "response": [self._on_response]},
        )
        self._client = _RetryingOpenAI(
            base_url=url,
            # local servers need no key; the package insists on a non-empty string
            api_key=api_key or "unused",
            max_retries=self.max_retries,
            timeout=self.timeout_s,
            http_client=http,
        )
        self._client.backoff_base_s = backoff_base_s
        self._client.backoff_max_s = backoff_max_s
        self._client.waits = []
        # no key: send no Authorization header at all rather than a dummy bearer token
        self._options: Any = {} if api_key else {"headers": {"Authorization": openai.Omit()}}

    @property
    def retry_waits(self) -> list[float]:
        """Every backoff wait chosen so far (seconds), for tests and run metadata."""
        return self._client.waits

    def __repr__(self) -> str:  # never show the key
        return f"ChatClient(base_url={redact_url(self.base_url)!r})"

    # -- whole-response deadline ---------------------------------------------------------------
    def _on_request(self, request: Any) -> None:
        self._local.at = time.monotonic() + self.timeout_s
        self._local.attempts += 1

    def _on_response(self, response: Any) -> None:
        deadline, timeout, request = self._local.at, self.timeout_s, response.request
        if time.monotonic() > deadline:
            raise _httpx.ReadTimeout(f"no complete response within {timeout:g} s", request=request)
        inner = response.stream

        class _Bounded(_httpx.SyncByteStream):
            def __iter__(self) -> Any:
                for chunk in inner:
                    if time.monotonic() > deadline:
                        raise _httpx.ReadTimeout(f"no complete response within {timeout:g} s", request=request)
                    yield chunk

            def close(self) -> None:
                inner.close()

        response.stream = _Bounded()

    # -- calls ---------------------------------------------------------------------------------
    def chat(self, body: dict[str, Any]) -> ChatResult:
        """POST ``body`` to ``/chat/completions``; never raises for anything the server does."""
        self._local.attempts = 0
        try:
            payload = self._client.post("/chat/completions", body=body, cast_to=object, options=self._options)
        except openai.APIStatusError as exc:
            return ChatResult(None, self._status_error(exc), self._local.attempts)
        except openai.APITimeoutError:
            return ChatResult(None, self._clean(f"timed out: no complete response within {self.timeout_s:g} s"
                                                f" (after {self._local.attempts} attempts)"), self._local.attempts)
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            return ChatResult(None, self._clean(f"connection error: cannot reach {self.base_url}: {cause}"
                                                f" (after {self._local.attempts} attempts)"), self._local.attempts)
        except (openai.OpenAIError, ValueError) as exc:  # undecodable JSON and the like
            return ChatResult(None, self._clean(f"bad response: {exc}"), self._local.attempts)
        attempts = self._local.attempts
        if not isinstance(payload, dict):
            return ChatResult(None, self._clean(f"unexpected response shape: {str(payload)[:200]}"), attempts)
        content, err = _content(payload)
        usage = payload.get("usage")
        usage = dict(usage) if isinstance(usage, dict) else {}
        if err is not None:
            return ChatResult(None, self._clean(err), attempts, usage, payload)
        return ChatResult(content, None, attempts, usage, payload)

    def _status_error(self, exc: Any) -> str:
        code = exc.status_code
        if 300 <= code < 400:
            where = exc.response.headers.get("location", "?")
            return self._clean(f"HTTP {code}: redirect to {redact_url(where)} not followed")
        try:
            body = exc.response.text
        except Exception:  # noqa: BLE001 - a body we cannot read is just not shown
            body = ""
        retried = code in (408, 409, 429) or code >= 500
        tail = f" (after {self._local.attempts} attempts)" if retried else ""
        return self._clean(f"HTTP {code}: {' '.join(body.split())[:200]}{tail}")

    def _clean(self, text: str) -> str:
        return redact(" ".join(text.split()), self._secrets)

    def close(self) -> None:
        self._client.close()


def _content(payload: dict[str, Any]) -> tuple[str | None, str | None]:
    """(text, None) or (None, why) from a chat-completions reply."""
    try:
        content = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None, f"unexpected response shape: {str(payload)[:200]}"
    if content is None:
        return "", None
    if isinstance(content, list):  # some servers return content parts
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        if all(isinstance(p, str) for p in parts):
            return "".join(parts), None  # type: ignore[arg-type]
    if not isinstance(content, str):
        return None, f"unexpected response shape: message content is {type(content).__name__}, not text"
    return content, None


__all__ = ["ChatClient", "ChatResult", "redact", "redact_url"]
