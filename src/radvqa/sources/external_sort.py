"""Sorting more records than memory should hold: an external merge sort for adapters that must
group rows by a key the files are not ordered by (REFLACX's readings of one study sit in different
metadata files and rows).

Records are added one by one; every ``run_size`` of them are sorted and written to an anonymous
temporary file (one pickle per batch of ``BATCH`` records, so the merge reads them back a batch at
a time), the last run
stays in memory, and iteration merges the runs (``heapq.merge``). Memory is then one run plus one
batch per spilled run, whatever the number of records; a table that fits one
run is never written to disk. Records must be tuples with a total order (no two equal up to a
field whose types do not compare): the adapter ends them with a unique position (file, line).
"""

from __future__ import annotations

import heapq
import pickle
import tempfile
from collections.abc import Iterator
from typing import IO, Any

RUN_SIZE = 4096
BATCH = 128  # records per pickle: one pickle per record costs more than reading a reading's files


class ExternalSort:
    def __init__(self, run_size: int = RUN_SIZE) -> None:
        if run_size < 1:
            raise ValueError("run_size must be >= 1")
        self.run_size = run_size
        self._buf: list[Any] = []
        self._runs: list[IO[bytes]] = []
        self.spilled = 0  # records written to disk (for benchmarks and tests)

    def add(self, record: Any) -> None:
        buf = self._buf
        buf.append(record)
        if len(buf) >= self.run_size:
            self._spill()

    def _spill(self) -> None:
        self._buf.sort()
        f = tempfile.TemporaryFile()
        buf = self._buf
        for i in range(0, len(buf), BATCH):
            f.write(pickle.dumps(buf[i:i + BATCH], 5))
        f.seek(0)
        self._runs.append(f)
        self.spilled += len(self._buf)
        self._buf = []

    def __iter__(self) -> Iterator[Any]:
        """The records in order (once: the runs are consumed and closed)."""
        buf, self._buf = self._buf, []
        buf.sort()
        if not self._runs:
            return iter(buf)
        return heapq.merge(*[_read_run(f) for f in self._runs], buf)

    def close(self) -> None:
        for f in self._runs:
            f.close()
        self._runs = []
        self._buf = []


def _read_run(f: IO[bytes]) -> Iterator[Any]:
    # pickle.load per batch (a fresh Unpickler each time): a reused one keeps its memo, and each
    # pickle numbers its memo from 0, so a shared memo would hand back wrong objects
    try:
        while True:
            try:
                batch = pickle.load(f)
            except EOFError:
                return
            yield from batch
    finally:
        f.close()


__all__ = ["RUN_SIZE", "ExternalSort"]
