"""Which rules engine runs: the pure Python modules or the ones compiled to C with mypyc.

A user installs the compiled engine with ``RADVQA_COMPILE=1 pip install .`` (setup.py compiles
``MODULES`` then); the default install is pure Python. Output is byte-identical either way, the
speed is not (about 1.3x fewer instructions per report compiled), so ``radvqa info`` and the
build manifest (``extractor.compiled``) say which one ran: a timing means little without it.

This module is read by setup.py before radvqa is installed: it imports nothing from radvqa."""

from __future__ import annotations

import importlib
import importlib.machinery
from typing import Any

# The per-sentence analysis, the per-report loop and aggregation, sentence and section splitting,
# the labeller, the checks on a report's text: where a pass spends its Python time (src/radvqa/extract/README.md). These
# modules define no class with keyword arguments and no decorated class (mypyc would build a
# plain Python class or drop the arguments): the msgspec records live in _structs.py. Their
# module constants are `Final` (compiled code reads them as C statics, not by a lookup in the
# module's dict) and their records have precise types (read as tuples, not iterated).
MODULES: tuple[str, ...] = ("_trie", "aggregate", "attributes", "context", "labels", "mentions", "rules",
                            "sections", "sentences", "text")

# the environment variable that makes setup.py compile MODULES ("1", "true", "yes")
COMPILE_ENV = "RADVQA_COMPILE"


def compile_requested(value: str | None) -> bool:
    """Whether the value of ``RADVQA_COMPILE`` asks for the compiled engine ("", "0", "false",
    "no" or unset: pure Python)."""
    v = (value or "").strip().lower()
    if v in ("", "0", "false", "no", "off"):
        return False
    if v in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"{COMPILE_ENV}={value!r}: use 1 (compile the extraction engine with mypyc) or 0")


def engine_modules() -> dict[str, str]:
    """Engine module -> the file it was imported from (a .py file, or an extension module when
    compiled)."""
    out: dict[str, str] = {}
    for name in MODULES:
        mod = importlib.import_module(f"radvqa.extract.{name}")
        out[name] = str(getattr(mod, "__file__", "") or "")
    return out


def _is_extension(path: str) -> bool:
    return any(path.endswith(s) for s in importlib.machinery.EXTENSION_SUFFIXES)


def engine_info() -> dict[str, Any]:
    """``{"compiled": bool, "modules_compiled": n, "modules": n}``: compiled is true only when
    every engine module is an extension module (a partial build is reported as such by the counts)."""
    files = engine_modules()
    n = sum(_is_extension(f) for f in files.values())
    return {"compiled": n == len(files), "modules_compiled": n, "modules": len(files)}


def is_compiled() -> bool:
    """True when every engine module runs compiled (mypyc), False for the pure Python engine."""
    return bool(engine_info()["compiled"])
