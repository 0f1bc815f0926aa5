"""--executor ray gives the same files as the local executor (skipped when the ray extra is absent):
on a local Ray instance the build starts itself, and on a two-node cluster (two raylets on this
machine, started by the test through ``ray.cluster_utils.Cluster``) that the build joins, where
both nodes run read and shard tasks over the shared output folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from radvqa.run.builder import build

from test_run_build import files_bytes, opts, records  # noqa: E402  (tests/ is on sys.path under pytest)

ray = pytest.importorskip("ray")


def test_ray_output_identical_to_local(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)  # start a local Ray instance
    recs = records(200)
    build(opts(tmp_path / "local", workers=1), records=recs)
    m = build(opts(tmp_path / "ray", workers=2, executor="ray"), records=recs)
    assert m["options"]["executor"] == "ray"
    assert files_bytes(tmp_path / "ray") == files_bytes(tmp_path / "local")
    assert (tmp_path / "ray" / "rejected.jsonl").read_bytes() == (tmp_path / "local" / "rejected.jsonl").read_bytes()
    assert not ray.is_initialized()  # the local instance it started is shut down


def test_two_node_cluster_identical_to_local(tmp_path: Path, monkeypatch) -> None:
    from ray.cluster_utils import Cluster

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    # the synthetic source read by the workers (8 parts) and 8 shards, so both nodes get tasks
    local = build(opts(tmp_path / "local", workers=1, studies=480), records=None)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        monkeypatch.setenv("RAY_ADDRESS", cluster.address)  # what a user sets to join a cluster
        m = build(opts(tmp_path / "ray2", workers=4, executor="ray", studies=480), records=None)
        assert len([n for n in ray.nodes() if n["Alive"]]) == 2
        assert ray.is_initialized()  # a cluster the build joined is left running for its owner
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert m["options"]["nodes"] == 2, "every task ran on one node"
    assert m["timings"]["read_parts"] == 8
    assert m["counts"] == local["counts"]
    assert files_bytes(tmp_path / "ray2") == files_bytes(tmp_path / "local")
    assert (tmp_path / "ray2" / "rejected.jsonl").read_bytes() == (tmp_path / "local" / "rejected.jsonl").read_bytes()
