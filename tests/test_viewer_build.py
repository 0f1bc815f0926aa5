"""The viewer on a real `radvqa build` output (the bundled sample: OpenI reports, NIH images with
expert boxes), written with small shards and row groups so paging crosses many units."""

from __future__ import annotations

import http.client
import importlib.util
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as pads
import pytest

from radvqa.viewer.query import NULL_TOKEN, Filters, ViewerDataset
from radvqa.viewer.server import ViewerServer, start_in_thread


def _fixture_module():
    spec = importlib.util.spec_from_file_location("viewer_fixture", Path(__file__).parent / "data/viewer/fixture.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _fixture_module().build_sample(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def table(built: Path):
    return pads.dataset(sorted((built / "qa").glob("*.parquet")), format="parquet").to_table()


def test_facets_agree_with_the_table_and_the_manifest(built: Path, table) -> None:
    data = ViewerDataset(built)
    assert len(data.units) > 3 and data.total_rows == table.num_rows
    f = data.facets()["facets"]
    assert dict(map(tuple, f["strategy"])) == dict(Counter(table.column("strategy").to_pylist()))
    assert dict(map(tuple, f["finding"])) == dict(Counter(x for xs in table.column("findings").to_pylist() for x in xs))
    pol = Counter(NULL_TOKEN if v is None else v for v in table.column("polarity").to_pylist())
    assert dict(map(tuple, f["polarity"])) == dict(pol)
    import json

    counts = json.loads((built / "manifest.json").read_text())["counts"]
    if "qa_by_strategy" in counts:
        assert dict(map(tuple, f["strategy"])) == counts["qa_by_strategy"]


def test_paged_filter_equals_the_filtered_table(built: Path, table) -> None:
    data = ViewerDataset(built)
    finding = data.facets()["facets"]["finding"][0][0]
    mask = [finding in xs and s == "qba" for xs, s in zip(table.column("findings").to_pylist(),
                                                           table.column("strategy").to_pylist(), strict=True)]
    expected = [q for q, m in zip(table.column("qa_id").to_pylist(), mask, strict=True) if m]
    filters = Filters.make({"finding": [finding], "strategy": ["qba"]})
    got: list[str] = []
    for offset in range(0, len(expected), 37):
        got += [r["qa_id"] for r in data.query(filters, offset, 37).rows]
    assert got == expected and len(expected) > 37


def test_every_image_of_the_build_is_served_and_boxes_fit(built: Path, table) -> None:
    data = ViewerDataset(built)
    srv = ViewerServer(data, "127.0.0.1", 0)
    start_in_thread(srv)
    try:
        with_boxes = table.filter(pc.greater(pc.list_value_length(table.column("boxes")), 0))
        assert with_boxes.num_rows > 0  # the NIH part of the sample has expert boxes
        seen: set[str] = set()
        for row in with_boxes.to_pylist():
            item = data.present(row)
            for im in item["images"]:
                if not im["path"]:
                    continue  # e.g. the prior image of a diff question, not on disk
                assert im["url"], f"no URL for {im['path']}"
                if im["url"] not in seen:
                    seen.add(im["url"])
                    conn = http.client.HTTPConnection(*srv.server_address[:2], timeout=10)
                    conn.request("GET", im["url"])
                    resp = conn.getresponse()
                    # stored paths are relative to the manifest's image_roots (see ARCHITECTURE.md)
                    real = data.gate.url_for(im["path"])[1]
                    assert real is not None and resp.status == 200 and resp.read() == real.read_bytes()
                    conn.close()
                for b in row["boxes"]:
                    if b["image_id"] == im["id"]:
                        assert 0 <= b["x1"] < b["x2"] <= im["width"] and 0 <= b["y1"] < b["y2"] <= im["height"]
        assert seen
    finally:
        srv.shutdown()
        srv.server_close()
