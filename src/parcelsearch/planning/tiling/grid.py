"""The 6-decimal grid the service receives: snapping, growth that survives rounding, parts,
canonical rings.

What "exact" means, precisely: the union of the pieces covers the area (every point of
the area, so every parcel whose representative point lies inside it, is searched) and
reaches at most two grid steps (2e-6°, about 22 cm) beyond it — except along
*connectors* (:mod:`parcelsearch.planning.tiling.connectors`): where parts of one area share a ring,
a sliver within √2 grid steps of a straight link of at most 3 km between two of them, that
enters no other piece of the area but may cross land outside it (a parcel there is matched
only if its representative point lies in the sliver, which is usually well under a grid step
wide; ``connectors=False`` makes none). To survive rounding
to the grid, an area that is not already on it is first grown by
:data:`ROUNDING_MARGIN` (sharp corners bevelled) and clipped to
[-180, 180] × [-90, 90]. Growing may close a slit narrower than two grid steps; the
slit itself is then searched (it lies within a grid step of the area), but whatever
lies behind it stays out: every pocket the growth seals off is kept as a hole.
"""

from __future__ import annotations

import numpy as np
import shapely
from shapely import Polygon
from shapely.geometry.base import BaseGeometry

from parcelsearch import settings

__all__ = [
    "GRID",
    "ROUNDING_MARGIN",
    "SCALE",
    "CODE_OFFSET",
    "WORLD",
    "canonical_ring",
    "clamped",
    "grow_for_rounding",
    "off_grid",
    "polygons",
    "snap",
    "sorted_pieces",
    "vertex_codes",
]

#: Spacing of the coordinate grid the service receives (6 decimals).
GRID = 10.0**-settings.COORD_DECIMALS
#: Grid steps in one degree.
SCALE = 10**settings.COORD_DECIMALS
#: How far exact mode grows an area before snapping it to the grid: a little more than the
#: farthest a vertex can move when each coordinate is rounded to 6 decimals (√2 × GRID / 2).
ROUNDING_MARGIN = 0.708 * GRID
#: Mitre limit of that growth (× the margin): a sharp corner is bevelled 1.5 margins out,
#: whose ends lie √(1.5² + 1) margins away, so growth plus rounding stay within
#: 1.803 × 0.708 + 0.708 ≈ 1.98 grid steps of the area.
_MITRE_LIMIT = 1.5
#: Vertices off the grid up to which :func:`grow_for_rounding` checks whether snapping an area
#: loses any of it before growing it.
_CHECKED_OFF_GRID = 8
#: Added to grid coordinates (|value| ≤ 1.8e8 < 2**30) to make them non-negative 31-bit ints
#: (:func:`vertex_codes`).
CODE_OFFSET = 2**30
#: Longitudes and latitudes the service accepts: every piece is clipped to them.
WORLD = shapely.box(-180.0, -90.0, 180.0, 90.0)


def snap(geom: BaseGeometry) -> BaseGeometry:
    """``geom`` on the 6-decimal grid, valid, exactly-collinear vertices removed, normalised.

    Normalising (rings from their smallest vertex, fixed orientation, parts sorted) makes
    every representation of the same area tile identically.
    """
    return shapely.normalize(shapely.simplify(shapely.set_precision(geom, GRID), 0.0))


def grow_for_rounding(geom: BaseGeometry) -> BaseGeometry:
    """``geom``, grown by :data:`ROUNDING_MARGIN` if snapping it would lose any of it.

    Snapping moves every boundary point by at most √2 × GRID / 2. An area with at most
    :data:`_CHECKED_OFF_GRID` vertices off the grid is kept as it is if snapping it loses
    none of it; any other is grown first (mitres limited to 1.5 margins: a sharp corner gets
    one bevel, any other corner no new vertex), which guarantees the snapped pieces still
    cover the whole area: rounding never drops a parcel whose representative point lies
    inside. (An area with more vertices off the grid is grown unchecked: the check costs as
    much as snapping it, and rounding many vertices all but surely loses some of it.)
    Every hole of the grown area is kept, including pockets sealed off behind a slit
    narrower than twice the margin, so nothing farther than two grid steps from the area is
    ever searched.
    """
    if off_grid(geom) <= _CHECKED_OFF_GRID and snap(geom).covers(geom):
        return geom
    return shapely.buffer(geom, ROUNDING_MARGIN, join_style="mitre", mitre_limit=_MITRE_LIMIT)


def off_grid(geom: BaseGeometry) -> int:
    """How many vertices of ``geom`` lie off the grid (6 decimals)."""
    xy = shapely.get_coordinates(geom)
    return int(np.count_nonzero((np.rint(xy * SCALE) / SCALE != xy).any(axis=1)))


def clamped(geom: BaseGeometry) -> BaseGeometry:
    """``geom`` less anything beyond ±180° longitude or ±90° latitude (growth can reach it)."""
    minx, miny, maxx, maxy = geom.bounds
    if minx >= -180 and miny >= -90 and maxx <= 180 and maxy <= 90:
        return geom
    return shapely.union_all(polygons(shapely.intersection(geom, WORLD)))


def polygons(geom: BaseGeometry) -> list[Polygon]:
    """The non-empty Polygons of a (multi)polygon or collection."""
    return [p for p in shapely.get_parts(geom) if p.geom_type == "Polygon" and not p.is_empty]


def canonical_ring(polygon: Polygon) -> np.ndarray:
    """The exterior ring as sent: on the grid, counter-clockwise, from its lowest-left vertex.

    Returns
    -------
    numpy.ndarray
        ``(n + 1, 2)`` closed ring; the start is the smallest ``(lon, lat)`` vertex.
    """
    coords = shapely.get_coordinates(shapely.orient_polygons(polygon).exterior)[:-1]
    coords = np.round(coords * SCALE) / SCALE
    start = np.lexsort((coords[:, 1], coords[:, 0]))[0]
    coords = np.roll(coords, -start, axis=0)
    return np.vstack([coords, coords[:1]])


def sorted_pieces(pieces: list[Polygon]) -> list[Polygon]:
    """Canonical pieces in the order they are sent: by first vertex, then vertex count."""
    return sorted(pieces, key=lambda p: tuple(p.exterior.coords[0]) + (len(p.exterior.coords),))


def vertex_codes(ring: np.ndarray) -> np.ndarray:
    """One int64 per vertex (grid units), ordered as ``(lon, lat)`` are."""
    return np.asarray(((ring[:, 0] + CODE_OFFSET) << 31) | (ring[:, 1] + CODE_OFFSET))
