"""Pure geometry: one study area → the fewest single-ring pieces that fit a request line.

The Search service takes one closed ring per request, and its gateway refuses request
lines longer than a byte budget. :func:`tile` turns an area (a Polygon or MultiPolygon
in EPSG:4326) into pieces that are each

- a valid polygon with a single ring (holes are cut away, parts are split);
- on the 6-decimal grid the service receives (snapped with :func:`shapely.set_precision`
  *before* anything else, so rounding can never make a ring invalid);
- small enough that ``GET <path>?searchPolygon=<ring>&page=99999 HTTP/1.1`` fits the
  budget (five-digit page numbers are reserved for);
- canonical: counter-clockwise, starting at the lowest-left vertex, pieces sorted, so the
  same area always yields byte-identical requests (stable cache keys).

One concern a module, each importing only those above it:

- ``request_budget``: :class:`Budget`, the request-line bytes a ring takes;
- ``grid``: snapping to the 6-decimal grid, the growth that survives rounding (what
  "exact" means), parts, canonical rings;
- ``antimeridian``: :func:`split_antimeridian`, and parts joined again across ±180°;
- ``line_fitting``: a line's fewest straight segments within a distance of its vertices,
  their ends placed freely (for the covers);
- ``covers``: tolerance mode's :func:`cover`, the one check of a tolerance
  (:func:`check_tolerance`), and the area the pieces tile (``prepared``);
- ``connectors``: two pieces of different parts joined into one ring by a sliver;
- ``match_rule``: the vendor's matching rule (:func:`check_match`) and how far a
  connector's sliver may reach under it;
- ``repack``: fuller pieces: a group of neighbouring pieces re-cut into one fewer along
  any diagonals of their union;
- ``tree_cut``: one part cut into the fewest pieces that fit (a constrained
  triangulation's dual tree cut into the fewest components, Kundu & Misra);
- ``merging``: an area's pieces merged, the pair with the fewest bytes first: neighbours
  by their union, parts joined by connectors;
- ``partition``: the exact partition of a prepared area (tree cut, merged, then
  repacked);
- ``pieces``: :func:`tile`, and the :class:`TilingMemo` a plan owns;
- ``bounds``: :func:`lower_bound`, :func:`parts_bound` and :func:`estimate`, far cheaper
  than tiling, and ``exact_least``, the exact partition's bound.

Names load their module on first use (PEP 562), so ``parcelsearch.planning.areas`` importing
``parcelsearch.planning.tiling.antimeridian`` loads that module (and the grid) alone.

Examples
--------
>>> from shapely import box
>>> from parcelsearch.planning.tiling import tile
>>> [p.exterior.coords[0] for p in tile(box(-97.5, 32.7, -97.4, 32.8))]
[(-97.5, 32.7)]
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Public name → the module that defines it (imported on first use).
_LAZY = {
    "BUDGET_PAGE": "request_budget",
    "Budget": "request_budget",
    "GRID": "grid",
    "canonical_ring": "grid",
    "split_antimeridian": "antimeridian",
    "MIN_TOLERANCE": "covers",
    "check_tolerance": "covers",
    "cover": "covers",
    "MATCH_RULES": "match_rule",
    "check_match": "match_rule",
    "TilingMemo": "pieces",
    "tile": "pieces",
    "estimate": "bounds",
    "lower_bound": "bounds",
    "parts_bound": "bounds",
}

__all__ = [
    "BUDGET_PAGE",
    "GRID",
    "MATCH_RULES",
    "MIN_TOLERANCE",
    "Budget",
    "TilingMemo",
    "canonical_ring",
    "check_match",
    "check_tolerance",
    "cover",
    "estimate",
    "lower_bound",
    "parts_bound",
    "split_antimeridian",
    "tile",
]

if TYPE_CHECKING:
    from parcelsearch.planning.tiling.antimeridian import split_antimeridian
    from parcelsearch.planning.tiling.bounds import estimate, lower_bound, parts_bound
    from parcelsearch.planning.tiling.covers import MIN_TOLERANCE, check_tolerance, cover
    from parcelsearch.planning.tiling.grid import GRID, canonical_ring
    from parcelsearch.planning.tiling.match_rule import MATCH_RULES, check_match
    from parcelsearch.planning.tiling.pieces import TilingMemo, tile
    from parcelsearch.planning.tiling.request_budget import BUDGET_PAGE, Budget


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
