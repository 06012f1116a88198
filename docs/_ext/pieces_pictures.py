"""Pictures of pieces for the guide, drawn at build time from the demo data (no network).

Each picture is a plan made by the code being documented, drawn with geopandas ``.plot()``
(matplotlib, Agg) into ``docs/guide/_generated/`` (git-ignored), so the pictures can never
show what the planner no longer does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import geopandas as gpd
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import shapely  # noqa: E402

import parcelsearch  # noqa: E402

#: Folder (under the Sphinx source folder) the pictures are written to.
FOLDER = Path("guide") / "_generated"
#: The tolerance (metres) of the creek's second picture.
TOLERANCE = 5.0


def creek_area() -> gpd.GeoDataFrame:
    """The notebook's creek neighbourhood: about 1,600 vertices, in UTM zone 14N (metres)."""
    corner = gpd.GeoSeries.from_xy([-99.7380], [32.4440], crs="EPSG:4326").to_crs(
        "EPSG:32614")[0]
    rng = np.random.default_rng(42)
    x = np.linspace(0, 1400, 1600)
    creek_y = 650 + 70 * np.sin(x / 110) + 20 * np.sin(x / 27) + rng.normal(0, 1.5, x.size)
    ring = [(0, 0), (1400, 0), *zip(x[::-1], creek_y[::-1], strict=True)]
    return gpd.GeoDataFrame(
        {"name": ["Creekside"]},
        geometry=[shapely.Polygon([(corner.x + dx, corner.y + dy) for dx, dy in ring])],
        index=pd.Index(["creekside"], name="area_id"),
        crs="EPSG:32614",
    )


def _draw(ax: Any, plan: Any, title: str, crs: str) -> None:
    tiles = plan.tiles.to_crs(crs)
    tiles.plot(ax=ax, column="piece_id", cmap="tab20", alpha=0.55, edgecolor="#222222",
               linewidth=0.8, categorical=True)
    plan.areas.to_crs(crs).boundary.plot(ax=ax, color="#b00020", linewidth=1.2)
    ax.set_title(title, fontsize=10)
    ax.set_axis_off()
    ax.set_aspect("equal")


def _pieces(plan: Any) -> str:
    count = len(plan.pieces)
    return f"{count} piece{'s' * (count != 1)}"


def draw_demo(path: Path) -> None:
    """The demo areas and their exact pieces (holes cut, parts apart)."""
    areas = parcelsearch.demo_areas().set_index("area_id")
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2))
    for ax, name in zip(axes, ["park-ring", "twin-sites"], strict=True):
        plan = parcelsearch.plan(areas.loc[[name]])
        _draw(ax, plan, f"{name}: {_pieces(plan)}", "EPSG:3857")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def draw_creek(path: Path) -> None:
    """The creek area exact, then with a tolerance: fewer pieces, a little outside."""
    creek = creek_area()
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2))
    for ax, tolerance in zip(axes, [0.0, TOLERANCE], strict=True):
        plan = parcelsearch.plan(creek, tolerance=tolerance)
        mode = "exact" if not tolerance else f"tolerance {tolerance:g} m"
        _draw(ax, plan, f"{mode}: {_pieces(plan)}", "EPSG:32614")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


PICTURES = {"pieces-demo.png": draw_demo, "pieces-creek.png": draw_creek}


def _generate(app: Any) -> None:
    folder = Path(app.srcdir) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    for name, draw in PICTURES.items():
        draw(folder / name)


def setup(app: Any) -> dict[str, Any]:
    """Register the picture generation (once, before any page is read)."""
    app.connect("builder-inited", _generate)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
