"""Each example notebook, live in a real browser: Voilà runs it, headless Chromium shows it.

Voilà (a Jupyter server that executes a notebook in a fresh kernel and renders its outputs
with their live widgets) serves ``notebooks/`` on 127.0.0.1; Chromium opens each notebook,
waits for it to finish, and checks every map the way a reader meets it: the map drew as many
shapes as its spec has features (per the counts ``refresh_outputs.py`` saved with the map's
picture: context blocks not clickable, everything else clickable), and clicking a piece (or,
on a map of areas, an area or its marker) shown in the map's first view opens a popup with
that shape's rows — a round trip through the kernel, as in JupyterLab. All offline: the
notebooks start the bundled service.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from _chromium import ROOT, chromium, require_chromium, screenshot_path
from _notebooks import NOTEBOOKS, map_cells
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from parcelsearch.maps.context import CONTEXT_NAME

START_TIMEOUT = 60.0
RUN_TIMEOUT = 240.0
#: A point inside ``arguments[0]`` (an SVG path) where it is the topmost element, as an offset
#: from its box's centre; null when none is (hidden under another shape or off screen).
POINT_ON_PATH_JS = """
const path = arguments[0], box = path.getBoundingClientRect();
for (let fy = 0.5; fy < 1; fy += 0.1) {
  for (const sy of [1, -1]) {
    for (let fx = 0.5; fx < 1; fx += 0.05) {
      for (const sx of [1, -1]) {
        const x = box.left + box.width * (0.5 + sx * (fx - 0.5));
        const y = box.top + box.height * (0.5 + sy * (fy - 0.5));
        if (document.elementFromPoint(x, y) === path) {
          return [x - box.left - box.width / 2, y - box.top - box.height / 2];
        }
      }
    }
  }
}
return null;
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def voila(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Voilà serving ``notebooks/`` on 127.0.0.1; its base URL."""
    require_chromium()
    port = _free_port()
    log = tmp_path_factory.mktemp("voila") / "voila.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "voila",
                "--no-browser",
                f"--port={port}",
                "--Voila.ip=127.0.0.1",
                "--show_tracebacks=True",
                "notebooks",
            ],
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while "is running at" not in log.read_text(encoding="utf-8", errors="replace"):
            assert proc.poll() is None, log.read_text(encoding="utf-8", errors="replace")
            assert time.monotonic() < deadline, "Voilà did not start within a minute"
            time.sleep(0.25)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    require_chromium()
    with chromium(size=(1280, 1000)) as driver:
        yield driver


def expected_shapes(notebook: Any) -> list[dict[str, int]]:
    """Per map cell, the features per layer saved with its picture."""
    counts = []
    for cell in map_cells(notebook):
        saved = [
            o["metadata"]["parcelsearch"]["shapes"]
            for o in cell.outputs
            if "parcelsearch" in o.get("metadata", {})
        ]
        assert len(saved) == 1, f"refresh the notebook's outputs: {cell.source!r}"
        counts.append(saved[0])
    return counts


def drawn(driver: webdriver.Chrome) -> list[tuple[int, int]]:
    """Per Leaflet map on the page: (clickable shapes, other shapes)."""
    found: list[tuple[int, int]] = driver.execute_script("""
      return Array.from(document.querySelectorAll(".leaflet-container")).map(c => [
        c.querySelectorAll(".leaflet-overlay-pane path.leaflet-interactive").length,
        c.querySelectorAll(".leaflet-overlay-pane path:not(.leaflet-interactive)").length]);""")
    return [tuple(x) for x in found]  # type: ignore[misc]


def popup_rows(container: WebElement) -> dict[str, str]:
    """The rows of the popup open in a map, once the kernel has filled it."""

    def rows(_: Any) -> dict[str, str] | None:
        cells = container.find_elements(By.CSS_SELECTOR, ".leaflet-popup-content tr")
        found = {
            c.find_element(By.TAG_NAME, "th").get_attribute("textContent") or "": c.find_element(
                By.TAG_NAME, "td"
            ).get_attribute("textContent")
            or ""
            for c in cells
        }
        return found or None

    result: dict[str, str] = WebDriverWait(container.parent, 30).until(rows)
    return result


def click_shape(driver: webdriver.Chrome, container: WebElement, indices: range) -> dict[str, str]:
    """Click the first of the ``indices``-th clickable shapes of a map that shows in its view;
    the rows of the popup it opens."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", container)
    paths = container.find_elements(
        By.CSS_SELECTOR, ".leaflet-overlay-pane path.leaflet-interactive"
    )
    for index in indices:
        offset = driver.execute_script(POINT_ON_PATH_JS, paths[index])
        if offset is not None:
            ActionChains(driver).move_to_element_with_offset(
                paths[index], int(offset[0]), int(offset[1])
            ).click().perform()
            return popup_rows(container)
    raise AssertionError("none of the shapes is visible in the map's first view")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_live_and_its_maps_draw_and_answer_clicks(
    voila: str, browser: webdriver.Chrome, path: Path
) -> None:
    notebook = nbformat.read(path, as_version=4)
    expected = expected_shapes(notebook)
    want = [
        (sum(n for k, n in c.items() if k != CONTEXT_NAME), c.get(CONTEXT_NAME, 0))
        for c in expected
    ]
    browser.get(f"{voila}/voila/render/{path.name}")
    try:
        WebDriverWait(browser, RUN_TIMEOUT, poll_frequency=1).until(lambda d: drawn(d) == want)
    except TimeoutException:
        browser.save_screenshot(str(screenshot_path(f"voila-{path.stem}-failed")))
        errors = browser.find_elements(
            By.CSS_SELECTOR, ".jp-RenderedText[data-mime-type='application/vnd.jupyter.stderr']"
        )
        pytest.fail(
            f"{path.name}: maps drew {drawn(browser)}, expected {want} "
            f"(clickable, context); stderr: {[e.text[:300] for e in errors]}"
        )
    assert "Traceback" not in browser.find_element(By.TAG_NAME, "body").text
    containers = browser.find_elements(By.CSS_SELECTOR, ".leaflet-container")
    for counts, container in zip(expected, containers, strict=True):
        if "Pieces" in counts:
            rows = click_shape(browser, container, range(counts["Pieces"]))  # drawn first
            assert {"area", "piece"} <= set(rows), rows
            assert re.fullmatch(r".+ \(.+\)", rows["area"]) and rows["piece"].isdigit(), rows
            assert ("parcels matched" in rows) or ("vertices" in rows), rows
        else:
            markers = counts.get("Area markers", 0)  # drawn last, over the areas
            shapes = counts["Study areas"] + markers
            rows = click_shape(browser, container, range(shapes - 1, -1, -1))
            assert {"area_id", "name", "market", "area (km²)"} <= set(rows), rows
    browser.save_screenshot(str(screenshot_path(f"voila-{path.stem}")))
