"""The built documentation site in headless Chromium: the index, the API page of
``parcelsearch.search`` and a rendered notebook with its map picture, all from disk.

CI builds the site before the tests (``.ci/run``:
``python -m sphinx -W --keep-going -b html docs docs/_build/html``); elsewhere these tests
skip, saying so, until it is built. Every page must load only files of the site itself
(nothing from the network), and each leaves a screenshot in ``_screenshots/``.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from _chromium import ROOT, chromium, require_chromium, screenshot_path
from PIL import Image
from selenium import webdriver
from selenium.webdriver.common.by import By

from parcelsearch.maps.spec import BACKGROUND

SITE = ROOT / "docs" / "_build" / "html"
BUILD = "python -m sphinx -W --keep-going -b html docs docs/_build/html"


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    """One headless Chromium for the module (the site must be built first)."""
    if not (SITE / "index.html").is_file():
        pytest.skip(
            f"the documentation site is not built: run `{BUILD}` "
            '(pip install -e ".[docs]"; CI builds it before the tests)'
        )
    require_chromium()
    with chromium((1280, 1000)) as driver:
        driver.set_page_load_timeout(30)
        yield driver


def open_page(driver: webdriver.Chrome, page: str) -> None:
    """Open a page of the built site and check it loaded nothing from elsewhere."""
    path = SITE / page
    assert path.is_file(), f"{page} is missing from the built site"
    driver.get(path.as_uri())
    linked = driver.execute_script(
        "return Array.from(document.querySelectorAll("
        "'script[src], link[rel=stylesheet], img[src], iframe[src], link[rel=preload]'))"
        ".map(e => e.src || e.href)"
    )
    assert linked, "the page links no stylesheet or script of its own"
    assert [u for u in linked if not u.startswith(SITE.as_uri())] == []
    # the theme's stylesheet applied (the header sticks to the top of the window)
    assert (
        driver.execute_script(
            "return getComputedStyle(document.querySelector('.bd-header')).position"
        )
        == "sticky"
    )


def shot(driver: webdriver.Chrome, name: str) -> np.ndarray:
    """Save a screenshot of the window and return its pixels (RGB)."""
    path = screenshot_path(f"docs_{name}")
    driver.save_screenshot(str(path))
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"), dtype=int)


def assert_drawn(pixels: np.ndarray) -> None:
    """Not a blank window: the page painted text and colour."""
    assert pixels.std() > 20
    assert (pixels.max(axis=2) < 100).mean() > 0.005  # dark text somewhere


def test_index_opens_with_the_guide_examples_and_reference(browser: webdriver.Chrome) -> None:
    open_page(browser, "index.html")
    assert browser.find_element(By.TAG_NAME, "h1").text.strip().startswith("parcelsearch")
    nav = browser.find_element(By.CSS_SELECTOR, "nav.navbar-nav, .navbar-header-items").text
    for section in ("User guide", "Examples", "API reference", "Changelog"):
        assert section in nav
    article = browser.find_element(By.TAG_NAME, "article").text
    assert 'pip install -e ".[service]" && parcelsearch demo' in article
    assert_drawn(shot(browser, "index"))


def test_the_api_page_of_search(browser: webdriver.Chrome) -> None:
    open_page(browser, "reference/generated/parcelsearch.search.html")
    assert browser.find_element(By.TAG_NAME, "h1").text.strip() == "parcelsearch.search"
    signature = browser.find_element(By.ID, "parcelsearch.search").text
    for argument in ("areas", "client", "tolerance", "budget", "allow_partial"):
        assert argument in signature
    body = browser.find_element(By.TAG_NAME, "article").text
    for section in ("Parameters", "Returns", "Raises", "Notes"):
        assert section in body, section
    assert "QuotaWouldExceedError" in body
    assert_drawn(shot(browser, "api_search"))


def test_a_rendered_notebook_shows_its_map_picture(browser: webdriver.Chrome) -> None:
    open_page(browser, "examples/01_quickstart.html")
    assert "Quickstart" in browser.find_element(By.TAG_NAME, "h1").text
    pictures = [
        img
        for img in browser.find_elements(By.CSS_SELECTOR, "article img")
        if browser.execute_script("return arguments[0].naturalWidth", img) >= 900
    ]
    assert pictures, "no map picture in the rendered notebook"
    picture = pictures[-1]  # the result's map
    browser.execute_script("arguments[0].scrollIntoView()", picture)
    assert browser.execute_script("return arguments[0].complete", picture)
    assert_drawn(shot(browser, "notebook_quickstart"))
    with Image.open(io.BytesIO(picture.screenshot_as_png)) as image:
        pixels = np.asarray(image.convert("RGB"), dtype=int)
    assert min(pixels.shape[:2]) > 200
    background = np.array([int(BACKGROUND[i : i + 2], 16) for i in (1, 3, 5)])
    grey = (np.abs(pixels - background).max(axis=2) <= 6).mean()
    assert grey < 0.5, "the map picture on the page is mostly empty background"


def test_the_guide_shows_the_pieces_drawn_at_build_time(browser: webdriver.Chrome) -> None:
    open_page(browser, "guide/planning.html")
    sources = [
        img.get_attribute("src") or ""
        for img in browser.find_elements(By.CSS_SELECTOR, "article img")
    ]
    assert any(s.endswith("pieces-creek.png") for s in sources), sources
    widths = browser.execute_script(
        "return Array.from(document.querySelectorAll('article img')).map(i => i.naturalWidth)"
    )
    assert all(w > 300 for w in widths)


def test_site_pages_link_to_each_other(browser: webdriver.Chrome) -> None:
    """The API page is reached from the reference index, the notebook from the examples."""
    for index, target in (
        ("reference/index.html", "parcelsearch.search.html"),
        ("examples/index.html", "01_quickstart.html"),
    ):
        open_page(browser, index)
        hrefs = [
            a.get_attribute("href") or ""
            for a in browser.find_elements(By.CSS_SELECTOR, "article a")
        ]
        assert any(Path(h.split("#")[0]).name == target for h in hrefs), index
