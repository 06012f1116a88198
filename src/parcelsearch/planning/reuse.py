"""The same areas cost the same in any CRS: a search reuses the pieces of the same areas.

A plan is made from areas reprojected to EPSG:4326; the same boundaries arriving in another
CRS (UTM, a state plane in feet, web mercator) come back from that reprojection a few
billionths of a degree apart, and the tiler, whose cuts depend on every vertex, may then
choose other pieces — whose pages are not in the cache, so the search pays again. So each
search keeps the pieces of each of its areas in the cache folder (``plans/``, one JSON file
per area id and settings), and a later search gives an area whose boundary, once reprojected
to EPSG:4326, matches the kept one vertex by vertex within :data:`MATCH_DEGREES` (1.5 steps
of the 6-decimal request grid the pieces are snapped to) the same pieces, so their cached
pages serve it. Areas are matched one by one (each is tiled on its own): a search of 400
tracts reuses the pieces of the 28 searched last week, in whatever CRS either came.

A kept plan is data to check, not an order (the cache folder may be shared, synced or
copied): each piece is read back from the very ring that will be sent, and the pieces are
used only if their union covers the area, bar slivers narrower than the boundary match
(:data:`MATCH_DEGREES`), reaches beyond it no farther than the plan's settings let honest
pieces (slivers narrower than twice two grid steps and the match, plus the tolerance), every
piece fits the request line, and the ids run 0..n-1; else
the kept file is ignored and the area planned afresh, saying so
(:class:`~parcelsearch.notices.KeptFileWarning`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections.abc import Collection, Hashable
from pathlib import Path
from typing import Any

import shapely

from parcelsearch import _wire
from parcelsearch.kept_files import write_whole
from parcelsearch.notices import KeptFileWarning, warn
from parcelsearch.planning.plans import Piece, Plan
from parcelsearch.planning.tiling.grid import GRID
from parcelsearch.planning.tiling.request_budget import BUDGET_PAGE

__all__ = ["PLANS_FOLDER", "MATCH_DEGREES", "reuse", "stored_plan", "keep_plan"]

_log = logging.getLogger(__name__)

#: The folder of kept plans inside the cache folder.
PLANS_FOLDER = "plans"
#: How far (degrees) a vertex of an area may move and still be the same area: 1.5 steps of
#: the request grid (1e-6°), far above reprojection round trips (1e-9° or less).
MATCH_DEGREES = 1.5e-6
_FORMAT = 2


def _area_key(area_id: Hashable) -> str:
    value = area_id.item() if hasattr(area_id, "item") else area_id
    return json.dumps(value, default=str)


def _settings(plan: Plan) -> dict[str, Any]:
    return {
        "format": _FORMAT,
        "tolerance": plan.tolerance,
        "connectors": plan.connectors,
        "match": plan.match,
        "path": plan.path,
        "max_request_bytes": plan.max_request_bytes,
    }


def _file(plan: Plan, area_id: Hashable, folder: str | os.PathLike[str]) -> Path:
    """One file per area id and settings (the boundary is compared inside)."""
    digest = hashlib.sha256(json.dumps([_settings(plan), _area_key(area_id)]).encode())
    return Path(folder) / PLANS_FOLDER / f"{digest.hexdigest()[:24]}.json"


def _kept_pieces(
    plan: Plan, area_id: Hashable, geometry: shapely.Geometry, folder: str | os.PathLike[str]
) -> list[Piece] | None:
    """The pieces kept for this area (same id, settings and boundary) if they still make a
    plan of it (:func:`_covers`), or None."""
    path = _file(plan, area_id, folder)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        if document.get("settings") != _settings(plan) or document.get("area") != _area_key(
            area_id
        ):
            return None
        if not _same_area(geometry, shapely.from_wkb(bytes.fromhex(document["boundary"]))):
            return None
        pieces = [
            _piece(plan, area_id, piece_id, ring)
            for piece_id, ring, _wkb, _request_bytes in document["pieces"]
        ]
    except (OSError, ValueError, KeyError, TypeError, shapely.errors.ShapelyError):
        return None  # none kept, or not readable: planned afresh
    flaw = _flaw(plan, geometry, pieces)
    if flaw is not None:
        warn(
            KeptFileWarning(
                f"the kept plan {path} of area {_area_key(area_id)} is ignored "
                f"({flaw}): the area is planned afresh"
            )
        )
        return None
    return pieces


def _piece(plan: Plan, area_id: Hashable, piece_id: object, ring: object) -> Piece:
    """A kept piece read back from the ring that will be sent (its geometry and size are
    the ring's own, not what the file says of them)."""
    if not isinstance(ring, str) or not isinstance(piece_id, int):
        raise TypeError("a kept piece is an id and a ring")
    coords = json.loads(ring)
    text = _wire.ring_json(coords)
    if text != ring:
        raise ValueError("a kept ring not as the planner writes it")
    return Piece(
        area_id=area_id,
        piece_id=piece_id,
        polygon_json=text,
        geometry=shapely.Polygon(coords),
        request_bytes=_wire.search_target_bytes(plan.path, text, BUDGET_PAGE),
    )


def _flaw(plan: Plan, geometry: shapely.Geometry, pieces: list[Piece]) -> str | None:
    """What makes kept ``pieces`` no plan of the area ``geometry``, or None."""
    if not pieces:
        return "no piece"  # every area has one
    if [p.piece_id for p in pieces] != list(range(len(pieces))):
        return "piece ids not 0..n-1"
    if any(p.request_bytes > plan.max_request_bytes for p in pieces):
        return f"a piece over the {plan.max_request_bytes:,}-byte request line"
    area = shapely.make_valid(geometry)
    union = shapely.union_all(shapely.make_valid([p.geometry for p in pieces]))
    if not _thin(shapely.difference(area, union), MATCH_DEGREES):
        return "its pieces do not cover the area"
    if not _thin(shapely.difference(union, area), _reach(plan, area)):
        return "its pieces reach beyond the area farther than the plan's settings allow"
    return None


def _thin(rest: shapely.Geometry, half_width: float) -> bool:
    """Whether ``rest`` is empty but for slivers narrower than twice ``half_width``."""
    return bool(rest.is_empty or shapely.buffer(rest, -half_width).is_empty)


def _reach(plan: Plan, area: shapely.Geometry) -> float:
    """How far (degrees) honest pieces may stick out of ``area``: two grid steps (exact
    pieces; a connector's sliver is thinner) and the boundary match, plus the tolerance in
    degrees of longitude at the area's farthest latitude (the most degrees per metre)."""
    exact = 2 * GRID + MATCH_DEGREES
    if not plan.tolerance:
        return exact
    _, south, _, north = area.bounds
    metres_per_degree = 111_320 * max(math.cos(math.radians(max(abs(south), abs(north)))), 1e-3)
    return exact + plan.tolerance / metres_per_degree


def _same_area(geometry: shapely.Geometry, kept: shapely.Geometry) -> bool:
    """Vertex by vertex within :data:`MATCH_DEGREES`: in the order they come (a reprojection
    keeps it), else in normal form (rings that start elsewhere). The normal form alone is not
    enough: it starts a ring at its least vertex, and of two vertices a billionth of a degree
    apart in x, a reprojection round trip may make either the least."""
    return bool(
        shapely.equals_exact(geometry, kept, tolerance=MATCH_DEGREES)
        or shapely.equals_exact(
            shapely.normalize(geometry), shapely.normalize(kept), tolerance=MATCH_DEGREES
        )
    )


def stored_plan(plan: Plan, folder: str | os.PathLike[str]) -> Plan | None:
    """``plan`` with the pieces kept in ``folder`` for each of its areas that was searched
    before (in any CRS, with the same settings), its own pieces for the others, and its
    areas and memo; ``None`` when no area was kept (or readable)."""
    pieces, kept = _with_kept_pieces(plan, folder)
    return _with_pieces(plan, pieces) if kept else None


def _with_pieces(plan: Plan, pieces: list[Piece]) -> Plan:
    return Plan(
        plan.areas,
        pieces,
        tolerance=plan.tolerance,
        max_request_bytes=plan.max_request_bytes,
        path=plan.path,
        memo=plan.memo,
        connectors=plan.connectors,
        match=plan.match,
    )


def _with_kept_pieces(
    plan: Plan, folder: str | os.PathLike[str]
) -> tuple[list[Piece], set[Hashable]]:
    """The pieces of ``plan``, those of each area kept in ``folder`` in place of its own, and
    the ids of the areas kept."""
    pieces: list[Piece] = []
    kept_ids: set[Hashable] = set()
    own = _by_area(plan)
    for area_id, geometry in zip(plan.areas.index, plan.areas.geometry.array, strict=True):
        kept = _kept_pieces(plan, area_id, geometry, folder)
        if kept is not None:
            kept_ids.add(area_id)
        pieces.extend(own.get(area_id, []) if kept is None else kept)
    return pieces, kept_ids


def _by_area(plan: Plan) -> dict[Hashable, list[Piece]]:
    by_area: dict[Hashable, list[Piece]] = {}
    for piece in plan.pieces:
        by_area.setdefault(piece.area_id, []).append(piece)
    return by_area


def keep_plan(
    plan: Plan, folder: str | os.PathLike[str], skip: Collection[Hashable] = ()
) -> list[Path]:
    """Keep the pieces of each of ``plan``'s areas (but those in ``skip``) in ``folder`` for
    later searches of the same areas (each file written whole); the files written."""
    by_area = _by_area(plan)
    written = []
    for area_id, geometry in zip(plan.areas.index, plan.areas.geometry.array, strict=True):
        if area_id in skip:
            continue
        document = {
            "settings": _settings(plan),
            "area": _area_key(area_id),
            "boundary": shapely.to_wkb(geometry, hex=True),
            "pieces": [
                [p.piece_id, p.polygon_json, shapely.to_wkb(p.geometry, hex=True), p.request_bytes]
                for p in by_area.get(area_id, [])
            ],
        }
        written.append(_write(_file(plan, area_id, folder), document))
    return written


def _write(path: Path, document: dict[str, Any]) -> Path:
    """Written whole (:func:`parcelsearch.kept_files.write_whole`: no temporary file left
    behind, none followed through a symlink)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_whole(path, json.dumps(document).encode("utf-8"), mode=0o644)


def reuse(plan: Plan, folder: str | os.PathLike[str] | None, *, keep: bool = True) -> Plan:
    """``plan``, with the pieces kept for each of its areas searched before in any CRS (then
    the same pieces, so the same cached pages); with ``keep``, the pieces of the other areas
    are kept for next time.

    A folder that cannot be written only costs the reuse (logged), never the search. Kept
    pieces that no longer cover their area are not used (a warning says so, the area is
    planned afresh).
    """
    if folder is None:
        return plan
    pieces, kept = _with_kept_pieces(plan, folder)
    if kept:
        if [p.polygon_json for p in pieces] != [p.polygon_json for p in plan.pieces]:
            _log.info(
                "the pieces of an earlier search of %d of these areas are reused (%d "
                "pieces instead of %d)",
                len(kept),
                len(pieces),
                len(plan.pieces),
            )
        plan = _with_pieces(plan, pieces)
    if keep and len(kept) < len(plan.areas):
        try:
            keep_plan(plan, folder, skip=kept)
        except OSError as exc:
            _log.warning("the plan could not be kept for reuse: %s", exc)
    return plan
