"""Readers of maps for the tests: layers, popup tables, the saved page's data."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import ipyleaflet

from parcelsearch.maps import LayerSpec

EVIL = "<script>alert(1)</script>"


def geojson_layers(m: ipyleaflet.Map) -> dict[str, ipyleaflet.GeoJSON]:
    return {layer.name: layer for layer in m.layers if isinstance(layer, ipyleaflet.GeoJSON)}


def popup_table(popup: str) -> dict[str, str]:
    """A popup's table as {label: text}, unescaped."""
    cells = re.findall(r"<tr><th>(.*?)</th><td>(.*?)</td></tr>", popup)
    return {html.unescape(k): html.unescape(v) for k, v in cells}


def popups(layer: LayerSpec | ipyleaflet.GeoJSON) -> list[dict[str, str]]:
    data = layer.geojson if isinstance(layer, LayerSpec) else layer.data
    return [popup_table(f["properties"]["popup"]) for f in data["features"]]


def piece(m: ipyleaflet.Map, area: str, piece_id: int) -> dict[str, Any]:
    """The feature of one piece in a map's "Pieces" layer."""
    label = {"a1": "North (a1)", "a2": f"{EVIL} (a2)", "a3": "Twin sites (a3)"}[area]
    feature: dict[str, Any]
    for feature in geojson_layers(m)["Pieces"].data["features"]:
        table = popup_table(feature["properties"]["popup"])
        if table["area"] == label and table["piece"] == str(piece_id):
            return feature
    raise LookupError((area, piece_id))


class Page(HTMLParser):
    """Collects a page's tags and the text of its scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._in_script: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = dict(attrs)

    def handle_data(self, data: str) -> None:
        if self._in_script is not None:
            self.scripts.append((self._in_script, data))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = None


def parse_page(path: Path) -> tuple[Page, dict[str, Any]]:
    """The parsed page and the map data its script reads."""
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    data = [text for attrs, text in page.scripts if attrs.get("id") == "ps-spec"]
    assert len(data) == 1
    return page, json.loads(data[0])
