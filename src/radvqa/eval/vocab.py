"""Load the answer-extraction vocabulary (``data/parsers.yaml``) once."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

_REQUIRED = (
    "version",
    "yes_words",
    "no_words",
    "negation_cues",
    "affirmative_cues",
    "uncertainty_cues",
    "refusal_cues",
    "mc_letter_lead",
    "number_words",
    "articles",
    "replacements",
    "count_question_types",
    "grounding_question_types",
)


@lru_cache(maxsize=None)
def load_vocab() -> dict[str, Any]:
    """The parser vocabulary; raises ValueError naming a missing key (a broken data file
    must fail loudly, not score everything as unparsed)."""
    text = resources.files("radvqa.eval").joinpath("data/parsers.yaml").read_text("utf-8")
    data = yaml.safe_load(text)
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise ValueError(f"radvqa/eval/data/parsers.yaml lacks keys: {missing}")
    for key, val in data.items():
        # a bare yes/no/on/off in YAML 1.1 is a boolean: refuse it rather than parse wrong
        if isinstance(val, list) and any(not isinstance(x, str) for x in val):
            raise ValueError(f"parsers.yaml {key!r}: every entry must be a quoted string, got {val!r}")
    return data
