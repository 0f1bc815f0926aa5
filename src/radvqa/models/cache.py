"""On-disk prediction cache (SQLite, stdlib): a second run with the same model, prompt version,
images and parameters sends no request.

Key = sha256 over a canonical JSON of (model spec, adapter params, image prep, prompt set tag,
system + prompt text, sha256 of every image file). Only successful answers are stored, so errors
are retried next time.
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


def cache_key(
    *,
    model: str,
    params: dict[str, Any],
    prep: dict[str, Any],
    prompt_tag: str,
    system: str | None,
    prompt: str,
    image_hashes: list[str],
) -> str:
    payload = json.dumps(
        {
            "model": model,
            "params": params,
            "prep": prep,
            "prompt_tag": prompt_tag,
            "system": system,
            "prompt": prompt,
            "images": image_hashes,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class PredictionCache:
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
