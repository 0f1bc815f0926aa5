"""Build hook: the package metadata is in pyproject.toml. With ``RADVQA_COMPILE=1`` the rules
engine modules (radvqa/extract/compiled.py ``MODULES``) are compiled to C with mypyc:

    RADVQA_COMPILE=1 pip install .            # compiled engine (mypy and a C compiler needed)
    RADVQA_COMPILE=1 pip wheel . -w dist      # a compiled wheel for this Python and platform
    pip install .                             # default: pure Python, no mypy, no compiler

The build backend (_build/backend.py) adds mypy to the build requirements only when compiling.
``radvqa info`` and the build manifest (``extractor.compiled``) say which engine is installed."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent


def _engine():  # type: ignore[no-untyped-def]
    # radvqa is not importable while it is being built: load the one module that lists the engine
    spec = importlib.util.spec_from_file_location("_radvqa_compiled", HERE / "src" / "radvqa" / "extract" / "compiled.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def ext_modules() -> list:  # type: ignore[type-arg]
    engine = _engine()
    if not engine.compile_requested(os.environ.get(engine.COMPILE_ENV)):
        return []
    if os.environ.get("_RADVQA_BUILD_REQUIRES"):  # _build/backend.py asks what to install first
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        raise SystemExit(f"{engine.COMPILE_ENV}=1 compiles the extraction engine with mypyc: install mypy "
                         "(pip install 'mypy>=1.10'), or let pip's build isolation install it "
                         "(no --no-build-isolation)") from None
    # paths relative to this folder, as setuptools wants them; mypy flags as on its command line.
    # The engine imports msgspec, yaml, ... without stubs: their types are Any to mypyc.
    paths = [f"src/radvqa/extract/{m}.py" for m in engine.MODULES]
    return mypycify(["--ignore-missing-imports", "--follow-imports=silent", *paths],
                    opt_level=os.environ.get("MYPYC_OPT_LEVEL", "3"))


os.chdir(HERE)  # mypycify and setuptools take paths relative to the project folder
setup(ext_modules=ext_modules())
