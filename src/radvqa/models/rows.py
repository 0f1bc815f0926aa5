"""Stream question rows out of a radvqa dataset directory and resolve their image paths.

Reads only question-side columns (never answers), in Arrow record batches, so memory stays flat
whatever the dataset size.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Iterator

# Columns predict may read. Answer columns are deliberately absent (no leakage into prompts).
QUESTION_COLUMNS: tuple[str, ...] = (
    "qa_id",
    "question",
    "choices",
    "image_ids",
    "image_paths",
    "question_type",
    "strategy",
    "split",
    "modality",
    "source",
)
REQUIRED_COLUMNS: tuple[str, ...] = ("qa_id", "question", "image_paths")
# manifest.json keys that may name the image root (the I/O writer's, and common spellings)
_MANIFEST_ROOT_KEYS: tuple[str, ...] = ("image_root", "images_root", "image_dir", "images_dir")


class DatasetError(ValueError):
    pass


def _parquet_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise DatasetError(f"dataset not found: {path}")
    qa = path / "qa"
    base = qa if qa.is_dir() else path
    files = sorted(p for p in base.rglob("*.parquet") if not p.name.startswith((".", "_")))
    if not files:
        raise DatasetError(f"no QA Parquet files under {base} (expected {path}/qa/part-*.parquet)")
    return files


def read_manifest(path: Path) -> dict[str, Any]:
    m = (path if path.is_dir() else path.parent) / "manifest.json"
    if not m.is_file():
        return {}
    try:
        data = json.loads(m.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{m}: not valid JSON ({exc})") from exc
    return data if isinstance(data, dict) else {}


@dataclass
class QADataset:
    path: Path
    files: list[Path]
    manifest: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(cls, path: str | Path) -> QADataset:
        p = Path(path)
        return cls(path=p, files=_parquet_files(p), manifest=read_manifest(p))

    def _dataset(self) -> Any:
        import pyarrow.dataset as pads

        ds = pads.dataset([str(f) for f in self.files], format="parquet")
        missing = [c for c in REQUIRED_COLUMNS if c not in ds.schema.names]
        if missing:
            raise DatasetError(
                f"{self.path}: QA files lack column(s) {', '.join(missing)} (see DESIGN.md, QA row)"
            )
        return ds

    def _filter(self, ds: Any, split: str | None) -> Any:
        import pyarrow.dataset as pads

        if split is None:
            return None
        if "split" not in ds.schema.names:
            raise DatasetError(f"{self.path}: --split given but the QA files have no split column")
        return pads.field("split") == split

    def count(self, split: str | None = None) -> int:
        ds = self._dataset()
        return int(ds.count_rows(filter=self._filter(ds, split)))

    def iter_rows(self, split: str | None = None, batch_rows: int = 1024) -> Iterator[dict[str, Any]]:
        ds = self._dataset()
        cols = [c for c in QUESTION_COLUMNS if c in ds.schema.names]
        scanner = ds.scanner(columns=cols, filter=self._filter(ds, split), batch_size=batch_rows)
        # Scanner.to_batches keeps file and row order: predictions come out in dataset order
        for batch in scanner.to_batches():
            yield from batch.to_pylist()

    def image_roots(self, override: str | Path | None = None) -> list[Path]:
        """Where relative image paths are looked up, in order."""
        base = self.path if self.path.is_dir() else self.path.parent
        roots: list[Path] = []
        if override is not None:
            roots.append(Path(override))
        for src in (self.manifest, self.manifest.get("options") or {}):
            if not isinstance(src, dict):
                continue
            # "image_roots" (list) is what `radvqa build` writes: stored paths are relative to them
            declared = src.get("image_roots")
            vals = [declared] if isinstance(declared, str) else list(declared) if isinstance(declared, list) else []
            vals += [src.get(k) for k in _MANIFEST_ROOT_KEYS]
            for v in vals:
                if isinstance(v, str) and v:
                    r = Path(v)
                    roots.append(r if r.is_absolute() else base / r)
        roots += [base, base / "images"]
        # sources record paths as they found them (often relative to the directory `radvqa build`
        # ran in, or to an input folder): try the build inputs, then the current directory
        for inp in self.manifest.get("inputs") or []:
            ip = Path(inp.get("path", "") if isinstance(inp, dict) else str(inp))
            if str(ip) and ip.is_dir():
                roots.append(ip)
        roots.append(Path.cwd())
        seen: set[Path] = set()
        return [r for r in roots if not (r in seen or seen.add(r))]  # type: ignore[func-returns-value]


class ImageResolver:
    """Relative path -> existing file, trying each root; remembers answers (rows share images)."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = roots
        self._memo: dict[str, Path | None] = {}

    def resolve(self, path: str) -> Path | None:
        if path in self._memo:
            return self._memo[path]
        p = Path(path).expanduser()
        found: Path | None = None
        if p.is_absolute():
            found = p if p.is_file() else None
        else:
            for root in self.roots:
                cand = root / p
                if cand.is_file():
                    found = cand
                    break
        if len(self._memo) < 200_000:
            self._memo[path] = found
        return found

    def describe(self) -> str:
        return ", ".join(str(r) for r in self.roots)
