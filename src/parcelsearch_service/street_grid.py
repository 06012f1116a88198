"""A synthetic street grid's parcels: the kinds of place (:data:`PLACES`), a market's grid
(:class:`MarketSpec`), blocks cut into lots, and :func:`fabric`, deterministic for a seed.
:mod:`parcelsearch_service.synth` gives these names too, and lays grids under study areas.

The fabric imitates a US street grid: rectangular blocks separated by streets, each block cut
into two back-to-back rows of lots of varied frontage. Some lots are commercial (wider,
deeper), some are condominium buildings (several parcels with one footprint and one GroupID),
some runs of adjacent lots form an *assemblage* (separate parcels sharing one GroupID), and a
few blocks are parks (one large parcel).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

__all__ = [
    "MarketSpec",
    "MARKETS_DEMO",
    "Place",
    "PLACES",
    "PLACE_BY_SIZE_KM2",
    "DEFAULT_SEED",
    "fabric",
    "group_ids",
]

DEFAULT_SEED = 20240611
_M_PER_DEG_LAT = 110_574.0
_M_PER_DEG_LON_EQ = 111_320.0


@dataclass(frozen=True)
class MarketSpec:
    """One synthetic city grid.

    Parameters
    ----------
    name
        Market name as the Markets service lists it ("City, ST").
    lon, lat
        The south-west corner of the grid (degrees, EPSG:4326).
    blocks_x, blocks_y
        Blocks along the east-west and north-south axes.
    rotation
        Grid bearing in degrees counter-clockwise from east (real grids are rarely square
        to the meridian).
    place
        The kind of place (a key of :data:`PLACES`): its blocks, lots and uses.
    """

    name: str
    lon: float
    lat: float
    blocks_x: int
    blocks_y: int
    rotation: float = 0.0
    place: str = "suburban"


#: The demo markets: real US places, small grids (a few thousand parcels in all).
MARKETS_DEMO: tuple[MarketSpec, ...] = (
    MarketSpec("Abilene, TX", -99.7420, 32.4430, 12, 14, rotation=0.0),
    MarketSpec("Tarrant County Unincorporated, TX", -97.5520, 32.8150, 8, 8, rotation=17.0),
    MarketSpec("Boise, ID", -116.2100, 43.6100, 8, 9, rotation=-35.0),
)


@dataclass(frozen=True)
class Place:
    """The street grid of one kind of place (figures in metres).

    Attributes
    ----------
    street, block_length, lot_depth
        Ranges drawn uniformly: street right-of-way, block length (east-west), lot depth
        (a block holds two back-to-back rows of lots).
    frontage
        Mean lot frontage by use (``residential``, ``commercial``).
    uses
        Probability of each block use: ``residential``, ``commercial``, ``condo``, ``park``.
    units
        Units of a condominium building: drawn from ``units[0]`` to ``units[1]``.
    """

    street: tuple[float, float]
    block_length: tuple[float, float]
    lot_depth: tuple[float, float]
    frontage: dict[str, float]
    uses: dict[str, float]
    units: tuple[int, int] = (2, 8)

    def parcels_per_km2(self) -> float:
        """Parcels the grid makes per square kilometre, on average (street area included)."""
        lengths = np.linspace(*self.block_length, 2001)

        def per_row(mean: float) -> float:
            return float(np.maximum(1, np.round(lengths / mean)).mean())

        homes, shops = per_row(self.frontage["residential"]), per_row(self.frontage["commercial"])
        units = 0.4 + 0.6 * (self.units[0] + self.units[1]) / 2
        block = (
            2
            * (
                self.uses["residential"] * homes
                + self.uses["commercial"] * shops
                + self.uses["condo"] * homes * units
            )
            + self.uses["park"]
        )
        street = sum(self.street) / 2
        pitch = (sum(self.block_length) / 2 + street) * (sum(self.lot_depth) + street)
        return block / pitch * 1e6


#: The kinds of place a fabric imitates: dense city blocks of narrow lots and flats, the
#: suburban grid of the demo, and rural roads a mile or so apart around farm-sized lots.
PLACES: dict[str, Place] = {
    "urban": Place(
        street=(15.0, 20.0),
        block_length=(90.0, 160.0),
        lot_depth=(25.0, 35.0),
        frontage={"residential": 8.0, "commercial": 20.0},
        uses={"residential": 0.68, "commercial": 0.2, "condo": 0.08, "park": 0.04},
        units=(2, 12),
    ),
    "suburban": Place(
        street=(18.0, 24.0),
        block_length=(150.0, 260.0),
        lot_depth=(30.0, 45.0),
        frontage={"residential": 17.0, "commercial": 38.0},
        uses={"residential": 0.78, "commercial": 0.12, "condo": 0.06, "park": 0.04},
    ),
    "rural": Place(
        street=(20.0, 30.0),
        block_length=(800.0, 1600.0),
        lot_depth=(200.0, 400.0),
        frontage={"residential": 250.0, "commercial": 120.0},
        uses={"residential": 0.93, "commercial": 0.03, "condo": 0.0, "park": 0.04},
    ),
}

#: Each area's kind of place by its size, as census tracts are drawn (about 4,000 people
#: each): an area under the first figure (km²) is urban, under the second suburban, else
#: rural.
PLACE_BY_SIZE_KM2 = (5.0, 50.0)


def group_ids(n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` distinct GroupIDs in the vendor's shape: 17 lowercase hex characters."""
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        need = n - len(out)
        text = rng.bytes(9 * need).hex()
        for i in range(need):
            gid = text[18 * i : 18 * i + 17]
            if gid not in seen:
                seen.add(gid)
                out.append(gid)
    return np.array(out, dtype=object)


def _to_lonlat(x: np.ndarray, y: np.ndarray, spec: MarketSpec) -> tuple[np.ndarray, np.ndarray]:
    """Local metres (grid axes) → lon/lat: rotate, then an equirectangular step at the origin."""
    theta = math.radians(spec.rotation)
    east = x * math.cos(theta) - y * math.sin(theta)
    north = x * math.sin(theta) + y * math.cos(theta)
    lon = spec.lon + east / (_M_PER_DEG_LON_EQ * math.cos(math.radians(spec.lat)))
    lat = spec.lat + north / _M_PER_DEG_LAT
    return lon, lat


def _grid_lines(
    n: int,
    span: tuple[float, float],
    rng: np.random.Generator,
    street: tuple[float, float] = PLACES["suburban"].street,
) -> np.ndarray:
    """Start/end positions of ``n`` blocks along one axis, streets between them."""
    lengths = rng.uniform(*span, n)
    streets = rng.uniform(*street, n)
    starts = np.concatenate([[0.0], np.cumsum(lengths + streets)[:-1]]) + streets[0] / 2
    return np.column_stack([starts, starts + lengths])


@dataclass
class _Lots:
    x0: list[np.ndarray]
    x1: list[np.ndarray]
    y0: list[np.ndarray]
    y1: list[np.ndarray]
    use: list[np.ndarray]
    units: list[np.ndarray]
    assemble: list[np.ndarray]


def _split_row(length: float, mean: float, rng: np.random.Generator) -> np.ndarray:
    """Lot boundaries along a block face of ``length`` m: varied frontages summing to it."""
    count = max(1, int(round(length / mean)))
    widths = rng.uniform(0.6, 1.5, count)
    return np.concatenate([[0.0], np.cumsum(widths) / widths.sum() * length])


def _block_lots(
    bx: np.ndarray,
    by: np.ndarray,
    use: str,
    rng: np.random.Generator,
    lots: _Lots,
    place: Place = PLACES["suburban"],
) -> None:
    """Cut one block into lots (two back-to-back rows), appended to ``lots``."""
    (x0, x1), (y0, y1) = bx, by
    if use == "park":
        parts = [(np.array([x0]), np.array([x1]), np.array([y0]), np.array([y1]))]
    else:
        mean = place.frontage["commercial" if use == "commercial" else "residential"]
        mid = (y0 + y1) / 2
        parts = []
        for ya, yb in ((y0, mid), (mid, y1)):
            edges = x0 + _split_row(x1 - x0, mean, rng)
            n = len(edges) - 1
            parts.append((edges[:-1], edges[1:], np.full(n, ya), np.full(n, yb)))
    for px0, px1, py0, py1 in parts:
        n = len(px0)
        kinds = np.full(
            n,
            "park" if use == "park" else ("commercial" if use == "commercial" else "residential"),
            dtype=object,
        )
        units = np.ones(n, dtype=np.int64)
        if use == "condo":
            # Most lots of a condo block are buildings of several units sharing a footprint.
            condo = rng.random(n) < 0.6
            kinds[condo] = "condominium"
            units[condo] = rng.integers(place.units[0], place.units[1] + 1, int(condo.sum()))
        # Assemblages: a run of 2-4 adjacent single lots under one GroupID.
        assemble = np.zeros(n, dtype=np.int64)
        if use in ("residential", "commercial") and n >= 3 and rng.random() < 0.25:
            run = int(rng.integers(2, min(4, n) + 1))
            start = int(rng.integers(0, n - run + 1))
            assemble[start : start + run] = 1
            kinds[start : start + run] = "assemblage"
        lots.x0.append(px0)
        lots.x1.append(px1)
        lots.y0.append(py0)
        lots.y1.append(py1)
        lots.use.append(kinds)
        lots.units.append(units)
        lots.assemble.append(assemble)


def _market_lots(spec: MarketSpec, rng: np.random.Generator) -> _Lots:
    """Every lot of one market grid, in local metres."""
    place = PLACES[spec.place]
    xs = _grid_lines(spec.blocks_x, place.block_length, rng, place.street)
    ys = _grid_lines(
        spec.blocks_y, (2 * place.lot_depth[0], 2 * place.lot_depth[1]), rng, place.street
    )
    uses = rng.choice(
        list(place.uses), size=(spec.blocks_y, spec.blocks_x), p=list(place.uses.values())
    )
    lots = _Lots([], [], [], [], [], [], [])
    for j in range(spec.blocks_y):
        for i in range(spec.blocks_x):
            _block_lots(xs[i], ys[j], str(uses[j, i]), rng, lots, place)
    return lots


def _market_frame(spec: MarketSpec, rng: np.random.Generator) -> gpd.GeoDataFrame:
    """One market's parcels: condominium units repeated, assemblages grouped."""
    lots = _market_lots(spec, rng)
    cat = {f: np.concatenate(getattr(lots, f)) for f in ("x0", "x1", "y0", "y1", "use", "units")}
    # One group per lot, except each assemblage run (consecutive flagged lots in one row
    # segment) which shares a group.
    flags = [a for a in lots.assemble]
    starts = []
    for a in flags:
        s = np.ones(len(a), dtype=bool)
        s[1:] = ~((a[1:] == 1) & (a[:-1] == 1))
        starts.append(s)
    lot_group = np.cumsum(np.concatenate(starts)) - 1
    repeat = cat["units"]
    x0, x1, y0, y1 = (np.repeat(cat[k], repeat) for k in ("x0", "x1", "y0", "y1"))
    corners_x = np.stack([x0, x1, x1, x0, x0], axis=1)
    corners_y = np.stack([y0, y0, y1, y1, y0], axis=1)
    lon, lat = _to_lonlat(corners_x, corners_y, spec)
    geometry = shapely.polygons(np.stack([lon, lat], axis=2))
    gids = group_ids(int(lot_group.max()) + 1, rng)
    return gpd.GeoDataFrame(
        {
            "group_id": gids[np.repeat(lot_group, repeat)],
            "market": spec.name,
            "land_use": np.repeat(cat["use"], repeat),
        },
        geometry=geometry,
        crs="EPSG:4326",
    )


def fabric(
    markets: Sequence[MarketSpec] = MARKETS_DEMO, seed: int | Sequence[int] = DEFAULT_SEED
) -> gpd.GeoDataFrame:
    """The synthetic parcels of ``markets``, deterministic for a ``seed``.

    Returns
    -------
    geopandas.GeoDataFrame
        Columns ``parcel_id`` (int64, 1..n), ``group_id`` (17 hex chars), ``market``,
        ``land_use`` (residential, commercial, condominium, assemblage, park) and the lot
        footprint, EPSG:4326. GroupIDs are unique across markets.
    """
    rng = np.random.default_rng(seed)
    frames = [_market_frame(spec, rng) for spec in markets]
    parcels = pd.concat(frames, ignore_index=True)
    _dedupe_groups_across(parcels, rng)
    parcels.insert(0, "parcel_id", np.arange(1, len(parcels) + 1, dtype=np.int64))
    return gpd.GeoDataFrame(parcels, geometry="geometry", crs="EPSG:4326")


def _dedupe_groups_across(parcels: pd.DataFrame, rng: np.random.Generator) -> None:
    """Re-draw any GroupID that two markets happened to share (68 random bits: rare)."""
    owners = parcels.groupby("group_id")["market"].nunique()
    for gid in owners.index[owners > 1]:
        for market in parcels.loc[parcels.group_id == gid, "market"].unique()[1:]:
            parcels.loc[(parcels.group_id == gid) & (parcels.market == market), "group_id"] = (
                group_ids(1, rng)[0]
            )
