"""The same areas cost the same in any CRS: a search reuses the plan of the same areas.

A plan is made from areas reprojected to EPSG:4326; the same boundaries arriving in another
CRS (UTM, a state plane in feet, web mercator) come back from that reprojection a few
billionths of a degree apart, and the tiler, whose cuts depend on every vertex, may then
choose other pieces — whose pages are not in the cache, so the search pays again. So each
search keeps its plan in the cache folder (``plans/``, one JSON file per set of area ids and
settings), and a later search whose areas, once reprojected to EPSG:4326, match those areas
vertex by vertex within :data:`MATCH_DEGREES` (1.5 steps of the 6-decimal request grid the
pieces are snapped to) is given the same pieces, so their cached pages serve it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import shapely

from parcelsearch.planning import Piece, Plan

__all__ = ["PLANS_FOLDER", "MATCH_DEGREES", "reuse", "stored_plan", "keep_plan"]

_log = logging.getLogger(__name__)

#: The folder of kept plans inside the cache folder.
PLANS_FOLDER = "plans"
#: How far (degrees) a vertex of an area may move and still be the same area: 1.5 steps of
#: the request grid (1e-6°), far above reprojection round trips (1e-9° or less).
MATCH_DEGREES = 1.5e-6
_FORMAT = 1


def _area_key(area_id: Hashable) -> str:
    value = area_id.item() if hasattr(area_id, "item") else area_id
    return json.dumps(value, default=str)


def _settings(plan: Plan) -> dict[str, Any]:
    return {"format": _FORMAT, "tolerance": plan.tolerance, "connectors": plan.connectors,
            "match": plan.match, "path": plan.path, "max_request_bytes": plan.max_request_bytes}


def _file(plan: Plan, folder: str | os.PathLike[str]) -> Path:
    """One file per set of area ids and settings (the geometry is compared inside)."""
    ids = sorted(_area_key(a) for a in plan.areas.index)
    digest = hashlib.sha256(json.dumps([_settings(plan), ids]).encode()).hexdigest()[:24]
    return Path(folder) / PLANS_FOLDER / f"{digest}.json"


def _same_areas(plan: Plan, stored: dict[str, str]) -> bool:
    """Whether ``plan``'s areas match the stored ones (WKB hex by area key) vertex by vertex
    within :data:`MATCH_DEGREES`."""
    if len(stored) != len(plan.areas):
        return False
    for area_id, geometry in zip(plan.areas.index, plan.areas.geometry.array, strict=True):
        kept = stored.get(_area_key(area_id))
        if kept is None:
            return False
        if not _same_area(geometry, shapely.from_wkb(bytes.fromhex(kept))):
            return False
    return True


def _same_area(geometry: shapely.Geometry, kept: shapely.Geometry) -> bool:
    """Vertex by vertex within :data:`MATCH_DEGREES`: in the order they come (a reprojection
    keeps it), else in normal form (rings that start elsewhere). The normal form alone is not
    enough: it starts a ring at its least vertex, and of two vertices a billionth of a degree
    apart in x, a reprojection round trip may make either the least."""
    return bool(shapely.equals_exact(geometry, kept, tolerance=MATCH_DEGREES)
                or shapely.equals_exact(shapely.normalize(geometry), shapely.normalize(kept),
                                        tolerance=MATCH_DEGREES))


def stored_plan(plan: Plan, folder: str | os.PathLike[str]) -> Plan | None:
    """The plan kept in ``folder`` for the same areas (in any CRS) and settings as ``plan``,
    with ``plan``'s areas and memo; ``None`` when there is none (or it is unreadable)."""
    path = _file(plan, folder)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        if document.get("settings") != _settings(plan):
            return None
        if not _same_areas(plan, document["areas"]):
            return None
        by_key = {_area_key(a): a for a in plan.areas.index}
        pieces = [Piece(area_id=by_key[area], piece_id=int(piece_id), polygon_json=ring,
                        geometry=shapely.from_wkb(bytes.fromhex(wkb)),
                        request_bytes=int(request_bytes))
                  for area, piece_id, ring, wkb, request_bytes in document["pieces"]]
    except (OSError, ValueError, KeyError, TypeError, shapely.errors.ShapelyError):
        return None  # none kept, or not readable: plan afresh
    return Plan(plan.areas, pieces, tolerance=plan.tolerance,
                max_request_bytes=plan.max_request_bytes, path=plan.path, memo=plan.memo,
                connectors=plan.connectors, match=plan.match)


def keep_plan(plan: Plan, folder: str | os.PathLike[str]) -> Path:
    """Keep ``plan`` in ``folder`` for later searches of the same areas (written whole)."""
    path = _file(plan, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "settings": _settings(plan),
        "areas": {_area_key(a): shapely.to_wkb(g, hex=True)
                  for a, g in zip(plan.areas.index, plan.areas.geometry.array, strict=True)},
        "pieces": [[_area_key(p.area_id), p.piece_id, p.polygon_json,
                    shapely.to_wkb(p.geometry, hex=True), p.request_bytes]
                   for p in plan.pieces],
    }
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temp.write_text(json.dumps(document), encoding="utf-8")
    os.replace(temp, path)
    return path


def reuse(plan: Plan, folder: str | os.PathLike[str] | None, *, keep: bool = True) -> Plan:
    """``plan``, or the plan kept for the same areas in any CRS (then the same pieces, so the
    same cached pages); with ``keep``, a plan not found is kept for next time.

    A folder that cannot be written only costs the reuse (logged), never the search.
    """
    if folder is None:
        return plan
    found = stored_plan(plan, folder)
    if found is not None:
        if [p.polygon_json for p in found.pieces] != [p.polygon_json for p in plan.pieces]:
            _log.info("the plan of an earlier search of the same areas is reused (%d pieces "
                      "instead of %d)", len(found.pieces), len(plan.pieces))
        return found
    if keep:
        try:
            keep_plan(plan, folder)
        except OSError as exc:
            _log.warning("the plan could not be kept for reuse: %s", exc)
    return plan
