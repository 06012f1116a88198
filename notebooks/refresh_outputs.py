"""Run the example notebooks top to bottom in a fresh kernel and store small, stable outputs.

CI checks the notebooks with nbval (``python -m pytest``): the cells marked
``# NBVAL_CHECK_OUTPUT`` must print what the committed notebook shows. When a change to the
toolkit rightly changes one of those figures, rerun this script and review the diff::

    python notebooks/refresh_outputs.py                # all notebooks
    python notebooks/refresh_outputs.py notebooks/02_tiles_tolerance_quota.ipynb

Each notebook is executed in its own folder with the current Python, like nbval does. What is
kept, so that committed notebooks stay small and their diffs readable:

- text outputs (``text/plain``, ``text/html``, streams, errors);
- for each map a cell shows, a static picture instead of the live widget: the kernel writes
  the map with :func:`parcelsearch.maps.save_html` (the same spec, offline context included)
  and headless Chromium photographs that page (a small palette PNG), so the notebook reads on
  a static viewer; its metadata records the shapes per layer (``parcelsearch.shapes``), which
  ``tests/browser/test_notebooks_live.py`` compares with what a live run draws;
- no other widgets (progress bars: no bar is saved, never one frozen at 0 %), no
  ``metadata.widgets`` and no execution timing.

Needs the test extras (``jupyter_client``, ``ipykernel``, ``nbformat``, ``selenium``,
``pillow``) and Debian's ``chromium`` + ``chromium-driver``; nbconvert is not used.
"""

# mypy: disable-error-code="no-untyped-call"
# (nbformat has no type hints)

from __future__ import annotations

import argparse
import base64
import io
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager
from nbval.kernel import CURRENT_ENV_KERNEL_NAME, NbvalKernelspecManager
from PIL import Image
from selenium import webdriver
from selenium.webdriver.support.ui import WebDriverWait

HERE = Path(__file__).resolve().parent
# The browser tests' headless Chromium (Debian's chromium + chromedriver, no downloads).
sys.path.insert(0, str(HERE.parent / "tests" / "browser"))
from _chromium import chromium  # noqa: E402

#: Output MIME types kept; anything else (widget views, images, JavaScript) is dropped.
KEEP_MIME = ("text/plain", "text/html")
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
CELL_TIMEOUT = 120.0
#: Width of the map pictures, and the most colours their palette keeps (small files).
PICTURE_WIDTH = 900
PICTURE_COLOURS = 96
#: Run silently in the kernel after a cell whose result is a widget: writes the map's page.
#: Also stores how many shapes each layer has, for the live browser test to compare.
SAVE_MAP = """
import json as _ps_json, pathlib as _ps_path, parcelsearch.maps as _ps_maps
if hasattr(_, "parcelsearch_spec"):
    _ps_path.Path({counts!r}).write_text(_ps_json.dumps(_.parcelsearch_spec.feature_counts()))
    _ps_maps.save_html(_, {page!r}, basemap=False)
del _ps_json, _ps_path, _ps_maps
"""


def _keep(output: dict[str, Any]) -> dict[str, Any] | None:
    """The output stripped to its text, or None when nothing worth keeping remains."""
    if output["output_type"] in ("display_data", "execute_result"):
        data = output.get("data", {})
        if WIDGET_MIME in data:
            return None  # a map or a progress bar: its text/plain is just a widget repr
        kept = {k: v for k, v in data.items() if k in KEEP_MIME}
        if not kept:
            return None
        output["data"] = kept
        output["metadata"] = {}
    return output


def _has_widget_result(outputs: list[dict[str, Any]]) -> bool:
    return any(
        o["output_type"] == "execute_result" and WIDGET_MIME in o.get("data", {}) for o in outputs
    )


def picture(driver: webdriver.Chrome, page: Path) -> str:
    """A saved map page photographed whole, as a base64 palette PNG."""
    _viewport(driver, PICTURE_WIDTH, 560)
    driver.get(page.as_uri())
    WebDriverWait(driver, 20).until(
        lambda d: d.execute_script("return !!window.psMaps && window.psMaps.length > 0")
    )
    if driver.execute_script("return !!document.getElementById('panels')"):
        height = driver.execute_script("return document.documentElement.scrollHeight")
        _viewport(driver, PICTURE_WIDTH, int(height))  # panels: the whole page
        time.sleep(0.5)  # let Leaflet settle after the resize
    with Image.open(io.BytesIO(driver.get_screenshot_as_png())) as shot:
        small = shot.convert("RGB").quantize(colors=PICTURE_COLOURS)
        out = io.BytesIO()
        small.save(out, format="PNG", optimize=True)
    return base64.b64encode(out.getvalue()).decode("ascii")


def _viewport(driver: webdriver.Chrome, width: int, height: int) -> None:
    """Size the page's viewport (a headless window cannot grow past its screen)."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )


def _map_picture(
    client: BlockingKernelClient, driver: webdriver.Chrome, folder: Path, count: int
) -> dict[str, Any] | None:
    """The picture of the map the last cell returned, as a display output (None: no map)."""
    page, counts = folder / f"map-{count}.html", folder / f"map-{count}.json"
    code = SAVE_MAP.format(page=str(page), counts=str(counts))
    client.execute_interactive(
        code, silent=True, store_history=False, timeout=CELL_TIMEOUT, allow_stdin=False
    )
    if not page.exists():
        return None
    return nbformat.v4.new_output(
        "display_data",
        data={
            "image/png": picture(driver, page),
            "text/plain": "<static picture of the map: run the cell for the live map>",
        },
        metadata={"parcelsearch": {"shapes": json.loads(counts.read_text(encoding="utf-8"))}},
    )


def execute(path: Path, driver: webdriver.Chrome) -> float:
    """Execute one notebook in place; returns the seconds it took."""
    notebook = nbformat.read(path, as_version=4)
    manager = KernelManager(
        kernel_name=CURRENT_ENV_KERNEL_NAME, kernel_spec_manager=NbvalKernelspecManager()
    )
    manager.start_kernel(cwd=str(path.parent))
    client = manager.client()
    client.start_channels()
    started = time.perf_counter()
    pages = tempfile.TemporaryDirectory(prefix="parcelsearch-refresh-")
    try:
        client.wait_for_ready(timeout=60)
        count = 0
        for cell in notebook.cells:
            if cell.cell_type != "code":
                continue
            cell.metadata.pop("execution", None)
            outputs: list[dict[str, Any]] = []

            def hook(msg: dict[str, Any], outputs: list[dict[str, Any]] = outputs) -> None:
                kind = msg["msg_type"]
                if kind == "clear_output":
                    outputs.clear()
                elif kind in ("stream", "display_data", "execute_result", "error"):
                    outputs.append(nbformat.v4.output_from_msg(msg))

            reply = client.execute_interactive(
                cell.source, output_hook=hook, timeout=CELL_TIMEOUT, allow_stdin=False
            )
            count += 1
            cell.execution_count = count
            pictured = _has_widget_result(outputs) and reply["content"]["status"] == "ok"
            cell.outputs = [o for o in (_keep(dict(o)) for o in outputs) if o is not None]
            cell.outputs = [nbformat.from_dict(o) for o in _merge_streams(cell.outputs)]
            if pictured and (shot := _map_picture(client, driver, Path(pages.name), count)):
                cell.outputs.append(shot)
            for output in cell.outputs:
                if "execution_count" in output:
                    output["execution_count"] = count
            if reply["content"]["status"] != "ok":
                raise RuntimeError(
                    f"{path.name}: cell {count} failed:\n{cell.source}\n"
                    + "\n".join(reply["content"].get("traceback", []))
                )
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
        pages.cleanup()
    elapsed = time.perf_counter() - started
    notebook.metadata.pop("widgets", None)
    nbformat.validate(notebook)
    nbformat.write(notebook, path)
    return elapsed


def _merge_streams(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Join consecutive stream chunks of the same name (as Jupyter shows them)."""
    merged: list[dict[str, Any]] = []
    for output in outputs:
        last = merged[-1] if merged else None
        if (
            output["output_type"] == "stream"
            and last is not None
            and last["output_type"] == "stream"
            and last["name"] == output["name"]
        ):
            last["text"] += output["text"]
        else:
            merged.append(output)
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "notebooks", nargs="*", type=Path, default=sorted(HERE.glob("[0-9][0-9]_*.ipynb"))
    )
    args = parser.parse_args(argv)
    with chromium() as driver:
        for path in args.notebooks:
            seconds = execute(path.resolve(), driver)
            size = path.stat().st_size
            print(f"{path}: executed in {seconds:.1f} s, {size / 1e3:,.0f} kB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
