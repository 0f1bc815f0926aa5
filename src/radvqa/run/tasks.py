"""What the executors ship to workers and get back: typed, plain-data structs (msgspec), so a task
pickles to a process pool or Ray and a shard's statistics round-trip through its completion marker.

- ``ReadTask`` / ``ReadStats``: one part of the sources (a patient range of the synthetic source,
  a row range of a table, ...), read by a worker and spilled to that part's bucket files.
- ``ShardTask`` / ``ShardStats``: one output shard (the buckets ``b % n_shards == shard`` of every
  part), processed by ``run/worker.run_shard``.
"""

from __future__ import annotations

from typing import Any

import msgspec


class ReadTask(msgspec.Struct, frozen=True, kw_only=True):
    spill: str  # the spill folder; this part writes ``spill/pNNNN/`` and ``spill/pNNNN.rejected.jsonl``
    part: int
    n_parts: int
    source: str  # registry name, or "module:Class" (benchmarks)
    inputs: list[str]  # absolute paths
    image_roots: list[str]
    cwd: str  # the driver's folder: relative image paths in sources resolve against it
    studies: int | None = None  # the synthetic source's --studies
    source_options: dict[str, Any] = msgspec.field(default_factory=dict)  # typed options of the source (--reflacx-*)
    seed: int = 0
    limit: int | None = None
    strict: bool = False
    spec: Any = None  # the source's description of this part (None: the whole source)


class ReadStats(msgspec.Struct, kw_only=True):
    part: int
    studies: int
    source_rejects: int  # rejected records that are studies
    row_rejects: int = 0  # rejected table rows that are not studies (a box, label or size row)
    records_read: int | None = None  # the adapter's own count, where it counts (sources.base.ReadCounts)
    seconds: float
    pid: int


class ShardTask(msgspec.Struct, frozen=True, kw_only=True):
    out: str
    spill: str
    shard: int
    n_shards: int
    n_parts: int
    options: dict[str, Any]
    # delete this shard's spill files once its marker is written (``build`` without keep_spill):
    # each worker removes its own inputs, in parallel, instead of the driver removing the whole
    # spill after the last shard (~0.8 s for synthetic 200k on the 16-core device)
    drop_spill: bool = False


class ShardStats(msgspec.Struct, kw_only=True):
    shard: int
    n_shards: int
    studies_in: int
    studies_out: int
    studies_rejected: int
    patients: int
    qa_rows: int
    scene_graph_rows: int
    qa_by_strategy: dict[str, int]
    qa_by_question_type: dict[str, int]
    grades: dict[str, int]
    qa_by_split: dict[str, int]
    studies_by_split: dict[str, int]
    rejects_by_stage: dict[str, int]
    reject_lines: int
    files: dict[str, int]  # path relative to the output folder -> size in bytes
    timings: dict[str, float]
    pid: int
    # io.stats.image_counts of this shard's files, counted by the worker (the parent only adds
    # them: no serial pass over the whole output); None in a marker written before this field
    image_counts: dict[str, int] | None = None
    # positive findings the rows leave unstated, by why (Generator.not_stated); None in a marker
    # written before this field
    findings_not_stated: dict[str, int] | None = None
    # studies whose "normal" claims a sentence kept away, by why (Generator.normal_blocked)
    normal_claims_blocked: dict[str, int] | None = None
    # list rows said and taken back, by why (Generator.rows_withheld)
    rows_withheld: dict[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        return msgspec.structs.asdict(self)


Task = ReadTask | ShardTask
Result = ReadStats | ShardStats
