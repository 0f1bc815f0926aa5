"""radvqa.extract: radiology report text -> scene-graph observations.

    from radvqa.extract import get_extractor
    ex = get_extractor("rules", ontology=onto)      # offline, default
    ex = get_extractor("llm", ontology=onto, url="http://host:8000/v1", model="name")
    extraction = ex.extract(text, study_id)         # model.Extraction; never raises on bad text
    for extraction in ex.extract_many(pairs): ...   # pairs of (study_id, text)
"""

from __future__ import annotations

from typing import Any

EXTRACTORS = ("rules", "llm")


def get_extractor(name: str = "rules", *, ontology: Any = None, **options: Any) -> Any:
    """An extractor by name: ``rules`` (default, offline) or ``llm`` (OpenAI-compatible server:
    ``url=``, ``model=``, optional ``api_key``, ``concurrency``, ``timeout``, ``retries``,
    ``cache_dir``)."""
    if name == "rules":
        from radvqa.extract.rules import RulesExtractor

        return RulesExtractor(ontology, **options)
    if name == "llm":
        from radvqa.extract.llm import LLMExtractor

        return LLMExtractor(ontology, **options)
    raise KeyError(f"unknown extractor {name!r}; known: {', '.join(EXTRACTORS)}")


__all__ = ["EXTRACTORS", "get_extractor"]
