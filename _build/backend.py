"""The build backend: setuptools', plus mypy as a build requirement when ``RADVQA_COMPILE=1``
asks for the compiled extraction engine (setup.py). A default build needs neither mypy nor a C
compiler."""

from __future__ import annotations

import os
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403  (every other hook unchanged)

_COMPILE_REQUIRES = ["mypy>=1.10"]


def _compiling() -> bool:
    return os.environ.get("RADVQA_COMPILE", "").strip().lower() in ("1", "true", "yes", "on")


# setuptools runs setup.py to find its requirements, before mypy is installed: setup.py then
# skips the compile (it reads this variable) and mypy is added here
_ASKING = "_RADVQA_BUILD_REQUIRES"


def _requires(hook: Any, config_settings: Any) -> list[str]:
    os.environ[_ASKING] = "1"
    try:
        base = list(hook(config_settings))
    finally:
        del os.environ[_ASKING]
    return [*base, *(_COMPILE_REQUIRES if _compiling() else [])]


def get_requires_for_build_wheel(config_settings: Any = None) -> list[str]:
    return _requires(_setuptools.get_requires_for_build_wheel, config_settings)


def get_requires_for_build_editable(config_settings: Any = None) -> list[str]:
    return _requires(_setuptools.get_requires_for_build_editable, config_settings)
