"""Units of radvqa.models: prompts (package YAML), box parsing and mapping, image loading, cache keys,
Retry-After parsing, row reading and image path resolution, concurrency limit and timeouts."""

from __future__ import annotations

import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from radvqa.models.boxes import find_boxes, to_stored_pixels
from radvqa.models.cache import PredictionCache, cache_key
from radvqa.models.images import ImageLoadError, ImagePrep, load_image
from radvqa.models.openai_compat import OpenAIAdapter
from radvqa.models.prompts import PromptError, available_prompt_sets, load_prompts
from radvqa.models.rows import DatasetError, ImageResolver, QADataset

DATA = Path(__file__).parent / "data" / "models" / "vqa20"
NIH = DATA / "images" / "nih" / "00014716_007.jpg"


# -- prompts -------------------------------------------------------------------------------------
def test_prompt_families_from_question_columns_only():
    p = load_prompts()
    assert p.tag == "default@1" and "default" in available_prompt_sets()
    assert p.family({"question": "Is the heart enlarged?"}) == "yesno"
    assert p.family({"question": "Which one?", "choices": ["a", "b"]}) == "mc"
    assert p.family({"question": "Describe it.", "question_type": "where_finding"}) == "box"
    assert p.family({"question": "What organ?", "question_type": "open_organ"}) == "open"
    assert p.family({"question": "Where is the mass?"}) == "box"
    # the answer never decides the family (no leakage from gold columns)
    assert p.family({"question": "What organ?", "answer_short": "yes"}) == "open"


def test_prompt_render_mc_box_and_errors():
    p = load_prompts()
    fam, text = p.render({"qa_id": "1", "question": "Which {odd} finding?", "choices": ["A x", "B y"]})
    assert fam == "mc" and "A. A x\nB. B y" in text and "{odd}" in text
    fam, text = p.render({"qa_id": "2", "question": "Where is it?"}, image_size=(320, 240))
    assert fam == "box" and "(320x240 pixels" in text
    _, text = p.render({"qa_id": "3", "question": "Where?"}, box_convention="norm1000")
    assert "0-1000" in text
    with pytest.raises(PromptError, match="empty question"):
        p.render({"qa_id": "4", "question": "  "})
    with pytest.raises(PromptError, match="no prompt set"):
        load_prompts("nope")


def test_prompt_file_validation(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("id: x\nversion: 1\nfamilies:\n  open: {template: '{question}'}\n")
    with pytest.raises(PromptError, match="families missing"):
        load_prompts(str(f))


# -- boxes ---------------------------------------------------------------------------------------
def test_find_boxes_formats():
    assert find_boxes("at [10, 20, 30, 40] and (1.5,2,3,4)") == [[10, 20, 30, 40], [1.5, 2, 3, 4]]
    assert find_boxes("<|box_start|>(100,200),(300,400)<|box_end|>") == [[100, 200, 300, 400]]
    assert find_boxes("no box, just 3 numbers [1, 2, 3]") == []
    assert find_boxes(None) == []


def test_box_mapping_to_stored_pixels():
    # sent at 224 px, stored at 448 px: x2
    assert to_stored_pixels([[10, 20, 30, 40]], "pixels", (224, 224), (448, 448)) == [[20, 40, 60, 80]]
    assert to_stored_pixels([[0, 0, 500, 1000]], "norm1000", (1, 1), (448, 300)) == [[0, 0, 224, 300]]
    assert to_stored_pixels([[0.5, 0.5, 0.25, 0.25]], "norm1", (1, 1), (100, 100)) == [[25, 25, 50, 50]]
    # clipped to the image; zero-area boxes dropped
    assert to_stored_pixels([[-5, -5, 600, 50], [3, 3, 3, 9]], "pixels", (448, 448), (448, 448)) == [[0, 0, 448, 50]]
    with pytest.raises(ValueError):
        to_stored_pixels([[1, 2, 3, 4]], "bogus", (1, 1), (1, 1))


# -- images --------------------------------------------------------------------------------------
def test_load_image_resize_and_passthrough():
    img = load_image(NIH, ImagePrep(max_side=224))
    assert img.stored_size == (448, 448) and img.sent_size == (224, 224) and img.mime == "image/png"
    from PIL import Image

    assert Image.open(io.BytesIO(img.data)).size == (224, 224)
    same = load_image(NIH, ImagePrep(max_side=1024))
    assert same.data == NIH.read_bytes() and same.mime == "image/jpeg"  # no needless re-encode
    assert same.sha256 == img.sha256  # the key is the stored file, not the resized copy
    assert load_image(NIH, ImagePrep(max_side=224)).data == img.data  # deterministic bytes


def test_load_image_16bit_and_broken(tmp_path):
    import numpy as np
    from PIL import Image

    arr = (np.arange(64 * 32, dtype=np.uint16).reshape(32, 64) * 30).astype(np.uint16)
    p = tmp_path / "g16.png"
    Image.fromarray(arr).save(p)
    img = load_image(p, ImagePrep(max_side=None))
    assert img.stored_size == (64, 32) and img.pil().size == (64, 32)
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not an image")
    with pytest.raises(ImageLoadError, match="cannot decode"):
        load_image(bad)
    with pytest.raises(ImageLoadError, match="cannot read"):
        load_image(tmp_path / "none.jpg")


def test_load_dicom(tmp_path):
    pydicom = pytest.importorskip("pydicom")
    import numpy as np
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    meta = FileMetaDataset()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.1.1"
    meta.MediaStorageSOPInstanceUID = generate_uid()
    ds = FileDataset(str(tmp_path / "x.dcm"), {}, file_meta=meta, preamble=b"\0" * 128)
    arr = np.tile(np.arange(40, dtype=np.uint16) * 100, (20, 1))
    ds.Rows, ds.Columns = arr.shape
    ds.SamplesPerPixel, ds.BitsAllocated, ds.BitsStored, ds.HighBit = 1, 16, 12, 11
    ds.PixelRepresentation = 0
    ds.PhotometricInterpretation = "MONOCHROME1"
    ds.PixelData = arr.tobytes()
    ds.save_as(tmp_path / "x.dcm", enforce_file_format=True)
    img = load_image(tmp_path / "x.dcm", ImagePrep(max_side=None))
    px = img.pil().convert("L")
    assert img.stored_size == (40, 20)
    assert px.getpixel((0, 0)) == 255 and px.getpixel((39, 0)) == 0  # MONOCHROME1 inverted
    del pydicom


# -- cache ---------------------------------------------------------------------------------------
def test_cache_key_covers_every_input(tmp_path):
    base = dict(model="openai:m", params={"t": 0}, prep={"max_side": 10}, prompt_tag="default@1",
                system="s", prompt="q", image_hashes=["h1"])
    k = cache_key(**base)
    assert k == cache_key(**dict(base))
    for field, other in [("model", "openai:n"), ("params", {"t": 1}), ("prep", {"max_side": 11}),
                         ("prompt_tag", "default@2"), ("system", None), ("prompt", "q2"),
                         ("image_hashes", ["h2"])]:
        assert cache_key(**{**base, field: other}) != k, field
    c = PredictionCache(tmp_path)
    assert c.get(k) is None
    c.put(k, {"text": "yes"})
    assert PredictionCache(tmp_path).get(k) == {"text": "yes"}  # persisted on disk
    assert c.hits == 0 and c.misses == 1


# -- HTTP details --------------------------------------------------------------------------------
class _SlowServer:
    def __init__(self, delay: float) -> None:
        self.active = 0
        self.peak = 0
        self.lock = threading.Lock()
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers["Content-Length"]))
                with outer.lock:
                    outer.active += 1
                    outer.peak = max(outer.peak, outer.active)
                time.sleep(delay)
                with outer.lock:
                    outer.active -= 1
                body = json.dumps({"choices": [{"message": {"content": "no"}}]}).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # client gave up (timeout test)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_concurrency_limit_is_respected(tmp_path):
    from radvqa.models.predict import PredictOptions, Predictor

    srv = _SlowServer(0.1)
    try:
        a = OpenAIAdapter("m", base_url=srv.url, concurrency=3)
        t0 = time.perf_counter()
        s = Predictor(a, PredictOptions(progress=False)).run(DATA, tmp_path / "p.jsonl")
        dt = time.perf_counter() - t0
    finally:
        srv.close()
    assert srv.peak == 3  # never more than --concurrency requests in flight, and it does overlap
    assert s.requests == 19 and dt < 19 * 0.1  # faster than one at a time


def test_timeout_then_error(tmp_path):
    srv = _SlowServer(0.6)
    try:
        a = OpenAIAdapter("m", base_url=srv.url, timeout_s=0.2, max_retries=1, backoff_base_s=0.001)
        from radvqa.models.base import Request
        from radvqa.models.images import load_image as li

        r = a.generate([Request(qa_id="x", prompt="Is it?", images=(li(NIH),))])[0]
    finally:
        srv.close()
    assert r.text is None and "after 2 attempts" in r.error and "timed out" in r.error


# -- rows ----------------------------------------------------------------------------------------
def test_rows_stream_question_columns_only_and_resolve_images(tmp_path):
    ds = QADataset.open(DATA)
    rows = list(ds.iter_rows(batch_rows=7))
    assert len(rows) == 20 and ds.count() == 20 and ds.count("validate") == 1
    assert "answer" not in rows[0] and "answer_short" not in rows[0]  # never read answers
    res = ImageResolver(ds.image_roots())
    assert res.resolve("nih/00014716_007.jpg") == DATA / "images" / "nih" / "00014716_007.jpg"
    assert res.resolve(str(NIH.resolve())) == NIH.resolve()  # absolute paths as they are
    assert res.resolve("nih/nope.jpg") is None
    with pytest.raises(DatasetError, match="no QA Parquet"):
        QADataset.open(tmp_path)
    with pytest.raises(DatasetError, match="not found"):
        QADataset.open(tmp_path / "missing")


def test_hf_without_torch_is_a_clear_error(monkeypatch):
    import sys

    from radvqa.models.base import AdapterError
    from radvqa.models.registry import get_adapter

    monkeypatch.setitem(sys.modules, "torch", None)  # as if torch were not installed
    with pytest.raises(AdapterError, match=r"radvqa\[hf\]"):
        get_adapter(f"hf:{DATA}")


def test_relative_paths_from_build_inputs_and_cwd(tmp_path, monkeypatch):
    import shutil

    ds_dir = tmp_path / "ds"
    shutil.copytree(DATA / "qa", ds_dir / "qa")
    inp = tmp_path / "inputs"
    (inp / "nih").mkdir(parents=True)
    shutil.copy(NIH, inp / "nih" / NIH.name)
    (ds_dir / "manifest.json").write_text(json.dumps({"inputs": [str(inp)]}))
    res = ImageResolver(QADataset.open(ds_dir).image_roots())
    assert res.resolve("nih/" + NIH.name) == inp / "nih" / NIH.name
    monkeypatch.chdir(DATA / "images")
    res = ImageResolver(QADataset.open(ds_dir).image_roots())
    assert res.resolve("vqa-rad/synpic17738.jpg") is not None  # relative to where the user runs
