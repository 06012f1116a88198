"""``parcelsearch demo``: the whole product, end to end, on the bundled demo data.

Starts the reference service on 127.0.0.1 with a fresh demo key, then: markets check →
plan → search (progress bar) → per-area summary → GroupIDs to parquet and an HTML map →
the same search again, from the cache, for zero calls → stop.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

import geopandas as gpd
import pandas as pd

from parcelsearch._run.search_run import search
from parcelsearch._shared import data_path
from parcelsearch.local import local_service
from parcelsearch.maps import save_html
from parcelsearch.market_list import check_markets, markets
from parcelsearch.outputs import run_metadata, terminal_table, write_tiles
from parcelsearch.planning.plans import plan
from parcelsearch.result import zoning_price

__all__ = ["demo_areas", "demo_context", "run_demo"]


def demo_areas() -> gpd.GeoDataFrame:
    """The bundled demo study areas: neighbourhood, corridor, area with a hole, multipart,
    and one outside every active market. Columns ``area_id``, ``name``, ``market``."""
    return gpd.read_file(data_path("demo_areas.geojson"))


def demo_context() -> gpd.GeoDataFrame:
    """The blocks of the demo parcel fabric (304 polygons, EPSG:4326), for offline maps.

    Every map draws it by default (``context="bundled"`` of :func:`parcelsearch.maps.save_html`
    and the map functions), so the demo's maps show streets and blocks without map tiles.
    Generated from the demo parcels by
    ``data/make_demo_context.py``. Columns ``market``, ``kind``.
    """
    return gpd.read_file(data_path("demo_context.geojson"))


def _say(out: TextIO, text: str = "") -> None:
    print(text, file=out, flush=True)


def _table(out: TextIO, frame: pd.DataFrame) -> None:
    _say(out, terminal_table(frame, noun="area"))


def run_demo(
    out_dir: str | Path = "parcelsearch-demo", *, progress: bool = True, out: TextIO = sys.stdout
) -> int:
    """Run the demo; returns the exit status (0 on success).

    Parameters
    ----------
    out_dir
        Folder for ``group_ids.parquet``, ``map.html`` and ``tiles.geojson``.
    progress
        Show the search's progress bar.
    out
        Where to print the narrative.
    """
    folder = Path(out_dir)
    _say(out, "parcelsearch demo: the reference service with the bundled demo parcels")
    with local_service(key_type="demo") as client:  # says which extra is missing, if one is
        folder.mkdir(parents=True, exist_ok=True)  # made once the service can run
        _say(out, f"service ready at {client.base_url} with a fresh demo key (50 calls for life)")
        areas = demo_areas().set_index("area_id")
        checked = check_markets(areas, "market", markets(client))
        _say(out, "\n1. Markets check")
        _table(out, pd.DataFrame(checked.drop(columns="geometry")))
        active_plan = plan(checked[checked["market_active"]], 0.0)
        _say(out, "\n2. Plan (no calls spent)")
        _table(out, active_plan.summary())
        _say(out, f"{len(active_plan.pieces)} pieces → at least {active_plan.min_calls} calls")
        _say(out, "\n3. Search")
        result = search(areas, client=client, active_markets_only=True, progress=progress)
        _table(out, result.summary())
        if not result.skipped.empty:
            _say(out, "skipped before spending:")
            _table(out, result.skipped)
        ids_path = result.to_parquet(folder / "group_ids.parquet")
        map_path = save_html(
            result,
            folder / "map.html",
            title="parcelsearch demo",
            basemap=True,
            areas=areas,
            context=demo_context(),
        )
        tiles_path = write_tiles(result.tiles, folder / "tiles.geojson", run_metadata(result))
        unique = len(result.group_ids)
        _say(out, f"\n{unique} unique GroupIDs; {result.calls} calls spent")
        for tier in ("basic", "enhanced", "premium"):
            price = zoning_price(unique, tier)
            _say(out, f"  zoning them at the {tier} tier would cost ${price:,.2f}")
        _say(out, f"GroupIDs → {ids_path}\nmap      → {map_path}\npieces   → {tiles_path}")
        _say(out, "\n4. The same search again")
        again = search(areas, client=client, active_markets_only=True, progress=False)
        same = again.ids.equals(result.ids)
        _say(
            out,
            f"{again.calls} calls spent, {again.cached_pages} pages from the cache; "
            f"same GroupIDs: {same}",
        )
        if again.calls != 0 or not same:
            _say(
                out,
                "demo: the rerun should have cost zero calls and matched",
            )
            return 1
    _say(out, "\nservice stopped. Done.")
    return 0
