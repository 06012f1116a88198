"""Parcels loaded once, searched fast: point arrays, a spatial index, a hit-list cache.

A parcel matches a search polygon when its representative point (shapely
``point_on_surface``, computed once at load) lies inside **or on** the polygon; with
``match="intersects"`` when its footprint intersects the polygon. Hits are kept sorted in
parcel_id order and cached per normalised polygon, so pages 2..n are array slices.

Examples
--------
>>> from parcelsearch_service import synth
>>> example = synth.example_fabric()
>>> store = ParcelStore(example.parcels)
>>> from parcelsearch_service.polygon import parse_polygon
>>> import json
>>> hits = store.hits(parse_polygon(json.dumps(example.ring)))
>>> len(hits), store.page(hits, 3)[:1] == example.expected[200:201]
(276, True)
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

import geopandas as gpd
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import shapely

from parcelsearch._shared import data_path
from parcelsearch.errors import ConfigurationError, InputError
from parcelsearch.planning.vector_files import read_vector
from parcelsearch.settings import PAGE_SIZE
from parcelsearch_service.polygon import ParsedPolygon

__all__ = [
    "MatchMode",
    "MATCH_MODES",
    "ParcelStore",
    "HitCache",
    "CountGrid",
    "load_parcels",
    "load_markets",
    "fabric_markets",
    "demo_parcels_path",
    "demo_markets_path",
]

MatchMode = Literal["representative-point", "intersects"]
MATCH_MODES: tuple[str, ...] = ("representative-point", "intersects")
_GROUP_ID = r"[0-9a-f]{17}"


def demo_parcels_path() -> Path:
    """The bundled demo parcels (GeoParquet)."""
    return data_path("demo_parcels.parquet")


def demo_markets_path() -> Path:
    """The bundled markets list."""
    return data_path("markets.txt")


def _read_any(path: Path) -> gpd.GeoDataFrame:
    """Read any file geopandas reads (:func:`parcelsearch.planning.vector_files.read_vector`)."""
    try:
        return read_vector(path, what="parcels file")
    except InputError as exc:
        raise ConfigurationError(f"{exc.message}; pass --parcels FILE") from None


def load_parcels(source: str | Path | gpd.GeoDataFrame | None = None) -> gpd.GeoDataFrame:
    """Parcels from a file, a frame, or (``None``) the bundled demo data, checked.

    Returns
    -------
    geopandas.GeoDataFrame
        ``parcel_id``, ``group_id``, geometry in EPSG:4326, sorted by ``parcel_id``.

    Raises
    ------
    ConfigurationError
        Missing columns, duplicate parcel ids, malformed GroupIDs, empty or non-areal
        geometries; the message names the row and the fix.
    """
    if source is None:
        path = demo_parcels_path()
        if path.exists():
            frame = gpd.read_parquet(path)
        else:  # a checkout without the committed file: generate it (deterministic)
            from parcelsearch_service import synth

            frame = synth.demo_parcels()
        name = "the bundled demo parcels"
    elif isinstance(source, gpd.GeoDataFrame):
        frame, name = source, "the parcels frame"
    else:
        frame, name = _read_any(Path(source)), f"parcels file {source}"
    return _checked(frame, name)


def combined_parcels(paths: Sequence[str | Path]) -> gpd.GeoDataFrame:
    """The parcels of several files served together (``serve --parcels A --parcels B``).

    Raises
    ------
    ConfigurationError
        A file's own faults (:func:`load_parcels`), or a parcel id in two files: the message
        names both and the fix.
    """
    frames = [load_parcels(path) for path in paths]
    owner: dict[int, int] = {}
    for k, frame in enumerate(frames):
        for parcel_id in frame.parcel_id.tolist():
            first = owner.setdefault(parcel_id, k)
            if first != k:
                raise ConfigurationError(
                    f"parcel_id {_show(parcel_id)} is in both parcels file {paths[first]} and "
                    f"{paths[k]}; parcel ids must be unique across the files served together: "
                    "make synthetic fabrics again with 'parcels synth' (its ids do not collide "
                    "across areas), or renumber one file"
                )
    both = gpd.GeoDataFrame(
        pd.concat(frames, ignore_index=True), geometry="geometry", crs="EPSG:4326"
    )
    return both.sort_values("parcel_id", kind="stable").reset_index(drop=True)


def _show(value: object) -> str:
    """repr of a cell, numpy scalars as plain Python values."""
    item = getattr(value, "item", None)
    return repr(item() if callable(item) else value)


def _checked(frame: gpd.GeoDataFrame, name: str) -> gpd.GeoDataFrame:
    missing = [c for c in ("parcel_id", "group_id") if c not in frame.columns]
    if missing:
        raise ConfigurationError(
            f"{name} lacks column(s) {', '.join(missing)}; it needs parcel_id, group_id and "
            f"a geometry (it has {', '.join(map(str, frame.columns))})"
        )
    if frame.crs is None:
        xmin, ymin, xmax, ymax = frame.total_bounds if len(frame) else (0, 0, 0, 0)
        if not (-180 <= xmin <= xmax <= 180 and -90 <= ymin <= ymax <= 90):
            raise ConfigurationError(
                f"{name} has no CRS and its coordinates are not longitude/latitude; "
                "set its CRS (e.g. frame.set_crs(...)) before serving"
            )
        frame = frame.set_crs("EPSG:4326")
    elif not frame.crs.equals("EPSG:4326"):
        frame = frame.to_crs("EPSG:4326")
    frame = frame[["parcel_id", "group_id", frame.geometry.name]]
    if frame.geometry.name != "geometry":
        frame = frame.rename_geometry("geometry")
    dup = frame.parcel_id.duplicated(keep=False)
    if dup.any():
        raise ConfigurationError(
            f"{name}: parcel_id {_show(frame.parcel_id[dup].iloc[0])} appears "
            f"{int((frame.parcel_id == frame.parcel_id[dup].iloc[0]).sum())} times; parcel ids "
            "must be unique"
        )
    gid = frame.group_id.astype("string")
    bad = ~gid.fillna("").str.fullmatch(_GROUP_ID)
    if bad.any():
        row = frame[bad].iloc[0]
        raise ConfigurationError(
            f"{name}: parcel_id {_show(row.parcel_id)} has group_id {_show(row.group_id)}; "
            "a GroupID "
            "is 17 lowercase hexadecimal characters, e.g. '0a1b2c3d4e5f60718'"
        )
    geom = frame.geometry.array
    empty = shapely.is_empty(geom) | shapely.is_missing(geom)
    areal = np.isin(shapely.get_type_id(geom), (3, 6))
    if (empty | ~areal).any():
        row = frame[empty | ~areal].iloc[0]
        absent = row.geometry is None or row.geometry.is_empty
        raise ConfigurationError(
            f"{name}: parcel_id {_show(row.parcel_id)} has "
            f"{'no geometry' if absent else row.geometry.geom_type}"
            "; every parcel needs a Polygon or MultiPolygon footprint"
        )
    frame = frame.assign(group_id=gid.astype(object))
    return frame.sort_values("parcel_id", kind="stable").reset_index(drop=True)


def fabric_markets(sources: Sequence[str | Path]) -> list[str] | None:
    """The markets the parcels files ``sources`` lay parcels for (their ``market`` column,
    as ``parcels synth`` writes it): sorted, distinct names; None when no file has such a
    column or a source is a ``postgresql://`` URL (the bundled list is served then).

    Only the ``market`` column is read.

    Raises
    ------
    ConfigurationError
        A file that cannot be read (the message names it).
    """
    import pyogrio

    names: set[str] = set()
    found = False
    for source in sources:
        if str(source).startswith(("postgresql://", "postgres://")):
            return None
        path = Path(source)
        try:
            if path.suffix.lower() == ".parquet":
                if "market" not in pq.read_schema(path).names:
                    continue
                column = pq.read_table(path, columns=["market"]).column("market").to_pylist()
            else:
                if "market" not in pyogrio.read_info(path)["fields"].tolist():
                    continue
                column = pyogrio.read_dataframe(path, columns=["market"], read_geometry=False)[
                    "market"
                ].tolist()
        except Exception as exc:  # noqa: BLE001 - any unreadable file, named
            raise ConfigurationError(
                f"parcels file {path}: its market column cannot be read "
                f"({exc}); pass --markets FILE"
            ) from None
        found = True
        names.update(str(n).strip() for n in column if isinstance(n, str) and n.strip())
    return sorted(names) if found and names else None


def load_markets(source: str | Path | Sequence[str] | None = None) -> list[str]:
    """Sorted, distinct market names from a file (one per line, or a JSON list) or a list."""
    if source is None:
        path = demo_markets_path()
        if path.exists():
            source = path
        else:
            from parcelsearch_service import synth

            source = list(synth.MARKET_NAMES)
    if isinstance(source, str | Path):
        path = Path(source)
        if not path.exists():
            raise ConfigurationError(f"markets file {path} does not exist; pass --markets FILE")
        text = path.read_text(encoding="utf-8")
        if text.lstrip().startswith("["):
            import json

            try:
                names = json.loads(text)
            except ValueError as exc:
                raise ConfigurationError(f"markets file {path} is not valid JSON: {exc}") from exc
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise ConfigurationError(f"markets file {path} must be a JSON list of strings")
        else:
            names = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")]
    else:
        names = list(source)
    return sorted({n.strip() for n in names if n and n.strip()})


class HitCache:
    """Hit lists per normalised polygon, least recently used dropped first (thread-safe).

    Both parcel stores keep one, so pages 2..n of a search are array slices.
    """

    def __init__(self, size: int = 512) -> None:
        self.size = size
        self._entries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """The cached hit list for ``key``, or ``compute()`` cached (read-only)."""
        cached = self.peek(key)
        return self.put(key, compute()) if cached is None else cached

    def __contains__(self, key: object) -> bool:
        """Whether a hit list is cached for ``key`` (its place in the order unchanged)."""
        return key in self._entries

    def peek(self, key: str) -> np.ndarray | None:
        """The cached hit list for ``key`` (now the most recently used), or ``None``."""
        with self._lock:
            cached = self._entries.get(key)
            if cached is not None:
                self._entries.move_to_end(key)
            return cached

    def clear(self) -> None:
        """Forget every hit list (the parcels changed)."""
        with self._lock:
            self._entries.clear()

    def put(self, key: str, hits: np.ndarray) -> np.ndarray:
        """Cache ``hits`` for ``key`` (made read-only) and return them."""
        hits.flags.writeable = False
        with self._lock:
            self._entries[key] = hits
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)
        return hits


@dataclass(frozen=True)
class CountGrid:
    """Index entries counted per cell of a regular grid over their extent, summed (a
    summed-area table): in constant time, an upper bound on the entries whose boxes meet a
    rectangle — the candidates an STRtree query for it tests, known before querying.

    Each entry is counted in the cell of its box's centre, and a rectangle is widened by
    the largest half-extent of a box, so every box it meets has its centre inside; the cell
    of a coordinate is computed alike for both (floating-point arithmetic is monotonic), so
    none is missed at a cell's edge. Cells are about square, about one an entry (at most
    :data:`MAX_CELLS`).

    Examples
    --------
    >>> xy = np.array([0.0, 1.0, 9.0])
    >>> grid = CountGrid.of(xy, xy, xy, xy)
    >>> grid.at_most((0.0, 0.0, 1.0, 1.0)), grid.at_most((20.0, 20.0, 30.0, 30.0))
    (2, 0)
    """

    #: The most cells a grid has (its table: 4 bytes a cell).
    MAX_CELLS: ClassVar[int] = 1 << 20

    x0: float
    y0: float
    dx: float
    dy: float
    pad_x: float
    pad_y: float
    table: np.ndarray

    @classmethod
    def of(
        cls, xmin: np.ndarray, ymin: np.ndarray, xmax: np.ndarray, ymax: np.ndarray
    ) -> CountGrid:
        """The grid of the boxes ``(xmin, ymin, xmax, ymax)`` (arrays)."""
        if len(xmin) == 0:
            return cls(0.0, 0.0, 1.0, 1.0, 0.0, 0.0, np.zeros((2, 2), dtype=np.int32))
        cx, cy = (xmin + xmax) / 2, (ymin + ymax) / 2
        x0, y0 = float(cx.min()), float(cy.min())
        width, height = float(cx.max()) - x0, float(cy.max()) - y0
        cells = min(cls.MAX_CELLS, max(len(cx), 16))
        aspect = (width or height or 1.0) / (height or width or 1.0)
        nx = max(1, min(cells, round(math.sqrt(cells * aspect))))
        ny = max(1, cells // nx)
        dx, dy = (width / nx) or 1.0, (height / ny) or 1.0
        i = np.minimum(((cx - x0) / dx).astype(np.int64), nx - 1)
        j = np.minimum(((cy - y0) / dy).astype(np.int64), ny - 1)
        counts = np.bincount(j * nx + i, minlength=nx * ny).reshape(ny, nx)
        table = np.zeros((ny + 1, nx + 1), dtype=np.int32)
        table[1:, 1:] = counts.cumsum(axis=0).cumsum(axis=1)
        return cls(
            x0, y0, dx, dy, float((xmax - xmin).max()) / 2, float((ymax - ymin).max()) / 2, table
        )

    def at_most(self, bounds: tuple[float, float, float, float]) -> int:
        """At least as many as the entries whose boxes meet the rectangle ``bounds``."""
        ny, nx = self.table.shape[0] - 1, self.table.shape[1] - 1
        xmin, ymin, xmax, ymax = bounds
        i0 = math.floor((xmin - self.pad_x - self.x0) / self.dx)
        i1 = math.floor((xmax + self.pad_x - self.x0) / self.dx)
        j0 = math.floor((ymin - self.pad_y - self.y0) / self.dy)
        j1 = math.floor((ymax + self.pad_y - self.y0) / self.dy)
        if i1 < 0 or j1 < 0:  # below the least centre
            return 0
        # Clamped as the centres were (the greatest one is in the last cell, not past it).
        i0, j0 = min(max(i0, 0), nx - 1), min(max(j0, 0), ny - 1)
        i1, j1 = min(i1, nx - 1) + 1, min(j1, ny - 1) + 1
        t = self.table
        return int(t[j1, i1] - t[j0, i1] - t[j1, i0] + t[j0, i0])


@dataclass(frozen=True)
class _Indexed:
    """One set of parcels as the embedded store searches them (swapped whole on replace)."""

    group_ids: np.ndarray
    parcel_ids: np.ndarray
    footprints: np.ndarray
    x: np.ndarray
    y: np.ndarray
    tree: shapely.STRtree
    grid: CountGrid
    cache: HitCache


class ParcelStore:
    """Parcels held in arrays for fast polygon searches.

    Parameters
    ----------
    parcels
        A checked frame (see :func:`load_parcels`) or anything :func:`load_parcels` takes.
    match
        ``"representative-point"`` (default) or ``"intersects"``.
    cache_size
        Hit lists kept (least recently used dropped first).
    """

    def __init__(
        self,
        parcels: str | Path | gpd.GeoDataFrame | None = None,
        match: str = "representative-point",
        cache_size: int = 512,
    ) -> None:
        if match not in MATCH_MODES:
            raise ConfigurationError(
                f"match must be one of {', '.join(MATCH_MODES)}, got {match!r}"
            )
        self.match: str = match
        self._replacing = threading.Lock()
        self._cache_size = cache_size
        self._data: _Indexed
        self._load(load_parcels(parcels))

    def _load(self, frame: gpd.GeoDataFrame) -> None:
        """Index a checked frame: every array is built first, then swapped in at once."""
        footprints = np.asarray(frame.geometry.array, dtype=object)
        points = shapely.point_on_surface(footprints)
        x, y = shapely.get_x(points), shapely.get_y(points)
        if self.match == "intersects":
            tree = shapely.STRtree(footprints)
            boxes = shapely.bounds(footprints)
            grid = CountGrid.of(boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3])
        else:
            tree = shapely.STRtree(points)
            grid = CountGrid.of(x, y, x, y)
        self._data = _Indexed(
            frame.group_id.to_numpy(dtype=object),
            frame.parcel_id.to_numpy(),
            footprints,
            x,
            y,
            tree,
            grid,
            HitCache(self._cache_size),
        )

    def replace(self, parcels: str | Path | gpd.GeoDataFrame | None) -> int:
        """Serve other parcels from now on (a running service's data changes for real).

        The new parcels are read, checked and indexed first (bad rows refused as at
        start-up, the old parcels still served meanwhile); then the parcels, their index
        and the hit lists are swapped in one assignment. Keys, counters and the request log
        are not touched. Replace between runs: a request answered during the swap may
        take its hit list from the old parcels and its page from the new ones.

        Returns
        -------
        int
            The parcels now served.
        """
        with self._replacing:
            self._load(load_parcels(parcels))
        return len(self)

    @property
    def group_ids(self) -> np.ndarray:
        """GroupIDs in parcel_id order."""
        return self._data.group_ids

    @property
    def parcel_ids(self) -> np.ndarray:
        """Parcel ids, sorted."""
        return self._data.parcel_ids

    @property
    def footprints(self) -> np.ndarray:
        """Parcel footprints (shapely), in parcel_id order."""
        return self._data.footprints

    @property
    def x(self) -> np.ndarray:
        """Longitudes of the representative points."""
        return self._data.x

    @property
    def y(self) -> np.ndarray:
        """Latitudes of the representative points."""
        return self._data.y

    def __len__(self) -> int:
        return len(self.group_ids)

    def __repr__(self) -> str:
        return f"ParcelStore({len(self):,} parcels, match={self.match!r})"

    def close(self) -> None:
        """Nothing to release (the parcels are in memory); here for the stores' interface."""

    def _search(self, data: _Indexed, polygon: shapely.Polygon) -> np.ndarray:
        if self.match == "intersects":
            hits = data.tree.query(polygon, predicate="intersects")
        else:
            candidates = data.tree.query(polygon)  # envelope test only
            inside = shapely.intersects_xy(polygon, data.x[candidates], data.y[candidates])
            hits = candidates[inside]
        return np.sort(hits)

    def work(self, parsed: ParsedPolygon) -> int:
        """An upper bound on the parcels a search for ``parsed`` tests (0 when its hit list
        is cached), known in constant time before searching."""
        data = self._data
        if parsed.normalised in data.cache:
            return 0
        return data.grid.at_most(parsed.bounds)

    def hits(self, parsed: ParsedPolygon) -> np.ndarray:
        """Indices (parcel_id order) of the parcels matching ``parsed``; cached."""
        data = self._data
        return data.cache.get(parsed.normalised, lambda: self._search(data, parsed.polygon))

    def page(self, hits: np.ndarray, page: int) -> list[str]:
        """GroupIDs of ``page`` (1-based) of ``hits``: at most ``PAGE_SIZE``."""
        start = (page - 1) * PAGE_SIZE
        return self.group_ids[hits[start : start + PAGE_SIZE]].tolist()  # type: ignore[no-any-return]
