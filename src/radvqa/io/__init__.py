"""radvqa.io: Arrow schemas of the IR, sharded Parquet writer/readers, manifest, rejects, dataset card,
validate, stats and exports.

    from radvqa.io import qa_schema, read_qa, ShardWriter, validate
    read_qa("radvqa-out")          # list[QA] over all shards
    validate("radvqa-out").ok

Names are imported lazily so ``radvqa --help`` (which imports ``radvqa.io.cli``) does not load pyarrow.
"""

from __future__ import annotations

from typing import Any

_WHERE = {
    "ShardWriter": "parquet", "WriteError": "parquet", "iter_batches": "parquet", "iter_objects": "parquet",
    "read_qa": "parquet", "read_scene_graphs": "parquet", "read_table": "parquet", "shard_files": "parquet",
    "SCHEMA_VERSION": "schema", "codec": "schema", "qa_schema": "schema", "qa_to_table": "schema",
    "scene_graph_schema": "schema", "scene_graphs_to_table": "schema", "table_to_qa": "schema",
    "table_to_scene_graphs": "schema", "validate": "validate", "export": "export", "compute_stats": "stats",
    "read_manifest": "manifest",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module 'radvqa.io' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"radvqa.io.{mod}"), name)
