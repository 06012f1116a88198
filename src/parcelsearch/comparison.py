"""Comparing two searches of the same study areas: which GroupIDs appeared, which vanished.

A side of a comparison (:class:`Side`) is a :class:`~parcelsearch.SearchResult`, an output
file written by ``parcelsearch search --out`` (``.parquet``, ``.csv`` with its sidecar,
``.gpkg``, ``.geojson``) or a run id from the run history. :func:`compare` gives a
:class:`Diff`: one row per (area id, ``group_id``, ``change`` ∈ {added, removed}), a
per-area summary, and the pieces that changed (a map layer).

Two sides compare only when they searched the same areas (same ids, same geometries where
both sides know them) with the same tolerance: a piece reaching ``t`` metres outside an area
finds GroupIDs there, which would read as changes. Anything else is refused, saying what
differs and what would compare. Areas that one side did not finish are left out of the rows
(their summary says ``comparable`` False).

Examples
--------
>>> diff = new_result.diff(old_result)  # doctest: +SKIP
>>> diff.rows.head()  # doctest: +SKIP
>>> diff.summary  # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import geopandas as gpd
import pandas as pd
import pyarrow as pa
import shapely

from parcelsearch import notices
from parcelsearch.errors import Hint, InputError, NotComparableError
from parcelsearch.formats import ARROW_STRING, FORMATS, suffixes
from parcelsearch.kept_files import atomically

if TYPE_CHECKING:
    from parcelsearch.stores.history import History

__all__ = ["Side", "Diff", "compare", "NotComparableError", "CHANGES"]

#: The values of :attr:`Diff.rows` ``change``.
CHANGES = ("added", "removed")
_SUMMARY = [
    "before",
    "after",
    "added",
    "removed",
    "pieces",
    "read",
    "inferred",
    "sampled",
    "changed_pieces",
    "comparable",
]


@dataclass(frozen=True)
class Side:
    """One search as a comparison sees it.

    Attributes
    ----------
    ids
        One row per (area id, ``group_id``).
    id_name
        The area id column.
    areas
        The area ids searched, in order.
    tolerance
        The run's tolerance in metres (``None``: unknown).
    areas_fingerprint
        :func:`parcelsearch.stores.history.areas_fingerprint` of the areas (``None``:
        unknown).
    areas_complete
        The areas searched to their last page.
    pieces
        The pieces (area id, ``piece_id``, ``rows``, ``status``, ``changed``, geometry), or
        ``None`` when the side does not know them.
    label
        How messages name this side.
    """

    ids: pd.DataFrame
    id_name: str
    areas: list[Hashable]
    tolerance: float | None
    areas_fingerprint: str | None
    areas_complete: list[Hashable]
    pieces: gpd.GeoDataFrame | None = None
    label: str = ""

    @classmethod
    def of_file(cls, path: str | os.PathLike[str]) -> Side:
        """The side of a GroupIDs file written by ``parcelsearch search --out``.

        Raises
        ------
        InputError
            Not such a file (missing, another format, no run metadata).
        """
        file = Path(path)
        if not file.exists():
            raise InputError(
                f"{str(file)!r} does not exist: give an output of "
                "'parcelsearch search --out' or a run id from 'parcelsearch runs'",
                hints=[Hint("runs", None, "list run ids with {knob}")],
            )
        suffix = file.suffix.lower()
        readable = suffixes("rows", "areas")  # what --out writes
        if suffix not in readable:
            raise InputError(
                f"cannot compare {str(file)!r}: {suffix or 'no extension'} is not "
                f"one of {', '.join(readable)} (the outputs of --out)"
            )
        if not file.is_file():
            raise InputError(f"cannot compare {str(file)!r}: it is not a regular file")
        try:
            ids, meta = FORMATS[suffix].read_back(file)
            return _side_of(ids, meta, str(file))
        except InputError:
            raise
        except _UNREADABLE as exc:  # a damaged or foreign file: the input's fault, said so
            reason = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise InputError(
                f"cannot compare {str(file)!r}: it is not a readable {suffix} output of "
                f"'parcelsearch search --out' ({type(exc).__name__}: {reason})",
                field="file",
            ) from None

    @classmethod
    def of_run(cls, history: History, run_id: str) -> Side:
        """The side of a run recorded in the run history (an id or a unique prefix)."""
        run = history.run(run_id)
        pieces = history.pieces(run["run_id"])
        id_name = str(run.get("id_name") or "area_id")
        ids = history.ids(run["run_id"], id_name)
        geometry = [_ring_polygon(r) for r in pieces["ring"]]
        frame = gpd.GeoDataFrame(
            pieces.drop(columns="ring").rename(columns={"area_id": id_name}),
            geometry=geometry,
            crs="EPSG:4326",
        )
        return cls(
            ids,
            id_name,
            list(run["areas_ids"]),
            float(run["tolerance"]),
            str(run["areas_fingerprint"]),
            list(run["areas_complete"]),
            frame,
            f"run {str(run['run_id'])[:12]}",
        )


#: What reading a damaged or foreign file raises (the readers' own errors): an input error.
_UNREADABLE: tuple[type[BaseException], ...] = (
    OSError,
    ValueError,
    KeyError,
    IndexError,
    TypeError,
    AttributeError,
    RuntimeError,
    pa.ArrowException,
)


def _ring_polygon(ring: str) -> shapely.Polygon:
    return shapely.Polygon(json.loads(ring))


def _side_of(ids: pd.DataFrame, meta: dict[str, Any], label: str) -> Side:
    if not meta:
        raise InputError(
            f"{label} carries no run metadata (was it written by "
            "'parcelsearch search --out'?): nothing says which areas and "
            "tolerance it searched"
        )
    if not isinstance(meta, dict):
        raise InputError(f"{label}: its run metadata is not a JSON object")
    id_name = str(meta.get("id_column") or (ids.columns[0] if len(ids.columns) else ""))
    if id_name not in ids.columns or "group_id" not in ids.columns:
        raise InputError(f"{label} lacks the columns {id_name[:60]!r} and 'group_id'")
    areas, complete = meta.get("areas", []), meta.get("areas_complete", meta.get("areas", []))
    tolerance = meta.get("tolerance")
    if not isinstance(areas, list) or not isinstance(complete, list):
        raise InputError(f"{label}: its run metadata's areas are not lists")
    if tolerance is not None and (
        isinstance(tolerance, bool)
        or not isinstance(tolerance, int | float)
        or not math.isfinite(tolerance)
    ):
        raise InputError(
            f"{label}: its run metadata's tolerance is not a number ({str(tolerance)[:40]!r})"
        )
    ids = ids[[id_name, "group_id"]]
    if not _strings(ids["group_id"]):
        raise InputError(
            f"{label}: its group_id column holds "
            f"{pd.api.types.infer_dtype(ids['group_id'], skipna=True)} values, "
            "not GroupIDs (text)"
        )
    missing = ids[id_name].isna() | ids["group_id"].isna()
    if missing.any():  # no id: nothing to compare; said, never counted as a change
        notices.warn(
            notices.ParcelSearchWarning(
                f"{label}: {int(missing.sum())} rows without an area id or group_id are ignored"
            )
        )
        ids = ids[~missing]
    return Side(
        ids.astype({"group_id": ARROW_STRING}),
        id_name,
        areas,
        None if tolerance is None else float(tolerance),
        meta.get("areas_fingerprint"),
        complete,
        None,
        label,
    )


def _strings(column: pd.Series) -> bool:
    """Whether a column holds text (or nothing but missing values): GroupIDs are strings."""
    return pd.api.types.is_string_dtype(column.dtype) and pd.api.types.infer_dtype(
        column, skipna=True
    ) in ("string", "empty")


@dataclass(frozen=True)
class Diff:
    """What changed between two searches of the same areas.

    Attributes
    ----------
    rows
        One row per (area id, ``group_id``, ``change``): ``added`` (only in the new search)
        or ``removed`` (only in the old one); areas both searches finished.
    summary
        Per area: GroupIDs ``before`` and ``after``, ``added``, ``removed``, the new search's
        ``pieces`` and how it knows them (``read``, ``inferred`` unchanged from page 1,
        ``sampled`` to check that inference), ``changed_pieces``, and ``comparable``
        (both searches finished the area). The piece columns are missing values (``<NA>``)
        when the new side does not know its pieces (an output file of GroupIDs alone), never
        zeros.
    pieces
        The new search's pieces that changed (``changed`` true, or ``rows`` different from
        the old search's same piece): a map layer (:meth:`map`).
    old, new
        How the two sides are named.
    """

    rows: pd.DataFrame
    summary: pd.DataFrame
    pieces: gpd.GeoDataFrame | None
    old: str
    new: str
    id_name: str = "area_id"
    notes: list[str] = field(default_factory=list)

    @property
    def added(self) -> int:
        """GroupID rows added."""
        return int((self.rows["change"] == "added").sum())

    @property
    def removed(self) -> int:
        """GroupID rows removed."""
        return int((self.rows["change"] == "removed").sum())

    def __repr__(self) -> str:
        changed = "pieces unknown" if self.pieces is None else f"{len(self.pieces)} pieces changed"
        return (
            f"<Diff {self.old} → {self.new}: {self.added} added, {self.removed} removed "
            f"in {int(self.summary['comparable'].sum())} areas, {changed}>"
        )

    def to_file(self, path: str | os.PathLike[str]) -> Path:
        """Write :attr:`rows` (``.parquet`` or ``.csv``, by extension), whole."""
        out = Path(path)
        suffix = out.suffix.lower()
        if suffix not in suffixes("rows"):
            raise InputError(
                f"cannot write the diff to {str(out)!r}: use {' or '.join(suffixes('rows'))}",
                hints=[Hint("out", "diff.csv", "for example {knob}")],
            )
        out.parent.mkdir(parents=True, exist_ok=True)
        write = FORMATS[suffix].writer("rows")
        return atomically(out, lambda temp: write(self.rows, temp, {}))

    def map(self, **kwargs: Any) -> Any:
        """An ipyleaflet map of the pieces that changed (see :attr:`pieces`)."""
        from parcelsearch.maps import areas_map

        if self.pieces is None or self.pieces.empty:
            raise InputError("no piece is known to have changed: nothing to map")
        layer = self.pieces.set_index([self.id_name, "piece_id"]).reset_index(drop=True)
        return areas_map(layer, **kwargs)


def _check_comparable(old: Side, new: Side) -> None:
    """Refuse two sides that did not search the same areas with the same tolerance."""
    if old.id_name != new.id_name:
        raise NotComparableError(
            f"{old.label} names its areas by {old.id_name!r}, {new.label} by {new.id_name!r}: "
            "compare searches of the same study areas",
            hints=[Hint("id_column", old.id_name, "search again with {knob}")],
        )
    only_old = [a for a in old.areas if a not in set(new.areas)]
    only_new = [a for a in new.areas if a not in set(old.areas)]
    if only_old or only_new:
        common = [a for a in new.areas if a in set(old.areas)]
        parts = [
            f"only {old.label} has areas {_few(only_old)}" if only_old else "",
            f"only {new.label} has areas {_few(only_new)}" if only_new else "",
        ]
        raise NotComparableError(
            f"{'; '.join(p for p in parts if p)}: the two searches are comparable on "
            f"{len(common)} common areas ({_few(common)}); search those areas in both to "
            "compare them"
        )
    if (
        old.areas_fingerprint
        and new.areas_fingerprint
        and old.areas_fingerprint != new.areas_fingerprint
    ):
        raise NotComparableError(
            f"{old.label} and {new.label} searched areas with the same ids but different "
            "geometries: a changed outline, not the city, would show as changes; search the "
            "same areas in both"
        )
    if old.tolerance is None or new.tolerance is None:
        return
    if not math.isclose(old.tolerance, new.tolerance, abs_tol=1e-9):
        raise NotComparableError(
            f"{old.label} searched with tolerance {old.tolerance:g} m, {new.label} with "
            f"{new.tolerance:g} m: pieces reaching different distances outside the areas find "
            "different GroupIDs there, which would read as changes; the areas and ids are "
            "comparable only at one tolerance",
            hints=[Hint("tolerance", f"{old.tolerance:g}", "search again with {knob}")],
        )


def _few(values: Sequence[Hashable], most: int = 5) -> str:
    shown = ", ".join(repr(_plain(v)) for v in values[:most])
    return shown + (f" and {len(values) - most} more" if len(values) > most else "") or "none"


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _changed_pieces(old: Side, new: Side) -> gpd.GeoDataFrame | None:
    """The new side's pieces that changed: flagged so by the run, or ``rows`` different."""
    if new.pieces is None:
        return None
    pieces = new.pieces
    keys = [new.id_name, "piece_id"]
    changed = pd.Series(False, index=pieces.index)
    if "changed" in pieces.columns:
        changed |= (
            pieces["changed"]
            .map(lambda v: bool(v) if v is not None and not pd.isna(v) else False)
            .astype(bool)
        )
    if old.pieces is not None and "rows" in old.pieces.columns:
        before = pd.DataFrame(old.pieces)[[*keys, "rows"]].rename(columns={"rows": "rows_before"})
        joined = pd.DataFrame(pieces)[keys].merge(before, on=keys, how="left")
        rows_before = pd.to_numeric(joined["rows_before"], errors="coerce").to_numpy()
        rows_after = pd.to_numeric(pieces["rows"], errors="coerce").to_numpy()
        known = ~(pd.isna(rows_before) | pd.isna(rows_after))
        changed |= pd.Series(known & (rows_before != rows_after), index=pieces.index)
    columns = [c for c in (*keys, "rows", "status", "changed") if c in pieces.columns]
    out = pieces.loc[changed, [*columns, pieces.geometry.name]]
    return gpd.GeoDataFrame(out, geometry=pieces.geometry.name, crs=pieces.crs)


def _status_counts(side: Side) -> pd.DataFrame:
    names = ["pieces", "read", "inferred", "sampled"]
    if side.pieces is None:
        return pd.DataFrame(columns=names)
    frame = pd.DataFrame(side.pieces)
    status = frame["status"] if "status" in frame.columns else pd.Series("read", index=frame.index)
    grouped = frame.assign(_s=status).groupby(side.id_name, sort=False)["_s"]
    return pd.DataFrame(
        {
            "pieces": grouped.size(),
            "read": grouped.agg(lambda s: int((s == "read").sum())),
            "inferred": grouped.agg(lambda s: int((s == "inferred").sum())),
            "sampled": grouped.agg(lambda s: int((s == "sampled").sum())),
        }
    )


def _known_counts(counts: pd.Series, known: bool) -> Any:
    """Counts per area: an area without pieces has 0 where the pieces are known, and every
    count is missing (``<NA>``, never 0) where they are not (a file of GroupIDs alone)."""
    return (counts.fillna(0) if known else counts).astype("Int64").to_numpy()


def compare(old: Side, new: Side) -> Diff:
    """What changed from ``old`` to ``new`` (see the module's docstring).

    Raises
    ------
    NotComparableError
        Different areas (ids or geometries) or tolerance; the message says what differs and
        what is comparable.
    """
    _check_comparable(old, new)
    id_name = new.id_name
    comparable = [
        a for a in new.areas if a in set(old.areas_complete) and a in set(new.areas_complete)
    ]
    rows = _changes(old.ids, new.ids, id_name, comparable)
    rows = rows.sort_values([id_name, "group_id", "change"], key=_sort_key, kind="stable")
    rows = rows.reset_index(drop=True).astype({"group_id": "string"})
    summary = pd.DataFrame(index=pd.Index(new.areas, name=id_name))
    summary["before"] = _per_area(old.ids, id_name, new.areas)
    summary["after"] = _per_area(new.ids, id_name, new.areas)
    summary["added"] = _per_area(rows[rows["change"] == "added"], id_name, new.areas)
    summary["removed"] = _per_area(rows[rows["change"] == "removed"], id_name, new.areas)
    counts = _status_counts(new).reindex(new.areas)
    for column in ("pieces", "read", "inferred", "sampled"):
        summary[column] = _known_counts(counts[column], new.pieces is not None)
    pieces = _changed_pieces(old, new)
    changed = pieces.groupby(id_name).size() if pieces is not None else pd.Series(dtype="int64")
    summary["changed_pieces"] = _known_counts(changed.reindex(new.areas), pieces is not None)
    summary["comparable"] = [a in comparable for a in new.areas]
    return Diff(rows, summary[_SUMMARY], pieces, old.label or "old", new.label or "new", id_name)


def _sort_key(column: pd.Series) -> pd.Series:
    return column.map(str) if column.dtype == object else column


def _changes(
    old: pd.DataFrame, new: pd.DataFrame, id_name: str, comparable: list[Hashable]
) -> pd.DataFrame:
    """The (area id, ``group_id``, ``change``) rows of the comparable areas, found by Arrow's
    set lookups on one key per row (no Python object per row); when the two sides' area ids
    are of different kinds, by sets of plain values."""
    import pyarrow.compute as pc

    columns = [id_name, "group_id"]
    if old[id_name].dtype != new[id_name].dtype:
        return _changes_by_sets(old, new, id_name, comparable)
    keys = []
    for frame in (old, new):
        area, group = (pc.cast(pa.array(frame[c], from_pandas=True), pa.string()) for c in columns)
        keys.append(pc.binary_join_element_wise(area, group, "\x1f"))
    parts = []
    for frame, key, other, change in (
        (new, keys[1], keys[0], "added"),
        (old, keys[0], keys[1], "removed"),
    ):
        only = pc.invert(pc.is_in(key, value_set=other)).to_numpy(zero_copy_only=False)
        picked = frame.loc[only, columns]
        parts.append(picked[picked[id_name].isin(comparable)].assign(change=change))
    rows: pd.DataFrame = pd.concat(parts, ignore_index=True).astype({"group_id": "string"})
    unique: pd.DataFrame = rows.drop_duplicates().reset_index(drop=True)
    return unique


def _changes_by_sets(
    before: pd.DataFrame, after: pd.DataFrame, id_name: str, comparable: list[Hashable]
) -> pd.DataFrame:
    old, new = (_keyed(frame, id_name) for frame in (before, after))  # 1 and "1" differ
    return pd.DataFrame(
        [(a, g, "added") for a, g in new.difference(old) if a in comparable]
        + [(a, g, "removed") for a, g in old.difference(new) if a in comparable],
        columns=[id_name, "group_id", "change"],
    )


def _keyed(ids: pd.DataFrame, id_name: str) -> set[tuple[Any, str]]:
    return {(_plain(a), str(g)) for a, g in zip(ids[id_name], ids["group_id"], strict=True)}


def _per_area(ids: pd.DataFrame, id_name: str, areas: list[Hashable]) -> list[int]:
    counts = ids.groupby(id_name)["group_id"].nunique() if len(ids) else pd.Series(dtype=int)
    plain = {_plain(k): int(v) for k, v in counts.items()}
    return [plain.get(_plain(a), 0) for a in areas]
