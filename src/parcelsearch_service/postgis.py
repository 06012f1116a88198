"""Parcels in PostGIS: the table, its loader (COPY) and a store that searches it.

The table is ``parcelsearch.parcels``: ``seq`` (the parcel's position in parcel_id order, as
the embedded store sorts them), ``parcel_id`` (as text), ``group_id``, ``point`` (the
representative point, shapely ``point_on_surface`` — computed here, exactly as the embedded
store does) and ``footprint``, with GiST indexes on both geometries, clustered on the point
index. :class:`PostgisParcelStore` answers like :class:`~parcelsearch_service.store.ParcelStore`:
the same matches (inside-or-on is ``ST_Covers``; ``intersects`` is ``ST_Intersects``), in the
same order, hit lists cached so pages 2..n are slices.

Each session runs with ``jit = off``, no parallel gather and custom plans
(``plan_cache_mode = force_custom_plan``): measured here, JIT and parallel bitmap scans turn
0.5 ms queries into 3–68 ms, and a generic plan took 8.9 s instead of 1.1 s on a concave
polygon. A concave search polygon with many vertices is cut into pieces (``ST_Subdivide``)
whose boxes select the candidates; the exact test is against the whole polygon, so
subdividing never changes a match. A small or convex polygon is one index scan.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import psycopg
import psycopg.errors
import shapely

from parcelsearch.errors import ConfigurationError
from parcelsearch.settings import PAGE_SIZE
from parcelsearch_service.connections import ThreadConnections
from parcelsearch_service.errors import StoreBusyError
from parcelsearch_service.keys.store import is_postgres_url
from parcelsearch_service.polygon import ParsedPolygon
from parcelsearch_service.store import MATCH_MODES, HitCache, ParcelStore, load_parcels

__all__ = [
    "PostgisParcelStore",
    "load_parcels_into",
    "open_parcel_store",
    "prepare_table",
    "index_table",
    "TABLE",
    "SESSION",
]

TABLE = "parcelsearch.parcels"
#: Rows converted at a time while loading (bounds the loader's memory).
_CHUNK = 100_000
#: Vertices per piece when a concave search polygon is subdivided.
SUBDIVIDE_VERTICES = 64

#: Settings of every session that searches parcels.
SESSION = (
    "SET jit = off",
    "SET max_parallel_workers_per_gather = 0",
    "SET plan_cache_mode = force_custom_plan",
)

_CREATE = f"""
CREATE SCHEMA IF NOT EXISTS parcelsearch;
CREATE TABLE {TABLE} (
    seq BIGINT PRIMARY KEY,
    parcel_id TEXT NOT NULL UNIQUE,
    group_id CHAR(17) NOT NULL,
    point geometry(Point, 4326) NOT NULL,
    footprint geometry(Geometry, 4326) NOT NULL
)
"""

_INDEX = f"""
CREATE INDEX parcels_point_gist ON {TABLE} USING gist (point);
CREATE INDEX parcels_footprint_gist ON {TABLE} USING gist (footprint);
CLUSTER {TABLE} USING parcels_point_gist;
ANALYZE {TABLE}
"""

# The candidates come from the pieces' boxes (index scans); the exact test is against the
# whole polygon (prepared once per query by PostGIS), so a point on a cut line still counts
# exactly once and a point on the polygon's edge counts as the embedded store counts it.
#: Per match rule: the column a polygon is tested against, and the test (as the embedded store).
_MATCHES = {
    "representative-point": ("point", "ST_Covers"),
    "intersects": ("footprint", "ST_Intersects"),
}
_SEARCH_SIMPLE = {
    match: f"""
SELECT group_id FROM {TABLE}
WHERE {test}(ST_GeomFromWKB(%(wkb)s, 4326), {column})
ORDER BY seq
"""
    for match, (column, test) in _MATCHES.items()
}
_SEARCH_SUBDIVIDED = {
    match: f"""
WITH search AS (SELECT ST_GeomFromWKB(%(wkb)s, 4326) AS g),
pieces AS (SELECT ST_Subdivide(g, %(vertices)s) AS piece FROM search)
SELECT p.group_id FROM {TABLE} p, search
WHERE EXISTS (SELECT 1 FROM pieces WHERE pieces.piece && p.{column})
  AND {test}(search.g, p.{column})
ORDER BY p.seq
"""
    for match, (column, test) in _MATCHES.items()
}


def _connect(url: str) -> psycopg.Connection[Any]:
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise ConfigurationError(f"cannot connect to the parcels database: {exc}") from None
    for statement in SESSION:
        conn.execute(statement)
    return conn


def load_parcels_into(
    source: str | Path | gpd.GeoDataFrame | None, url: str, replace: bool = False
) -> int:
    """Load parcels (any file geopandas reads, or a frame) into ``parcelsearch.parcels``.

    The rows are checked as the embedded store checks them, their representative points
    computed the same way, and written with ``COPY``; then indexed, clustered and analysed,
    all in one transaction.

    Parameters
    ----------
    source
        Parcels: ``parcel_id``, ``group_id``, a polygon geometry (``None``: the bundled demo).
    url
        ``postgresql://`` URL of a database with PostGIS.
    replace
        Replace a table that already holds parcels (otherwise that is an error).

    Returns
    -------
    int
        Parcels loaded.

    Raises
    ------
    ConfigurationError
        Bad rows (named), no PostGIS, or parcels already loaded without ``replace``.
    """
    frame = load_parcels(source)
    with _connect(url) as conn, conn.transaction():
        prepare_table(conn, replace)
        with conn.cursor().copy(
            f"COPY {TABLE} (seq, parcel_id, group_id, point, footprint) FROM STDIN"
        ) as copy:
            for start in range(0, len(frame), _CHUNK):
                for row in _rows(frame.iloc[start : start + _CHUNK], start):
                    copy.write_row(row)
        index_table(conn)
    return len(frame)


def _rows(chunk: gpd.GeoDataFrame, start: int) -> Iterator[tuple[Any, ...]]:
    """COPY rows of a slice of the checked frame: representative points computed as the
    embedded store computes them, geometries as hex EWKB (SRID 4326)."""
    footprints = shapely.set_srid(np.asarray(chunk.geometry.array, dtype=object), 4326)
    points = shapely.set_srid(shapely.point_on_surface(footprints), 4326)
    return zip(
        range(start, start + len(chunk)),
        chunk.parcel_id.astype(str),
        chunk.group_id,
        shapely.to_wkb(points, hex=True, include_srid=True),
        shapely.to_wkb(footprints, hex=True, include_srid=True),
        strict=True,
    )


def index_table(conn: psycopg.Connection[Any]) -> None:
    """Index the loaded table (GiST on both geometries), cluster it on the points, analyse."""
    conn.execute(_INDEX)


def prepare_table(conn: psycopg.Connection[Any], replace: bool) -> None:
    """An empty ``parcelsearch.parcels`` (dropping one that holds parcels only if
    ``replace``).

    Raises
    ------
    ConfigurationError
        No PostGIS, or parcels already loaded and ``replace`` not given.
    """
    try:
        conn.execute("SELECT postgis_version()")
    except psycopg.errors.UndefinedFunction:
        raise ConfigurationError(
            "the database has no PostGIS; run CREATE EXTENSION postgis in it first"
        ) from None
    exists = conn.execute("SELECT to_regclass(%s)", (TABLE,)).fetchone()
    if exists is not None and exists[0] is not None:
        count = conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()
        held = 0 if count is None else int(count[0])
        if held and not replace:
            raise ConfigurationError(
                f"{TABLE} already holds {held:,} parcels; pass --replace to replace them"
            )
        conn.execute(f"DROP TABLE {TABLE}")
    conn.execute(_CREATE)


class PostgisParcelStore:
    """Parcels searched in PostGIS (``parcelsearch.parcels``), answering like
    :class:`~parcelsearch_service.store.ParcelStore`.

    Parameters
    ----------
    url
        ``postgresql://`` URL of a database loaded with :func:`load_parcels_into`.
    match
        ``"representative-point"`` (default) or ``"intersects"``.
    cache_size
        Hit lists kept (least recently used dropped first).
    """

    def __init__(
        self, url: str, match: str = "representative-point", cache_size: int = 512
    ) -> None:
        if match not in MATCH_MODES:
            raise ConfigurationError(
                f"match must be one of {', '.join(MATCH_MODES)}, got {match!r}"
            )
        self.url = url
        self.match: str = match
        self._connections = ThreadConnections(lambda: _connect(url))
        self._cache = HitCache(cache_size)
        conn = self._connection()
        if conn.execute("SELECT to_regclass(%s)", (TABLE,)).fetchone() in (None, (None,)):
            self.close()
            raise ConfigurationError(
                f"no {TABLE} table in that database; load parcels first with "
                "'parcelsearch parcels load FILE --into URL'"
            )
        count = conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()
        self._count = 0 if count is None else int(count[0])

    def __len__(self) -> int:
        return self._count

    def __repr__(self) -> str:
        return f"PostgisParcelStore({len(self):,} parcels, match={self.match!r})"

    def replace(self, parcels: str | Path | gpd.GeoDataFrame | None) -> int:
        """Load other parcels into the table (:func:`load_parcels_into` with ``replace``, one
        transaction: searches see the old parcels or the new ones, never a mix) and forget
        this process's hit lists. Keys, counters and the request log are not touched; other
        worker processes keep their hit lists until restarted. Returns the parcels loaded."""
        self._count = load_parcels_into(parcels, self.url, replace=True)
        self._cache.clear()
        return self._count

    def _connection(self) -> psycopg.Connection[Any]:
        conn: psycopg.Connection[Any] = self._connections.get()
        return conn

    def close(self) -> None:
        """Close every connection (they reopen when used again, e.g. in a forked worker)."""
        self._connections.close()

    def _search(self, polygon: shapely.Polygon) -> np.ndarray:
        conn = self._connection()
        try:
            rows = self._query(conn, polygon)
        except psycopg.OperationalError as exc:  # server gone or restarting: 503, not 500
            if conn.closed:
                self._connections.forget()
            raise StoreBusyError("the parcels database is unavailable") from exc
        return np.array([row[0] for row in rows], dtype=object)

    def _query(self, conn: psycopg.Connection[Any], polygon: shapely.Polygon) -> list[Any]:
        return conn.execute(*self.search_statement(polygon)).fetchall()

    def search_statement(self, polygon: shapely.Polygon) -> tuple[str, dict[str, Any]]:
        """The query (one ``group_id`` column, in order) of the parcels matching ``polygon``,
        and its named parameters (``wkb``, ``vertices``)."""
        # A small or convex polygon is one index scan (and cheap to plan); a large concave one
        # is cut into pieces whose boxes select far fewer candidates than its own box.
        queries = _SEARCH_SUBDIVIDED if _worth_subdividing(polygon) else _SEARCH_SIMPLE
        return queries[self.match], {"wkb": shapely.to_wkb(polygon), "vertices": SUBDIVIDE_VERTICES}

    def hits(self, parsed: ParsedPolygon) -> np.ndarray:
        """GroupIDs (parcel_id order) of the parcels matching ``parsed``; cached."""
        return self._cache.get(parsed.normalised, lambda: self._search(parsed.polygon))

    def cached(self, parsed: ParsedPolygon) -> np.ndarray | None:
        """The cached hit list of ``parsed``, or ``None`` (nothing is queried)."""
        return self._cache.peek(parsed.normalised)

    def remember(self, parsed: ParsedPolygon, group_ids: Sequence[str]) -> np.ndarray:
        """Cache ``group_ids`` (what :meth:`search_statement` returned, in order) as the hit
        list of ``parsed``: :meth:`hits` then answers without a query."""
        return self._cache.put(parsed.normalised, np.array(group_ids, dtype=object))

    def page(self, hits: np.ndarray, page: int) -> list[str]:
        """GroupIDs of ``page`` (1-based) of ``hits``: at most ``PAGE_SIZE``."""
        start = (page - 1) * PAGE_SIZE
        return hits[start : start + PAGE_SIZE].tolist()  # type: ignore[no-any-return]


def _worth_subdividing(polygon: shapely.Polygon) -> bool:
    """More vertices than a piece holds, and markedly concave (area < 80 % of its hull)."""
    if shapely.get_num_coordinates(polygon) <= SUBDIVIDE_VERTICES:
        return False
    return bool(polygon.area < 0.8 * polygon.convex_hull.area)


def open_parcel_store(
    parcels: str | Path | gpd.GeoDataFrame | ParcelStore | PostgisParcelStore | None,
    match: str = "representative-point",
) -> ParcelStore | PostgisParcelStore:
    """The parcel store for ``parcels``: a ``postgresql://`` URL opens PostGIS; a file, a
    frame or ``None`` (the bundled demo) the embedded store; a store is returned as is."""
    if isinstance(parcels, ParcelStore | PostgisParcelStore):
        return parcels
    if is_postgres_url(parcels):
        return PostgisParcelStore(str(parcels), match=match)
    return ParcelStore(parcels, match=match)
