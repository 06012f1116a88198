"""The result of a search: tidy GroupIDs, the tiles sent, a per-area summary and prices."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import geopandas as gpd
import pandas as pd

from parcelsearch.errors import Hint, InputError
from parcelsearch.formats import FORMATS, METADATA_KEY
from parcelsearch.kept_files import atomically, check_replace
from parcelsearch.notices import NothingMatchedWarning, OldPagesWarning
from parcelsearch.settings import ZONING_PRICES

if TYPE_CHECKING:
    from parcelsearch.comparison import Diff, Side
    from parcelsearch.planning.plans import Plan

__all__ = [
    "SearchResult",
    "zoning_price",
    "skipped_frame",
    "age_text",
    "METADATA_KEY",
    "OLD_PAGES_AFTER",
]

#: Age past which the pages a search served from the cache are called old (a notice).
OLD_PAGES_AFTER = timedelta(days=1)


def age_text(age: timedelta) -> str:
    """An age in the largest whole unit: ``31 days``, ``5 hours``, ``12 minutes``,
    ``40 seconds`` (``1 day``, never ``0 days``)."""
    seconds = max(0, int(age.total_seconds()))
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60), ("second", 1)):
        if seconds >= size or unit == "second":
            count = seconds // size
            return f"{count:,} {unit}{'s' * (count != 1)}"
    raise AssertionError("unreachable")  # pragma: no cover


def skipped_frame(
    areas: gpd.GeoDataFrame, *, reason: str = "", market: Any = None, suggestion: Any = None
) -> gpd.GeoDataFrame:
    """Areas left out before spending: ``market``, ``reason``, ``suggestion`` and geometry,
    indexed like ``areas`` (the one shape of :attr:`SearchResult.skipped`)."""
    return gpd.GeoDataFrame(
        {
            "market": pd.Series(market, index=areas.index, dtype="object"),
            "reason": pd.Series(reason, index=areas.index, dtype="object"),
            "suggestion": pd.Series(suggestion, index=areas.index, dtype="object"),
        },
        geometry=areas.geometry.values,
        crs=areas.crs,
        index=areas.index,
    )


def zoning_price(group_ids: int, tier: str = "basic") -> float:
    """What zoning calls for ``group_ids`` GroupIDs cost at the vendor's price for ``tier``.

    Parameters
    ----------
    group_ids
        Number of zoning calls (one per unique GroupID).
    tier
        ``"basic"`` ($0.29), ``"enhanced"`` ($0.49) or ``"premium"`` ($0.69).

    Raises
    ------
    InputError
        An unknown tier (the message lists the known ones).

    Examples
    --------
    >>> zoning_price(100, "enhanced")
    49.0
    """
    try:
        price = ZONING_PRICES[tier.lower()]
    except KeyError:
        tiers = ", ".join(ZONING_PRICES)
        raise InputError(
            f"unknown zoning tier {tier!r}: use one of {tiers}", field="tier"
        ) from None
    return round(group_ids * price, 2)


@dataclass
class SearchResult:
    """Everything one search produced.

    Attributes
    ----------
    ids
        One row per (area id, ``group_id``), deduplicated and sorted: merge it onto your own
        table by ``group_id``. With a tolerance, also ``may_lie_outside``: found only by
        pieces reaching beyond the area (the parcel may lie up to the tolerance outside);
        in any search, also True for a GroupID listed for two areas whose finding pieces
        meet across a boundary (the parcel lies within 22 cm of both and may be outside
        either). An exact search has the column only when it marks something.
    tiles
        The pieces sent: area id, ``piece_id``, ``rows``, ``pages``, ``calls`` (network calls
        made for the piece in this run), ``cached_pages``, ``from_cache`` and geometry.
    plan
        The plan that was searched.
    calls
        Network calls made in this run (retries and probes included).
    probes
        Of :attr:`calls`, those the run spent probing the vendor (its page numbering with
        ``page=0``, page 1 read again to check its order): within the budget, and shown.
    cached_pages
        Pages served from the response cache instead of the network.
    skipped
        Areas left out before spending (e.g. outside active markets): ``market``, ``reason``,
        ``suggestion`` and geometry (see :func:`skipped_frame`).
    complete
        Whether every area was searched to its last page.
    areas_complete
        The ids of the areas searched to their last page (all of them when ``complete``).
    refetched_pieces
        Pieces fetched again because their pages came from different answers.
    run_id
        The run's id in the run history (``parcelsearch runs``); empty when not recorded.
    refresh
        How cached pages were used: ``"cached"`` (reused where present), ``"all"`` (none
        reused) or ``"changed"`` (reused for the pieces whose page 1 had not changed).
    verification
        With ``refresh="changed"``: the verify sample (pieces sampled, found changed) and the
        estimate, with its 95 % interval, of changed pieces the inference missed.
    oldest_page
        When the oldest page served from the cache was fetched (UTC), ``None`` when none
        was (``metadata["oldest_page_fetched_at"]``; see :meth:`cache_age_text`).
    """

    ids: pd.DataFrame
    tiles: gpd.GeoDataFrame
    plan: Plan
    calls: int = 0
    cached_pages: int = 0
    probes: int = 0
    skipped: gpd.GeoDataFrame = field(
        default_factory=lambda: skipped_frame(gpd.GeoDataFrame(geometry=[], crs="EPSG:4326"))
    )
    complete: bool = True
    areas_complete: list[Hashable] | None = None
    refetched_pieces: int = 0
    run_id: str = ""
    refresh: str = "cached"
    verification: dict[str, Any] = field(default_factory=dict)
    oldest_page: datetime | None = None

    def __post_init__(self) -> None:
        if self.areas_complete is None:
            self.areas_complete = _complete_areas(self)

    @property
    def metadata(self) -> dict[str, Any]:
        """What this run did, as written into outputs (JSON-ready)."""
        return {
            "complete": bool(self.complete),
            "calls": int(self.calls),
            "probes": int(self.probes),
            "cached_pages": int(self.cached_pages),
            "areas_complete": [_plain(a) for a in self.areas_complete or []],
            "areas": [_plain(a) for a in self.plan.areas.index],
            "refetched_pieces": int(self.refetched_pieces),
            "tolerance": float(self.plan.tolerance),
            "match": self.plan.match,
            "oldest_page_fetched_at": (
                None if self.oldest_page is None else self.oldest_page.isoformat()
            ),
            **_refresh_metadata(self),
        }

    def diff(self, previous: SearchResult) -> Diff:
        """What changed from ``previous`` (an earlier search of the same areas) to this one.

        Returns
        -------
        parcelsearch.comparison.Diff
            ``rows`` (area id, ``group_id``, ``change`` ∈ {added, removed}), ``summary``
            (per area: before, after, added, removed, pieces read/inferred/sampled, changed
            pieces) and ``pieces`` (the pieces that changed, a map layer).

        Raises
        ------
        parcelsearch.comparison.NotComparableError
            Different areas or tolerance (the message says what is comparable).
        """
        from parcelsearch.comparison import compare

        return compare(previous._side("the previous result"), self._side("this result"))

    def _side(self, label: str) -> Side:
        """This result as one side of a comparison (:mod:`parcelsearch.comparison`)."""
        return _comparison_side(self, label)

    @property
    def nothing_matched(self) -> bool:
        """True when pieces were searched and not one parcel matched any of them (then check
        the CRS the areas are in, and that the service covers their markets)."""
        searched = self.tiles["pages"].notna()
        return bool(searched.any()) and int(self.tiles.loc[searched, "rows"].sum()) == 0

    def nothing_matched_warning(self) -> NothingMatchedWarning | None:
        """The notice a search gives when :attr:`nothing_matched`, else None."""
        return _nothing_matched_notice(self) if self.nothing_matched else None

    def cache_age_text(self, now: datetime | None = None) -> str:
        """How old the pages served from the cache are: ``the oldest fetched 31 days ago, on
        2026-10-27 09:12 UTC``; empty when no page came from the cache."""
        if self.oldest_page is None:
            return ""
        age = (now or datetime.now(UTC)) - self.oldest_page
        return (
            f"the oldest fetched {age_text(age)} ago, on "
            f"{self.oldest_page.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
        )

    def old_pages_warning(self, now: datetime | None = None) -> OldPagesWarning | None:
        """The notice a search gives when it served cached pages over
        :data:`OLD_PAGES_AFTER` old (how old, and how to re-check them), else None."""
        if (
            self.oldest_page is None
            or (now or datetime.now(UTC)) - self.oldest_page < OLD_PAGES_AFTER
        ):
            return None
        return _old_pages_notice(self.cached_pages, self.cache_age_text(now))

    @property
    def id_name(self) -> str:
        """Name of the area id column."""
        return self.plan.id_name

    @property
    def group_ids(self) -> pd.Index:
        """The unique GroupIDs over all areas, sorted."""
        unique: list[str] = sorted(self.ids["group_id"].unique())
        return pd.Index(unique, name="group_id")

    def summary(self) -> pd.DataFrame:
        """Per area, in the areas' order: matched parcels, unique GroupIDs, pieces, pages,
        calls and pages from cache."""
        tiles = pd.DataFrame(self.tiles.drop(columns="geometry"))
        per_area = tiles.groupby(self.id_name, sort=False).agg(
            parcels=("rows", "sum"),
            pieces=("piece_id", "count"),
            pages=("pages_fetched", "sum"),
            calls=("calls", "sum"),
            cached_pages=("cached_pages", "sum"),
        )
        unique = self.ids.groupby(self.id_name)["group_id"].nunique().rename("group_ids")
        out = per_area.join(unique).fillna({"group_ids": 0})
        out = out.reindex([a for a in self.plan.areas.index if a in out.index])
        out["group_ids"] = out["group_ids"].astype("int64")
        out["complete"] = out.index.isin(list(self.areas_complete or []))
        return out[["parcels", "group_ids", "pieces", "pages", "calls", "cached_pages", "complete"]]

    def zoning_cost(self, tier: str = "basic") -> float:
        """Price of one zoning call per unique GroupID at the vendor's ``tier`` price (USD)."""
        return zoning_price(len(self.group_ids), tier)

    def to_parquet(self, path: str | Path, *, force: bool = False) -> Path:
        """Write :attr:`ids` (area id column and ``group_id``) to a parquet file.

        The schema metadata holds :attr:`metadata` as JSON under the key ``parcelsearch``
        (``pyarrow.parquet.read_schema(path).metadata[b"parcelsearch"]``). The file is
        written whole (a temporary file renamed) and never replaces a more complete result:
        a partial one, or one that found nothing, beside a complete file that found
        something raises :class:`~parcelsearch.errors.OutputKeptError` and keeps the file,
        unless ``force=True``.

        Its schema is this method's own, kept for the files it has written: :attr:`ids` as
        they are, where ``--out`` and :meth:`to_file` join each area's columns and add the
        id column, areas skipped and version to the metadata. Written by the parquet row of
        :data:`parcelsearch.formats.FORMATS`, as they are.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {**self.metadata, "group_ids": int(len(self.group_ids))}
        check_replace(path, meta, force=force)
        write = FORMATS[".parquet"].writer("rows")
        return atomically(path, lambda temp: write(self.ids, temp, meta))

    def to_file(self, path: str | Path, *, force: bool = False) -> Path:
        """Write the GroupIDs in the format the extension names, as ``parcelsearch search
        --out`` does (:func:`parcelsearch.outputs.write_ids`: ``.parquet``, ``.csv``,
        ``.gpkg``, ``.geojson``), with the run's metadata; like
        :meth:`geopandas.GeoDataFrame.to_file`, the extension chooses the format.

        Raises
        ------
        InputError
            An extension not written, or a folder that cannot be written.
        OutputKeptError
            ``path`` holds a more complete result; it is kept (unless ``force=True``).
        """
        from parcelsearch.outputs import write_ids  # geodata writers: only when writing

        return write_ids(self, path, force=force)

    def map(self, **kwargs: Any) -> Any:
        """An ipyleaflet map of the areas, the pieces sent (coloured by parcels matched) and
        any areas skipped; see :func:`parcelsearch.maps.result_map`."""
        from parcelsearch.maps import result_map

        return result_map(self, **kwargs)

    def __repr__(self) -> str:
        figures = ", ".join(f"{k}={v}" for k, v in _figures(self).items())
        state = "" if self.complete else " INCOMPLETE"
        return f"<SearchResult{state} {figures}>"

    def _repr_html_(self) -> str:
        return _html(self)


def _plain(value: Any) -> Any:
    """A JSON-ready area id (numpy scalars become Python ones)."""
    return value.item() if hasattr(value, "item") else value


# -- what a result is made of, and how it is shown -------------------------------------


def _complete_areas(result: SearchResult) -> list[Hashable]:
    """Areas whose every piece was fetched to its last page (from :attr:`SearchResult.tiles`)."""
    areas = list(result.plan.areas.index)
    if result.complete or result.tiles.empty:
        return areas if result.complete else []
    tiles = result.tiles
    done = tiles["pages"].notna() & (tiles["pages_fetched"] >= tiles["pages"].fillna(-1))
    by_area = done.groupby(tiles[result.plan.id_name], sort=False).all()
    return [a for a in areas if bool(by_area.get(a, False))]


def _refresh_metadata(result: SearchResult) -> dict[str, Any]:
    """The run id, areas' fingerprint, refresh mode, piece statuses and verification."""
    from parcelsearch.stores.history import areas_fingerprint

    tiles = result.tiles
    statuses = tiles["status"].value_counts().to_dict() if "status" in tiles.columns else {}
    return {
        "run_id": result.run_id,
        "areas_fingerprint": areas_fingerprint(result.plan),
        "refresh": result.refresh,
        "pieces_by_status": {str(k): int(v) for k, v in statuses.items()},
        "verification": result.verification,
    }


def _comparison_side(result: SearchResult, label: str) -> Side:
    """``result`` as one side of a comparison (:mod:`parcelsearch.comparison`)."""
    from parcelsearch.comparison import Side
    from parcelsearch.stores.history import areas_fingerprint

    return Side(
        result.ids[[result.id_name, "group_id"]],
        result.id_name,
        list(result.plan.areas.index),
        float(result.plan.tolerance),
        areas_fingerprint(result.plan),
        list(result.areas_complete or []),
        result.tiles,
        label,
    )


def _nothing_matched_notice(result: SearchResult) -> NothingMatchedWarning:
    """The notice of a search in which no parcel matched (what it spent, what to check)."""
    areas, calls, cached = len(result.summary()), result.calls, result.cached_pages
    return NothingMatchedWarning(
        f"no parcel matched any of the {areas} area{'s' * (areas != 1)} searched "
        f"({calls} call{'s' * (calls != 1)} spent in this run, "
        f"{cached} page{'s' * (cached != 1)} from cache); areas "
        "far from every parcel usually mean coordinates in another CRS than declared, or "
        "a market the service does not cover",
        hints=[
            Hint("crs_override", None, "check the CRS and declare the right one with {knob}"),
            Hint("markets", None, "list the markets covered with {knob}"),
        ],
    )


def _old_pages_notice(pages: int, age: str) -> OldPagesWarning:
    """The notice of ``pages`` served from the cache, the oldest ``age`` old (how to re-check)."""
    return OldPagesWarning(
        f"{pages:,} page{'s' * (pages != 1)} came from the cache, "
        f"{age}: parcels may have changed since",
        hints=[
            Hint(
                "refresh",
                "changed",
                "re-check them with {knob} (one call a piece: page 1 of each piece, "
                "and the other pages of the pieces that changed)",
            ),
            Hint("max_age", "30d", "or refuse pages older than a month with {knob}"),
        ],
    )


def _figures(result: SearchResult) -> dict[str, Any]:
    """The figures a result's repr leads with."""
    return {
        "areas": int(result.plan.areas.shape[0]),
        "skipped areas": int(result.skipped.shape[0]),
        "pieces": int(result.tiles.shape[0]),
        "calls spent": int(result.calls),
        "pages from cache": int(result.cached_pages),
        "unique GroupIDs": int(len(result.group_ids)),
        "zoning price (basic)": f"${result.zoning_cost('basic'):,.2f}",
    }


def _html_figures(result: SearchResult) -> dict[str, str]:
    """The figures of :func:`_figures` for a notebook, with the price at every tier."""
    figures = {k: f"{v:,}" if isinstance(v, int) else v for k, v in _figures(result).items()}
    del figures["zoning price (basic)"]
    for tier in ("basic", "enhanced", "premium"):
        figures[f"zoning price ({tier})"] = f"${result.zoning_cost(tier):,.2f}"
    return figures


def _html(result: SearchResult) -> str:
    """A result in a notebook: its figures, and per area its summary (folded)."""
    rows = "".join(
        f"<tr><th style='text-align:left'>{k}</th><td>{v}</td></tr>"
        for k, v in _html_figures(result).items()
    )
    title = (
        "SearchResult"
        if result.complete
        else (
            f"SearchResult (incomplete: {len(result.areas_complete or [])} of "
            f"{len(result.plan.areas)} areas complete)"
        )
    )
    return (
        f"<div><strong>{title}</strong><table>{rows}</table>"
        f"<details><summary>per area</summary>{result.summary().to_html()}</details></div>"
    )
