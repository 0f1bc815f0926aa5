"""The one on-disk answer cache (SQLite, stdlib) for every model call: predict, the LLM extractor,
the eval judge and the grade judge each keep one in their own folder, keyed by whatever makes an
answer reproducible for them (model, prompt version, inputs). Callers store only valid answers, so
failures are asked again next time.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any


def default_cache_dir() -> Path:
    env = os.environ.get("RADVQA_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "radvqa" / "predict"


def key_of(*parts: str) -> str:
    """sha256 over the parts, NUL-separated (a part cannot run into the next)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()


class AnswerCache:
    """Thread-safe key -> {"text", "seen_sizes"} store in one SQLite file."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / "cache.sqlite3"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable enough, no fsync per answer
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS predictions (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )
        self._db.commit()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM predictions WHERE key = ?", (key,)).fetchone()
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
        return json.loads(row[0])

    def put(self, key: str, value: dict[str, Any]) -> None:
        data = json.dumps(value, ensure_ascii=False, sort_keys=True)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO predictions (key, value) VALUES (?, ?)", (key, data)
            )
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM predictions").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
