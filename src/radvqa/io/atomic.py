"""Atomic file writes: write under a temporary name beside the target, then rename over it.

A reader (or a resumed build) sees either the old file or the complete new one, never a part of
it; a failed write leaves no temporary file behind and raises ``WriteError`` naming the file and
the reason (disk full, permission denied, ...). Every writer of the package's output uses these:
Parquet shards (io/parquet.py), manifest, card, markers, reject files and run state.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# the output folder's state directory (run fingerprint, spill, shard markers): shared by the build
# runner and the passes that rewrite a finished build (quality/regrade.py)
STATE_DIR = ".radvqa"


class WriteError(OSError):
    """A file could not be written; the message says which file and why."""


def state_dir(out: Path) -> Path:
    return Path(out) / STATE_DIR


def tmp_name(final: Path) -> Path:
    """The temporary name a file is written under before the rename: hidden, same folder."""
    return final.with_name(f".{final.name}.tmp")


def explain(exc: OSError, path: Path) -> str:
    if exc.errno == errno.ENOSPC:
        why = "no space left on device (disk full)"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        why = "permission denied"
    elif exc.errno == errno.EROFS:
        why = "read-only file system"
    else:
        why = exc.strerror or str(exc)
    return f"cannot write {path}: {why}"


@contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """Yield the temporary path to write; on success rename it to ``path``, on failure remove it
    and raise ``WriteError`` (an ``OSError`` subclass) with a clear message. The parent folder is
    created."""
    path = Path(path)
    tmp = tmp_name(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        if isinstance(exc, WriteError):
            raise
        raise WriteError(exc.errno, explain(exc, path)) from exc
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


def write_atomic(path: Path | str, data: str | bytes, fsync: bool = True) -> None:
    """Write text (UTF-8) or bytes to ``path`` atomically; ``fsync``: flushed to disk before the
    rename, so a marker never names a file the disk does not hold after a crash."""
    with atomic_path(path) as tmp:
        if isinstance(data, bytes):
            f = open(tmp, "wb")
        else:
            f = open(tmp, "w", encoding="utf-8")
        with f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
