"""The adapter protocol: a batch of (images, prompt) requests in, text (and maybe boxes) out.

Adapters know nothing about datasets, caching or files: `radvqa.models.predict` streams rows,
builds `Request`s, consults the cache and writes predictions. That keeps an adapter small enough
to add one per serving stack.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable
from collections.abc import Sequence

from radvqa.models.images import LoadedImage

# How a model writes box coordinates (recorded in the run metadata):
# pixels   - pixels of the image as the model saw it (after radvqa's resize, or the processor's)
# norm1000 - 0..1000 of width/height (Qwen2-VL style)
# norm1    - 0..1 fractions
BOX_CONVENTIONS: tuple[str, ...] = ("pixels", "norm1000", "norm1")


@dataclass(frozen=True)
class Request:
    """One question to put to a model."""

    qa_id: str
    prompt: str
    images: tuple[LoadedImage, ...]
    system: str | None = None
    family: str = "open"


@dataclass
class Response:
    """What a model returned for one request. `error` set means no usable answer."""

    text: str | None
    error: str | None = None
    latency_s: float | None = None
    # model-space size of each image when the adapter knows it better than the request does
    # (e.g. a processor that resizes again); boxes are mapped from this size
    seen_sizes: list[tuple[int, int]] | None = None
    usage: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Adapter(Protocol):
    """A model behind one interface. Implementations: openai (HTTP), hf (transformers), echo (tests)."""

    spec: str  # "openai:gpt-4o-mini", "hf:/models/qwen2-vl", ...
    box_convention: str  # one of BOX_CONVENTIONS
    default_batch_size: int  # requests per generate() call the adapter prefers
    default_concurrency: int  # generate() calls that may run at once (threads)

    def params(self) -> dict[str, Any]:
        """Everything that changes outputs (generation settings, dtype, base URL): goes into the
        run metadata and the cache key. Never secrets."""
        ...

    def generate(self, requests: Sequence[Request]) -> list[Response]:
        """One response per request, same order; never raises for one bad request (sets error)."""
        ...

    def close(self) -> None: ...


class AdapterError(RuntimeError):
    """A configuration problem that stops the whole run (bad spec, missing package, bad path)."""
