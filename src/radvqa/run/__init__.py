"""radvqa.run: the build pipeline (``build``), shard planning by patient, executors (this process, a
process pool, Ray) and resume.

    from radvqa.run import BuildOptions, build
    manifest = build(BuildOptions(source="sample", out="radvqa-out", workers=2))

Names are imported lazily so ``radvqa --help`` (which imports ``radvqa.run.cli``) stays light.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ALL_STRATEGIES", "BuildError", "BuildOptions", "Progress", "build", "resume_state"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        import importlib

        return getattr(importlib.import_module("radvqa.run.builder"), name)
    raise AttributeError(f"module 'radvqa.run' has no attribute {name!r}")
