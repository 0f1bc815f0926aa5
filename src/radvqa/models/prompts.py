"""Versioned prompt templates (package YAML data) and the rule that picks a row's question family."""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any
from collections.abc import Mapping

import yaml

FAMILIES: tuple[str, ...] = ("yesno", "mc", "open", "box")
_LETTERS = string.ascii_uppercase


class PromptError(ValueError):
    pass


@dataclass(frozen=True)
class _Rule:
    family: str
    when: str
    pattern: re.Pattern[str] | None


@dataclass(frozen=True)
class PromptSet:
    id: str
    version: int
    system: str | None
    rules: tuple[_Rule, ...]
    templates: Mapping[str, str]
    option_format: str
    box_phrases: Mapping[str, str]
    multi_image: Mapping[str, str]

    @property
    def tag(self) -> str:
        """"<id>@<version>": what the metadata records and the cache keys on."""
        return f"{self.id}@{self.version}"

    def family(self, row: Mapping[str, Any]) -> str:
        """The question family of a QA row, from question columns only (never the answer)."""
        choices = row.get("choices")
        qtype = row.get("question_type") or ""
        question = row.get("question") or ""
        for rule in self.rules:
            if rule.when == "always":
                return rule.family
            if rule.when == "has_choices" and choices:
                return rule.family
            if rule.when == "question_type_matches" and rule.pattern and rule.pattern.search(qtype):
                return rule.family
            if rule.when == "question_matches" and rule.pattern and rule.pattern.search(question):
                return rule.family
        return "open"

    def render(
        self,
        row: Mapping[str, Any],
        *,
        box_convention: str = "pixels",
        image_size: tuple[int, int] | None = None,
        n_images: int = 1,
        family: str | None = None,
    ) -> tuple[str, str]:
        """(family, prompt text) for one row."""
        fam = family or self.family(row)
        question = str(row.get("question") or "").strip()
        if not question:
            raise PromptError(f"row {row.get('qa_id')!r} has an empty question")
        options = ""
        choices = row.get("choices") or []
        if fam == "mc":
            if not choices:
                raise PromptError(f"row {row.get('qa_id')!r}: multiple choice without choices")
            if len(choices) > len(_LETTERS):
                raise PromptError(f"row {row.get('qa_id')!r}: {len(choices)} choices, at most 26")
            options = "\n".join(
                self.option_format.format(letter=_LETTERS[i], text=str(c))
                for i, c in enumerate(choices)
            )
        box_phrase = ""
        if fam == "box":
            phrase = self.box_phrases.get(box_convention)
            if phrase is None:
                raise PromptError(f"prompt set {self.tag} has no box phrase for {box_convention!r}")
            w, h = image_size or (0, 0)
            box_phrase = phrase.format(width=w, height=h)
        # str.format only on the template: braces inside questions are left alone
        text = self.templates[fam].format(question=question, options=options, box_phrase=box_phrase)
        if n_images > 1:
            pre = self.multi_image.get(str(n_images), self.multi_image.get("default", ""))
            if pre:
                text = pre.format(count=n_images) + "\n" + text
        return fam, text


def _compile(data: Mapping[str, Any], origin: str) -> PromptSet:
    try:
        families = data["families"]
        missing = [f for f in FAMILIES if f not in families]
        if missing:
            raise PromptError(f"{origin}: families missing: {', '.join(missing)}")
        rules = []
        for r in data.get("family_rules", [{"family": "open", "when": "always"}]):
            if r["family"] not in FAMILIES:
                raise PromptError(f"{origin}: rule names unknown family {r['family']!r}")
            if r["when"] not in ("always", "has_choices", "question_type_matches", "question_matches"):
                raise PromptError(f"{origin}: unknown rule condition {r['when']!r}")
            pat = re.compile(r["pattern"]) if r.get("pattern") else None
            rules.append(_Rule(r["family"], r["when"], pat))
        return PromptSet(
            id=str(data["id"]),
            version=int(data["version"]),
            system=(data.get("system") or None),
            rules=tuple(rules),
            templates={k: str(v["template"]) for k, v in families.items()},
            option_format=str(families["mc"].get("option_format", "{letter}. {text}")),
            box_phrases={str(k): str(v) for k, v in (data.get("box_phrases") or {}).items()},
            multi_image={str(k): str(v) for k, v in (data.get("multi_image") or {}).items()},
        )
    except (KeyError, TypeError, re.error) as exc:
        raise PromptError(f"{origin}: malformed prompt file ({exc!r})") from exc


def available_prompt_sets() -> list[str]:
    root = resources.files("radvqa.models") / "prompts"
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".yaml"))


@lru_cache(maxsize=16)
def load_prompts(name_or_path: str = "default") -> PromptSet:
    """A bundled prompt set by name (see `available_prompt_sets()`) or a YAML file path."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return _compile(yaml.safe_load(p.read_text(encoding="utf-8")), str(p))
    res = resources.files("radvqa.models") / "prompts" / f"{name_or_path}.yaml"
    if not res.is_file():
        raise PromptError(
            f"no prompt set {name_or_path!r}; bundled: {', '.join(available_prompt_sets())}"
        )
    return _compile(yaml.safe_load(res.read_text(encoding="utf-8")), f"prompts/{name_or_path}.yaml")
