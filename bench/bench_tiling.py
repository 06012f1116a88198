"""Tiling benchmark: pieces for exact mode, tolerance 5 m and plain halving, side by side.

Run ``python bench/bench_tiling.py`` (from the repository root or ``bench/``). It prints a
table and writes it to the ``tiling`` section of ``bench/RESULTS.md``.

Two sets of study areas:

- synthetic, hard on purpose and deterministic (:func:`hard_areas`): fractal
  (midpoint-displacement) coastlines around lakes with islands, a meandering river
  splitting a district in two, and an archipelago — each ≥ 5,000 vertices, multipart,
  with holes;
- real (:func:`real_areas`): New Zealand's surveyed coastlines and islands (LINZ
  Topo50 1:150k coastline polygons) and its 2018 regional-council boundary, as the
  ``nzgeom`` package ships them inside its wheel (nothing is downloaded at run time):
  ``pip install -e ".[bench]"``;
- real coastline regions (:func:`coast_regions`): every region's land on the two main
  islands with ≥ 20,000 vertices — one or a few parts each, where (unlike island
  groups, which need a piece per island) the comparison with halving is not bounded by
  the part count; ``parts/halving`` shows that bound for every area.

``bench_search.py`` imports both and adds the parcel floor and calls measured through
real searches against the reference service.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from parcelsearch import settings
from parcelsearch.planning import tiling

sys.path.insert(0, str(Path(__file__).parent))
from _halving import halving_baseline  # noqa: E402

_LON0, _LAT0 = -97.35, 32.75  # Fort Worth-ish: the demo fabric's neighbourhood
_M_PER_DEG_LAT = 110_574.0


def _to_lonlat(xy: np.ndarray, lon0: float = _LON0, lat0: float = _LAT0) -> np.ndarray:
    """Local metres → lon/lat (equirectangular about ``lon0, lat0``; fine at city scale)."""
    lon = lon0 + xy[:, 0] / (_M_PER_DEG_LAT * 1.00336 * math.cos(math.radians(lat0)))
    return np.column_stack([lon, lat0 + xy[:, 1] / _M_PER_DEG_LAT])


def fractal_ring(
    rng: np.random.Generator,
    centre: tuple[float, float],
    radius: float,
    levels: int,
    roughness: float = 0.22,
    start: int = 7,
) -> shapely.Polygon:
    """A closed midpoint-displacement coastline (metres), repaired to one valid polygon.

    ``start`` points on a wobbly circle are refined ``levels`` times: each edge gets a
    midpoint displaced across the edge by ``roughness × edge length × N(0, 1)``, so the
    ring has ``start × 2**levels`` vertices and detail at every scale.
    """
    angles = np.sort(rng.uniform(0, 2 * np.pi, start))
    radii = radius * rng.uniform(0.75, 1.25, start)
    ring = np.column_stack([centre[0] + radii * np.cos(angles), centre[1] + radii * np.sin(angles)])
    for _ in range(levels):
        nxt = np.roll(ring, -1, axis=0)
        edge = nxt - ring
        normal = np.column_stack([-edge[:, 1], edge[:, 0]])
        mid = (ring + nxt) / 2 + roughness * normal * rng.standard_normal(len(ring))[:, None]
        out = np.empty((2 * len(ring), 2))
        out[0::2], out[1::2] = ring, mid
        ring = out
    polygon = shapely.make_valid(shapely.Polygon(ring), method="structure", keep_collapsed=False)
    parts = sorted(shapely.get_parts(polygon), key=lambda p: -p.area)
    return shapely.Polygon(parts[0].exterior)


def _meander(rng: np.random.Generator, length: float, width: float, levels: int) -> shapely.Polygon:
    """A river: a fractal centre line across the district, buffered to ``width`` metres."""
    line = np.array([[-length, 0.0], [0.0, rng.uniform(-0.2, 0.2) * length], [length, 0.0]])
    for _ in range(levels):
        nxt = line[1:]
        edge = nxt - line[:-1]
        normal = np.column_stack([-edge[:, 1], edge[:, 0]])
        mid = (line[:-1] + nxt) / 2 + 0.18 * normal * rng.standard_normal(len(edge))[:, None]
        out = np.empty((2 * len(line) - 1, 2))
        out[0::2], out[1::2] = line, mid
        line = out
    return shapely.buffer(shapely.LineString(line), width / 2, quad_segs=2)


def _inside(
    rng: np.random.Generator,
    host: shapely.Geometry,
    radius: float,
    levels: int,
    avoid: shapely.Geometry,
) -> shapely.Polygon:
    """A fractal ring of about ``radius`` lying inside ``host`` and clear of ``avoid``."""
    x0, y0, x1, y1 = host.bounds
    for _ in range(500):
        centre = (rng.uniform(x0, x1), rng.uniform(y0, y1))
        ring = fractal_ring(rng, centre, radius, levels)
        if host.buffer(-radius * 0.1).contains(ring) and not ring.buffer(radius * 0.1).intersects(
            avoid
        ):
            return ring
    raise RuntimeError("no room for a ring")  # pragma: no cover - deterministic seeds fit


def _lakes(rng: np.random.Generator) -> shapely.Geometry:
    """A fractal shore round three fractal lakes, with fractal islands in the lakes."""
    area = land = fractal_ring(rng, (0, 0), 9_000, 10)
    lakes = shapely.Polygon()
    for radius in (2_000, 1_500, 1_000):
        lake = _inside(rng, land, radius, 8, lakes)
        lakes = lakes.union(lake)
        area = area.difference(lake)
        islands = shapely.Polygon()
        for _ in range(3):
            island = _inside(rng, lake, radius * 0.15, 6, islands)
            islands = islands.union(island)
        area = area.union(islands)
    return area


def _river(rng: np.random.Generator) -> shapely.Geometry:
    """A fractal district cut in two by a meandering river, ponds as holes."""
    district = fractal_ring(rng, (0, 0), 7_000, 10, roughness=0.18)
    area = district.difference(_meander(rng, 9_000, 120, 9))
    ponds = shapely.Polygon()
    for _ in range(4):
        pond = _inside(rng, area, 500, 6, ponds)
        ponds = ponds.union(pond)
    return area.difference(ponds)


def _archipelago(rng: np.random.Generator) -> shapely.Geometry:
    """A fractal coast with a bay, plus 25 fractal islands offshore, lagoons as holes."""
    coast = fractal_ring(rng, (-4_000, 0), 6_000, 10)
    sea = shapely.box(*coast.buffer(9_000).bounds).difference(coast.buffer(300))
    islands = shapely.Polygon()
    for _ in range(25):
        islands = islands.union(_inside(rng, sea, rng.uniform(200, 900), 6, islands))
    lagoons = shapely.Polygon()
    for _ in range(3):
        lagoons = lagoons.union(_inside(rng, coast, 700, 7, lagoons))
    return coast.difference(lagoons).union(islands)


def hard_areas(seed: int = 20240605) -> gpd.GeoDataFrame:
    """Three hard study areas (EPSG:4326, index ``area_id``): lakes, river, archipelago."""
    rng = np.random.default_rng(seed)
    shapes = {"lakes": _lakes(rng), "river": _river(rng), "archipelago": _archipelago(rng)}
    offsets = {"lakes": (0.0, 0.0), "river": (0.25, 0.0), "archipelago": (0.0, 0.25)}
    geoms = []
    for name, shape in shapes.items():
        dx, dy = offsets[name]
        shape = shapely.transform(
            shape, lambda xy, dx=dx, dy=dy: _to_lonlat(xy, _LON0 + dx, _LAT0 + dy)
        )
        geoms.append(shapely.make_valid(shape, method="structure", keep_collapsed=False))
    frame = gpd.GeoDataFrame(geometry=geoms, index=pd.Index(list(shapes), name="area_id"), crs=4326)
    return frame


#: Real study areas: island groups (every island within 3 km of the named one) and a
#: region clipped to the land.
_REAL_ISLANDS = {
    "waiheke": "Waiheke Island",
    "great-barrier": "Great Barrier Island (Aotea Island)",
    "durville": "Rangitoto ke te Tonga / D'Urville Island",
}
_MAINLAND = ("North Island or Te Ika-a-Māui", "South Island or Te Waipounamu")


def real_areas() -> gpd.GeoDataFrame:
    """Five real study areas (EPSG:4326, index ``area_id``) from the ``nzgeom`` package.

    Waiheke, Great Barrier and D'Urville islands with the islands round them, the
    Chatham Islands, and the Nelson region's land: 3,700–22,000 vertices and 29–315
    parts each, about 1,800 km² in all.
    """
    import nzgeom  # the bench extra; imported here so the synthetic benchmark runs without it

    root = Path(nzgeom.__file__).parent / "data"
    coast = gpd.read_file(root / "coastlines" / "nz-coastlines-and-islands-polygons-topo-150k.gpkg")
    regions = gpd.read_file(root / "regions" / "regional-council-2018-generalised.gpkg")
    islands = coast[~coast["name"].isin(_MAINLAND)]
    shapes = {}
    for area_id, name in _REAL_ISLANDS.items():
        main = coast.loc[coast["name"] == name].geometry.iloc[0]
        near = shapely.box(*main.bounds).buffer(3_000)
        shapes[area_id] = shapely.union_all(islands[islands.intersects(near)].geometry.to_numpy())
    chatham = coast.loc[coast["grp_name"] == "Chatham Islands"]
    shapes["chatham"] = shapely.union_all(chatham.geometry.to_numpy())
    nelson = regions.loc[regions["REGC2018_V1_00_NAME"] == "Nelson Region"].geometry.iloc[0]
    land = shapely.union_all(coast[coast.intersects(nelson)].geometry.to_numpy())
    shapes["nelson"] = shapely.intersection(nelson, land)
    frame = gpd.GeoDataFrame(
        geometry=list(shapes.values()), index=pd.Index(list(shapes), name="area_id"), crs=coast.crs
    )
    return frame.to_crs(4326)


def coast_regions(min_vertices: int = 20_000) -> gpd.GeoDataFrame:
    """Every regional council's land on the two main islands, islands offshore left out, that
    has at least ``min_vertices`` vertices: large one- or few-part areas with a detailed
    surveyed coastline (index ``area_id``, EPSG:4326), from the ``nzgeom`` package.

    Island groups need one piece per island whatever the planner does (exact pieces may
    not bridge the sea), which bounds exact ÷ halving from below; these areas do not.
    """
    import nzgeom  # the bench extra, as in real_areas

    root = Path(nzgeom.__file__).parent / "data"
    coast = gpd.read_file(root / "coastlines" / "nz-coastlines-and-islands-polygons-topo-150k.gpkg")
    regions = gpd.read_file(root / "regions" / "regional-council-2018-generalised.gpkg")
    mainland = shapely.union_all(coast.loc[coast["name"].isin(_MAINLAND)].geometry.to_numpy())
    shapes = {}
    for name, region in zip(regions["REGC2018_V1_00_NAME"], regions.geometry, strict=True):
        land = shapely.intersection(region, mainland)
        parts = [p for p in shapely.get_parts(land) if p.geom_type == "Polygon" and p.area > 0]
        vertices = sum(shapely.get_num_coordinates(p) - 1 - len(p.interiors) for p in parts)
        if vertices >= min_vertices:
            key = name.removesuffix(" Region").lower().replace(" ", "-").replace("'", "")
            shapes[key] = shapely.MultiPolygon(parts) if len(parts) > 1 else parts[0]
    frame = gpd.GeoDataFrame(
        geometry=list(shapes.values()), index=pd.Index(list(shapes), name="area_id"), crs=coast.crs
    )
    return frame.to_crs(4326)


#: The regions whose offshore islands make :func:`island_city`'s areas.
_ISLAND_REGIONS = ("Auckland Region", "Northland Region", "Waikato Region", "Bay of Plenty Region")


def _nz_layers() -> tuple[gpd.GeoDataFrame, gpd.GeoDataFrame]:
    """The coastline polygons and the regional councils shipped in ``nzgeom``."""
    import nzgeom  # the bench extra, as in real_areas

    root = Path(nzgeom.__file__).parent / "data"
    coast = gpd.read_file(root / "coastlines" / "nz-coastlines-and-islands-polygons-topo-150k.gpkg")
    regions = gpd.read_file(root / "regions" / "regional-council-2018-generalised.gpkg")
    return coast, regions


def island_city(min_km2: float = 0.1) -> gpd.GeoDataFrame:
    """A dense island city: every offshore island of at least ``min_km2`` of four regional
    councils round the Hauraki Gulf (Auckland, Northland, Waikato, Bay of Plenty), one
    multi-part area a region (index ``area_id``, EPSG:4326), from the ``nzgeom`` package.

    Several large multi-part areas with many islands each (Great Barrier, Waiheke and Little
    Barrier among them), some 700 km² in all: the shape of a real coastal city's districts,
    where every island needs a piece of its own in exact mode.
    """
    coast, regions = _nz_layers()
    islands = coast[~coast["name"].isin(_MAINLAND) & (coast.geometry.area >= min_km2 * 1e6)]
    shapes = {}
    for name in _ISLAND_REGIONS:
        region = regions.loc[regions["REGC2018_V1_00_NAME"] == name].geometry.iloc[0]
        inside = islands[islands.intersects(region)].geometry.to_numpy()
        land = shapely.intersection(region, shapely.union_all(inside))
        parts = [
            p
            for p in shapely.get_parts(land)
            if p.geom_type == "Polygon" and p.area >= min_km2 * 1e6
        ]
        shapes[name.removesuffix(" Region").lower().replace(" ", "-")] = shapely.MultiPolygon(parts)
    frame = gpd.GeoDataFrame(
        geometry=list(shapes.values()), index=pd.Index(list(shapes), name="area_id"), crs=coast.crs
    )
    return frame.to_crs(4326)


#: The regions of :func:`region_city`: large coastal regions with many offshore islands.
_DENSE_REGIONS = (
    "Bay of Plenty Region",
    "Tasman Region",
    "Nelson Region",
    "Gisborne Region",
    "Taranaki Region",
)


def region_city(min_km2: float = 0.01) -> gpd.GeoDataFrame:
    """A dense real city like issue 28's: five large regional councils, each ONE multi-part
    area of its land on the main islands WITH its offshore islands of at least ``min_km2``
    (index ``area_id``, EPSG:4326), from the ``nzgeom`` package: about a hundred parts and
    some 90,000 vertices in all."""
    coast, regions = _nz_layers()
    land = coast[coast["name"].isin(_MAINLAND) | (coast.geometry.area >= min_km2 * 1e6)]
    tree = shapely.STRtree(land.geometry.to_numpy())
    shapes = {}
    for name in _DENSE_REGIONS:
        region = regions.loc[regions["REGC2018_V1_00_NAME"] == name].geometry.iloc[0]
        near = land.geometry.to_numpy()[tree.query(region, predicate="intersects")]
        parts = [
            p
            for p in shapely.get_parts(shapely.intersection(region, shapely.union_all(near)))
            if p.geom_type == "Polygon" and p.area >= min_km2 * 1e6
        ]
        shapes[name.removesuffix(" Region").lower().replace(" ", "-")] = shapely.MultiPolygon(parts)
    frame = gpd.GeoDataFrame(
        geometry=list(shapes.values()), index=pd.Index(list(shapes), name="area_id"), crs=coast.crs
    )
    return frame.to_crs(4326)


def island_set(min_km2: float = 0.01) -> gpd.GeoDataFrame:
    """A large set of simple areas: every offshore island of New Zealand of at least
    ``min_km2``, each its own area (one ring, a few to a few thousand vertices; index
    ``area_id``, EPSG:4326), from the ``nzgeom`` package."""
    coast, _ = _nz_layers()
    islands = coast[~coast["name"].isin(_MAINLAND) & (coast.geometry.area >= min_km2 * 1e6)]
    ids = [f"island-{number}" for number in range(len(islands))]
    frame = gpd.GeoDataFrame(
        geometry=islands.geometry.to_numpy(), index=pd.Index(ids, name="area_id"), crs=coast.crs
    )
    return frame.to_crs(4326)


def _vertex_bound(geometry: shapely.Geometry, budget: tiling.Budget) -> int:
    """Σ over parts of ⌈vertices ÷ vertices-per-request⌉ (mean vertex bytes of the part)."""
    bound = 0
    for part in shapely.get_parts(shapely.set_precision(geometry, tiling.GRID)):
        coords = np.concatenate([shapely.get_coordinates(r)[:-1] for r in shapely.get_rings(part)])
        per_vertex = budget.ring_bytes(coords) - budget.base + 1
        per_request = (budget.max_request_bytes - budget.base) / (per_vertex / len(coords))
        bound += math.ceil(len(coords) / per_request)
    return bound


def piece_counts(
    areas: gpd.GeoDataFrame,
    tolerance: float = 5.0,
    max_request_bytes: int = settings.MAX_REQUEST_LINE_BYTES,
) -> pd.DataFrame:
    """Per area: vertices, parts, holes, vertex bound, pieces (exact, tolerance, halving).

    Columns: ``vertices, parts, holes, vertex_bound, exact, tol_<t>m, halving,
    exact/halving, seconds_exact, seconds_tol, seconds_halving``.
    """
    budget = tiling.Budget(max_request_bytes, settings.SEARCH_PATH)
    rows = []
    for area_id, geometry in areas.geometry.items():
        parts = shapely.get_parts(geometry)
        row: dict[str, object] = {
            "area_id": area_id,
            "vertices": int(shapely.get_num_coordinates(geometry) - len(shapely.get_rings(parts))),
            "parts": len(parts),
            "holes": int(shapely.get_num_interior_rings(parts).sum()),
            "vertex_bound": _vertex_bound(geometry, budget),
        }
        for column, run in (
            ("exact", lambda g: tiling.tile(g, max_request_bytes=max_request_bytes)),
            (
                f"tol_{tolerance:g}m",
                lambda g: tiling.tile(g, tolerance=tolerance, max_request_bytes=max_request_bytes),
            ),
            ("halving", lambda g: halving_baseline(g, max_request_bytes=max_request_bytes)),
        ):
            started = time.perf_counter()
            row[column] = len(run(geometry))
            row[f"seconds_{column.split('_')[0]}"] = round(time.perf_counter() - started, 2)
        row["exact/halving"] = round(row["exact"] / row["halving"], 3)  # type: ignore[operator]
        # Without connectors exact ≥ parts: the ratio could not go lower (with them it can).
        row["parts/halving"] = round(row["parts"] / row["halving"], 3)  # type: ignore[operator]
        row["exact/vertex_bound"] = round(
            row["exact"] / row["vertex_bound"],
            3,  # type: ignore[operator]
        )
        rows.append(row)
    return pd.DataFrame(rows).set_index("area_id")


def _table(name: str, areas: gpd.GeoDataFrame) -> str:
    counts = piece_counts(areas)
    totals = counts[["vertices", "parts", "vertex_bound", "exact", "tol_5m", "halving"]].sum()
    text = counts.to_markdown() if _has_tabulate() else f"```\n{counts.to_string()}\n```"
    return (
        f"**{name}** — pieces per area (each costs at least one call).\n\n{text}\n\n"
        f"Totals: {totals['vertices']:,} vertices; vertex bound {totals['vertex_bound']}; "
        f"exact {totals['exact']}, tolerance 5 m {totals['tol_5m']}, halving {totals['halving']}; "
        f"exact/halving = {totals['exact'] / totals['halving']:.3f} (target ≤ 0.6; without "
        f"connectors the parts alone would bound it below by parts/halving = "
        f"{totals['parts'] / totals['halving']:.3f}); "
        f"exact/vertex bound = {totals['exact'] / totals['vertex_bound']:.3f}.\n"
    )


def main() -> None:
    from _results import write_section

    markdown = (
        f"Request lines ≤ {settings.MAX_REQUEST_LINE_BYTES:,} bytes at page 99999.\n\n"
        + _table("Synthetic hard areas", hard_areas())
        + "\n"
        + _table("Real boundaries (nzgeom: NZ coastlines, islands, Nelson region)", real_areas())
        + "\n"
        + _table(
            "Real coastline regions (nzgeom: every regional council's land on the two main "
            "islands with ≥ 20,000 vertices, offshore islands left out)",
            coast_regions(),
        )
    )
    print(markdown)
    write_section("tiling", markdown)


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()
