"""Portable image paths: each stored image path is relative to the first image root containing it.

Contract (docs/ARCHITECTURE.md, "Image paths"): ``manifest.json`` carries ``"image_roots"``, the
absolute folders of the build's inputs (a folder as given, a file's parent folder), in input order.
Every ``SceneGraph.images[].path`` and ``QA.image_paths`` entry is stored relative to the first of
those roots that contains the file (POSIX separators), and stays absolute only when it lies under
no root. A reader resolves a relative path by trying ``root / path`` for each root in order.

The rewrite happens once per study in the read phase (before the spill), so the pipeline, the
generator and every worker only ever see the portable form and output stays identical whatever the
worker count. The images themselves are never opened here (paths are compared as strings after
``os.path.abspath``; a second try with symlinks resolved catches roots given through a link).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from radvqa.model import Study

MEMO_MAX = 65_536


def image_roots_for(inputs: Sequence[Path | str]) -> list[str]:
    """Absolute roots of the build inputs, in order, without duplicates or the file system root."""
    roots: list[str] = []
    for inp in inputs:
        p = os.path.abspath(os.fspath(inp))
        root = p if os.path.isdir(p) else os.path.dirname(p)
        if root and root != os.path.dirname(root) and root not in roots:
            roots.append(root)
    return roots


class PathRelativizer:
    """Maps a source's image path to its stored form; remembers answers (studies share folders)."""

    def __init__(self, roots: Sequence[str], cwd: str | None = None) -> None:
        self.roots = list(roots)
        self._real = [os.path.realpath(r) for r in self.roots]
        self.cwd = cwd or os.getcwd()
        self._memo: dict[str, str] = {}

    def _under(self, p: str, roots: list[str]) -> str | None:
        for r in roots:
            if p == r:
                continue
            if p.startswith(r.rstrip(os.sep) + os.sep):
                return os.path.relpath(p, r).replace(os.sep, "/")
        return None

    def __call__(self, path: str) -> str:
        got = self._memo.get(path)
        if got is not None:
            return got
        if len(self._memo) >= MEMO_MAX:  # most paths are seen once: keep memory flat in N
            self._memo.clear()
        if os.path.isabs(path):
            p = os.path.normpath(path)
        else:
            # a relative path from a source: relative to the current folder if the file is there,
            # else to the first root holding it (then it is already in its stored form)
            cand = os.path.normpath(os.path.join(self.cwd, path))
            if not os.path.exists(cand):
                for r in self.roots:
                    if os.path.exists(os.path.join(r, path)):
                        cand = os.path.normpath(os.path.join(r, path))
                        break
                else:
                    self._memo[path] = path  # nowhere on disk: kept exactly as the source gave it
                    return path
            p = cand
        rel = self._under(p, self.roots)
        if rel is None:
            rel = self._under(os.path.realpath(p), self._real)
        out = rel if rel is not None else p
        self._memo[path] = out
        return out

    def study(self, study: Study) -> Study:
        """Rewrite the study's image paths in place (and return it)."""
        for im in study.images:
            if im.path:
                im.path = self(im.path)
        return study
