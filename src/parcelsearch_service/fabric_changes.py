"""Next month's fabric: a deterministic copy of a parcel fabric with known changes.

Cities change in neighbourhoods: a field is subdivided, a block is redeveloped (lots merged),
a block is demolished, new units are added to existing lots. :func:`next_month` applies such
edits to a fabric (the demo's, the synthetic one, any checked parcels frame) at a chosen rate,
clustered around a few centres or scattered, and returns the truth: every GroupID that
appeared or vanished, and by which edit.

Edits (each touches single-parcel groups only, so a vanished GroupID vanishes everywhere):

- ``split``: the lot is cut in two across its longer side; the old GroupID is removed, two
  new ones added (the first half keeps the parcel_id, the second is appended);
- ``merge``: the lot and its next neighbour (touching, next parcel_id) become one parcel
  under a new GroupID (two removed, one added);
- ``remove``: the parcel is demolished (one removed);
- ``add``: a new unit on the lot: a new parcel with the same footprint and a new GroupID,
  appended (one added);
- ``swap``: the parcel keeps its place and footprint, its GroupID is replaced (one removed,
  one added): the only edit that leaves every count equal.

Examples
--------
>>> from parcelsearch_service import synth
>>> month = next_month(synth.example_fabric().parcels, rate=0.05, seed=1)
>>> sorted(month.truth.columns)
['change', 'edit', 'group_id', 'parcel_id']
>>> next_month(synth.example_fabric().parcels, rate=0.05, seed=1).truth.equals(month.truth)
True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from parcelsearch_service.store import load_parcels
from parcelsearch_service.synth import group_ids

__all__ = ["NextMonth", "next_month", "EDITS", "LAYOUTS"]

Edit = Literal["split", "merge", "remove", "add", "swap"]
#: Edits that change how many parcels a search counts (all but ``swap``).
EDITS: tuple[str, ...] = ("split", "merge", "remove", "add")
LAYOUTS: tuple[str, ...] = ("clustered", "scattered")
_TRUTH_COLUMNS = ["group_id", "change", "edit", "parcel_id"]


@dataclass(frozen=True)
class NextMonth:
    """A changed fabric and the truth about it.

    Attributes
    ----------
    parcels
        The new fabric (``parcel_id``, ``group_id``, geometry, any other columns kept),
        sorted by ``parcel_id``.
    truth
        One row per GroupID that changed: ``group_id``, ``change`` (``added`` or
        ``removed``), ``edit`` (split, merge, remove, add, swap) and the ``parcel_id`` it
        was on (before for removals, after for additions).
    """

    parcels: gpd.GeoDataFrame
    truth: pd.DataFrame

    @property
    def changed(self) -> set[str]:
        """Every GroupID added or removed."""
        return set(self.truth["group_id"])

    def of_edits(self, edits: Iterable[str]) -> set[str]:
        """The GroupIDs changed by ``edits`` (e.g. :data:`EDITS`: those that change counts)."""
        wanted = set(edits)
        return set(self.truth.loc[self.truth["edit"].isin(wanted), "group_id"])


class _Editor:
    """The edits of one derivation, applied to plain lists, then turned into a frame."""

    def __init__(self, frame: gpd.GeoDataFrame, rng: np.random.Generator) -> None:
        self.frame = frame
        self.rng = rng
        self.geometry = list(frame.geometry.array)
        self.gids = list(frame["group_id"])
        self.keep = np.ones(len(frame), dtype=bool)
        self.added: list[tuple[int, str, shapely.Geometry]] = []  # (parcel_id, gid, footprint)
        self.truth: list[tuple[str, str, str, int]] = []
        self.used = np.zeros(len(frame), dtype=bool)
        self.next_id = int(frame["parcel_id"].max()) + 1 if len(frame) else 1
        self.taken = set(self.gids)

    def new_gid(self) -> str:
        while True:
            gid = str(group_ids(1, self.rng)[0])
            if gid not in self.taken:
                self.taken.add(gid)
                return gid

    def _pid(self, i: int) -> int:
        return int(self.frame["parcel_id"].iat[i])

    def _removed(self, i: int, edit: str) -> None:
        self.truth.append((self.gids[i], "removed", edit, self._pid(i)))

    def _append(self, gid: str, footprint: shapely.Geometry, edit: str) -> None:
        pid = self.next_id
        self.next_id += 1
        self.added.append((pid, gid, footprint))
        self.truth.append((gid, "added", edit, pid))

    def _rekey(self, i: int, edit: str) -> str:
        self._removed(i, edit)
        gid = self.new_gid()
        self.gids[i] = gid
        self.truth.append((gid, "added", edit, self._pid(i)))
        return gid

    def apply(self, i: int, edit: str, single: np.ndarray) -> bool:
        """Apply ``edit`` to row ``i``; ``False`` when it does not fit there (nothing done)."""
        if self.used[i]:
            return False
        if edit == "merge":
            return self._merge(i, single)
        if edit == "split":
            halves = _halves(self.geometry[i])
            if halves is None:
                return False
            self._rekey(i, "split")
            self.geometry[i] = halves[0]
            self._append(self.new_gid(), halves[1], "split")
        elif edit == "remove":
            self._removed(i, "remove")
            self.keep[i] = False
        elif edit == "add":
            self._append(self.new_gid(), self.geometry[i], "add")
        else:
            self._rekey(i, "swap")
        self.used[i] = True
        return True

    def _merge(self, i: int, single: np.ndarray) -> bool:
        j = i + 1
        if j >= len(self.gids) or self.used[j] or not single[j]:
            return False
        a, b = self.geometry[i], self.geometry[j]
        if shapely.distance(a, b) > 1e-9:
            return False
        merged = shapely.union(a, b)
        if merged.geom_type != "Polygon":
            return False
        self._removed(j, "merge")
        self.keep[j] = False
        self._rekey(i, "merge")
        self.geometry[i] = merged
        self.used[i] = self.used[j] = True
        return True

    def result(self) -> NextMonth:
        frame = self.frame.copy()
        frame["group_id"] = self.gids
        frame = frame.set_geometry(gpd.GeoSeries(self.geometry, index=frame.index, crs=frame.crs))
        frame = frame[self.keep]
        if self.added:
            pids, gids, shapes = zip(*self.added, strict=True)
            extra = gpd.GeoDataFrame(
                {"parcel_id": np.array(pids, dtype=np.int64), "group_id": list(gids)},
                geometry=list(shapes),
                crs=frame.crs,
            )
            frame = pd.concat([frame, extra], ignore_index=True)
        frame = gpd.GeoDataFrame(frame, geometry="geometry", crs=self.frame.crs)
        frame = frame.sort_values("parcel_id", kind="stable").reset_index(drop=True)
        truth = pd.DataFrame(self.truth, columns=_TRUTH_COLUMNS)
        return NextMonth(frame, truth.astype({"parcel_id": "int64"}))


def _halves(polygon: shapely.Geometry) -> tuple[shapely.Polygon, shapely.Polygon] | None:
    """A quadrilateral lot cut in two across its longer side (``None``: not a quadrilateral)."""
    if polygon.geom_type != "Polygon" or len(polygon.interiors):
        return None
    ring = np.asarray(polygon.exterior.coords)
    if len(ring) != 5:
        return None
    c0, c1, c2, c3 = ring[:4]
    if np.hypot(*(c1 - c0)) < np.hypot(*(c2 - c1)):
        c0, c1, c2, c3 = c1, c2, c3, c0
    m01, m32 = (c0 + c1) / 2, (c3 + c2) / 2
    return shapely.Polygon([c0, m01, m32, c3]), shapely.Polygon([m01, c1, c2, m32])


def _order(
    frame: gpd.GeoDataFrame,
    candidates: np.ndarray,
    layout: str,
    clusters: int,
    edits: Sequence[str],
    rng: np.random.Generator,
) -> list[tuple[int, str]]:
    """(row, edit) in the order edits are tried: nearest-first around each cluster centre
    (one edit a neighbourhood, in turn), or a random order with random edits."""
    if layout == "scattered":
        order = rng.permutation(candidates)
        kinds = rng.choice(list(edits), size=len(order))
        return [(int(i), str(k)) for i, k in zip(order, kinds, strict=True)]
    points = shapely.point_on_surface(np.asarray(frame.geometry.array, dtype=object))
    x, y = shapely.get_x(points), shapely.get_y(points)
    centres = rng.choice(candidates, size=min(clusters, len(candidates)), replace=False)
    queues = [
        candidates[np.argsort(np.hypot(x[candidates] - x[c], y[candidates] - y[c]), kind="stable")]
        for c in centres
    ]
    out: list[tuple[int, str]] = []
    for rank in range(len(candidates)):
        for n, queue in enumerate(queues):
            out.append((int(queue[rank]), edits[n % len(edits)]))
    return out


def next_month(
    parcels: gpd.GeoDataFrame | None = None,
    rate: float = 0.01,
    *,
    layout: str = "clustered",
    clusters: int = 4,
    edits: Sequence[str] = EDITS,
    swaps: int = 0,
    swap_parcels: Sequence[int] = (),
    seed: int = 0,
) -> NextMonth:
    """Derive next month's fabric from ``parcels`` with known changes.

    Parameters
    ----------
    parcels
        A parcels frame (``parcel_id`` numeric, ``group_id``, footprints); ``None``: the demo.
    rate
        Fraction of the parcels an edit touches (0 ≤ rate ≤ 1): ``round(rate × n)`` edits,
        at least one when ``rate > 0``.
    layout
        ``"clustered"``: edits packed around ``clusters`` centres, one kind of edit a
        neighbourhood (subdivision, redevelopment, demolished block, new units);
        ``"scattered"``: anywhere, edits drawn at random.
    edits
        The kinds of count-changing edits used (see the module's docstring).
    swaps, swap_parcels
        Same-count swaps: on the parcels whose ``parcel_id`` is in ``swap_parcels`` (e.g.
        parcels deep in a piece's pages; applied after the other edits, which they leave
        as they are), and on ``swaps`` random parcels.
    seed
        The same arguments and seed always give the same fabric and truth.

    Raises
    ------
    ValueError
        A rate outside [0, 1], an unknown layout or edit, a swap parcel that is not there
        or not alone in its group, or a fabric with too few parcels that fit the edits.
    """
    if not 0 <= rate <= 1:
        raise ValueError(f"rate must be between 0 and 1, got {rate!r}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    unknown = [e for e in edits if e not in EDITS]
    if unknown or not edits:
        raise ValueError(f"edits must be some of {', '.join(EDITS)}, got {list(edits)!r}")
    frame = load_parcels(parcels) if parcels is None else parcels.copy()
    if not pd.api.types.is_integer_dtype(frame["parcel_id"]):
        raise ValueError(
            "next_month needs whole-number parcel_id values (new parcels are "
            "numbered after the largest)"
        )
    frame = frame.sort_values("parcel_id", kind="stable").reset_index(drop=True)
    rng = np.random.default_rng(seed)
    editor = _Editor(frame, rng)
    single = ~frame["group_id"].duplicated(keep=False).to_numpy()
    chosen = [_row_of(frame, pid, single) for pid in swap_parcels]  # checked before editing
    candidates = np.flatnonzero(single & ~editor.used)
    wanted = 0 if rate == 0 else max(1, round(rate * len(frame)))
    done = 0
    for i, edit in _order(frame, candidates, layout, clusters, edits, rng):
        if done >= wanted:
            break
        done += editor.apply(i, edit, single)
    if done < wanted:
        raise ValueError(f"only {done} of the {wanted} edits asked for fit this fabric")
    for row, pid in zip(chosen, swap_parcels, strict=True):  # after the edits: same edits
        if not editor.apply(row, "swap", single):
            raise ValueError(
                f"swap parcel {pid!r} was already edited by this derivation; choose another"
            )
    for i in rng.permutation(np.flatnonzero(single & ~editor.used))[:swaps]:
        editor.apply(int(i), "swap", single)
    return editor.result()


def _row_of(frame: gpd.GeoDataFrame, pid: int, single: np.ndarray) -> int:
    rows = np.flatnonzero(frame["parcel_id"].to_numpy() == pid)
    if len(rows) != 1 or not single[rows[0]]:
        raise ValueError(f"swap parcel {pid!r} is not a parcel alone in its group")
    return int(rows[0])
