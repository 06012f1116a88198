"""Study areas in, validated areas out: one row per area id, EPSG:4326, areal, in range.

:func:`validate_areas` is the first step of every plan. It accepts what analysts
hold — a GeoDataFrame or GeoSeries in any CRS, a shapely geometry, or a list of
geometries — and returns a GeoDataFrame in EPSG:4326 indexed by area id whose
geometries are valid Polygons or MultiPolygons with longitudes in [-180, 180].

Anything that cannot be planned is refused with an :class:`~parcelsearch.errors.InputError`
naming the row (the area id), the field and the fix. Invalid geometries are repaired
with :func:`shapely.make_valid` and a :class:`GeometryRepairedWarning` naming the row.
Areas crossing the antimeridian (an edge jumping more than 180° in longitude, or
longitudes beyond ±180) are split into parts on either side of it.

Examples
--------
>>> from shapely import box
>>> areas = validate_areas([box(-97.5, 32.7, -97.4, 32.8)])
>>> areas.index.name, areas.crs.to_epsg(), areas.geom_type.tolist()
('area_id', 4326, ['Polygon'])
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from shapely.geometry.base import BaseGeometry

from parcelsearch import notices
from parcelsearch.errors import Hint, InputError
from parcelsearch.notices import CoordinatesWarning, ParcelSearchWarning, RowNumberIdsWarning
from parcelsearch.planning.land import check_near_land
from parcelsearch.planning.tiling.antimeridian import split_antimeridian

__all__ = [
    "GeometryRepairedWarning",
    "index_by_id",
    "validate_areas",
    "split_antimeridian",
    "unwrap_longitudes",
]

#: Name given to the area id when neither ``id_column`` nor the index names it, and the
#: column used as the ids when no ``id_column`` is named.
DEFAULT_ID_NAME = "area_id"
#: The rule that chooses the area ids (also in the README and ``--help``).
ID_RULE = (
    "--id-column names the column of area ids; without it, a column named 'area_id' "
    "is used, else the row numbers (0, 1, …, with a warning)"
)
_AREAL = ("Polygon", "MultiPolygon")
_SHOWN = 5  # offending rows named in one message


class GeometryRepairedWarning(ParcelSearchWarning):
    """An invalid study area was repaired with :func:`shapely.make_valid`."""


def validate_areas(
    areas: Any, id_column: str | None = None, *, trust_crs: bool = False
) -> gpd.GeoDataFrame:
    """Validate and normalise study areas.

    Parameters
    ----------
    areas
        A GeoDataFrame or GeoSeries with a CRS (any CRS), a shapely geometry, or a list
        of shapely geometries. Bare shapely geometries carry no CRS and are taken to be
        longitude/latitude (EPSG:4326).
    id_column
        Column holding the area ids. Without it (the rule of :data:`ID_RULE`): a column
        named ``area_id``; else the index, if the areas have one of their own (named, or
        not the row numbers 0..n-1); else the row numbers, with a
        :class:`~parcelsearch.notices.RowNumberIdsWarning` when the areas have columns (one
        of which may have been meant). An ``area_id`` column beside
        an index of the user's own (named or not integers) that differs from it is refused
        as ambiguous.
    trust_crs
        False (default): areas implausible for their declared CRS are refused before
        anything is planned or spent — coordinates that all look like degrees
        (|x| ≤ 180, |y| ≤ 90) in a projected CRS (the areas would be metres wide near
        0, 0), or areas lying wholly outside the region the CRS is meant for
        (``pyproj.CRS.area_of_use``), or areas in a declared CRS (a GeoDataFrame or
        GeoSeries, EPSG:4326 too; not bare geometries) more than 50 km from any land
        (:func:`~parcelsearch.planning.land.check_near_land`: out at sea). True: taken
        as declared (the second gives a :class:`~parcelsearch.notices.CoordinatesWarning`
        instead).

    Returns
    -------
    geopandas.GeoDataFrame
        EPSG:4326, indexed by area id (index name ``id_column``, the index's own name,
        or ``"area_id"``), one Polygon or MultiPolygon per row, other columns kept.

    Raises
    ------
    InputError
        No areas; no CRS; missing ``id_column``; ambiguous ids; missing or duplicate ids; missing,
        empty, non-areal, non-finite or out-of-range geometries; coordinates implausible
        for their CRS (unless ``trust_crs``). The message names the row.

    Warns
    -----
    GeometryRepairedWarning
        For each invalid geometry repaired with :func:`shapely.make_valid`.
    RowNumberIdsWarning
        When the row numbers are the ids (no ``id_column``, no ``area_id``, no index).
    """
    frame = _as_frame(areas)
    frame, id_name = index_by_id(frame, id_column)
    geoms = np.asarray(frame.geometry.array, dtype=object)
    ids = list(frame.index)
    _check_kinds(geoms, ids)
    geoms = shapely.force_2d(geoms)
    _check_finite(geoms, ids, "")
    if not _is_lonlat(frame.crs):
        if not trust_crs:
            _check_degrees_in_projected(geoms, ids, frame.crs)
        geoms = _to_lonlat(geoms, frame.crs, ids)
    _check_range(geoms, ids, frame.crs)
    _check_area_of_use(geoms, frame.crs, ids, trust_crs)
    geoms = np.array([_normalise(g, row) for g, row in zip(geoms, ids, strict=True)], dtype=object)
    if not trust_crs and isinstance(areas, gpd.GeoDataFrame | gpd.GeoSeries):  # declared
        check_near_land(geoms, ids, frame.crs)
    out = gpd.GeoDataFrame(
        frame.drop(columns=frame.geometry.name),
        geometry=gpd.GeoSeries(geoms, index=frame.index, crs="EPSG:4326"),
    )
    out.index.name = id_name
    return out


# -- input shapes -----------------------------------------------------------------------


def _as_frame(areas: Any) -> gpd.GeoDataFrame:
    """Any accepted input as a GeoDataFrame with a CRS."""
    if isinstance(areas, gpd.GeoDataFrame):
        if areas._geometry_column_name not in areas.columns:
            raise InputError(
                "the GeoDataFrame has no active geometry column; "
                "set one with gdf.set_geometry('<column>')",
                field="geometry",
            )
        frame = areas
    elif isinstance(areas, gpd.GeoSeries):
        frame = areas.to_frame("geometry").set_geometry("geometry")
    elif isinstance(areas, BaseGeometry):
        frame = gpd.GeoDataFrame(geometry=[areas], crs="EPSG:4326")
    elif isinstance(areas, Iterable) and not isinstance(areas, str | bytes | pd.DataFrame):
        items = list(areas)
        for position, item in enumerate(items):
            if not isinstance(item, BaseGeometry):
                raise InputError(
                    f"area {position!r}: expected a shapely geometry, got {type(item).__name__}",
                    row=position,
                    field="geometry",
                )
        frame = gpd.GeoDataFrame(geometry=items, crs="EPSG:4326")
    else:
        raise InputError(
            f"cannot read study areas from a {type(areas).__name__}: pass a GeoDataFrame, "
            "a GeoSeries, a shapely geometry or a list of them "
            "(read files with geopandas.read_file)"
        )
    if frame.crs is None:
        kind = type(areas).__name__
        raise InputError(
            f"the {kind} has no CRS, so its coordinates cannot be placed on Earth",
            field="geometry",
            hints=[Hint("crs", "EPSG:4326", "declare it with {knob} (or the CRS the data is in)")],
        )
    if len(frame) == 0:
        raise InputError("there are no study areas (the input has no rows)")
    return frame


def index_by_id(frame: gpd.GeoDataFrame, id_column: str | None) -> tuple[gpd.GeoDataFrame, str]:
    """``frame`` indexed by its area ids, and their name (the rule: see :func:`validate_areas`).

    Refuses missing, duplicate or ambiguous ids (:class:`~parcelsearch.errors.InputError`).
    """
    if id_column is not None:
        if id_column not in frame.columns:
            columns = ", ".join(map(repr, frame.columns.drop(frame.geometry.name)[:20]))
            raise InputError(
                f"id column {id_column!r} is not in the areas; columns are: {columns or 'none'}",
                field=id_column,
                hints=[Hint("id_column", None, "name one of them with {knob}")],
            )
        if id_column == frame.geometry.name:
            raise InputError("the id column cannot be the geometry column", field=id_column)
        frame = frame.set_index(id_column)
        id_name = id_column
    else:
        if isinstance(frame.index, pd.MultiIndex):
            raise InputError(
                "the areas have a MultiIndex; use one id column "
                "(areas.reset_index() then id_column=...)",
                field="index",
            )
        frame, id_name = _default_ids(frame)
    field = id_column or ("index" if id_name not in frame.index.names else id_name)
    missing = [pos for pos, value in enumerate(frame.index) if _is_missing(value)]
    if missing:
        raise InputError(
            f"{len(missing)} area(s) have no id (rows at positions {missing[:_SHOWN]}); "
            f"give every area an id in {field!r}",
            row=missing[0],
            field=field,
        )
    duplicated = frame.index[frame.index.duplicated()].unique().tolist()
    if duplicated:
        raise InputError(
            f"area ids must be unique; duplicated in {field!r}: {_names(duplicated)}",
            row=duplicated[0],
            field=field,
            hints=[Hint("id_column", None, "name a column of unique ids with {knob}")],
        )
    return frame, id_name


def _default_ids(frame: gpd.GeoDataFrame) -> tuple[gpd.GeoDataFrame, str]:
    """The ids when no id column was named: an ``area_id`` column, else the index if the
    areas have one of their own, else row numbers (with a :class:`RowNumberIdsWarning`)."""
    index = frame.index
    own_index = index.name is not None or not index.equals(pd.RangeIndex(len(index)))
    if DEFAULT_ID_NAME in frame.columns:
        chosen = index.name is not None or not pd.api.types.is_integer_dtype(index.dtype)
        if chosen and not _same(index, frame[DEFAULT_ID_NAME]):
            raise InputError(
                f"the areas have both an {DEFAULT_ID_NAME!r} column and an index of their own "
                f"({index.name or 'unnamed'}: {_names(index[:_SHOWN].tolist())}), and it is "
                "not clear which identifies them; to use the index, make it a column "
                "(areas.reset_index()) and name that column",
                field="id_column",
                hints=[Hint("id_column", DEFAULT_ID_NAME, "to use the column, pass {knob}")],
            )
        return frame.set_index(DEFAULT_ID_NAME), DEFAULT_ID_NAME
    if own_index:
        return frame, str(index.name) if index.name is not None else DEFAULT_ID_NAME
    columns = [str(c) for c in frame.columns if c != frame.geometry.name]
    if columns:  # one of them may be the ids: say that row numbers were used instead
        notices.warn(
            RowNumberIdsWarning(
                f"the study areas have no {DEFAULT_ID_NAME!r} column, so they are identified by "
                f"their row numbers (0 to {len(frame) - 1}) in every output (their columns: "
                f"{_names(columns)})",
                hints=[Hint("id_column", None, "name the column that identifies them with {knob}")],
            )
        )
    return frame, DEFAULT_ID_NAME


def _same(index: pd.Index, column: pd.Series) -> bool:
    return bool((index.to_numpy(dtype=object) == column.to_numpy(dtype=object)).all())


def _is_missing(value: object) -> bool:
    try:
        return bool(pd.isna(value))  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return False


def _names(rows: Sequence[Hashable]) -> str:
    shown = ", ".join(repr(r) for r in rows[:_SHOWN])
    return shown + (f" and {len(rows) - _SHOWN} more" if len(rows) > _SHOWN else "")


# -- geometry checks --------------------------------------------------------------------


def _refuse(bad: np.ndarray, ids: list[Hashable], what: str, fix: str | Hint) -> None:
    """Raise one InputError naming the rows flagged in ``bad``."""
    rows = [ids[i] for i in np.flatnonzero(bad)]
    if rows:
        noun = "area" if len(rows) == 1 else "areas"
        advice, hints = (f"; {fix}", []) if isinstance(fix, str) else ("", [fix])
        raise InputError(
            f"{noun} {_names(rows)}: geometry {what}{advice}",
            row=rows[0],
            field="geometry",
            hints=hints,
        )


def _check_kinds(geoms: np.ndarray, ids: list[Hashable]) -> None:
    missing = shapely.is_missing(geoms)
    _refuse(missing, ids, "is missing", "give every area a polygon or drop the row")
    _refuse(shapely.is_empty(geoms), ids, "is empty", "give every area a polygon or drop the row")
    types = shapely.get_type_id(geoms)
    areal = np.isin(types, (3, 6))  # Polygon, MultiPolygon
    collection = types == 7
    _refuse(
        collection,
        ids,
        "is a GeometryCollection",
        "keep its polygons only (explode it into parts, then dissolve the polygons)",
    )
    kinds = {ids[i]: shapely.get_type_id(geoms[i]) for i in np.flatnonzero(~areal)}
    if kinds:
        names = {
            0: "Point",
            1: "LineString",
            2: "LinearRing",
            4: "MultiPoint",
            5: "MultiLineString",
        }
        first = next(iter(kinds.values()))
        _refuse(
            ~areal,
            ids,
            f"is a {names.get(int(first), 'non-areal geometry')}, not an area",
            "only Polygons and MultiPolygons can be searched; buffer points and lines "
            "into areas first (by so many metres, in a projected CRS such as the local UTM "
            "zone)",
        )


def _check_finite(geoms: np.ndarray, ids: list[Hashable], when: str) -> None:
    bad = np.array([not np.isfinite(shapely.get_coordinates(g)).all() for g in geoms], dtype=bool)
    _refuse(bad, ids, f"has non-finite coordinates (NaN or infinity){when}", "fix or drop them")


def _is_lonlat(crs: Any) -> bool:
    return bool(crs.equals("EPSG:4326") or crs.to_epsg() == 4326)


def _to_lonlat(geoms: np.ndarray, crs: Any, ids: list[Hashable]) -> np.ndarray:
    series = gpd.GeoSeries(geoms, crs=crs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # pyproj: inf for points off the map
        out = np.asarray(series.to_crs("EPSG:4326").array, dtype=object)
    _check_finite(out, ids, f" once reprojected from {crs.to_string()} to EPSG:4326")
    return out


def _check_range(geoms: np.ndarray, ids: list[Hashable], crs: Any) -> None:
    """Refuse coordinates that are not longitude/latitude, saying what is wrong with them.

    Longitudes up to ±540° are accepted (a ring drawn continuously across the
    antimeridian); a multipart area may have parts on both sides of ±180° (as Natural
    Earth's Fiji and Russia do), but no single part may span 360° or more.
    """
    bounds = shapely.bounds(geoms)
    beyond = (
        (bounds[:, 1] < -90) | (bounds[:, 3] > 90) | (bounds[:, 0] < -540) | (bounds[:, 2] > 540)
    )
    for bad in np.flatnonzero(beyond).tolist():
        _refuse_range(ids, bad, bounds[bad], crs)
    for i, geom in enumerate(geoms):
        if bounds[i, 2] - bounds[i, 0] < 360:
            continue
        spans = np.ptp(shapely.bounds(shapely.get_parts(geom))[:, [0, 2]], axis=1)
        if (spans >= 360).any():
            _refuse(
                np.arange(len(ids)) == i,
                ids,
                f"has a part spanning {float(spans.max()):g}° of longitude (360° or more)",
                "a search polygon must not go all the way round the globe; split that part "
                "into pieces narrower than 360°",
            )


#: Degrees the areas may lie beyond their CRS's area of use before it is called wrong.
_AREA_OF_USE_MARGIN = 1.0


def _check_area_of_use(geoms: np.ndarray, crs: Any, ids: list[Hashable], trust_crs: bool) -> None:
    """Refuse areas that lie wholly outside the area their CRS is meant for (a local grid
    declared in a UTM zone, say): the coordinates are then almost surely in another CRS.
    With ``trust_crs``, a :class:`~parcelsearch.notices.CoordinatesWarning` instead."""
    use = None if _is_lonlat(crs) else crs.area_of_use
    if use is None:
        return
    west, south, east, north = use.bounds
    minx, miny, maxx, maxy = (float(b) for b in shapely.total_bounds(geoms))
    margin = _AREA_OF_USE_MARGIN
    off_lon = west <= east and (maxx < west - margin or minx > east + margin)
    if not (off_lon or maxy < south - margin or miny > north + margin):
        return
    where = (
        f"the study areas lie at longitude {minx:.4g}..{maxx:.4g}, latitude "
        f"{miny:.4g}..{maxy:.4g}, outside the area {crs.to_string()} is meant for "
        f"(longitude {west:g}..{east:g}, latitude {south:g}..{north:g})"
    )
    declare = Hint("crs_override", None, "declare the CRS they are really in with {knob}")
    if trust_crs:
        notices.warn(
            CoordinatesWarning(
                f"{where}; their coordinates are probably in another CRS", hints=[declare]
            )
        )
        return
    raise InputError(
        f"{where}, so their coordinates are almost surely in another CRS; nothing was "
        "planned or spent",
        row=ids[0],
        field="crs",
        hints=[declare, Hint("trust_crs", None, "if the CRS is right, pass {knob}")],
    )


#: Words of the linear units (metres, feet) in which coordinates within ±180/±90 make areas
#: a few hundred units wide at most, near 0, 0 (in the Gulf of Guinea): degrees, surely.
_LINEAR_UNITS = ("metre", "meter", "foot", "feet")


def _check_degrees_in_projected(geoms: np.ndarray, ids: list[Hashable], crs: Any) -> None:
    """Refuse coordinates that all look like degrees (|x| ≤ 180, |y| ≤ 90) in a CRS whose
    unit is the metre or the foot: the areas would be at most 360 by 180 units wide, off
    the coast of Africa — they were surely longitude and latitude, declared wrongly."""
    if not getattr(crs, "is_projected", False):
        return
    units = {(axis.unit_name or "").lower() for axis in crs.axis_info}
    if not units or not all(any(word in u for word in _LINEAR_UNITS) for u in units):
        return
    minx, miny, maxx, maxy = (float(b) for b in shapely.total_bounds(geoms))
    if max(abs(minx), abs(maxx)) > 180 or max(abs(miny), abs(maxy)) > 90:
        return
    unit = sorted(units)[0]
    raise InputError(
        f"{'area' if len(ids) == 1 else 'areas'} {_names(ids)}: every coordinate lies within "
        f"±180, ±90 (x {minx:g}..{maxx:g}, y {miny:g}..{maxy:g}), "
        f"which looks like longitude/latitude in degrees, but {crs.to_string()} counts in "
        f"{unit}s: the areas would be a few hundred {unit}s wide near 0, 0, in the ocean off "
        "Africa; nothing was planned or spent",
        row=ids[0],
        field="crs",
        hints=[
            Hint("crs_override", "EPSG:4326", "if they are degrees, declare {knob}"),
            Hint("trust_crs", None, "if the CRS is right, pass {knob}"),
        ],
    )


def _refuse_range(ids: list[Hashable], i: int, bounds: np.ndarray, crs: Any) -> None:
    """Refuse row ``i`` whose coordinates lie beyond longitude/latitude limits."""
    fix: str | Hint
    lo_x, lo_y, hi_x, hi_y = (float(b) for b in bounds)
    extent = f"x {lo_x:g}..{hi_x:g}, y {lo_y:g}..{hi_y:g}"
    if not _is_lonlat(crs):
        what = f"is out of range for longitude/latitude once reprojected ({extent})"
        fix = f"check that {crs.to_string()} is the CRS the data is really in"
    elif max(abs(lo_x), abs(hi_x), abs(lo_y), abs(hi_y)) > 1_000:
        what = f"has coordinates far beyond longitude/latitude ({extent})"
        fix = Hint(
            "crs_override",
            phrase="these look like projected coordinates (metres or "
            "feet) although the CRS says EPSG:4326: declare the CRS they are really in "
            "with {knob}",
        )
    elif lo_y < -90 or hi_y > 90:
        what = f"has latitudes beyond ±90° ({extent})"
        fix = "latitudes must lie within -90..90; fix or drop the points beyond"
        if -90 <= lo_x and hi_x <= 90 and -180 <= lo_y and hi_y <= 180:
            fix += " (if the points are (latitude, longitude), swap them: longitude comes first)"
    else:
        what = f"has longitudes beyond ±540° ({extent})"
        fix = "longitudes must lie within -180..180 (or run on continuously across ±180)"
    _refuse(np.arange(len(ids)) == i, ids, what, fix)


# -- antimeridian and repair -------------------------------------------------------------


def _normalise(geom: BaseGeometry, row: Hashable) -> BaseGeometry:
    """Unwrap across the antimeridian, repair if invalid, split at ±180°."""
    crosses = _crosses_antimeridian(geom)
    if crosses:
        geom = unwrap_longitudes(geom, row=row)
    if not shapely.is_valid(geom):
        reason = shapely.is_valid_reason(geom)
        geom = shapely.make_valid(geom, method="structure", keep_collapsed=False)
        notices.warn(
            GeometryRepairedWarning(
                f"area {row!r}: its geometry was invalid ({reason}) and was repaired (made "
                "valid); check the result, or fix the source data"
            )
        )
    geom = _polygonal(geom)
    if crosses or shapely.bounds(geom)[0] < -180 or shapely.bounds(geom)[2] > 180:
        geom = split_antimeridian(geom)
    if geom.is_empty or geom.area == 0:
        raise InputError(
            f"area {row!r}: geometry has no area (it collapses to lines or points); "
            "give it a proper polygon or drop the row",
            row=row,
            field="geometry",
        )
    return geom


def _polygonal(geom: BaseGeometry) -> BaseGeometry:
    """The polygonal part of ``geom`` as a Polygon or MultiPolygon (may be empty)."""
    if geom.geom_type in _AREAL:
        return geom
    parts = [p for p in shapely.get_parts(geom) if p.geom_type in _AREAL]
    merged = shapely.union_all(parts) if parts else shapely.Polygon()
    return merged if merged.geom_type in _AREAL else shapely.Polygon()


def _crosses_antimeridian(geom: BaseGeometry) -> bool:
    """True when an edge jumps more than 180° in longitude or a longitude is beyond ±180°."""
    minx, _, maxx, _ = geom.bounds
    if minx < -180 or maxx > 180:
        return True
    if maxx - minx <= 180:
        return False
    rings = shapely.get_rings(shapely.get_parts(geom))
    return any(np.abs(np.diff(shapely.get_coordinates(r)[:, 0])).max() > 180 for r in rings)


def _unwrap_ring(coords: np.ndarray) -> np.ndarray:
    """Ring coordinates with every longitude step brought into (-180, 180]."""
    steps = np.diff(coords[:, 0])
    steps = steps - 360.0 * np.round(steps / 360.0)
    out = coords.copy()
    out[1:, 0] = coords[0, 0] + np.cumsum(steps)
    return out


def unwrap_longitudes(geom: BaseGeometry, *, row: Hashable = None) -> BaseGeometry:
    """Make longitudes continuous: no edge of ``geom`` steps more than 180°.

    A ring drawn across the antimeridian (179.9 → -179.9) becomes 179.9 → 180.1, so the
    polygon is whole again (longitudes may then lie beyond ±180; see
    :func:`split_antimeridian`). Holes are shifted by whole turns to sit in their shell.

    Raises
    ------
    InputError
        If a ring goes all the way round the globe (it encircles a pole).
    """
    polygons = []
    for part in shapely.get_parts(geom):
        shell = _unwrap_ring(shapely.get_coordinates(part.exterior))
        if abs(shell[-1, 0] - shell[0, 0]) > 1e-9:
            raise InputError(
                f"area {row!r}: geometry goes all the way round the globe (it encircles a "
                "pole), which a lon/lat search polygon cannot express; split it into parts "
                "that do not",
                row=row,
                field="geometry",
            )
        centre = (shell[:, 0].min() + shell[:, 0].max()) / 2
        holes = []
        for ring in part.interiors:
            hole = _unwrap_ring(shapely.get_coordinates(ring))
            hole[:, 0] -= 360.0 * np.round(
                ((hole[:, 0].min() + hole[:, 0].max()) / 2 - centre) / 360
            )
            holes.append(hole)
        polygons.append(shapely.Polygon(shell, holes))
    return polygons[0] if len(polygons) == 1 else shapely.MultiPolygon(polygons)
