"""The antimeridian: areas cut at ±180° for the service, and joined again to measure them.

The service takes longitudes in [-180, 180], so an area that crosses the antimeridian is
sent as parts on either side (:func:`split_antimeridian`); covers and bounds measure
distances across it, so they first move whole parts by 360° until the parts split there
meet again (:func:`joined_across_180`).
"""

from __future__ import annotations

import numpy as np
import shapely
from shapely.geometry.base import BaseGeometry

from parcelsearch.planning.tiling.grid import polygons

__all__ = ["joined_across_180", "split_antimeridian"]


def split_antimeridian(geom: BaseGeometry) -> BaseGeometry:
    """Cut a geometry with continuous longitudes at ±180° and wrap the parts back.

    Parameters
    ----------
    geom
        A Polygon or MultiPolygon whose longitudes may lie in [-540, 540].

    Returns
    -------
    Polygon or MultiPolygon
        The same area with every longitude in [-180, 180]: parts beyond 180° are
        moved to the western side of the antimeridian and vice versa.
    """
    minx, _, maxx, _ = geom.bounds
    if minx >= -180 and maxx <= 180:
        return geom
    pieces = []
    for turn in (-1, 0, 1):
        window = shapely.box(-180 + 360 * turn, -90, 180 + 360 * turn, 90)
        if not shapely.intersects(geom, window):
            continue
        piece = shapely.intersection(geom, window)
        if not piece.is_empty:
            pieces.append(shapely.transform(piece, lambda xy, t=turn: xy - [360.0 * t, 0.0]))
    parts = [p for piece in pieces for p in polygons(piece)]
    if not parts:
        return shapely.Polygon()
    return parts[0] if len(parts) == 1 else shapely.MultiPolygon(parts)


def joined_across_180(geometry: BaseGeometry) -> tuple[BaseGeometry, float]:
    """``geometry`` with whole parts moved by 360° so that parts split at ±180° meet again,
    and the longitude in the middle of what it spans.

    The parts' longitude spans are laid on the circle; the circle is cut in the widest gap
    no part covers, and every part before the cut is moved one turn east. A part is never
    torn: it moves whole.
    """
    parts = polygons(geometry)
    bounds = shapely.bounds(np.asarray(parts, dtype=object))
    order = np.argsort(bounds[:, 0], kind="stable")
    merged: list[list[float]] = []
    for lo, hi in bounds[order][:, [0, 2]].tolist():
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    gaps = [merged[i + 1][0] - merged[i][1] for i in range(len(merged) - 1)]
    wrap = merged[0][0] + 360 - merged[-1][1]
    if not gaps or wrap >= max(gaps):
        return geometry, (merged[0][0] + merged[-1][1]) / 2
    cut = int(np.argmax(gaps))
    east_of = merged[cut][1]  # parts up to here move one turn east
    moved = [
        shapely.transform(p, lambda xy: xy + [360.0, 0.0]) if b[2] <= east_of else p
        for p, b in zip(parts, bounds.tolist(), strict=True)
    ]
    return shapely.MultiPolygon(moved), (merged[cut + 1][0] + east_of + 360) / 2
