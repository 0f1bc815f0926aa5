"""Model spec -> adapter, with lazy imports: `radvqa predict --help` never imports torch.

Specs: `openai:MODEL` (OpenAI-compatible HTTP), `hf:PATH_OR_ID` (transformers).
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from radvqa.models.base import Adapter, AdapterError

from radvqa.registry import Registry

# kind -> adapter class, registered with @ADAPTERS.register(kind) in its module; a module is
# imported only when a kind it may hold is asked for (openai first: asking for it never imports hf)
ADAPTERS: Registry[type] = Registry("model kind", modules=("radvqa.models.openai_compat", "radvqa.models.hf"))


def register_adapter(kind: str, module: str, cls: str) -> None:
    """Add an adapter kind from ``module.cls`` (plugins, tests); prefer @ADAPTERS.register."""
    ADAPTERS.add(kind, getattr(importlib.import_module(module), cls))


def parse_spec(spec: str) -> tuple[str, str]:
    kind, sep, name = spec.partition(":")
    if not sep or not name.strip():
        raise AdapterError(
            f"model spec {spec!r} must be KIND:NAME, e.g. openai:gpt-4o-mini or hf:./my-model "
            f"(kinds: {', '.join(sorted(ADAPTERS.names()))})"
        )
    if kind not in ADAPTERS:
        raise AdapterError(f"unknown model kind {kind!r} in {spec!r}; kinds: {', '.join(sorted(ADAPTERS.names()))}")
    return kind, name.strip()


def get_adapter(spec: str, **options: Any) -> Adapter:
    """Build the adapter for `spec`. Options left at None are not passed; an option the adapter does
    not take is an error (so `--device` on an HTTP model is not silently ignored)."""
    kind, name = parse_spec(spec)
    cls = ADAPTERS.get(kind)
    given = {k: v for k, v in options.items() if v is not None}
    accepted = inspect.signature(cls.__init__).parameters
    wrong = sorted(k for k in given if k not in accepted)
    if wrong:
        flags = ", ".join("--" + k.replace("_", "-") for k in wrong)
        raise AdapterError(f"{flags} does not apply to {kind}: models")
    return cls(name, **given)
