"""The example notebooks in JupyterLab 4, as an analyst meets them: open, Run All, read.

JupyterLab serves a temp copy of ``notebooks/`` on 127.0.0.1 (see ``_lab.py``); headless
Chromium opens each notebook, clears its saved outputs, runs all cells in a fresh kernel and
waits for every map to draw. Then everything is read from the page: each Leaflet map's scale
bar, the bounding boxes of the SVG shapes in its overlay pane, its tiles and its legend; the
progress bars; the stderr blocks. All offline: the notebooks start the bundled service.

One Run All per notebook serves every test here (a module fixture; about 25 s a notebook).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from _chromium import chromium, require_chromium, screenshot_path
from _lab import jupyter_lab, require_jupyterlab
from _notebooks import NOTEBOOKS, map_cells
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from parcelsearch.maps.describe import CHANGED_STYLE
from parcelsearch.maps.framing import MIN_PX

#: Every test here takes seconds: a Run All in JupyterLab, or ipykernel's installer.
pytestmark = pytest.mark.slow

RUN_TIMEOUT = 240.0
#: The scale bar of a map showing its areas readably (the demo's areas are 0.3 to 2 km
#: across); the old first view of every area at once read "500 km".
READABLE_SCALE_M = 2_000
#: The legend may take at most this share of the map's height (a 400 px map).
LEGEND_SHARE = 0.4

#: The app's state: kernel status, code cells, cells run, cells queued or running.
STATE_JS = """
const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
if (!w || !w.content || !w.sessionContext || !w.sessionContext.session) return null;
const kernel = w.sessionContext.session.kernel;
const cells = w.content.widgets.filter(c => c.model.type === "code");
return {status: kernel ? kernel.status : "none", cells: cells.length,
        run: cells.filter(c => c.model.executionCount !== null).length,
        busy: cells.filter(c => c.promptNode.textContent.includes("*")).length};
"""

#: Per code cell: its source, its maps (what each shows) and what else its output holds.
READ_JS = """
function box(e) { const r = e.getBoundingClientRect();
  return {left: r.left, top: r.top, right: r.right, bottom: r.bottom,
          width: r.width, height: r.height}; }
function seen(r, c) {  // the part of box r inside box c, as [width, height]
  return [Math.max(0, Math.min(r.right, c.right) - Math.max(r.left, c.left)),
          Math.max(0, Math.min(r.bottom, c.bottom) - Math.max(r.top, c.top))]; }
function readMap(c) {
  const frame = box(c), pane = c.querySelector(".leaflet-overlay-pane");
  const shapes = Array.from(pane.querySelectorAll("path.leaflet-interactive")).map(p => {
    const [w, h] = seen(box(p), frame);
    return {w: w, h: h, stroke: p.getAttribute("stroke"),
            marker: /a\\d/.test(p.getAttribute("d") || "")};  // circle markers are arcs
  });
  const legend = c.querySelector(".ps-legend");
  const scale = c.querySelector(".leaflet-control-scale-line");
  return {width: frame.width, height: frame.height, scale: scale ? scale.textContent : null,
          tiles: c.querySelectorAll(".leaflet-tile").length,
          context: pane.querySelectorAll("path:not(.leaflet-interactive)").length,
          shapes: shapes, legend: legend ? box(legend) : null};
}
const w = window.jupyterapp.shell.currentWidget;
return w.content.widgets.filter(c => c.model.type === "code").map(c => ({
  source: c.model.sharedModel.getSource(),
  maps: Array.from(c.node.querySelectorAll(".leaflet-container")).map(readMap),
  stderr: Array.from(c.node.querySelectorAll(
    '.jp-RenderedText[data-mime-type="application/vnd.jupyter.stderr"]'))
    .map(e => e.textContent.slice(0, 300)),
  bars: Array.from(c.node.querySelectorAll(".progress-bar")).map(b => ({
    bar: b.getBoundingClientRect().width,
    track: b.parentElement.getBoundingClientRect().width}))
}));
"""


def _metres(scale: str | None) -> float:
    """A scale bar's length in metres ("300 m", "2 km")."""
    found = re.fullmatch(r"\s*([\d.]+)\s*(k?m)\s*", scale or "")
    assert found, f"no scale bar reading: {scale!r}"
    return float(found[1]) * (1000 if found[2] == "km" else 1)


def _wait_for_kernel(driver: webdriver.Chrome) -> None:
    WebDriverWait(driver, 120, poll_frequency=0.5).until(
        lambda d: (d.execute_script(STATE_JS) or {}).get("status") == "idle"
    )


def _all_run(driver: webdriver.Chrome) -> bool:
    state = driver.execute_script(STATE_JS)
    return bool(
        state and state["status"] == "idle" and state["run"] == state["cells"] and not state["busy"]
    )


def _maps_drawn(driver: webdriver.Chrome, maps: int) -> list[dict[str, Any]] | None:
    """The cells read from the page once ``maps`` maps have drawn shapes, steady for 1 s."""
    first = driver.execute_script(READ_JS)
    drawn = [m for c in first for m in c["maps"] if m["shapes"]]
    if len(drawn) < maps:
        return None
    time.sleep(1)
    again: list[dict[str, Any]] = driver.execute_script(READ_JS)
    return again if again == first else None


def run_all(driver: webdriver.Chrome, url: str, path: Path) -> list[dict[str, Any]]:
    """Open the notebook, clear it, Run All; its code cells as read from the page."""
    maps = len(map_cells(nbformat.read(path, as_version=4)))
    driver.get(url)
    _wait_for_kernel(driver)
    driver.execute_script(
        "return window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')"
    )
    driver.execute_script("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    try:
        WebDriverWait(driver, RUN_TIMEOUT, poll_frequency=1).until(_all_run)
        cells: list[dict[str, Any]] = WebDriverWait(driver, 60, poll_frequency=1).until(
            lambda d: _maps_drawn(d, maps)
        )
    finally:
        _screenshots(driver, path.stem)
        driver.execute_script("return window.jupyterapp.serviceManager.sessions.shutdownAll()")
    return cells


def _screenshots(driver: webdriver.Chrome, stem: str) -> None:
    """The page as it ended, then each map scrolled into view (``lab-STEM-map-N.png``)."""
    driver.save_screenshot(str(screenshot_path(f"lab-{stem}")))
    for n, element in enumerate(driver.find_elements(By.CSS_SELECTOR, ".leaflet-container")):
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
        driver.save_screenshot(str(screenshot_path(f"lab-{stem}-map-{n + 1}")))


@pytest.fixture(scope="module")
def lab_cells() -> Iterator[dict[str, list[dict[str, Any]]]]:
    """Per notebook (by stem), its code cells after Run All in JupyterLab."""
    require_chromium()
    require_jupyterlab()
    with (
        tempfile.TemporaryDirectory(prefix="parcelsearch-lab-") as folder,
        jupyter_lab(NOTEBOOKS, Path(folder)) as lab,
        chromium(size=(1280, 1000)) as driver,
    ):
        yield {p.stem: run_all(driver, lab.notebook_url(p.name), p) for p in NOTEBOOKS}


def _maps(cells: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(c["source"].splitlines()[-1], m) for c in cells for m in c["maps"]]


def test_every_map_opens_on_its_areas_at_a_readable_scale(
    lab_cells: dict[str, list[dict[str, Any]]],
) -> None:
    """Point 8: no map opens on the extent of all areas (grey, dots); the refresh map shows
    its changed pieces."""
    found = 0
    for stem, cells in lab_cells.items():
        for source, shown in _maps(cells):
            found += 1
            where = f"{stem}: {source} (scale {shown['scale']})"
            assert _metres(shown["scale"]) <= READABLE_SCALE_M, where
            readable = [
                s for s in shown["shapes"] if not s["marker"] and max(s["w"], s["h"]) >= MIN_PX
            ]
            assert readable, f"{where}: no area or piece {MIN_PX} px across in view"
            if "after.map(" in source:  # notebook 04: the map of what changed
                changed = [
                    s
                    for s in shown["shapes"]
                    if s["stroke"] == CHANGED_STYLE["color"] and min(s["w"], s["h"]) >= 4
                ]
                assert changed, f"{where}: no changed piece in view"
    assert found == sum(len(map_cells(nbformat.read(p, as_version=4))) for p in NOTEBOOKS)


def test_maps_draw_offline_by_default_and_the_legend_fits(
    lab_cells: dict[str, list[dict[str, Any]]],
) -> None:
    """Point 11: no tile is asked for, the bundled context is drawn under every map, and the
    legend leaves most of a 400 px map free."""
    for stem, cells in lab_cells.items():
        for source, shown in _maps(cells):
            where = f"{stem}: {source}"
            assert shown["tiles"] == 0, f"{where}: {shown['tiles']} map tiles requested"
            assert shown["context"] > 0, f"{where}: no offline context drawn"
            assert shown["height"] == pytest.approx(400, abs=2), where
            legend = shown["legend"]
            assert legend is not None, f"{where}: no legend"
            assert legend["height"] <= LEGEND_SHARE * shown["height"], (where, legend)
            assert legend["width"] <= LEGEND_SHARE * shown["width"], (where, legend)


def test_searches_show_a_full_bar_and_no_stderr_block(
    lab_cells: dict[str, list[dict[str, Any]]],
) -> None:
    """Points 9 and 10 (fixed on branch ``price``): a search's progress bar is drawn full
    width and full at the end; its price line is not a pink stderr block."""
    bars = 0
    for stem, cells in lab_cells.items():
        for cell in cells:
            if ".search(" not in cell["source"]:
                continue
            assert not cell["stderr"], f"{stem}: {cell['source']!r} wrote {cell['stderr']}"
            for bar in cell["bars"]:
                bars += 1
                assert bar["track"] >= 200, f"{stem}: a {bar['track']:.0f} px progress bar"
                assert bar["bar"] == pytest.approx(bar["track"], abs=1), (stem, bar)
    assert bars, "no progress bar seen under any search"


def test_the_project_kernel_registers_for_another_jupyterlab(tmp_path: Path) -> None:
    """The install guide's command: the kernelspec it writes runs this environment's Python."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "ipykernel",
            "install",
            "--prefix",
            str(tmp_path),
            "--name",
            "parcelsearch",
            "--display-name",
            "Python (parcelsearch)",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    spec = json.loads(
        (tmp_path / "share" / "jupyter" / "kernels" / "parcelsearch" / "kernel.json").read_text(
            encoding="utf-8"
        )
    )
    assert spec["argv"][0] == sys.executable and spec["display_name"] == "Python (parcelsearch)"
