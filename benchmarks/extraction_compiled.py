"""Run an extraction benchmark against a copy of the code whose rules engine is compiled to C
with mypyc, without installing it (a user installs the compiled engine with ``RADVQA_COMPILE=1
pip install .``: setup.py compiles the same modules).

    python benchmarks/extraction_compiled.py --build /tmp/radvqa_compiled -- \\
        benchmarks/extraction.py --gold dev --data ../shared/data/iu-xray
    python benchmarks/extraction_compiled.py --build /tmp/radvqa_compiled --reuse -- \\
        benchmarks/extraction_identity.py --data ../shared/data/iu-xray --out /tmp/compiled.jsonl

The source tree is copied to ``--build`` (the checkout itself gets no compiled file that could
shadow an edited module), the engine modules (``MODULES``) are compiled there with mypyc, and the
given script runs with ``PYTHONPATH`` pointing at the copy. Needs mypy (``pip install mypy``) and
a C compiler; about a minute and a half on two cores. The compiled engine checks the annotated
types at run time: the identity dump above must equal the pure-Python one (``cmp``), else a
report's extraction fails with a TypeError that names the wrong annotation."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _engine_modules() -> tuple[str, ...]:
    # the list setup.py compiles (RADVQA_COMPILE=1 pip install .), read from this checkout's file
    import importlib.util

    spec = importlib.util.spec_from_file_location("_radvqa_compiled", ROOT / "src" / "radvqa" / "extract" / "compiled.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return tuple(mod.MODULES)


# the per-sentence analysis, the per-report loop and aggregation, sentence and section splitting,
# the labeller: where a pass spends its Python time (see src/radvqa/extract/README.md)
MODULES = _engine_modules()
_CONFIG = "[mypy]\nignore_missing_imports = True\nfollow_imports = silent\n"


def build(dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(ROOT / "src", dest / "src", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    (dest / "mypy.ini").write_text(_CONFIG)
    cmd = [sys.executable, "-m", "mypyc", "--config-file", str(dest / "mypy.ini"),
           *(f"radvqa/extract/{m}.py" for m in MODULES)]
    res = subprocess.run(cmd, cwd=dest / "src", capture_output=True, text=True)
    if res.returncode != 0:
        sys.stderr.write(res.stdout[-4000:] + res.stderr[-4000:])
        raise SystemExit(f"mypyc failed (exit {res.returncode}); is mypy installed (pip install mypy)?")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", type=Path, required=True, help="folder for the compiled copy (replaced)")
    ap.add_argument("--reuse", action="store_true", help="run against the copy already built in --build")
    ap.add_argument("script", nargs=argparse.REMAINDER, help="-- SCRIPT [ARGS...] to run against the copy")
    args = ap.parse_args(argv)
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    dest = args.build.resolve()
    if not args.reuse:
        build(dest)
    # the copy first; whatever the caller's PYTHONPATH held (site folders of dependencies) after it
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(dest / "src"), os.environ.get("PYTHONPATH", "")) if p))
    check = subprocess.run([sys.executable, "-c", "import radvqa.extract.rules as r; print(r.__file__)"],
                           env=env, capture_output=True, text=True).stdout.strip()
    if not check.endswith(".so"):
        raise SystemExit(f"the copy in {dest} has no compiled engine ({check or 'no radvqa there'}); "
                         "build it without --reuse")
    print(f"compiled engine: {check}", flush=True)
    if not script:
        return 0
    return subprocess.run([sys.executable, *script], env=env, cwd=ROOT).returncode


if __name__ == "__main__":
    raise SystemExit(main())
