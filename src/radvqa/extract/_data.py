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
    return yaml.load(text, Loader=_NoDuplicates)


class _NoDuplicates(yaml.SafeLoader):
    """A key given twice in a mapping is an error: YAML keeps the last one, so a second
    ``low_lung_volumes:`` under ``phrases`` silently dropped the first list of phrases."""


def _mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for k, _v in node.value:
        key = loader.construct_object(k, deep=deep)
        if key in seen:
            raise ValueError(f"extraction data: key {key!r} given twice (line {k.start_mark.line + 1})")
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


_NoDuplicates.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
