"""Prediction cache key; the store itself is the shared :class:`radvqa.llm.cache.AnswerCache`
(a second run with the same model, prompt version, images and parameters sends no request).

Key = sha256 over a canonical JSON of (model spec, adapter params, image prep, prompt set tag,
system + prompt text, sha256 of every image file). Only successful answers are stored, so errors
are retried next time.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from radvqa.llm.cache import AnswerCache, default_cache_dir

PredictionCache = AnswerCache  # the name predict and the grade judge have always used


def cache_key(
    *,
    model: str,
    params: dict[str, Any],
    prep: dict[str, Any],
    prompt_tag: str,
    system: str | None,
    prompt: str,
    image_hashes: list[str],
) -> str:
    payload = json.dumps(
        {
            "model": model,
            "params": params,
            "prep": prep,
            "prompt_tag": prompt_tag,
            "system": system,
            "prompt": prompt,
            "images": image_hashes,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


__all__ = ["AnswerCache", "PredictionCache", "cache_key", "default_cache_dir"]
