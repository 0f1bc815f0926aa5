"""The viewer page in a real browser: Debian's Chromium, headless, driven by selenium.

Skipped (with the reason) when chromium, chromedriver or selenium is missing. CI installs them:
``apt-get install -y chromium chromium-driver`` (binaries /usr/bin/chromium, /usr/bin/chromedriver).
"""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from radvqa.model import to_builtins
from radvqa.viewer.export import export_html
from radvqa.viewer.query import ViewerDataset
from radvqa.viewer.server import ViewerServer, start_in_thread

DATA = Path(__file__).parent / "data" / "viewer"
CHROMIUM = os.environ.get("RADVQA_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("RADVQA_CHROMEDRIVER", "/usr/bin/chromedriver")

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium not installed (pip install -e .[dev])")
if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
    pytest.skip(
        f"needs {CHROMIUM} and {CHROMEDRIVER}: apt-get install -y chromium chromium-driver",
        allow_module_level=True,
    )

from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

# part colours of app.js (PALETTE[0..2]) as RGB
PART_RGB = [(0xE6, 0x19, 0x4B), (0x3C, 0xB4, 0x4B), (0x43, 0x63, 0xD8)]


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
    return FX.make_dataset(tmp_path_factory.mktemp("viewer-browser") / "ds")


@pytest.fixture(scope="module")
def server(dsdir: Path):
    srv = ViewerServer(ViewerDataset(dsdir), "127.0.0.1", 0)
    start_in_thread(srv)
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def driver():
    profile = tempfile.mkdtemp(prefix="radvqa-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--window-size=1280,1000", f"--user-data-dir={profile}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(30)
    yield drv
    drv.quit()
    shutil.rmtree(profile, ignore_errors=True)


def _settled(drv, total: int | None = None) -> None:
    """Wait until the page has rendered a response (and, if given, for that total)."""

    def ok(d) -> bool:
        body = d.find_element(By.TAG_NAME, "body")
        if body.get_attribute("data-ready") != "1" or body.get_attribute("data-loading"):
            return False
        return total is None or d.find_element(By.ID, "count").get_attribute("data-total") == str(total)

    WebDriverWait(drv, 15).until(ok)


def _images_loaded(drv) -> None:
    """Images in the viewport have arrived (the page loads the others lazily)."""
    WebDriverWait(drv, 15).until(lambda d: d.execute_script(
        "return [...document.images].filter(i => i.getBoundingClientRect().top < innerHeight)"
        ".every(i => i.complete && i.naturalWidth > 0)"))


def _rects(drv) -> list:
    return drv.find_elements(By.CSS_SELECTOR, "article.item svg.overlay rect.box")


def _errors(drv) -> list[str]:
    return [e["message"] for e in drv.get_log("browser") if e["level"] == "SEVERE"]


def test_page_filters_pages_and_draws_boxes(server: ViewerServer, driver, tmp_path: Path) -> None:
    driver.get(server.url)
    _settled(driver, total=30)
    assert len(driver.find_elements(By.CSS_SELECTOR, "article.item")) == 20  # default page size
    assert "30 matching items" in driver.find_element(By.ID, "count").text

    # filter by strategy: the vindr rows each carry one part with one expert box
    Select(driver.find_element(By.ID, "f-strategy")).select_by_value("vindr")
    _settled(driver, total=9)
    items = driver.find_elements(By.CSS_SELECTOR, "article.item")
    vindr = [r for r in ROWS if r["strategy"] == "vindr"]
    assert [i.get_attribute("data-qa-id") for i in items] == [r["qa_id"] for r in vindr]
    rects = _rects(driver)
    assert len(rects) == sum(len(r["boxes"]) for r in vindr) == 9
    _images_loaded(driver)
    for rect in rects:  # drawn in stored-image pixels, visible on screen
        assert float(rect.get_attribute("width")) > 0 and rect.size["width"] > 2
    assert "#strategy=vindr" in driver.current_url

    # free text on top of a facet; the describe question has 3 parts -> 3 colours + legend
    Select(driver.find_element(By.ID, "f-strategy")).select_by_value("qba")
    _settled(driver, total=17)
    box = driver.find_element(By.ID, "q")
    box.clear()
    box.send_keys("abnormal findings")
    driver.find_element(By.ID, "apply").click()
    describe = [r for r in ROWS if r["question_type"] == "B02_describe_abnormal"]
    _settled(driver, total=len(describe))
    _images_loaded(driver)
    first = driver.find_elements(By.CSS_SELECTOR, "article.item")[0]
    row = describe[0]
    boxed_parts = [p for p in row["answer_parts"] if p["boxes"]]
    rects = first.find_elements(By.CSS_SELECTOR, "svg.overlay rect.box")
    assert len(rects) == sum(len(p["boxes"]) for p in boxed_parts)
    assert len({r.get_attribute("stroke") for r in rects}) == len(boxed_parts)  # one colour per part
    legend = first.find_elements(By.CSS_SELECTOR, ".legend li")
    assert len(legend) == len(boxed_parts) and boxed_parts[0]["tag"] in legend[0].text
    parts = first.find_elements(By.CSS_SELECTOR, "ol.parts li.part")
    assert len(parts) == len(row["answer_parts"])
    text = first.text
    assert row["question"] in text and row["grade"] in text and row["provenance"][0] in text

    # screenshot: not blank, and the part colours are really painted over the X-ray
    png = driver.get_screenshot_as_png()
    (tmp_path / "page.png").write_bytes(png)
    shot = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    assert shot.shape[0] > 500 and shot.std() > 30
    assert len(np.unique(shot.reshape(-1, 3), axis=0)) > 500  # an image, not a flat page
    fig = np.asarray(Image.open(io.BytesIO(first.find_element(By.CSS_SELECTOR, ".imgwrap").screenshot_as_png)).convert("RGB")).astype(int)
    for rgb in PART_RGB[: len(boxed_parts)]:
        close = (np.abs(fig - np.array(rgb)).sum(axis=2) < 60).sum()
        assert close > 50, f"box colour {rgb} hardly on screen ({close} px)"

    # paging: 10 per page, second page shows rows 11-20 of the whole set
    driver.get(server.url + "#limit=10")
    _settled(driver, total=30)
    driver.find_element(By.CSS_SELECTOR, "#pager-top .next").click()
    WebDriverWait(driver, 10).until(lambda d: "offset=10" in d.current_url)
    _settled(driver, total=30)
    shown = [i.get_attribute("data-qa-id") for i in driver.find_elements(By.CSS_SELECTOR, "article.item")]
    assert shown == [r["qa_id"] for r in ROWS[10:20]]
    assert "page 2 of 3" in driver.find_element(By.ID, "pager-top").text
    assert _errors(driver) == []


def test_report_opens_with_the_cited_sentence_marked(server: ViewerServer, driver) -> None:
    driver.get(server.url + "#polarity=negative")
    neg = [r for r in ROWS if r["polarity"] == "negative"]
    _settled(driver, total=len(neg))
    first = driver.find_elements(By.CSS_SELECTOR, "article.item")[0]
    first.find_element(By.CSS_SELECTOR, "button.show-report").click()
    mark = WebDriverWait(driver, 10).until(lambda d: first.find_elements(By.CSS_SELECTOR, ".report mark"))
    cited = neg[0]["provenance"][0].split(": ", 1)[1]  # "S04: No pneumothorax."
    assert [m.text for m in mark] == [cited]
    assert first.find_element(By.CSS_SELECTOR, ".report").text.startswith("FINDINGS:")


def test_static_export_works_from_a_file_url(server: ViewerServer, dsdir: Path, driver, tmp_path: Path) -> None:
    out = tmp_path / "sample.html"
    export_html(ViewerDataset(dsdir), out, 12, seed=2)
    driver.get(out.as_uri())
    _settled(driver, total=12)
    _images_loaded(driver)
    assert len(driver.find_elements(By.CSS_SELECTOR, "article.item")) == 12
    assert len(_rects(driver)) > 0
    assert all(i.get_attribute("src").startswith("data:image/jpeg") for i in driver.find_elements(By.TAG_NAME, "img"))
    Select(driver.find_element(By.ID, "f-split")).select_by_value("train")
    sampled = [r["qa_id"] for r in ViewerDataset(dsdir).sample(12, seed=2) if r["split"] == "train"]
    _settled(driver, total=len(sampled))
    items = driver.find_elements(By.CSS_SELECTOR, "article.item")
    assert [i.get_attribute("data-qa-id") for i in items] == sampled
    # the sampled studies' reports travel inside the file
    items[0].find_element(By.CSS_SELECTOR, "button.show-report").click()
    WebDriverWait(driver, 10).until(lambda d: items[0].find_elements(By.CSS_SELECTOR, ".report"))
    assert items[0].find_element(By.CSS_SELECTOR, ".report").text.startswith("FINDINGS:")
    assert _errors(driver) == []


def _expected_rects(row: dict) -> int:
    """Boxes the page draws for a row: every part's boxes, plus row boxes no part carries."""
    keys = set()
    n = 0
    for part in row["answer_parts"]:
        for b in part["boxes"]:
            keys.add((b["image_id"], b["x1"], b["y1"], b["x2"], b["y2"], b["source"]))
            n += 1
    n += sum(1 for b in row["boxes"] if (b["image_id"], b["x1"], b["y1"], b["x2"], b["y2"], b["source"]) not in keys)
    return n


def test_real_build_page_draws_the_expert_boxes(driver, tmp_path_factory: pytest.TempPathFactory) -> None:
    from radvqa.viewer.query import Filters

    data = ViewerDataset(FX.build_sample(tmp_path_factory.getbasetemp()))
    facets = {"source": ["nih-cxr14"], "polarity": ["positive"], "strategy": ["vindr"]}
    page = data.query(Filters.make(facets), 0, 20)
    assert page.total > 0
    srv = ViewerServer(data, "127.0.0.1", 0)
    start_in_thread(srv)
    try:
        driver.get(srv.url + "#source=nih-cxr14&polarity=positive&strategy=vindr")
        _settled(driver, total=page.total)
        items = driver.find_elements(By.CSS_SELECTOR, "article.item")
        assert [i.get_attribute("data-qa-id") for i in items] == [r["qa_id"] for r in page.rows]
        assert len(_rects(driver)) == sum(_expected_rects(r) for r in page.rows) > 0
        _images_loaded(driver)
        shot = np.asarray(Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("RGB")).astype(int)
        assert shot.std() > 30
        assert _errors(driver) == []
    finally:
        srv.shutdown()
        srv.server_close()
