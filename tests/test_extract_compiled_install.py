"""The compiled extraction engine as an opt-in install (#12): ``RADVQA_COMPILE=1 pip install .``
compiles the engine modules with mypyc (setup.py), the default install stays pure Python, and
``radvqa info`` / the build manifest (``extractor.compiled``) say which one runs. The test that
compiles builds a real wheel (about 1.5 minutes on two cores) and runs only where mypy, a C
compiler and Python.h are present."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from radvqa.cli import app
from radvqa.extract.compiled import MODULES, compile_requested, engine_info, engine_modules

ROOT = Path(__file__).resolve().parents[1]
OPENI = Path(__file__).parent / "data" / "openi_issue13r10"


def test_pure_engine_reports_not_compiled() -> None:
    # the test run imports the checkout's .py files: the pure Python engine
    files = engine_modules()
    assert sorted(files) == sorted(MODULES) and all(f.endswith(".py") for f in files.values()), files
    assert engine_info() == {"compiled": False, "modules_compiled": 0, "modules": len(MODULES)}
    res = CliRunner().invoke(app, ["info"])
    assert res.exit_code == 0, res.output
    assert "extraction engine: pure Python" in res.output


def test_manifest_says_which_engine(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["build", "openi", "--input", str(OPENI), "--out", str(tmp_path / "b"), "-q"])
    assert res.exit_code == 0, res.output
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["extractor"] == {"name": "rules", "compiled": False}


def test_compile_switch_values() -> None:
    assert [compile_requested(v) for v in (None, "", "0", "false", "no", "1", "true", "YES")] == \
        [False, False, False, False, False, True, True, True]
    with pytest.raises(ValueError, match="RADVQA_COMPILE"):
        compile_requested("fast")


def test_engine_modules_are_the_ones_setup_compiles() -> None:
    # setup.py and benchmarks/extraction_compiled.py read the list from compiled.py; every module
    # in it exists, and the modules it leaves out are the ones mypyc cannot build (see compiled.py)
    for m in MODULES:
        assert (ROOT / "src" / "radvqa" / "extract" / f"{m}.py").is_file(), m
    assert "RADVQA_COMPILE" in (ROOT / "setup.py").read_text()


def _compile_skip_reason() -> str | None:
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        return "mypy (mypyc) is not installed: pip install 'radvqa[compile]'"
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if not shutil.which(cc):
        return f"no C compiler ({cc}) on PATH"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        return "no Python.h (the Python development headers) for this interpreter"
    return None


_DUMP = """
import json, sys
from radvqa.extract import get_extractor
from radvqa.extract.compiled import engine_info
from radvqa.extract.labels import Labeler
from radvqa.model import to_json
from radvqa.ontology import load_ontology
onto = load_ontology()
lab = Labeler(onto, "nih14")
out = open(sys.argv[2], "wb")
out.write(json.dumps(engine_info()).encode() + b"\\n")
texts = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for cache in (50000, 0):
    ex = get_extractor("rules", ontology=onto, cache_size=cache)
    for d in texts + texts:
        e = ex.extract(d["text"], d["report_id"])
        out.write(to_json(e) + json.dumps(lab.label(e), sort_keys=True).encode() + b"\\n")
"""


@pytest.mark.timeout(300)
def test_compiled_wheel_gives_the_same_scene_graphs(tmp_path: Path) -> None:
    reason = _compile_skip_reason()
    if reason:
        pytest.skip(reason)
    # build from a copy: mypyc writes build/ and C files beside the sources
    proj = tmp_path / "proj"
    proj.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, proj / name)
    shutil.copytree(ROOT / "_build", proj / "_build", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "src", proj / "src", ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info"))
    # -O0: the test checks the build and the output, not the speed (halves the C compile time)
    env = dict(os.environ, RADVQA_COMPILE="1", MYPYC_OPT_LEVEL="0")
    env.pop("PYTHONPATH", None)
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation",
                          "-w", str(tmp_path / "dist"), "-q"], cwd=proj, env=env, capture_output=True,
                         text=True, timeout=280)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("radvqa-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        z.extractall(tmp_path / "site")  # what pip install puts in site-packages
    for m in MODULES:
        assert any(n.startswith(f"radvqa/extract/{m}.") and n.endswith(tuple(_ext())) for n in names), m

    texts = ROOT / "tests" / "data" / "extraction_gold" / "dev.jsonl"
    (tmp_path / "dump.py").write_text(_DUMP)
    outs = {}
    for kind, path in (("pure", ROOT / "src"), ("compiled", tmp_path / "site")):
        run_env = dict(os.environ, PYTHONPATH=str(path))
        r = subprocess.run([sys.executable, str(tmp_path / "dump.py"), str(texts), str(tmp_path / f"{kind}.out")],
                           env=run_env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
        outs[kind] = (tmp_path / f"{kind}.out").read_bytes().split(b"\n", 1)
    assert json.loads(outs["pure"][0])["compiled"] is False
    assert json.loads(outs["compiled"][0]) == {"compiled": True, "modules_compiled": len(MODULES),
                                               "modules": len(MODULES)}
    assert outs["compiled"][1].count(b"\n") > 400  # 100+ gold reports, 2 passes, 2 cache settings
    assert outs["compiled"][1] == outs["pure"][1]  # byte-identical scene graphs and labels
    info = subprocess.run([sys.executable, "-m", "radvqa.cli", "info"], env=dict(os.environ, PYTHONPATH=str(tmp_path / "site")),
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert "extraction engine: compiled (mypyc)" in info.stdout, info.stdout + info.stderr


def _ext() -> list[str]:
    import importlib.machinery

    return list(importlib.machinery.EXTENSION_SUFFIXES)
