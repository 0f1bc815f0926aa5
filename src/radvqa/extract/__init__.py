"""radvqa.extract: radiology report text -> scene-graph observations.

    from radvqa.extract import get_extractor
    ex = get_extractor("rules", ontology=onto)      # offline, default
    ex = get_extractor("llm", ontology=onto, url="http://host:8000/v1", model="name")
    extraction = ex.extract(text, study_id)         # model.Extraction; never raises on bad text
    for extraction in ex.extract_many(pairs): ...   # pairs of (study_id, text)
"""

from __future__ import annotations

from typing import Any

from radvqa.registry import Registry

# @EXTRACTORS.register(name) on the class; modules imported on the first lookup
EXTRACTORS: Registry[type] = Registry("extractor", modules=("radvqa.extract.rules", "radvqa.extract.llm"))


def get_extractor(name: str = "rules", *, ontology: Any = None, **options: Any) -> Any:
    """An extractor by name: ``rules`` (default, offline) or ``llm`` (OpenAI-compatible server:
    ``url=``, ``model=``, optional ``api_key``, ``concurrency``, ``timeout``, ``retries``,
    ``cache_dir``)."""
    return EXTRACTORS.get(name)(ontology, **options)


__all__ = ["EXTRACTORS", "get_extractor"]
