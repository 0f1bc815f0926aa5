"""The package layers of docs/ARCHITECTURE.md hold in the code (issue 18, item 8): every import in
src/radvqa (module level or inside a function, TYPE_CHECKING included) goes from a package to one
in a lower layer, never sideways or up, so there is no cycle between packages. The layer table is
read from the document itself, so the document and the code cannot drift apart. An area's
``cli.py`` (command wiring, registered by radvqa.cli) may import any package."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SRC = ROOT / "src" / "radvqa"
DOC = ROOT / "docs" / "ARCHITECTURE.md"


def layers() -> dict[str, int]:
    """package -> layer number, from the block between the layer markers of ARCHITECTURE.md."""
    text = DOC.read_text(encoding="utf-8")
    m = re.search(r"<!-- layers:begin -->(.*?)<!-- layers:end -->", text, re.S)
    assert m, f"{DOC} has no <!-- layers:begin --> ... <!-- layers:end --> block"
    out: dict[str, int] = {}
    for line in m.group(1).splitlines():
        lm = re.match(r"\s*(\d+)\.\s+(.+?)\s*(?:#.*)?$", line)
        if not lm:
            continue
        for pkg in re.findall(r"`([\w.]+)`", lm.group(2)):
            assert pkg not in out, f"{pkg} is listed twice in the layer table"
            out[pkg] = int(lm.group(1))
    assert out, "the layer table is empty"
    return out


def _package(module: str) -> str | None:
    """radvqa.generate.engine -> generate; radvqa.model -> model; radvqa -> radvqa."""
    parts = module.split(".")
    if parts[0] != "radvqa":
        return None
    return parts[1] if len(parts) > 1 else "radvqa"


def _module_name(path: Path, src: Path) -> str:
    rel = path.relative_to(src.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(src: Path = SRC) -> list[tuple[str, str, str]]:
    """(importing package, imported package, "file:line") for every import between packages."""
    out = []
    for path in sorted(src.rglob("*.py")):
        mod = _module_name(path, src)
        if path.name == "cli.py" and mod != "radvqa.cli":
            continue  # an area's command wiring may import any area
        src_pkg = _package(mod)
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".")
                    base = base[: len(base) - node.level + (1 if is_pkg else 0)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                # "from radvqa import x": x may be a package (radvqa.x) or an attribute of radvqa
                targets = [f"{target}.{a.name}" for a in node.names] if target == "radvqa" else [target]
            else:
                continue
            for t in targets:
                dst = _package(t)
                if dst is None or dst == src_pkg:
                    continue
                if t.startswith("radvqa.") and not (src / dst).exists() and not (src / f"{dst}.py").exists():
                    dst = "radvqa"  # an attribute of the root package (__version__)
                out.append((src_pkg, dst, f"{path.relative_to(src.parent)}:{node.lineno}"))
    return out


def test_every_package_has_a_layer():
    table = layers()
    pkgs = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    pkgs |= {p.stem for p in SRC.glob("*.py") if p.stem not in ("__init__",)}
    pkgs.add("radvqa")
    missing = sorted(pkgs - set(table))
    assert not missing, f"packages/modules not in the layer table of {DOC.name}: {missing}"
    stale = sorted(set(table) - pkgs)
    assert not stale, f"layer table names packages that do not exist: {stale}"


def test_no_import_reaches_sideways_or_up():
    table = layers()
    bad = [f"{where}: {a} (layer {table[a]}) imports {b} (layer {table[b]})"
           for a, b, where in imports() if a in table and b in table and table[b] >= table[a]]
    assert not bad, "imports against the layer order of docs/ARCHITECTURE.md:\n" + "\n".join(bad)


def test_no_cycle_between_packages():
    graph: dict[str, set[str]] = {}
    for a, b, _ in imports():
        graph.setdefault(a, set()).add(b)
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> None:
        state[n] = 1
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                pytest.fail("package cycle: " + " -> ".join(path[path.index(m):] + [m]) if m in path
                            else f"package cycle through {m}")
            if m not in state:
                visit(m, path + [m])
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n, [n])


def test_the_checker_sees_lazy_and_relative_imports(tmp_path):
    """An import inside a function counts (io/card.py once imported run.worker that way), and so
    does a relative one; an area's cli.py is exempt."""
    pkg = tmp_path / "radvqa"
    for d in ("io", "run", "generate"):
        (pkg / d).mkdir(parents=True)
        (pkg / d / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("__version__ = '0'\n")
    (pkg / "io" / "card.py").write_text("def f():\n    from radvqa.run.worker import write\n    return write\n")
    (pkg / "generate" / "x.py").write_text("from ..run import y\nfrom radvqa import __version__\n")
    (pkg / "io" / "cli.py").write_text("import radvqa.run.builder\n")
    found = sorted((a, b) for a, b, _ in imports(pkg))
    assert found == [("generate", "radvqa"), ("generate", "run"), ("io", "run")]
    # and the real tree: the lazy io -> run and quality -> run imports are gone
    real = {(a, b) for a, b, _ in imports()}
    assert ("generate", "quality") in real and ("io", "run") not in real and ("quality", "run") not in real
