"""Viewer: queries over the Parquet shards, the HTTP server (API + file gate), static export."""

from __future__ import annotations

import base64
import http.client
import importlib.util
import io
import json
import os
import re
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image
from typer.testing import CliRunner

from radvqa.model import QA, to_builtins
from radvqa.viewer.export import export_html, render_static
from radvqa.viewer.paths import DatasetError, declared_image_roots
from radvqa.viewer.query import NULL_TOKEN, Filters, QueryError, ViewerDataset
from radvqa.viewer.server import ViewerServer, parse_query, start_in_thread

DATA = Path(__file__).parent / "data" / "viewer"


def _fixture_module():
    spec = importlib.util.spec_from_file_location("viewer_fixture", DATA / "fixture.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


FX = _fixture_module()
ROWS = [to_builtins(r) for r in FX.make_rows()]


@pytest.fixture(scope="module")
def dsdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return FX.make_dataset(tmp_path_factory.mktemp("viewer") / "ds")


@pytest.fixture(scope="module")
def data(dsdir: Path) -> ViewerDataset:
    return ViewerDataset(dsdir)


def _expected(pred) -> list[str]:
    return [r["qa_id"] for r in ROWS if pred(r)]


# ---------------------------------------------------------------------------------- queries
def test_dataset_is_cut_into_row_group_units(data: ViewerDataset) -> None:
    assert data.total_rows == len(ROWS) == 30
    assert len(data.units) > 2  # two shards, several row groups each: paging crosses both


def test_facets_count_every_value(data: ViewerDataset) -> None:
    f = data.facets()
    assert f["total"] == 30
    assert dict(map(tuple, f["facets"]["strategy"])) == dict(Counter(r["strategy"] for r in ROWS))
    findings = Counter(x for r in ROWS for x in r["findings"])
    assert dict(map(tuple, f["facets"]["finding"])) == dict(findings)
    pol = Counter(NULL_TOKEN if r["polarity"] is None else r["polarity"] for r in ROWS)
    assert dict(map(tuple, f["facets"]["polarity"])) == dict(pol)
    counts = [c for _, c in f["facets"]["grade"]]
    assert counts == sorted(counts, reverse=True)  # most frequent first
    assert f["manifest"]["version"] == "viewer-fixture"


@pytest.mark.parametrize(
    ("facets", "text", "pred"),
    [
        ({"strategy": ["vindr"]}, "", lambda r: r["strategy"] == "vindr"),
        ({"question_type": ["D02_is_there_finding"]}, "", lambda r: r["question_type"] == "D02_is_there_finding"),
        ({"finding": ["pleural_effusion"]}, "", lambda r: "pleural_effusion" in r["findings"]),
        ({"region": ["left_lung"]}, "", lambda r: "left_lung" in r["regions"]),
        ({"grade": ["A++", "A+"]}, "", lambda r: r["grade"] in ("A++", "A+")),
        ({"split": ["test"]}, "", lambda r: r["split"] == "test"),
        ({"polarity": ["negative"]}, "", lambda r: r["polarity"] == "negative"),
        ({"polarity": [NULL_TOKEN]}, "", lambda r: r["polarity"] is None),
        ({"strategy": ["qba"], "finding": ["mass", "pneumothorax"]}, "",
         lambda r: r["strategy"] == "qba" and {"mass", "pneumothorax"} & set(r["findings"])),
        ({}, "PLEURAL   Effusion", lambda r: "pleural effusion" in r["question"].lower()),
        ({"split": ["train"]}, "where", lambda r: r["split"] == "train" and "where" in r["question"].lower()),
        ({"finding": ["no_such_finding"]}, "", lambda r: False),
    ],
)
def test_filters_select_exactly_the_matching_rows(data: ViewerDataset, facets, text, pred) -> None:
    filters = Filters.make(facets, text)
    page = data.query(filters, 0, 200)
    expected = _expected(pred)
    assert page.total == len(expected) == data.count(filters)
    assert [r["qa_id"] for r in page.rows] == expected  # dataset order, full rows
    for row in page.rows:
        assert set(row) >= {"question", "answer", "answer_parts", "boxes", "grade", "provenance"}


def test_pages_tile_the_result_without_gaps_or_repeats(data: ViewerDataset) -> None:
    filters = Filters.make({"strategy": ["qba", "rin"]})
    expected = _expected(lambda r: r["strategy"] in ("qba", "rin"))
    seen: list[str] = []
    for offset in range(0, len(expected) + 3, 3):
        page = data.query(filters, offset, 3)
        assert page.total == len(expected)
        seen += [r["qa_id"] for r in page.rows]
    assert seen == expected
    assert data.query(filters, 1000, 5).rows == []
    # unfiltered paging uses metadata counts only and still lands on the right rows
    assert [r["qa_id"] for r in data.query(Filters(), 13, 4).rows] == [r["qa_id"] for r in ROWS[13:17]]


def test_rows_come_back_whole(data: ViewerDataset) -> None:
    row = data.query(Filters.make({"question_type": ["B02_describe_abnormal"]}), 0, 1).rows[0]
    src = next(r for r in ROWS if r["qa_id"] == row["qa_id"])
    assert row["answer_parts"] == src["answer_parts"]
    assert row["boxes"] == src["boxes"]
    assert len(row["answer_parts"]) >= 3 and row["answer_parts"][0]["boxes"]


@pytest.mark.parametrize(
    ("offset", "limit", "facets"),
    [(-1, 10, {}), (0, 0, {}), (0, 100000, {}), (0, 10, {"colour": ["red"]})],
)
def test_bad_queries_raise_clear_errors(data: ViewerDataset, offset, limit, facets) -> None:
    with pytest.raises(QueryError):
        data.query(Filters.make(facets), offset, limit)


def test_parse_query_accepts_repeats_and_commas_and_rejects_unknowns() -> None:
    f, off, lim = parse_query("strategy=qba,rin&grade=A&grade=B&q=left+effusion&offset=40&limit=20")
    assert f.as_dict() == {"grade": ["A", "B"], "strategy": ["qba", "rin"], "q": "left effusion"}
    assert (off, lim) == (40, 20)
    with pytest.raises(QueryError, match="unknown parameter"):
        parse_query("strateg=qba")
    with pytest.raises(QueryError, match="integer"):
        parse_query("limit=ten")


def test_not_a_dataset_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no QA shards"):
        ViewerDataset(tmp_path)
    with pytest.raises(DatasetError, match="not a directory"):
        ViewerDataset(tmp_path / "missing")
    (tmp_path / "qa").mkdir()
    (tmp_path / "qa" / "part-00000.parquet").write_bytes(b"not parquet")
    with pytest.raises(DatasetError, match="cannot read"):
        ViewerDataset(tmp_path)


def test_present_resolves_images_under_the_declared_root(data: ViewerDataset) -> None:
    item = data.present(data.query(Filters(), 0, 1).rows[0])
    (im,) = item["images"]
    assert im["url"] == f"/files/r0/{ROWS[0]['image_paths'][0]}"
    assert (im["width"], im["height"]) == (448, 448)  # stored size, read from the JPEG header
    assert im["id"] == ROWS[0]["image_ids"][0]


def test_sample_is_reproducible(data: ViewerDataset) -> None:
    a = [r["qa_id"] for r in data.sample(7, seed=3)]
    assert a == [r["qa_id"] for r in data.sample(7, seed=3)]
    assert a != [r["qa_id"] for r in data.sample(7, seed=4)]
    assert len(set(a)) == 7 and a == sorted(a)
    assert len(data.sample(500)) == 30
    neg = data.sample(3, filters=Filters.make({"polarity": ["negative"]}))
    assert {r["polarity"] for r in neg} == {"negative"}


# ---------------------------------------------------------------------------------- server
@pytest.fixture(scope="module")
def server(dsdir: Path, tmp_path_factory: pytest.TempPathFactory):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.txt").write_text("secret")
    # symlinks inside the dataset folder that lead out of it must not be followed
    os.symlink(outside / "secret.txt", dsdir / "leak.txt")
    os.symlink(outside, dsdir / "leakdir")
    os.symlink(dsdir / "manifest.json", dsdir / "inside-link.json")  # stays inside: fine
    (dsdir / ".hidden").write_text("x")
    srv = ViewerServer(ViewerDataset(dsdir), "127.0.0.1", 0)
    start_in_thread(srv)
    yield srv
    srv.shutdown()
    srv.server_close()


def _get(srv: ViewerServer, path: str, method: str = "GET", headers: dict | None = None):
    # http.client sends the path byte for byte (no client-side normalisation of "..")
    conn = http.client.HTTPConnection(*srv.server_address[:2], timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


@pytest.mark.parametrize(
    "path",
    [
        "/files/r0/../fixture.py",
        "/files/r0/images/../../viewer/fixture.py",
        "/files/d/../../../../etc/passwd",
        "/files/d/%2e%2e/%2e%2e/etc/passwd",
        "/files/d/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
        "/files/d/..%2f..%2fetc%2fpasswd",
        "/files/d/%252e%252e/etc/passwd",
        "/files/d//etc/passwd",
        "/files/d/%2fetc%2fpasswd",
        "/files//etc/passwd",
        "/files/r0/images/..\\..\\fixture.py",
        "/files/r0/fixture.py",  # inside the image root, but not an image
        "/files/r0/bbox_subset.csv",
        "/render/r0/fixture.py",
        "/render/d/../../etc/passwd",
        "/files/d/manifest.json%00.png",
        "/files/d/manifest.json",  # the dataset's own files go through the API, not /files
        "/files/d/inside-link.json",
        "/files/d/leak.txt",
        "/files/d/leakdir/secret.txt",
        "/files/d/.hidden",
        "/files/d/qa",
        "/files/d/qa/",
        "/files/d/",
        "/files/r9/images/00000732_005.jpg",
        "/files/d/%ff%fe",
        "/etc/passwd",
        "/../../etc/passwd",
        "/static/../query.py",
        "/static/index.html/../app.js/../../query.py",
    ],
)
def test_paths_outside_the_roots_are_404(server: ViewerServer, path: str) -> None:
    status, _, body = _get(server, path)
    assert status == 404, path
    assert b"secret" not in body and b"root:" not in body


def test_allowed_files_are_served_with_their_type(server: ViewerServer) -> None:
    status, headers, body = _get(server, "/files/r0/images/00000732_005.jpg")
    assert status == 200 and headers["Content-Type"] == "image/jpeg"
    assert body == (DATA / "images" / "00000732_005.jpg").read_bytes()
    assert "sandbox" in headers["Content-Security-Policy"]
    status, headers, body = _get(server, "/files/r0/images/00000732_005.jpg", method="HEAD")
    assert status == 200 and body == b"" and int(headers["Content-Length"]) > 0


def test_dataset_folder_serves_image_files_only(dsdir: Path, tmp_path: Path) -> None:
    # a dataset folder as a build leaves it (Parquet, manifest, scene graphs, rejected.jsonl with
    # report excerpts, README) plus images kept beside it: over real HTTP only the images come out
    import shutil

    ds = shutil.copytree(dsdir, tmp_path / "ds", symlinks=True, ignore=shutil.ignore_patterns("leak*", "inside-link.json"))
    (ds / "rejected.jsonl").write_text('{"ref": "x", "reason": "report text: secret"}\n')
    (ds / "README.md").write_text("# card\n")
    (ds / "scene_graphs").mkdir(exist_ok=True)
    (ds / "scene_graphs" / "part-99999.jsonl").write_text('{"report": "secret"}\n')
    (ds / "images").mkdir()
    jpg = (DATA / "images" / "00000732_005.jpg").read_bytes()
    (ds / "images" / "a.jpg").write_bytes(jpg)
    (ds / "images" / "notes.txt").write_text("secret")
    os.symlink(ds / "manifest.json", ds / "images" / "manifest.png")  # an image name on a JSON file
    os.symlink(ds / "images" / "a.jpg", ds / "images" / "a-link.jpg")  # image to image, inside: fine
    srv = ViewerServer(ViewerDataset(ds), "127.0.0.1", 0)
    start_in_thread(srv)
    try:
        status, headers, body = _get(srv, "/files/d/images/a.jpg")
        assert status == 200 and headers["Content-Type"] == "image/jpeg" and body == jpg
        assert _get(srv, "/files/d/images/a-link.jpg")[0] == 200
        served = [p.relative_to(ds).as_posix() for p in sorted(ds.rglob("*")) if p.is_file()]
        refused = [rel for rel in served if not rel.endswith(".jpg")]
        assert {"manifest.json", "rejected.jsonl", "README.md", "scene_graphs/part-99999.jsonl",
                "images/notes.txt", "images/manifest.png"} <= set(refused)
        assert any(rel.startswith("qa/") and rel.endswith(".parquet") for rel in refused)
        for rel in refused:
            for route in ("/files/d/", "/render/d/"):
                status, _, body = _get(srv, route + rel)
                assert status == 404 and b"secret" not in body, route + rel
        # the page still works: its data comes through the API
        status, _, body = _get(srv, "/api/query?limit=1")
        assert status == 200 and json.loads(body)["total"] == len(ROWS)
    finally:
        srv.shutdown()
        srv.server_close()


def test_api_answers_queries_and_reports_bad_ones(server: ViewerServer) -> None:
    status, headers, body = _get(server, "/api/query?strategy=vindr&limit=4&offset=4")
    res = json.loads(body)
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert res["total"] == 9 and len(res["items"]) == 4
    assert [it["qa_id"] for it in res["items"]] == _expected(lambda r: r["strategy"] == "vindr")[4:8]
    assert all(it["images"][0]["url"].startswith("/files/r0/images/") for it in res["items"])
    status, _, body = _get(server, "/api/query?limit=abc")
    assert status == 400 and "limit" in json.loads(body)["error"]
    status, _, body = _get(server, "/api/facets")
    assert status == 200 and json.loads(body)["total"] == 30
    assert _get(server, "/api/nothing")[0] == 404
    status, _, body = _get(server, "/api/study?id=nih:00000732_005")
    rep = json.loads(body)["report"]
    assert status == 200 and rep["text"].startswith("FINDINGS:") and rep["sentences"][0]["id"] == "S01"
    assert _get(server, "/api/study?id=nih:none")[0] == 404
    assert _get(server, "/api/query", method="POST")[0] == 405


def test_page_is_self_contained(server: ViewerServer) -> None:
    status, headers, page = _get(server, "/")
    assert status == 200 and "default-src 'none'" in headers["Content-Security-Policy"]
    for asset in ("/static/app.js", "/static/app.css"):
        st, _, body = _get(server, asset)
        assert st == 200
        page += body
    # no URL to another host anywhere (the SVG namespace is an identifier, never fetched)
    urls = set(re.findall(rb"https?://[^\s\"')]+", page))
    assert urls <= {b"http://www.w3.org/2000/svg"}


def test_foreign_host_header_is_refused_on_loopback(server: ViewerServer) -> None:
    assert _get(server, "/", headers={"Host": "attacker.example"})[0] == 403
    assert _get(server, "/", headers={"Host": f"localhost:{server.server_address[1]}"})[0] == 200


# ---------------------------------------------------------------------------------- export
def _embedded(page: str) -> dict:
    m = re.search(r'<script id="radvqa-data" type="application/json">(.*?)</script>', page, re.S)
    assert m, "no embedded data"
    return json.loads(m.group(1))


def test_static_export_inlines_sampled_items(data: ViewerDataset, tmp_path: Path) -> None:
    out = tmp_path / "sample.html"
    stats = export_html(data, out, 8, seed=1, max_side=200)
    assert stats["items"] == 8 and stats["images_missing"] == 0
    page = out.read_text(encoding="utf-8")
    payload = _embedded(page)
    assert len(payload["items"]) == 8
    assert [it["qa_id"] for it in payload["items"]] == [r["qa_id"] for r in data.sample(8, seed=1)]
    for it in payload["items"]:
        im = it["images"][0]
        assert im["url"] is None and im["data_url"].startswith("data:image/jpeg;base64,")
        pic = Image.open(io.BytesIO(base64.b64decode(im["data_url"].split(",", 1)[1])))
        assert max(pic.size) == 200  # downscaled...
        assert (im["width"], im["height"]) == (448, 448)  # ...but boxes keep stored pixels
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)
    assert '<link rel="stylesheet"' not in page and '<script src=' not in page
    assert sum(c for _, c in payload["facets"]["facets"]["strategy"]) == 8
    # the sampled studies' reports are embedded for "Show report"
    assert set(payload["reports"]) == {it["study_id"] for it in payload["items"]}
    assert all(r["text"].startswith("FINDINGS:") for r in payload["reports"].values())
    # same data + seed -> same bytes
    assert render_static(data, 8, seed=1, max_side=200)[0] == page


def test_static_export_cannot_be_broken_out_of_by_row_text(tmp_path: Path) -> None:
    evil = "</script><script>alert(1)</script>"
    qa = QA(qa_id="x1", source="s", split="test", patient_id="p", study_id="s1", strategy="qba",
            question_type="t", template_id="t", template_version=1, question=evil, answer=evil,
            image_paths=["missing.png"], image_ids=["i"])
    (tmp_path / "qa").mkdir()
    pq.write_table(pa.Table.from_pylist([to_builtins(qa)]), tmp_path / "qa" / "part-00000.parquet")
    page, stats = render_static(ViewerDataset(tmp_path), 5)
    assert evil not in page and stats["images_missing"] == 1
    assert _embedded(page)["items"][0]["question"] == evil


def test_cli_writes_static_page_and_reports_bad_input(dsdir: Path, tmp_path: Path) -> None:
    from radvqa.cli import app

    runner = CliRunner()
    out = tmp_path / "v.html"
    res = runner.invoke(app, ["view", str(dsdir), "--html", str(out), "--sample", "5", "--where", "strategy=qba"])
    assert res.exit_code == 0, res.output
    assert "5 items" in res.output
    assert {it["strategy"] for it in _embedded(out.read_text())["items"]} == {"qba"}
    res = runner.invoke(app, ["view", str(tmp_path / "nope")])
    assert res.exit_code == 1 and "not a directory" in res.output
    res = runner.invoke(app, ["view", str(dsdir), "--html", str(out), "--where", "colour=red"])
    assert res.exit_code == 2 and "unknown filter" in res.output


# ---------------------------------------------------------------------------------- image roots
def test_image_roots_declared_or_taken_from_the_build_inputs(tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    (ds / "imgs").mkdir(parents=True)
    src = tmp_path / "src"
    src.mkdir()
    (src / "labels.csv").write_text("x")
    assert declared_image_roots({"image_roots": ["imgs", str(src)]}, ds) == [ds / "imgs", src]
    assert declared_image_roots({"options": {"image_root": str(src)}}, ds) == [src]
    # no declaration: the build inputs (a file stands for its folder); never the file-system root
    assert declared_image_roots({"inputs": [str(src / "labels.csv"), str(src)]}, ds) == [src]
    assert declared_image_roots({"image_roots": ["/"]}, ds) == []
    assert declared_image_roots({}, ds) == []


def _one_row_dataset(root: Path, image_path: str, manifest: dict) -> Path:
    qa = QA(qa_id="r1", source="s", split="test", patient_id="p", study_id="s1", strategy="qba",
            question_type="t", template_id="t", template_version=1, question="Q?", answer="A.",
            image_paths=[image_path], image_ids=["img"])
    (root / "qa").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([to_builtins(qa)]), root / "qa" / "part-00000.parquet")
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def test_absolute_image_paths_are_served_only_under_a_root(tmp_path: Path) -> None:
    inp = tmp_path / "input"
    inp.mkdir()
    img = inp / "a.jpg"
    img.write_bytes((DATA / "images" / "00000732_005.jpg").read_bytes())
    data = ViewerDataset(_one_row_dataset(tmp_path / "ds", str(img), {"inputs": [str(inp)]}))
    im = data.present(data.query(Filters(), 0, 1).rows[0])["images"][0]
    assert im["url"] == "/files/r0/a.jpg" and im["width"] == 448
    data = ViewerDataset(_one_row_dataset(tmp_path / "ds2", str(img), {"image_roots": [str(tmp_path / "elsewhere")]}))
    im = data.present(data.query(Filters(), 0, 1).rows[0])["images"][0]
    assert im["url"] is None  # not under any allowed root: the page says "not available"


def test_dicom_images_are_rendered_for_the_browser(tmp_path: Path) -> None:
    import numpy as np
    import pydicom
    from pydicom.dataset import FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, SecondaryCaptureImageStorage, generate_uid

    # a 16-bit MONOCHROME1 DICOM made from a real NIH image (the layout MIMIC/VinDr ship)
    pix = np.asarray(Image.open(DATA / "images" / "00000732_005.jpg").convert("L"), dtype=np.uint16) * 16
    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = SecondaryCaptureImageStorage
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    dcm = pydicom.Dataset()
    dcm.file_meta = meta
    dcm.SOPClassUID, dcm.SOPInstanceUID = meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID
    dcm.Rows, dcm.Columns = pix.shape
    dcm.SamplesPerPixel, dcm.PhotometricInterpretation = 1, "MONOCHROME1"
    dcm.BitsAllocated, dcm.BitsStored, dcm.HighBit, dcm.PixelRepresentation = 16, 12, 11, 0
    dcm.PixelData = (4095 - pix).tobytes()  # MONOCHROME1: stored inverted
    root = tmp_path / "ds"
    (root / "images").mkdir(parents=True)
    dcm.save_as(root / "images" / "x.dcm", enforce_file_format=True)
    data = ViewerDataset(_one_row_dataset(root, "images/x.dcm", {"image_roots": ["."]}))
    im = data.present(data.query(Filters(), 0, 1).rows[0])["images"][0]
    assert im["url"] == "/render/r0/images/x.dcm" and (im["width"], im["height"]) == (448, 448)
    srv = ViewerServer(data, "127.0.0.1", 0)
    start_in_thread(srv)
    try:
        status, headers, body = _get(srv, im["url"])
    finally:
        srv.shutdown()
        srv.server_close()
    assert status == 200 and headers["Content-Type"] == "image/png"
    png = np.asarray(Image.open(io.BytesIO(body)))
    assert png.shape == (448, 448) and png.dtype == np.uint8
    # MONOCHROME1 was inverted back: the rendered copy follows the original JPEG, not its negative
    orig = np.asarray(Image.open(DATA / "images" / "00000732_005.jpg").convert("L"), dtype=float)
    assert np.corrcoef(orig.ravel(), png.astype(float).ravel())[0, 1] > 0.95
    page, stats = render_static(data, 1)
    assert stats["images_embedded"] == 1 and "data:image/jpeg;base64," in page
