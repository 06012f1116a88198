"""Study areas, plans and search results → :class:`~parcelsearch.maps.spec.MapSpec`.

Each builder turns its frames into named layers (popups, tooltips and styles per feature), a
legend and a subtitle, then :func:`_finish` decides the first views (one view, or one panel
per group of nearby areas), marks areas too small to see, and adds the offline context.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import geopandas as gpd
import ipyleaflet
import pandas as pd
import shapely
from shapely.geometry import shape

from parcelsearch.maps.classification import (
    PALETTE,
    class_breaks,
    class_colour,
    class_colours,
    class_label,
)
from parcelsearch.maps.context import BUNDLED, Context, context_layer, resolve_context
from parcelsearch.maps.features import (
    bounds_of,
    box,
    count,
    feature_layer,
    flag,
    geometry_json,
    is_missing,
    km2,
    text,
    to_wgs84,
)
from parcelsearch.maps.framing import first_views, focus_of, outliers
from parcelsearch.maps.spec import (
    AREA_STYLE,
    CACHED_DASH,
    MARKER_BELOW_PX,
    MARKER_LABEL,
    MARKER_STYLE,
    MARKERS_NAME,
    OUTLINE_STYLE,
    PIECE_STYLE,
    PLAN_PIECE_STYLE,
    SKIPPED_STYLE,
    UNSEARCHED_STYLE,
    Bounds,
    LayerSpec,
    Legend,
    LegendEntry,
    MapSpec,
    PlanLike,
    ResultLike,
    View,
    pixels,
    union,
    view_of,
)

__all__ = ["areas_spec", "plan_spec", "result_spec", "spec_of"]

Subjects = list[tuple[str, Bounds]]


def _with_ids(frame: pd.DataFrame, id_name: str | None) -> pd.DataFrame:
    """``frame`` indexed by ``id_name`` when that is one of its columns."""
    if id_name and id_name in frame.columns:
        return frame.set_index(id_name)
    return frame


def _names(areas: pd.DataFrame) -> dict[Hashable, Any]:
    return dict(areas["name"].items()) if "name" in areas.columns else {}


def _area_rows(record: Mapping[str, Any], id_name: str) -> list[tuple[str, str]]:
    rows = [(id_name, text(record["_id"]))]
    rows += [(column, text(record[column])) for column in ("name", "market") if column in record]
    return rows


def _area_label(area_id: Any, names: Mapping[Hashable, Any]) -> str:
    name = names.get(area_id)
    return text(area_id) if is_missing(name) else f"{name} ({area_id})"


def _subjects(frame: gpd.GeoDataFrame, suffix: str = "") -> Subjects:
    """(label, bounds) of each area: what the first views must show."""
    names = _names(frame)
    return [(_area_label(key, names) + suffix, box(geom)) for key, geom in frame.geometry.items()]


def _areas_layer(areas: gpd.GeoDataFrame, id_name: str, style: dict[str, Any]) -> LayerSpec:
    area_km2 = {key: km2(geom) for key, geom in areas.geometry.items()}
    names = _names(areas)
    return feature_layer(
        "Study areas",
        areas,
        popup=lambda r: [*_area_rows(r, id_name), ("area (km²)", area_km2[r["_id"]])],
        style=lambda r: dict(style),
        tooltip=lambda r: _area_label(r["_id"], names),
    )


def areas_spec(
    areas: gpd.GeoDataFrame, *, id_name: str | None = None, context: Context = BUNDLED
) -> MapSpec:
    """The description of a map of study areas (see :func:`parcelsearch.maps.areas_map`)."""
    frame = to_wgs84(_with_ids(areas, id_name))
    name = id_name or frame.index.name or "area"
    legend = Legend("Study areas", (LegendEntry("study area", AREA_STYLE["fillColor"]),))
    spec = MapSpec(
        f"Study areas ({len(frame)})",
        (_areas_layer(frame, name, AREA_STYLE),),
        legend,
        bounds_of(frame),
    )
    return _finish(spec, _subjects(frame), context)


def _plan_piece_rows(
    r: Mapping[str, Any], id_name: str, names: Mapping[Hashable, Any]
) -> list[tuple[str, str]]:
    return [
        ("area", _area_label(r[id_name], names)),
        ("piece", text(r["piece_id"])),
        ("vertices", count(r.get("vertices"))),
        ("request bytes", count(r.get("request_bytes"))),
        ("min calls", count(r.get("min_calls"))),
    ]


#: The legend's word for a connector: drawn as a thin line, it is part of a piece.
CONNECTOR_LABEL = (
    "thin line between parts: a connector (a sliver of the piece joining "
    "them; parcels on it outside the area can match)"
)


def connector_pieces(areas: gpd.GeoDataFrame, tiles: gpd.GeoDataFrame, id_name: str) -> int:
    """How many pieces join two or more parts of their area through a connector (a piece
    overlapping more than one part of its area)."""
    count = 0
    for area_id, piece in zip(tiles[id_name], tiles.geometry.array, strict=True):
        if area_id not in areas.index or piece is None:
            continue
        parts = shapely.get_parts(areas.geometry.loc[area_id])
        if len(parts) > 1 and int((shapely.area(shapely.intersection(parts, piece)) > 0).sum()) > 1:
            count += 1
    return count


def _with_connectors(
    legend: Legend, areas: gpd.GeoDataFrame, tiles: gpd.GeoDataFrame, id_name: str
) -> Legend:
    if not connector_pieces(areas, tiles, id_name):
        return legend
    return Legend(
        legend.title, (*legend.entries, LegendEntry(CONNECTOR_LABEL, OUTLINE_STYLE["color"]))
    )


def plan_spec(plan: PlanLike, *, context: Context = BUNDLED) -> MapSpec:
    """The description of a plan's map (see :func:`parcelsearch.maps.plan_map`)."""
    areas, tiles, id_name = to_wgs84(plan.areas), to_wgs84(plan.tiles), plan.id_name
    names = _names(areas)
    pieces = feature_layer(
        "Pieces",
        tiles,
        popup=lambda r: _plan_piece_rows(r, id_name, names),
        style=lambda r: dict(PLAN_PIECE_STYLE),
        tooltip=lambda r: f"{_area_label(r[id_name], names)} · piece {text(r['piece_id'])}",
    )
    legend = _with_connectors(
        Legend(
            "Plan",
            (
                LegendEntry("study area outline", OUTLINE_STYLE["color"]),
                LegendEntry("piece sent", PLAN_PIECE_STYLE["fillColor"]),
            ),
        ),
        areas,
        tiles,
        id_name,
    )
    calls = int(pd.to_numeric(tiles.get("min_calls", pd.Series(dtype=int))).sum())
    subtitle = f"{len(areas)} areas · {len(tiles)} pieces · at least {calls:,} calls"
    price = getattr(plan, "price_text", None)  # a Plan's price known without spending
    if callable(price):
        subtitle += f" · {price()}"
    spec = MapSpec(
        "Plan",
        (pieces, _areas_layer(areas, id_name, OUTLINE_STYLE)),
        legend,
        bounds_of(areas, tiles),
        subtitle,
    )
    return _finish(spec, _subjects(areas), context)


def _cached_text(r: Mapping[str, Any]) -> str:
    if flag(r.get("from_cache")):
        return "yes"
    cached: Any = r.get("cached_pages")
    if not is_missing(cached) and int(cached) > 0:
        return f"{int(cached):,} of {count(r.get('pages_fetched'))} pages"
    return "no"


def _pages_text(r: Mapping[str, Any]) -> str:
    pages: Any = r.get("pages")
    fetched: Any = r.get("pages_fetched")
    if is_missing(pages) or is_missing(fetched) or int(fetched) == int(pages):
        return count(pages)
    return f"{int(fetched):,} of {int(pages):,} fetched"


def _matched_text(rows: Any) -> str:
    return "not searched" if is_missing(rows) else f"{int(rows):,} parcels"


def _result_piece_rows(
    r: Mapping[str, Any], id_name: str, names: Mapping[Hashable, Any]
) -> list[tuple[str, str]]:
    return [
        ("area", _area_label(r[id_name], names)),
        ("piece", text(r["piece_id"])),
        ("parcels matched", "not searched" if is_missing(r["rows"]) else count(r["rows"])),
        ("pages", _pages_text(r)),
        ("calls", count(r.get("calls"))),
        ("cached", _cached_text(r)),
    ]


def _result_piece_style(r: Mapping[str, Any], breaks: Sequence[tuple[int, int]]) -> dict[str, Any]:
    if is_missing(r["rows"]):
        return dict(UNSEARCHED_STYLE)
    style = {**PIECE_STYLE, "fillColor": class_colour(int(r["rows"]), breaks)}
    if flag(r.get("from_cache")):
        style["dashArray"] = CACHED_DASH
    return style


def _result_legend(tiles: pd.DataFrame, breaks: Sequence[tuple[int, int]], skipped: int) -> Legend:
    rows = tiles["rows"]
    entries = [LegendEntry("0", PALETTE[0])] if (rows.fillna(-1) == 0).any() else []
    colours = class_colours(len(breaks))
    entries += [
        LegendEntry(class_label(lo, hi), c) for (lo, hi), c in zip(breaks, colours, strict=True)
    ]
    if rows.isna().any():
        entries.append(LegendEntry("not searched", "#ffffff", dashed=True))
    if tiles.get("from_cache", pd.Series(dtype=bool)).fillna(False).astype(bool).any():
        entries.append(LegendEntry("all pages from cache", "#ffffff", dashed=True))
    if skipped:
        entries.append(LegendEntry("skipped area", SKIPPED_STYLE["fillColor"], dashed=True))
    return Legend("Parcels matched per piece", tuple(entries))


def _skipped_areas(
    skipped: pd.DataFrame, areas: gpd.GeoDataFrame | None, id_name: str
) -> gpd.GeoDataFrame:
    """The rows of ``areas`` (in EPSG:4326, indexed by area id) that were skipped."""
    if areas is None or skipped.empty:
        return gpd.GeoDataFrame(geometry=[], crs=4326)
    frame = to_wgs84(_with_ids(areas, id_name))
    return frame[frame.index.isin(skipped.index)]


def _skipped_layer(skipped: pd.DataFrame, frame: gpd.GeoDataFrame, id_name: str) -> LayerSpec:
    """Skipped areas (geometry from the study areas), with why they were skipped."""
    frame = frame.drop(columns=[c for c in skipped.columns if c in frame.columns])
    frame = frame.join(skipped, how="left")
    names = _names(frame)
    rows = ("market", "reason", "suggestion")
    return feature_layer(
        "Skipped areas",
        frame,
        popup=lambda r: [
            (id_name, text(r["_id"])),
            *[(c, text(r[c])) for c in ("name", *rows) if c in r],
        ],
        style=lambda r: dict(SKIPPED_STYLE),
        tooltip=lambda r: f"{_area_label(r['_id'], names)}: skipped",
    )


def result_spec(
    result: ResultLike, *, areas: gpd.GeoDataFrame | None = None, context: Context = BUNDLED
) -> MapSpec:
    """The description of a result's map (see :func:`parcelsearch.maps.result_map`)."""
    id_name = result.id_name
    plan_areas, tiles = to_wgs84(result.plan.areas), to_wgs84(result.tiles)
    names = _names(plan_areas)
    breaks = class_breaks(tiles["rows"])
    pieces = feature_layer(
        "Pieces",
        tiles,
        popup=lambda r: _result_piece_rows(r, id_name, names),
        style=lambda r: _result_piece_style(r, breaks),
        tooltip=lambda r: (
            f"{_area_label(r[id_name], names)} · piece {text(r['piece_id'])}: "
            f"{_matched_text(r['rows'])}"
        ),
    )
    layers = [pieces, _areas_layer(plan_areas, id_name, OUTLINE_STYLE)]
    changed = _changed_tiles(tiles)
    if len(changed):
        layers.insert(
            1,
            feature_layer(
                CHANGED_NAME,
                changed,
                popup=lambda r: _result_piece_rows(r, id_name, names),
                style=lambda r: dict(CHANGED_STYLE),
                tooltip=lambda r: (
                    f"{_area_label(r[id_name], names)} · piece "
                    f"{text(r['piece_id'])}: changed since the last run"
                ),
            ),
        )
    skipped = result.skipped
    if areas is None and isinstance(skipped, gpd.GeoDataFrame) and not skipped.empty:
        areas = skipped[[skipped.geometry.name]]  # the result kept the skipped areas' shapes
        skipped = pd.DataFrame(skipped.drop(columns=skipped.geometry.name))
    drawn = _skipped_areas(skipped, areas, id_name)
    if len(drawn):
        layers.append(_skipped_layer(skipped, drawn, id_name))
    calls = int(pd.to_numeric(tiles.get("calls", pd.Series(dtype=int))).sum())
    subtitle = (
        f"{len(plan_areas)} areas · {len(tiles)} pieces · {calls:,} calls · {len(skipped)} skipped"
    )
    legend = _with_connectors(_result_legend(tiles, breaks, len(drawn)), plan_areas, tiles, id_name)
    if len(changed):
        subtitle += f" · {len(changed)} changed"
        legend = Legend(
            legend.title,
            (*legend.entries, LegendEntry("changed since the last run", CHANGED_STYLE["color"])),
        )
    spec = MapSpec(
        "Search result", tuple(layers), legend, bounds_of(plan_areas, tiles, drawn), subtitle
    )
    focus = (
        _subjects(plan_areas.loc[plan_areas.index.isin(changed[id_name])]) if len(changed) else None
    )
    return _finish(spec, [*_subjects(plan_areas), *_subjects(drawn, " · skipped")], context, focus)


#: The layer of pieces that changed since the last run (a refresh's result).
CHANGED_NAME = "Changed pieces"
#: Changed pieces: a thick magenta outline over the piece's class colour.
CHANGED_STYLE: dict[str, Any] = {"color": "#c51b7d", "weight": 3.5, "opacity": 1, "fill": False}


def _changed_tiles(tiles: gpd.GeoDataFrame) -> gpd.GeoDataFrame:
    """The pieces a refresh found changed (``changed`` true); none without that column."""
    if "changed" not in tiles.columns:
        return tiles.iloc[:0]
    flags = tiles["changed"].astype("boolean").fillna(False).astype(bool)
    return tiles[flags]


def _finish(
    spec: MapSpec, subjects: Subjects, context: Context, focus: Subjects | None = None
) -> MapSpec:
    """``spec`` with its first views, markers for specks and the offline context near them.

    ``focus`` names what a single map must open on when that is not every subject (the
    areas whose pieces changed).
    """
    far = outliers(focus or subjects)
    core = [s for s in (focus or subjects) if s not in far]
    view = focus_of(core, spec.bounds)
    if (
        view is not None
        and not far
        and focus is None
        and view.bounds == union(*(b for _, b in subjects))
    ):
        view = None  # every area: the whole map
    spec = dataclasses.replace(
        spec,
        views=first_views(subjects, spec.bounds),
        focus=view,
        listed=tuple(View(label, b) for label, b in far),
    )
    spec = _with_markers(spec)
    frame = resolve_context(context)
    if frame is not None:
        spec = dataclasses.replace(spec, context=context_layer(frame, _context_views(spec)))
    return spec


def _context_views(spec: MapSpec) -> list[Bounds]:
    """Where context is kept: the first views and the view a single map opens on."""
    views = [v.bounds for v in spec.first_views()]
    return views + ([spec.focus.bounds] if spec.focus is not None else [])


def _with_markers(spec: MapSpec) -> MapSpec:
    """``spec`` plus an "Area markers" layer when some area is too small to see at first.

    Areas far apart (several towns, states) fit in one overview only as specks; a dot on each
    (with the area's popup) keeps them findable. Areas that fill the view get no markers.
    Renderers that draw the spec's panels (``views``) leave the markers out: each panel shows
    its areas.
    """
    colours = {
        "Study areas": MARKER_STYLE["fillColor"],
        "Skipped areas": SKIPPED_STYLE["fillColor"],
    }
    areas = [
        (f, colours[x.name])
        for x in spec.layers
        if x.name in colours
        for f in x.geojson["features"]
    ]
    _, zoom = view_of(spec.bounds)
    if not any(pixels(box(shape(f["geometry"])), zoom) < MARKER_BELOW_PX for f, _ in areas):
        return spec
    features = [
        {
            "type": "Feature",
            "geometry": geometry_json(shape(f["geometry"]).representative_point()),
            "properties": {**f["properties"], "style": {**MARKER_STYLE, "fillColor": colour}},
        }
        for f, colour in areas
    ]
    markers = LayerSpec(MARKERS_NAME, {"type": "FeatureCollection", "features": features})
    legend = spec.legend or Legend("Study areas", ())
    legend = Legend(
        legend.title, (*legend.entries, LegendEntry(MARKER_LABEL, MARKER_STYLE["fillColor"]))
    )
    return dataclasses.replace(spec, layers=(*spec.layers, markers), legend=legend)


def spec_of(obj: Any, areas: gpd.GeoDataFrame | None = None, context: Context = BUNDLED) -> MapSpec:
    """The spec for anything :func:`parcelsearch.maps.save_html` accepts.

    A spec already made (a :class:`MapSpec` or a map's ``.parcelsearch_spec``) keeps its own
    context, and gains ``context`` when it has none and a frame is given.
    """
    spec = obj if isinstance(obj, MapSpec) else getattr(obj, "parcelsearch_spec", None)
    if isinstance(spec, MapSpec):
        if isinstance(context, gpd.GeoDataFrame) and spec.context is None:
            spec = dataclasses.replace(spec, context=context_layer(context, _context_views(spec)))
        return spec
    if isinstance(obj, ipyleaflet.Map):
        raise TypeError(
            "this ipyleaflet.Map was not made by parcelsearch.maps; "
            "save one from areas_map(), plan_map() or result_map()"
        )
    if isinstance(obj, gpd.GeoDataFrame):
        return areas_spec(obj, context=context)
    if hasattr(obj, "skipped") and hasattr(obj, "plan"):
        return result_spec(obj, areas=areas, context=context)
    if hasattr(obj, "tiles") and hasattr(obj, "areas"):
        return plan_spec(obj, context=context)
    raise TypeError(
        f"cannot map a {type(obj).__name__}: pass study areas (GeoDataFrame), "
        "a Plan, a SearchResult or a map made by parcelsearch.maps"
    )
