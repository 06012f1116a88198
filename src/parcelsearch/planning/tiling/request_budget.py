"""The request-line byte budget: how many bytes a ring may take in one search request.

The gateway refuses request lines longer than a byte budget, so every piece is measured as
``GET <path>?searchPolygon=<ring>&page=99999 HTTP/1.1`` (five-digit page numbers are
reserved for), with the bytes :mod:`parcelsearch._wire` decides.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import shapely
from shapely import Polygon
from shapely.geometry.base import BaseGeometry

from parcelsearch import _wire, settings
from parcelsearch.errors import InputError

__all__ = ["BUDGET_PAGE", "MAX_VERTEX_BYTES", "Budget", "ring_vertex_bytes"]

#: The page number whose request line the budget is checked at (room for five digits).
BUDGET_PAGE = 99999
#: Most bytes one vertex can take: ``%5B-180.123456,-90.123456%5D,`` is 29 bytes.
MAX_VERTEX_BYTES = 30


@dataclass(frozen=True)
class Budget:
    """The request-line byte budget of one search path.

    Parameters
    ----------
    max_request_bytes
        Longest request line allowed (``GET <target> HTTP/1.1``), in bytes.
    path
        The search path, e.g. ``"/v1/search"``.
    """

    max_request_bytes: int = settings.MAX_REQUEST_LINE_BYTES
    path: str = settings.SEARCH_PATH

    def __post_init__(self) -> None:
        smallest = self.base + 16 * MAX_VERTEX_BYTES  # a 16-vertex ring of the longest coordinates
        if self.max_request_bytes < smallest:
            raise InputError(
                f"max_request_bytes={self.max_request_bytes} cannot hold a useful ring on "
                f"{self.path!r}; use at least {smallest}",
                field="max_request_bytes",
            )

    @functools.cached_property
    def base(self) -> int:
        """Bytes of the request line with an empty ring ``[]`` at page 99999."""
        return _wire.search_target_bytes(self.path, "[]", BUDGET_PAGE)

    def ring_bytes(self, ring: Sequence[Sequence[float]] | np.ndarray) -> int:
        """Request-line bytes of a closed ring (closing vertex included), at page 99999."""
        return self.base - 1 + int(_wire.vertex_bytes_array(np.asarray(ring)).sum())

    def polygon_bytes(self, polygon: Polygon) -> int:
        """Request-line bytes of a polygon's exterior ring, at page 99999."""
        return self.ring_bytes(shapely.get_coordinates(polygon.exterior))

    def sent_bytes(self, pieces: Sequence[Polygon]) -> np.ndarray:
        """Request-line bytes of each piece as it is sent, at page 99999: its exterior ring
        on the grid, closed on its lowest-left vertex
        (:func:`~parcelsearch.planning.tiling.grid.canonical_ring`), all measured at once."""
        each, start = ring_vertex_bytes(pieces)
        return np.asarray(self.base - 1 + each + start, dtype=np.int64)

    def fits(self, polygon: Polygon) -> bool:
        """One ring that fits the budget."""
        return not polygon.interiors and self.polygon_bytes(polygon) <= self.max_request_bytes

    def polygon_bytes_each(self, polygons: Sequence[Polygon] | np.ndarray) -> np.ndarray:
        """:meth:`polygon_bytes` of every polygon, measured at once."""
        array = np.asarray(polygons, dtype=object)
        xy, which = shapely.get_coordinates(shapely.get_exterior_ring(array), return_index=True)
        size = np.bincount(which, weights=_wire.vertex_bytes_array(xy), minlength=len(array))
        return np.asarray(self.base - 1 + size.astype(np.int64), dtype=np.int64)

    def fits_each(self, polygons: Sequence[Polygon] | np.ndarray) -> np.ndarray:
        """:meth:`fits` of every polygon, measured at once."""
        array = np.asarray(polygons, dtype=object)
        return np.asarray(
            (shapely.get_num_interior_rings(array) == 0)
            & (self.polygon_bytes_each(array) <= self.max_request_bytes)
        )

    def vertex_bound(self, geometry: BaseGeometry) -> tuple[int, int]:
        """Fewest rings that can carry every vertex of ``geometry``, and fewest bytes they
        take: ⌈bytes of all its vertices ÷ what one request carries⌉ (at least one ring),
        and those vertex bytes plus each ring's fixed bytes. (Parts are not counted apart:
        a connector lets parts near each other share a ring,
        :mod:`parcelsearch.planning.tiling.connectors`.)"""
        capacity = self.max_request_bytes - self.base + 1
        size = 0
        for part in shapely.get_parts(geometry):
            if part.geom_type != "Polygon" or part.is_empty:
                continue
            xy = np.concatenate([shapely.get_coordinates(r)[:-1] for r in shapely.get_rings(part)])
            size += int(_wire.vertex_bytes_array(xy).sum())
        if not size:
            return 0, 0
        rings = max(1, math.ceil(size / capacity))
        return rings, size + rings * (self.base - 1)


def ring_vertex_bytes(pieces: Sequence[Polygon]) -> tuple[np.ndarray, np.ndarray]:
    """Bytes of each piece's exterior ring vertices (each once, on the 6-decimal grid), and
    of its lowest-left vertex (the one a sent ring starts and closes on)."""
    rings = shapely.get_exterior_ring(np.asarray(pieces, dtype=object))
    xy, which = shapely.get_coordinates(rings, return_index=True)
    scale = 10**settings.COORD_DECIMALS
    keep = np.ones(len(which), dtype=bool)
    keep[np.flatnonzero(np.diff(which))] = False
    keep[-1:] = False  # each ring's last (repeated) vertex
    xy, which = np.round(xy[keep] * scale) / scale, which[keep]
    vb = _wire.vertex_bytes_array(xy)
    each = np.bincount(which, weights=vb, minlength=len(pieces)).astype(np.int64)
    ranked = np.lexsort((xy[:, 1], xy[:, 0], which))  # per ring, lowest-left first
    firsts = ranked[np.flatnonzero(np.diff(which[ranked], prepend=-1))]
    start = np.zeros(len(pieces), dtype=np.int64)
    start[which[firsts]] = vb[firsts]
    return each, start
