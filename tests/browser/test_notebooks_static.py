"""The saved notebooks read on a static viewer: a picture for every map, no frozen bars.

``notebooks/refresh_outputs.py`` saves them so; this checks what is committed (no browser
needed here: the pictures were taken by headless Chromium when the notebooks were refreshed).
"""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path
from typing import Any

import nbformat
import numpy as np
import pytest
from _notebooks import NOTEBOOKS, map_cells
from PIL import Image

from parcelsearch.maps.spec import BACKGROUND

#: tqdm's text: "search:  0%|          | 0/7 [00:00<?, ?page/s]".
PROGRESS = re.compile(r"\d+%\|.*\| *\d+/\d+")
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _texts(notebook: Any) -> list[str]:
    out = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            out.append(output.get("text", ""))
            out += [str(v) for k, v in output.get("data", {}).items() if k.startswith("text/")]
    return out


def test_there_are_notebooks_with_maps() -> None:
    assert len(NOTEBOOKS) == 4
    assert all(map_cells(nbformat.read(p, as_version=4)) for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_map_leaves_a_picture_and_no_bar_is_frozen(path: Path) -> None:
    assert path.stat().st_size < 1_000_000
    notebook = nbformat.read(path, as_version=4)
    assert "widgets" not in notebook.metadata
    assert not any(
        WIDGET_MIME in o.get("data", {}) for c in notebook.cells for o in c.get("outputs", [])
    )
    assert [t for t in _texts(notebook) if PROGRESS.search(t)] == []
    background = np.array([int(BACKGROUND[i : i + 2], 16) for i in (1, 3, 5)])
    for cell in map_cells(notebook):
        pngs = [o["data"]["image/png"] for o in cell.outputs if "image/png" in o.get("data", {})]
        assert len(pngs) == 1, cell.source
        with Image.open(io.BytesIO(base64.b64decode(pngs[0]))) as image:
            pixels = np.asarray(image.convert("RGB"), dtype=int)
        assert pixels.shape[1] == 900 and pixels.shape[0] >= 400
        grey = (np.abs(pixels - background).max(axis=2) <= 6).mean()
        assert grey < 0.5, f"{path.name}: a map picture is mostly empty background"
