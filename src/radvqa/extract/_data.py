"""Loading of this area's YAML data files (package data, read once per process)."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

import yaml


@lru_cache(maxsize=None)
def load_data(name: str) -> Any:
    """Parse ``radvqa/extract/data/<name>.yaml`` (cached: the files are read-only data)."""
    text = resources.files("radvqa.extract").joinpath("data", f"{name}.yaml").read_text("utf-8")
    return yaml.safe_load(text)
