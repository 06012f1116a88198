"""The offline HTML map in headless Chromium: it opens on the pieces, over streets and blocks.

What a person sees first is checked from the page itself: Leaflet's view of each map against
the pieces (inside, and big enough to see), the context blocks drawn under them, a real click
on a piece showing its figures, and the screenshot's pixels (not a grey void).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pytest
from _chromium import chromium, require_chromium, screenshot_path
from PIL import Image
from selenium import webdriver
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

import parcelsearch
from parcelsearch.demo import demo_context, run_demo
from parcelsearch.maps import save_html
from parcelsearch.maps.framing import MIN_PX
from parcelsearch.maps.spec import BACKGROUND

#: Per map: its zoom, its container's box, and each layer's shapes as Leaflet shows them
#: (fully inside the view, partly visible, size in pixels, drawn as an SVG path).
VIEWS_JS = """
return window.psMaps.map(function (e) {
  var view = e.map.getBounds();
  function shapes(name) {
    var group = e.layers[name];
    if (!group) { return []; }
    return group.getLayers().map(function (l) {
      var b = l.getBounds ? l.getBounds() : L.latLngBounds([l.getLatLng()]);
      var nw = e.map.latLngToContainerPoint(b.getNorthWest());
      var se = e.map.latLngToContainerPoint(b.getSouthEast());
      return {inside: view.contains(b), visible: view.intersects(b),
              px: Math.max(se.x - nw.x, se.y - nw.y),
              tooltip: l.feature.properties.tooltip, drawn: !!(l._path && l._path.isConnected)};
    });
  }
  var box = e.map.getContainer().getBoundingClientRect();
  return {zoom: e.map.getZoom(), box: [box.left, box.top, box.right, box.bottom],
          pieces: shapes("Pieces"), areas: shapes("Study areas"),
          skipped: shapes("Skipped areas"), context: shapes("Context (offline)")};
});
"""


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output of ``parcelsearch demo`` (a real search on the local service)."""
    require_chromium()
    folder = tmp_path_factory.mktemp("demo")
    assert run_demo(folder, progress=False, out=io.StringIO()) == 0
    return folder


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    require_chromium()
    with chromium() as driver:
        yield driver


def open_map(driver: webdriver.Chrome, path: Path) -> list[dict[str, Any]]:
    """Open a saved map and wait until every map has drawn; the views as Leaflet has them."""
    driver.get(path.as_uri())
    WebDriverWait(driver, 20).until(
        lambda d: d.execute_script("return !!window.psMaps && window.psMaps.length > 0")
    )
    views: list[dict[str, Any]] = driver.execute_script(VIEWS_JS)
    return views


def seen(views: list[dict[str, Any]], kind: str) -> set[str]:
    """Tooltips of the shapes of ``kind`` fully inside some view and at least MIN_PX across."""
    return {
        s["tooltip"]
        for v in views
        for s in v[kind]
        if s["inside"] and s["drawn"] and s["px"] >= MIN_PX
    }


def not_background(shot: Path, box: list[float], tolerance: int = 6) -> float:
    """The share of a screenshot's pixels inside ``box`` that differ from the background."""
    background = np.array([int(BACKGROUND[i : i + 2], 16) for i in (1, 3, 5)])
    with Image.open(shot) as image:
        crop = np.asarray(image.convert("RGB").crop(tuple(round(x) for x in box)), dtype=int)
    return float((np.abs(crop - background).max(axis=2) > tolerance).mean())


def test_demo_map_opens_on_every_piece_in_panels_over_blocks(
    browser: webdriver.Chrome, demo_dir: Path
) -> None:
    tiles = gpd.read_file(demo_dir / "tiles.geojson")
    views = open_map(browser, demo_dir / "map.html")
    shot = screenshot_path("demo_map")
    browser.save_screenshot(str(shot))
    # four places ~1,000 km apart: Abilene (two areas), Fort Worth, Boise, Marfa (skipped)
    assert len(views) == 4
    assert [(len(v["areas"]), len(v["skipped"])) for v in views] == [(4, 1)] * 4
    pieces = seen(views, "pieces")
    assert len(pieces) == len(tiles) == len({s["tooltip"] for s in views[0]["pieces"]})
    assert len(seen(views, "areas")) == 4 and len(seen(views, "skipped")) == 1
    with_blocks = [sum(s["drawn"] and s["visible"] for s in v["context"]) for v in views]
    assert sorted(with_blocks)[0] == 0 and sorted(with_blocks)[1] >= 40  # Marfa has no fabric
    paths = len(browser.find_elements(By.CSS_SELECTOR, "#panels svg path"))
    assert paths >= sum(with_blocks) + 4 * (len(tiles) + 5)
    shares = [not_background(shot, v["box"]) for v in views]
    assert min(shares) > 0.2, shares  # never a grey void
    assert sorted(shares)[1] > 0.5, shares  # blocks fill the panels with fabric


def test_clicking_a_piece_shows_its_figures(browser: webdriver.Chrome, demo_dir: Path) -> None:
    tiles = gpd.read_file(demo_dir / "tiles.geojson")
    expected = int(tiles.loc[tiles["area_id"] == "pine-street", "rows"].sum())
    open_map(browser, demo_dir / "map.html")
    found = browser.execute_script("""
      for (const e of window.psMaps) {
        for (const l of e.layers["Pieces"].getLayers()) {
          if (l.feature.properties.tooltip.indexOf("(pine-street)") < 0) { continue; }
          if (!e.map.getBounds().contains(l.getBounds())) { continue; }
          const p = e.map.latLngToContainerPoint(l.getCenter());
          const box = e.map.getContainer().getBoundingClientRect();
          return [e.map.getContainer(), p.x - box.width / 2, p.y - box.height / 2];
        }
      }
      return null;""")
    assert found is not None
    container, dx, dy = found
    ActionChains(browser).move_to_element_with_offset(container, int(dx), int(dy)).click().perform()
    popup = WebDriverWait(browser, 10).until(
        lambda d: d.find_element(By.CSS_SELECTOR, ".leaflet-popup-content")
    )
    cells = popup.find_elements(By.CSS_SELECTOR, "tr")
    rows = {
        c.find_element(By.TAG_NAME, "th").get_attribute("textContent"): c.find_element(
            By.TAG_NAME, "td"
        ).get_attribute("textContent")
        for c in cells
    }
    assert rows.get("area") == "Pine Street corridor (pine-street)", rows
    assert rows["parcels matched"] == f"{expected:,}"


def test_close_areas_share_one_view_fitted_to_them(
    browser: webdriver.Chrome, tmp_path: Path
) -> None:
    areas = parcelsearch.demo_areas().set_index("area_id").loc[["northside", "pine-street"]]
    plan = parcelsearch.plan(areas)
    path = save_html(plan, tmp_path / "plan.html", basemap=False, context=demo_context())
    views = open_map(browser, path)
    browser.save_screenshot(str(screenshot_path("abilene_plan")))
    assert len(views) == 1
    assert len(seen(views, "pieces")) == len(plan.tiles)
    assert len(seen(views, "areas")) == 2
    assert views[0]["zoom"] >= 14
    assert sum(s["drawn"] and s["visible"] for s in views[0]["context"]) >= 100
    assert not_background(screenshot_path("abilene_plan"), views[0]["box"]) > 0.5
    data = json.loads(
        browser.execute_script("return document.getElementById('ps-spec').textContent")
    )
    assert data["tiles"] is None  # nothing to fetch: the blocks are the only background
