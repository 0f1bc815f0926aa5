"""Which files the viewer may hand out, and how a QA row's image path becomes a URL.

Only two kinds of places are served: the dataset folder itself (key ``d``) and the image roots the
dataset's manifest declares (keys ``r0``, ``r1``, ...), and from either only image files (by suffix,
``IMAGE_SUFFIXES``): the page reads the dataset's Parquet, manifest and scene graphs through the
server's /api routes, never as files, so nothing else there needs a URL. Every request path is checked segment by
segment *after* percent-decoding and then again after resolving symlinks, so ``..``, encoded
``..``, absolute paths, hidden files and symlinks that lead outside a root all end in "not found".
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from radvqa.viewer.images import BROWSER_SUFFIXES

DATASET_KEY = "d"
# what any root may hand out: pictures only, so a root that is a broad folder (a build input)
# does not expose reports, label files or anything else that sits beside the images, and the
# dataset folder does not hand out its rejected.jsonl (report excerpts), Parquet or manifest
IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp", ".tif", ".tiff", ".dcm", ".dicom"})


class DatasetError(ValueError):
    """The directory is not a radvqa dataset the viewer can read (said why)."""


@dataclass(frozen=True)
class Root:
    key: str  # URL segment: "d" (dataset folder) or "r<i>" (declared image root i)
    path: Path  # as declared (made absolute)
    real: str  # realpath, what containment is checked against


def load_manifest(dataset_dir: Path) -> dict[str, Any]:
    """The manifest as a dict; {} when the folder has none (a bare qa/ folder still browses)."""
    mpath = dataset_dir / "manifest.json"
    if not mpath.exists():
        return {}
    try:
        data = json.loads(mpath.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{mpath}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise DatasetError(f"{mpath}: expected a JSON object, got {type(data).__name__}")
    return data


def declared_image_roots(manifest: dict[str, Any], dataset_dir: Path) -> list[Path]:
    """Image roots of a dataset, in order. Relative entries are taken relative to the dataset
    folder (so a dataset that ships its images beside it can be moved as one folder).

    1. Declared: ``image_roots`` (list, single string or {name: path}) or ``image_root``, at the top
       level of the manifest or inside its ``options`` object.
    2. Otherwise the build's ``inputs`` (a folder as given; a file's parent folder): the images a
       row points at came from there. For the bundled sample (``source: sample`` without inputs)
       that is the sample folder inside the package.
    Only image files are ever served from these roots (see ``IMAGE_SUFFIXES``)."""
    found: list[str] = []
    for holder in (manifest, manifest.get("options")):
        if not isinstance(holder, dict):
            continue
        for key in ("image_roots", "image_root"):
            val = holder.get(key)
            if isinstance(val, str):
                found.append(val)
            elif isinstance(val, list):
                found.extend(v for v in val if isinstance(v, str))
            elif isinstance(val, dict):
                found.extend(v for v in val.values() if isinstance(v, str))
    if not found:
        inputs = manifest.get("inputs")
        if isinstance(inputs, str):
            inputs = [inputs]
        if isinstance(inputs, list):
            for entry in inputs:
                if isinstance(entry, str) and entry:
                    p = Path(entry) if Path(entry).is_absolute() else dataset_dir / entry
                    found.append(str(p if p.is_dir() else p.parent))
        if not found and manifest.get("source") == "sample":
            found.extend(str(p) for p in _sample_inputs())
    roots: list[Path] = []
    for entry in found:
        p = Path(entry)
        if not p.is_absolute():
            p = dataset_dir / p
        p = Path(os.path.abspath(p))
        if p not in roots and unsafe_root(p) is None:
            roots.append(p)
    return roots


def unsafe_root(p: Path) -> str | None:
    """Why a declared image root must not be served, or None. Judged on the RESOLVED path, so
    ``/proc/self/root`` or a symlink to ``/`` cannot pass as a narrow folder: never the whole file
    system, and never a folder that holds the user's home (``/home``, ``~`` itself)."""
    real = os.path.realpath(p)
    if real == os.path.realpath(Path(real).anchor or os.sep):
        return f"{p} resolves to the file-system root"
    home = os.path.realpath(os.path.expanduser("~"))
    if home and home != os.sep and _inside(home, real):
        return f"{p} resolves to {real}, which holds the home folder {home}"
    return None


def _sample_inputs() -> list[Path]:
    try:
        from radvqa.sources.sample import sample_inputs
    except ImportError:  # sources area not installed in this tree
        return []
    return [p for p in sample_inputs() if p.is_dir()]


class FileGate:
    """Maps URL paths to files under the allowed roots, refusing everything else."""

    def __init__(self, dataset_dir: Path, image_roots: list[Path]):
        ds = Path(os.path.abspath(dataset_dir))
        self.roots: dict[str, Root] = {DATASET_KEY: Root(DATASET_KEY, ds, os.path.realpath(ds))}
        for i, r in enumerate(image_roots):
            if unsafe_root(r) is not None:
                continue  # checked again here: callers may pass roots not read from a manifest
            key = f"r{i}"
            self.roots[key] = Root(key, r, os.path.realpath(r))

    # -- request side -------------------------------------------------------------------------
    def resolve(self, key: str, rel: str) -> Path | None:
        """The real file for ``/files/<key>/<rel>`` (``rel`` already percent-decoded once), or
        None when it must not be served (unknown root, bad segment, outside, not a file)."""
        root = self.roots.get(key)
        if root is None or not rel:
            return None
        if "\x00" in rel or "\\" in rel:
            return None
        segments = rel.split("/")
        for seg in segments:
            # empty segment = "//" (an absolute path smuggled in) ; dot-segments and hidden files
            if not seg or seg.startswith("."):
                return None
        real = os.path.realpath(os.path.join(root.real, *segments))
        if not _inside(real, root.real):
            return None  # a symlink (file or folder) that leads out of the root
        if not os.path.isfile(real):
            return None  # directories are never listed
        # the suffix of the name asked for AND of the file it resolves to: a link "x.png" -> notes.txt
        # inside the root is refused as well
        if not _image_name(segments[-1]) or not _image_name(real):
            return None
        return Path(real)

    # -- data side ----------------------------------------------------------------------------
    def url_for(self, image_path: str) -> tuple[str | None, Path | None]:
        """URL and real file for an image path as a QA row stores it (absolute, or relative to
        one of the roots). ``(None, None)`` when no allowed root holds it."""
        if not image_path:
            return None, None
        p = Path(image_path)
        if p.is_absolute():
            real = os.path.realpath(p)
            for root in self._image_first():
                if _inside(real, root.real) and os.path.isfile(real):
                    rel = os.path.relpath(real, root.real).replace(os.sep, "/")
                    if self.resolve(root.key, rel) is not None:
                        return self._url(root.key, rel), Path(real)
            return None, None
        rel = image_path.replace("\\", "/").lstrip("/")
        for root in self._image_first():
            hit = self.resolve(root.key, rel)
            if hit is not None:
                return self._url(root.key, rel), hit
        return None, None

    def _image_first(self) -> list[Root]:
        # declared image roots first: that is where image_paths are meant to be relative to
        return [r for k, r in self.roots.items() if k != DATASET_KEY] + [self.roots[DATASET_KEY]]

    @staticmethod
    def _url(key: str, rel: str) -> str:
        # DICOM/TIFF are not shown by browsers: those go through /render (an 8-bit PNG copy)
        kind = "files" if os.path.splitext(rel)[1].lower() in BROWSER_SUFFIXES else "render"
        return f"/{kind}/{key}/" + quote(rel, safe="/")


def _image_name(name: str) -> bool:
    return os.path.splitext(name)[1].lower() in IMAGE_SUFFIXES


def _inside(real: str, root_real: str) -> bool:
    return real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep)
