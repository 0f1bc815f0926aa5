"""One registry idiom (issue 18, item 4): sources, extractors, strategies, model adapters and
parser steps register with a decorator and are imported only when first looked up."""

from __future__ import annotations

import subprocess
import sys

import pytest

from radvqa.registry import Registry


def test_decorator_lookup_and_errors():
    reg: Registry[type] = Registry("widget")

    @reg.register("a")
    class A:
        pass

    assert reg.get("a") is A and "a" in reg and "b" not in reg and list(reg) == ["a"]
    with pytest.raises(KeyError, match=r"unknown widget 'b'; known: a"):
        reg.get("b")
    with pytest.raises(ValueError, match="registered twice"):
        reg.add("a", object())
    reg.add("a", A)  # the same object again (a module imported twice) is fine


def test_every_extension_point_uses_it():
    from radvqa.eval.parsers import PARSE_STEPS
    from radvqa.extract import EXTRACTORS
    from radvqa.generate.engine import KNOWN_STRATEGIES, STRATEGIES, STRATEGY_REGISTRY
    from radvqa.models.registry import ADAPTERS
    from radvqa.sources import SOURCES

    assert SOURCES.names()[:3] == ("sample", "openi", "nih-cxr14") and "synthetic" in SOURCES
    assert EXTRACTORS.names() == ("rules", "llm")
    assert STRATEGIES == ("qba", "vindr", "rin", "diff")  # the default set
    assert STRATEGY_REGISTRY.names() == KNOWN_STRATEGIES == STRATEGIES + ("probe",)  # + those asked for by name
    assert ADAPTERS.names() == ("openai", "hf")
    assert {"refusal", "leading_yes_no"} <= set(PARSE_STEPS.names())
    for reg in (SOURCES, EXTRACTORS, STRATEGY_REGISTRY, ADAPTERS):
        assert all(isinstance(reg.get(n), type) for n in reg.names())


def test_lookups_import_only_what_they_need():
    """Asking for the openai adapter or the rules extractor imports neither hf nor llm code; the
    order of names does not depend on which lookup came first."""
    code = (
        "import sys\n"
        "from radvqa.models.registry import ADAPTERS\n"
        "from radvqa.extract import EXTRACTORS\n"
        "from radvqa.sources import SOURCES\n"
        "ADAPTERS.get('openai'); EXTRACTORS.get('rules'); SOURCES.get('openi')\n"
        "print(*(m in sys.modules for m in ('radvqa.models.openai_compat', 'radvqa.models.hf',"
        " 'radvqa.extract.llm', 'radvqa.sources.openi', 'radvqa.sources.dicom')))\n"
        "SOURCES.get('synthetic')\n"
        "print(SOURCES.names()[-1], ADAPTERS.names())\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.splitlines()
    assert first.split() == ["True", "False", "False", "True", "False"]
    assert second == "synthetic ('openai', 'hf')"
