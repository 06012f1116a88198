"""Deterministic synthetic parcel fabric, demo markets and demo study areas (the street grid
itself, :func:`fabric`, in :mod:`parcelsearch_service.street_grid`; its names given here too).

The fabric imitates a US street grid: rectangular blocks separated by streets,
each block cut into two back-to-back rows of lots of varied frontage. Some lots are
commercial (wider, deeper), some are condominium buildings (several parcels with one
footprint and one GroupID), some runs of adjacent lots form an *assemblage* (separate
parcels sharing one GroupID), and a few blocks are parks (one large parcel). Its lots are
those of a kind of place (:data:`PLACES`): urban, suburban (the demo's) or rural;
:func:`fabric_for` lays the fitting one under any study areas.

Everything is generated from a seed, so the same call always returns the same frame.
``python -m parcelsearch_service.synth [DIR]`` rewrites the bundled demo files.

Examples
--------
>>> parcels = fabric(MARKETS_DEMO[:1], seed=7)
>>> list(parcels.columns)
['parcel_id', 'group_id', 'market', 'land_use', 'geometry']
>>> bool(parcels.group_id.str.fullmatch(r"[0-9a-f]{17}").all())
True
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import geopandas as gpd
import numpy as np
import pyproj
import shapely
from shapely.geometry import LineString, MultiPolygon, Polygon

from parcelsearch_service.street_grid import (
    _M_PER_DEG_LAT,
    DEFAULT_SEED,
    MARKETS_DEMO,
    PLACE_BY_SIZE_KM2,
    PLACES,
    MarketSpec,
    Place,
    _grid_lines,
    _to_lonlat,
    fabric,
    group_ids,
)

__all__ = [
    "MarketSpec",
    "MARKETS_DEMO",
    "MARKET_NAMES",
    "OUTSIDE_MARKET",
    "Example",
    "fabric",
    "fabric_for",
    "plan_fabric",
    "market_names",
    "FabricPlan",
    "Place",
    "PLACES",
    "place_of",
    "demo_parcels",
    "demo_areas",
    "large_fabric",
    "example_fabric",
    "group_ids",
    "write_demo_data",
    "DEFAULT_SEED",
]

#: Where the demo's "outside every active market" study area lies (not a listed market).
OUTSIDE_MARKET = "Marfa, TX"

#: The markets list the demo service serves (the demo markets among them).
MARKET_NAMES: tuple[str, ...] = tuple(
    sorted(
        {
            "Abilene, TX",
            "Ada County Unincorporated, ID",
            "Albuquerque, NM",
            "Amarillo, TX",
            "Arlington, TX",
            "Austin, TX",
            "Bernalillo County Unincorporated, NM",
            "Boise, ID",
            "Caldwell, ID",
            "Cedar Park, TX",
            "Charlotte, NC",
            "Collin County Unincorporated, TX",
            "Dallas, TX",
            "Dallas County Unincorporated, TX",
            "Denton, TX",
            "Denton County Unincorporated, TX",
            "El Paso, TX",
            "Fort Worth, TX",
            "Frisco, TX",
            "Garland, TX",
            "Georgetown, TX",
            "Harris County Unincorporated, TX",
            "Houston, TX",
            "Irving, TX",
            "Lubbock, TX",
            "Maricopa County Unincorporated, AZ",
            "Mecklenburg County Unincorporated, NC",
            "Meridian, ID",
            "Mesa, AZ",
            "Midland, TX",
            "Nampa, ID",
            "Odessa, TX",
            "Phoenix, AZ",
            "Plano, TX",
            "Round Rock, TX",
            "San Angelo, TX",
            "San Antonio, TX",
            "Scottsdale, AZ",
            "Tarrant County Unincorporated, TX",
            "Taylor County Unincorporated, TX",
            "Tempe, AZ",
            "Travis County Unincorporated, TX",
            "Tucson, AZ",
            "Waco, TX",
            "Wichita Falls, TX",
        }
    )
)


#: Parcels :func:`fabric_for` makes at most unless told otherwise (about 100 MB in memory).
MAX_PARCELS = 1_000_000
#: A fabric's parcel ids are ``base + 1 … base + n`` with ``base`` a multiple of this,
#: drawn from its areas and seed: fabrics made for different areas can be served together.
ID_SPAN = 10_000_000
#: How many such bases there are: every id stays below 2**53 (exact as a JSON number).
_ID_BASES = 900_000_000


@dataclass(frozen=True)
class FabricPlan:
    """What :func:`fabric_for` will make: the grids, where each kind of place lies, and about
    how many parcels (:func:`plan_fabric`).

    Attributes
    ----------
    specs
        One street grid per group of areas of one kind of place whose grown bounding boxes
        touch (``spec.place`` is its kind).
    regions
        By kind of place, where its parcels are kept (EPSG:4326): the grown areas of that
        kind, less the areas of other kinds.
    areas_by_place
        How many areas are of each kind.
    estimate
        Parcels expected: each kind's density (:meth:`Place.parcels_per_km2`) times the area
        of its region.
    id_base
        The fabric's first parcel id is ``id_base + 1``.
    """

    specs: tuple[MarketSpec, ...]
    regions: dict[str, shapely.Geometry]
    areas_by_place: dict[str, int]
    estimate: float
    id_base: int


def place_of(area_km2: float) -> str:
    """The kind of place of an area of ``area_km2`` (:data:`PLACE_BY_SIZE_KM2`)."""
    urban, suburban = PLACE_BY_SIZE_KM2
    return "urban" if area_km2 < urban else "suburban" if area_km2 < suburban else "rural"


def plan_fabric(
    areas: gpd.GeoDataFrame,
    *,
    seed: int = DEFAULT_SEED,
    margin: float = 50.0,
    market: str = "Your areas",
    place: str = "auto",
) -> FabricPlan:
    """The grids :func:`fabric_for` lays under ``areas`` and the parcels it expects to make.

    Parameters
    ----------
    areas
        Study areas, any CRS.
    seed, margin, market
        As for :func:`fabric_for`.
    place
        ``"auto"`` (each area's kind from its size, :func:`place_of`) or a key of
        :data:`PLACES` for every area.

    Raises
    ------
    ValueError
        No areas, areas without a CRS, or an unknown ``place``.
    """
    if areas.crs is None:
        raise ValueError("the areas have no CRS: set one (areas.set_crs(...)) first")
    if not len(areas) or areas.geometry.is_empty.all():
        raise ValueError(
            "there are no areas (no rows, or only empty geometries) to lay a fabric under"
        )
    if place != "auto" and place not in PLACES:
        raise ValueError(f"place {place!r} is not one of auto, {', '.join(PLACES)}")
    lonlat = areas.to_crs("EPSG:4326")
    local = lonlat.to_crs(lonlat.estimate_utm_crs())
    shapes = local.geometry.make_valid()
    kinds = (shapes.area / 1e6).map(place_of) if place == "auto" else shapes.map(lambda _: place)
    grown = shapes.buffer(margin)
    to_lonlat = pyproj.Transformer.from_crs(local.crs, "EPSG:4326", always_xy=True)
    specs: list[MarketSpec] = []
    regions: dict[str, shapely.Geometry] = {}
    estimate = 0.0
    for kind in (k for k in PLACES if (kinds == k).any()):
        mine = (kinds == kind).to_numpy()
        region = shapely.difference(
            shapely.union_all(grown[mine].to_numpy()), shapely.union_all(shapes[~mine].to_numpy())
        )
        estimate += PLACES[kind].parcels_per_km2() * region.area / 1e6
        specs += _grids(kind, grown[mine], to_lonlat, f"{market} {kind}")
        regions[kind] = shapely.transform(region, to_lonlat.transform, interleaved=False)
    digest = hashlib.blake2b(
        repr(
            (
                seed,
                [s.name for s in specs],
                [(round(s.lon, 5), round(s.lat, 5), s.blocks_x, s.blocks_y) for s in specs],
            )
        ).encode(),
        digest_size=8,
    ).digest()
    id_base = (1 + int.from_bytes(digest, "big") % _ID_BASES) * ID_SPAN
    return FabricPlan(
        tuple(specs), regions, {k: int((kinds == k).sum()) for k in regions}, estimate, id_base
    )


def _grids(
    kind: str, grown: gpd.GeoSeries, to_lonlat: pyproj.Transformer, name: str
) -> list[MarketSpec]:
    """One grid of ``kind`` over each group of touching bounding boxes of ``grown``."""
    place = PLACES[kind]
    pitch_x = place.block_length[0] + place.street[0]  # the smallest: the grid reaches over
    pitch_y = 2 * place.lot_depth[0] + place.street[0]
    boxes = shapely.unary_union(shapely.box(*np.asarray(grown.bounds).T))
    specs = []
    for k, box in enumerate(shapely.get_parts(boxes)):
        x0, y0, x1, y1 = box.bounds
        # one corner as plain floats (pyproj 3.6 warns on one-element arrays)
        lon, lat = to_lonlat.transform(float(x0), float(y0))
        specs.append(
            MarketSpec(
                f"{name} {k + 1}",
                lon,
                lat,
                max(1, math.ceil((x1 - x0) / pitch_x)),
                max(1, math.ceil((y1 - y0) / pitch_y)),
                place=kind,
            )
        )
    return specs


def fabric_for(
    areas: gpd.GeoDataFrame,
    *,
    seed: int = DEFAULT_SEED,
    margin: float = 50.0,
    market: str = "Your areas",
    max_parcels: int = MAX_PARCELS,
    place: str = "auto",
    plan: FabricPlan | None = None,
) -> gpd.GeoDataFrame:
    """A synthetic fabric over any study areas: a street grid of their kind of place under them.

    Each area is a kind of place (:data:`PLACES`): with ``place="auto"`` by its size, as
    census tracts are drawn (:func:`place_of`: under 5 km² urban — narrow lots, flats —,
    under 50 km² suburban, else rural — lots of several hectares), or ``place`` for all. The
    areas (any CRS) are grown by ``margin`` metres; each group of them of one kind whose grown
    bounding boxes touch gets one grid over its box, and the parcels whose representative
    point lies in the grown areas are kept. :func:`plan_fabric` says beforehand how many,
    within about a quarter. Deterministic for a ``seed``; the columns of :func:`fabric` and
    ``place``, ready for ``parcelsearch serve --parcels``; ``market`` names each grid's
    market as the vendor names markets (``"Your areas urban 1, VA"``: ``market``, the kind
    of place, the grid's number and its US state, :func:`market_names`), and ``serve
    --parcels`` serves those names as its market list.
    Parcel ids run from a base drawn from the areas and the seed (a multiple of
    :data:`ID_SPAN`) and GroupIDs are drawn with it, so fabrics made for different areas
    can be served together.

    ``plan`` is :func:`plan_fabric`'s of the same arguments when the caller made it already
    (``parcels synth`` prints its estimate), so it is not made twice.

    Raises
    ------
    ValueError
        Areas without a CRS, an unknown ``place``, or areas so large that the fabric would
        exceed ``max_parcels`` (the message says how many it would have).
    """
    if not 0 < max_parcels < ID_SPAN:
        raise ValueError(f"max_parcels must be from 1 to {ID_SPAN - 1:,}, got {max_parcels:,}")
    if plan is None:
        plan = plan_fabric(areas, seed=seed, margin=margin, market=market, place=place)
    if plan.estimate > max_parcels:
        coarser = (
            ""
            if set(plan.areas_by_place) == {"rural"}
            else "lay rural lots of several hectares (place='rural'), "
        )
        raise ValueError(
            f"a fabric over these areas would have about {plan.estimate:,.0f} parcels, more "
            f"than {max_parcels:,}: {coarser}search fewer or smaller areas, or raise the limit"
        )
    parcels = fabric(plan.specs, [seed, plan.id_base // ID_SPAN])
    kinds = parcels["market"].map({s.name: s.place for s in plan.specs})
    points = shapely.get_coordinates(parcels.geometry.representative_point())
    keep = np.zeros(len(parcels), dtype=bool)
    for kind, region in plan.regions.items():
        mine = (kinds == kind).to_numpy()
        keep[mine] = shapely.contains_xy(region, *points[mine].T)
    parcels = parcels[keep].reset_index(drop=True)
    parcels["market"] = parcels["market"].map(market_names(plan.specs)).to_numpy()
    parcels["place"] = kinds[keep].to_numpy()
    parcels["parcel_id"] = plan.id_base + np.arange(1, len(parcels) + 1, dtype=np.int64)
    return parcels


def market_names(specs: Sequence[MarketSpec]) -> dict[str, str]:
    """The market each grid of :func:`plan_fabric` lays parcels for, named as the vendor
    names markets (``"City, ST"``): the grid's name and the US state its south-west corner
    lies in (:func:`parcelsearch.planning.land.state_at`), or the grid's name alone outside
    the US. ``serve --parcels`` serves these names as its market list."""
    from parcelsearch.planning.land import state_at

    names = {}
    for spec in specs:
        state = state_at(spec.lon, spec.lat)
        names[spec.name] = spec.name if state is None else f"{spec.name}, {state}"
    return names


def demo_parcels() -> gpd.GeoDataFrame:
    """The bundled demo fabric (generated; identical to ``data/demo_parcels.parquet``)."""
    return fabric(MARKETS_DEMO, DEFAULT_SEED)


def large_fabric(n_parcels: int, seed: int = DEFAULT_SEED) -> gpd.GeoDataFrame:
    """About ``n_parcels`` parcels (exactly, after trimming) over grids in several markets.

    Used by the benchmark; nothing this size is committed.
    """
    per_block = 16.0
    cities = [s for s in MARKETS_DEMO]
    side = max(1, int(math.ceil(math.sqrt(n_parcels / per_block / len(cities)))))
    specs = [MarketSpec(c.name, c.lon, c.lat, side, side, c.rotation) for c in cities]
    parcels = fabric(specs, seed)
    while len(parcels) < n_parcels:
        side = int(side * 1.1) + 1
        specs = [MarketSpec(c.name, c.lon, c.lat, side, side, c.rotation) for c in cities]
        parcels = fabric(specs, seed)
    return parcels.iloc[:n_parcels].copy()


# --------------------------------------------------------------------------- study areas


def _local(spec: MarketSpec, coords: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    x = np.array([c[0] for c in coords])
    y = np.array([c[1] for c in coords])
    lon, lat = _to_lonlat(x, y, spec)
    return [(round(float(a), 7), round(float(b), 7)) for a, b in zip(lon, lat, strict=True)]


def _street_y(spec: MarketSpec, seed: int, k: int) -> tuple[float, float]:
    """Centre line (y, metres) of the street north of block row ``k`` and the grid's x extent."""
    rng = np.random.default_rng(seed)
    # Replay the generator exactly as fabric() does for the first market only.
    place = PLACES[spec.place]
    xs = _grid_lines(spec.blocks_x, place.block_length, rng, place.street)
    ys = _grid_lines(
        spec.blocks_y, (2 * place.lot_depth[0], 2 * place.lot_depth[1]), rng, place.street
    )
    return float((ys[k, 1] + ys[k + 1, 0]) / 2), float(xs[-1, 1])


def demo_areas(seed: int = DEFAULT_SEED) -> gpd.GeoDataFrame:
    """Five demo study areas that overlap the demo fabric (one outside every market).

    - ``northside``: a neighbourhood, an irregular polygon over several blocks;
    - ``pine-street``: a corridor, a 40 m buffer along one street;
    - ``park-ring``: a district with a hole (the blocks around a park left out);
    - ``twin-sites``: a multipart area, two separate sites;
    - ``marfa-ranch``: an area in a place that is not an active market.
    """
    abilene, tarrant, boise = MARKETS_DEMO
    street_y, _ = _street_y(abilene, seed, 8)
    # A neighbourhood bounded by streets on three sides and a meandering creek on the east.
    creek_y = np.arange(200.0, 910.0, 20.0)
    creek_x = 1080 + 55 * np.sin(creek_y / 70) + 20 * np.sin(creek_y / 19)
    neighbourhood = Polygon(
        _local(
            abilene,
            [
                (300, 250),
                (640, 215),
                *zip(creek_x, creek_y, strict=True),
                (700, 905),
                (520, 900),
                (250, 640),
            ],
        )
    )
    # A corridor: 40 m either side of one street, with rounded ends.
    corridor = shapely.buffer(
        LineString(_local(abilene, [(1400.0, street_y), (2550.0, street_y)])),
        40.0 / _M_PER_DEG_LAT,
        cap_style="round",
        quad_segs=6,
    )
    corridor = Polygon([(round(x, 7), round(y, 7)) for x, y in corridor.exterior.coords])
    # A district around a park: an irregular outline with an oval hole.
    angle = np.linspace(0, 2 * np.pi, 33)[:-1]
    park = [(575 + 140 * np.cos(a), 400 + 95 * np.sin(a)) for a in angle]
    hole_area = Polygon(
        _local(
            tarrant,
            [
                (200, 150),
                (620, 120),
                (950, 170),
                (980, 420),
                (930, 650),
                (560, 690),
                (230, 640),
                (180, 400),
            ],
        ),
        [_local(tarrant, park)],
    )
    # Two development sites: a rectangle and an L-shaped assemblage.
    twin = MultiPolygon(
        [
            Polygon(_local(boise, [(150, 120), (450, 120), (450, 330), (150, 330)])),
            Polygon(
                _local(
                    boise,
                    [(900, 600), (1250, 600), (1250, 700), (1040, 700), (1040, 820), (900, 820)],
                )
            ),
        ]
    )
    marfa = MarketSpec(OUTSIDE_MARKET, -104.0230, 30.3020, 1, 1)
    outside = Polygon(
        _local(marfa, [(0, 0), (520, -40), (800, 120), (760, 600), (300, 640), (40, 380)])
    )
    return gpd.GeoDataFrame(
        {
            "area_id": ["northside", "pine-street", "park-ring", "twin-sites", "marfa-ranch"],
            "name": [
                "Northside neighbourhood",
                "Pine Street corridor",
                "Ring around Crescent Park",
                "Twin development sites",
                "Marfa ranch parcel (no market)",
            ],
            "market": [abilene.name, abilene.name, tarrant.name, boise.name, OUTSIDE_MARKET],
        },
        geometry=[neighbourhood, corridor, hole_area, twin, outside],
        crs="EPSG:4326",
    )


# --------------------------------------------------------------------------- 276 example


@dataclass(frozen=True)
class Example:
    """A small fabric with a search ring and the answer it must give.

    Attributes
    ----------
    parcels
        The parcels to serve (some outside ``ring``).
    ring
        A closed ring ``[[lon, lat], ...]`` (EPSG:4326).
    expected
        GroupIDs the service must return for ``ring``, in parcel_id order.
    """

    parcels: gpd.GeoDataFrame
    ring: list[list[float]]
    expected: list[str]


def example_fabric(rows: int = 276, outside: int = 24, seed: int = 276) -> Example:
    """``rows`` parcels inside one ring and ``outside`` beyond it; condos repeat GroupIDs.

    The default is the issue's example: 276 parcels → rows 276, pages 3 (100/100/76).
    """
    if rows < 16:
        raise ValueError(
            f"example_fabric needs rows >= 16 (it holds a 6-unit condominium), got {rows}"
        )
    rng = np.random.default_rng(seed)
    spec = MarketSpec("Abilene, TX", -99.7000, 32.4700, 1, 1)
    width, depth, per_line = 20.0, 40.0, 20
    n = rows + outside
    k = np.arange(n)
    j = np.where(k < rows, k, k - rows)
    x0 = (j % per_line) * width + np.where(k < rows, 0.0, 2000.0)  # outside: 2 km east
    y0 = (j // per_line) * depth
    lon, lat = _to_lonlat(
        x0[:, None] + np.array([0, width, width, 0, 0]),
        y0[:, None] + np.array([0, 0, depth, depth, 0]),
        spec,
    )
    geometry = shapely.polygons(np.stack([lon, lat], axis=2))
    # Parcels 10..15 are a condominium: six parcels, one footprint, one GroupID.
    gids = group_ids(n, rng)
    gids[10:16] = gids[10]
    geometry[10:16] = geometry[10]
    order = rng.permutation(n)  # rows arrive in any order; the service sorts by parcel_id
    parcels = gpd.GeoDataFrame(
        {"parcel_id": (1000 + k)[order], "group_id": gids[order]},
        geometry=geometry[order],
        crs="EPSG:4326",
    )
    top = math.ceil(rows / per_line) * depth
    ring = _local(
        spec,
        [
            (-5, -5),
            (per_line * width + 5, -5),
            (per_line * width + 5, top + 5),
            (-5, top + 5),
            (-5, -5),
        ],
    )
    return Example(parcels, [list(p) for p in ring], [str(g) for g in gids[:rows]])


# --------------------------------------------------------------------------- files


def write_demo_data(directory: Path) -> dict[str, Path]:
    """Write the bundled demo files into ``directory``; returns them by role."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = {
        "parcels": directory / "demo_parcels.parquet",
        "markets": directory / "markets.txt",
        "areas": directory / "demo_areas.geojson",
    }
    demo_parcels().to_parquet(paths["parcels"], compression="zstd", index=False)
    paths["markets"].write_text("\n".join(MARKET_NAMES) + "\n")
    areas = demo_areas()
    paths["areas"].write_text(json.dumps(json.loads(areas.to_json(drop_id=True)), indent=1) + "\n")
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    """Regenerate the bundled demo data (``python -m parcelsearch_service.synth [DIR]``)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument(
        "directory", nargs="?", type=Path, default=Path(__file__).resolve().parents[2] / "data"
    )
    args = parser.parse_args(argv)
    for role, path in write_demo_data(args.directory).items():
        print(f"{role}: {path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
