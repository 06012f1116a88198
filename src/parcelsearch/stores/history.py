"""The run history's protocol and records, shared by its two twins.

A run history keeps what every search did: one row per run (run id, start and end time UTC,
the areas' fingerprint, the refresh mode and tolerance, the service's URL and path, the key's
fingerprint — never the key — calls spent, whether it completed), one row per piece (its
request ring's digest, ``rows``, ``pages``, and how this run knows its pages: ``read`` from the
network, ``inferred`` unchanged from page 1, ``sampled`` re-read to check the inference,
``cached``, or ``incomplete``), one digest per page, and the run's GroupIDs per area (so
``parcelsearch diff`` can compare two run ids).

:class:`History` holds the queries; its twins keep the tables:
:class:`parcelsearch.stores.local.history.RunHistory` in the ledger's SQLite file,
:class:`parcelsearch.stores.team.run_history.TeamRunHistory` in the team store
(:func:`parcelsearch.stores.open_history` picks one). Refresh (:func:`parcelsearch.search`
with ``refresh="changed"``) learns here what each piece's page 1 looked like last time;
:mod:`parcelsearch.comparison` compares two runs.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd
import shapely

from parcelsearch.errors import Hint, InputError

__all__ = [
    "History",
    "RunRecord",
    "PieceRecord",
    "Previous",
    "Nearby",
    "page_digest",
    "polygon_digest",
    "ring_box",
    "areas_fingerprint",
    "PIECE_STATUSES",
]

#: The longest request ring :meth:`History.nearby` reads (characters): no gateway takes a
#: request line of 64 KiB.
MOST_RING = 65536
#: The most records :meth:`History.nearby` reads, the nearest first.
NEARBY_ROWS = 1000
#: The most a run's blob of GroupIDs inflates (times its size) when read back.
MOST_INFLATED = 64

#: How a run knows a piece's pages.
PIECE_STATUSES = ("read", "inferred", "sampled", "cached", "incomplete")


def page_digest(rows: int, pages: int, data: Sequence[str]) -> str:
    """A page's digest: its counts and its GroupIDs in the service's order (32 hex)."""
    text = f"{rows}|{pages}|" + ",".join(data)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def polygon_digest(polygon_json: str) -> str:
    """The digest naming a piece's request ring across runs (32 hex)."""
    return hashlib.sha256(polygon_json.encode()).hexdigest()[:32]


class StudyAreas(Protocol):
    """What a fingerprint reads of a :class:`~parcelsearch.planning.plans.Plan`."""

    @property
    def id_name(self) -> str:
        """The areas' id column."""

    @property
    def areas(self) -> pd.DataFrame:
        """The areas, indexed by id, with their geometries."""


def areas_fingerprint(plan: StudyAreas) -> str:
    """The study areas' fingerprint: their ids, id column and geometries — each a sorted set
    of normalised polygons on a 1e-9° grid, so a file's round trip (a Polygon stored as a
    one-part MultiPolygon, the last digits of a coordinate) keeps it."""
    digest = hashlib.sha256(plan.id_name.encode())
    for area_id, geometry in zip(plan.areas.index, plan.areas.geometry.array, strict=True):
        digest.update(_area_key(area_id).encode())
        parts = shapely.get_parts(shapely.set_precision(geometry, 1e-9))
        for wkb in sorted(shapely.to_wkb(shapely.normalize(parts))):
            digest.update(wkb)
    return digest.hexdigest()[:16]


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _area_key(area_id: Hashable) -> str:
    return json.dumps(_plain(area_id))


def _area_value(text: str) -> Any:
    return json.loads(text)


@dataclass(frozen=True)
class PieceRecord:
    """What one run did with one piece.

    ``digests`` holds one digest per page known (page 1 first); ``changed`` is ``True`` /
    ``False`` against the previous record of the same ring, ``None`` when there was none.
    """

    area_id: Hashable
    piece_id: int
    polygon_json: str
    rows: int | None
    pages: int | None
    status: str
    changed: bool | None
    digests: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunRecord:
    """What one run did (see the module's docstring)."""

    run_id: str
    started: str
    finished: str
    fingerprint: str
    base_url: str
    path: str
    areas_fingerprint: str
    areas: int
    id_name: str
    tolerance: float
    mode: str
    complete: bool
    calls: int
    pieces: list[PieceRecord]
    ids: pd.DataFrame
    areas_ids: list[Any] = field(default_factory=list)
    areas_complete: list[Any] = field(default_factory=list)
    verification: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Previous:
    """The last record of one ring: counts and page digests (page 1 first)."""

    rows: int | None
    pages: int | None
    digests: tuple[str, ...]


@dataclass(frozen=True)
class Nearby:
    """A ring searched before, completely: its polygon JSON and the pages it had."""

    polygon_json: str
    pages: int


class History(ABC):
    """A run history: where runs are recorded and read back (see the module's docstring).

    :class:`parcelsearch.stores.local.history.RunHistory` keeps it in the ledger's SQLite
    file; :class:`parcelsearch.stores.team.run_history.TeamRunHistory` in the team's PostgreSQL
    store. Both hold the same tables and answer the same queries (written with ``?`` placeholders,
    ``{t}`` before a table's name and ``{seq}`` for the insertion order).
    """

    #: Where the history is, as it may be shown (no password).
    where: str

    @abstractmethod
    def _insert(self, rows: dict[str, list[tuple[Any, ...]]]) -> None:
        """Insert rows per table in one transaction (a row already there is kept or
        replaced: a run is recorded once)."""

    @abstractmethod
    def _select(self, query: str, args: Sequence[Any] = ()) -> pd.DataFrame:
        """The rows of one query (see the class's docstring for its dialect)."""

    # -- writing ---------------------------------------------------------------------

    def record(self, run: RunRecord) -> None:
        """Write one run (pieces, page digests, GroupIDs per area) in one transaction."""
        rows: dict[str, list[tuple[Any, ...]]] = {
            "runs": [
                (
                    run.run_id,
                    run.started,
                    run.finished,
                    run.fingerprint,
                    run.base_url,
                    run.path,
                    run.areas_fingerprint,
                    run.areas,
                    run.id_name,
                    float(run.tolerance),
                    run.mode,
                    int(run.complete),
                    int(run.calls),
                    json.dumps(
                        {
                            "areas": [_plain(a) for a in run.areas_ids],
                            "areas_complete": [_plain(a) for a in run.areas_complete],
                            "verification": run.verification,
                        }
                    ),
                )
            ],
            "rings": [],
            "run_pieces": [],
            "run_pages": [],
            "run_ids": [],
        }
        for piece in run.pieces:
            polygon = polygon_digest(piece.polygon_json)
            rows["rings"].append((polygon, piece.polygon_json, *ring_box(piece.polygon_json)))
            rows["run_pieces"].append(
                (
                    run.run_id,
                    _area_key(piece.area_id),
                    int(piece.piece_id),
                    polygon,
                    piece.rows,
                    piece.pages,
                    piece.status,
                    None if piece.changed is None else int(piece.changed),
                )
            )
            rows["run_pages"].extend(
                (run.run_id, polygon, k, d) for k, d in enumerate(piece.digests, 1)
            )
        for area_id, ids in run.ids.groupby(run.id_name, sort=False)["group_id"]:
            blob = zlib.compress("\n".join(sorted(map(str, ids))).encode())
            rows["run_ids"].append((run.run_id, _area_key(area_id), blob))
        self._insert(rows)

    # -- reading ---------------------------------------------------------------------

    def runs(self) -> pd.DataFrame:
        """One row per run, the latest first (see :func:`parcelsearch.runs`)."""
        query = """
            SELECT r.run_id, r.started, r.finished, r.mode, r.tolerance, r.areas,
                   r.areas_fingerprint, r.calls, r.complete, r.fingerprint AS key,
                   r.base_url, r.path,
                   COUNT(p.piece_id) AS pieces,
                   COALESCE(SUM(CASE WHEN p.status = 'read' THEN 1 ELSE 0 END), 0) AS read,
                   COALESCE(SUM(CASE WHEN p.status = 'inferred' THEN 1 ELSE 0 END), 0)
                       AS inferred,
                   COALESCE(SUM(CASE WHEN p.status = 'sampled' THEN 1 ELSE 0 END), 0)
                       AS sampled,
                   COALESCE(SUM(CASE WHEN p.status = 'cached' THEN 1 ELSE 0 END), 0) AS cached,
                   COALESCE(SUM(CASE WHEN p.changed = 1 THEN 1 ELSE 0 END), 0) AS changed,
                   r.id_name, r.detail{member}
            FROM {t}runs r LEFT JOIN {t}run_pieces p ON p.run_id = r.run_id
            GROUP BY r.run_id ORDER BY r.started DESC, r.{seq} DESC"""
        frame = self._select(query)
        for column in ("pieces", "read", "inferred", "sampled", "cached", "changed"):
            frame[column] = frame[column].astype("int64")
        frame["complete"] = frame["complete"].astype(bool)
        detail = frame.pop("detail").map(_detail)
        frame["verification"] = detail.map(lambda d: d.get("verification", {}))
        frame["areas_ids"] = detail.map(lambda d: d.get("areas", []))
        frame["areas_complete"] = detail.map(lambda d: d.get("areas_complete", []))
        return frame

    def run(self, run_id: str) -> dict[str, Any]:
        """One run's row (as :meth:`runs` gives it), found by its id or a unique prefix.

        Raises
        ------
        InputError
            No run, or several, with that id (prefix).
        """
        frame = self.runs()
        found = frame[frame["run_id"].str.startswith(run_id)] if run_id else frame.iloc[:0]
        if len(found) != 1:
            what = "no run" if found.empty else f"{len(found)} runs"
            raise InputError(
                f"{what} with id {run_id!r} in the run history {self.where}",
                hints=[Hint("runs", None, "list them with 'parcelsearch runs'")],
            )
        return {str(k): v for k, v in found.iloc[0].to_dict().items()}

    def pieces(self, run_id: str) -> pd.DataFrame:
        """One run's pieces: area id, piece_id, rows, pages, status, changed, ring."""
        query = """
            SELECT p.area_id, p.piece_id, p.rows, p.pages, p.status, p.changed, g.ring
            FROM {t}run_pieces p JOIN {t}rings g ON g.polygon = p.polygon
            WHERE p.run_id = ? ORDER BY p.{seq}"""
        frame = self._select(query, (run_id,))
        frame["area_id"] = frame["area_id"].map(_area_value)
        frame["changed"] = frame["changed"].map(lambda v: None if pd.isna(v) else bool(v))
        return frame

    def ids(self, run_id: str, id_name: str) -> pd.DataFrame:
        """One run's GroupIDs: one row per (area id, ``group_id``)."""
        rows = self._select(
            "SELECT area_id, group_ids FROM {t}run_ids WHERE run_id = ? ORDER BY {seq}", (run_id,)
        )
        areas: list[Any] = []
        groups: list[str] = []
        for area, blob in zip(rows["area_id"], rows["group_ids"], strict=True):
            text = _inflated(bytes(blob), self.where, run_id)
            found = text.split("\n") if text else []
            areas.extend([_area_value(area)] * len(found))
            groups.extend(found)
        return pd.DataFrame({id_name: areas, "group_id": pd.Series(groups, dtype="string")})

    def previous(
        self, base_url: str, path: str, polygon_jsons: Sequence[str]
    ) -> tuple[dict[str, Previous], set[str]]:
        """What the history knows of each ring (by polygon JSON) searched at ``base_url`` +
        ``path``: its latest *complete* record (counts and page digests), and the rings whose
        latest record of all is an unfinished refresh that found the piece changed (its
        cached page 1 is newer than its cached pages 2..n: those are stale)."""
        by_digest = {polygon_digest(p): p for p in dict.fromkeys(polygon_jsons)}
        found: dict[str, Previous] = {}
        stale: set[str] = set()
        records = self._records(base_url, path, list(by_digest))
        if records.empty:
            return found, stale
        # newest first, as ORDER BY r.finished DESC, r.{seq} DESC
        records = records.sort_values(["finished", "seq_order"], ascending=False, kind="stable")
        latest = records.drop_duplicates("polygon")
        unfinished = (latest["status"] == "incomplete") & (latest["changed"] == 1)
        stale.update(by_digest[p] for p in latest.loc[unfinished, "polygon"])
        done = records[records["status"] != "incomplete"].drop_duplicates("polygon")
        digests = self._digests(list(zip(done["run_id"], done["polygon"], strict=True)))
        for polygon, rows, pages, run_id in zip(
            done["polygon"], done["rows"], done["pages"], done["run_id"], strict=True
        ):
            found[by_digest[str(polygon)]] = Previous(
                _int(rows), _int(pages), digests.get((run_id, str(polygon)), ())
            )
        return found, stale

    def nearby(
        self, base_url: str, path: str, bounds: tuple[float, float, float, float]
    ) -> list[Nearby]:
        """The rings searched completely at ``base_url`` + ``path`` whose bounding box meets
        ``bounds`` (lon/lat: min x, min y, max x, max y), each with the pages of its latest
        complete record: what earlier searches tell of the parcel density near an area
        (read only; the tables are as they are).

        Bounded whatever the tables hold (another member may have written them): chosen in
        SQL, by each ring's stored bounding box, the :data:`NEARBY_ROWS` records nearest the
        middle of ``bounds`` within it, of rings no longer than :data:`MOST_RING` characters
        (a request line's)."""
        x0, y0, x1, y1 = (float(v) for v in bounds)
        query = """
            SELECT p.polygon, p.pages, g.ring, r.finished, r.{seq} AS seq_order
            FROM {t}run_pieces p JOIN {t}runs r ON r.run_id = p.run_id
                 JOIN {t}rings g ON g.polygon = p.polygon
            WHERE r.base_url = ? AND r.path = ? AND p.status <> 'incomplete'
                  AND p.pages IS NOT NULL AND length(g.ring) <= ?
                  AND g.x0 <= ? AND g.x1 >= ? AND g.y0 <= ? AND g.y1 >= ?
            ORDER BY abs(g.x0 + g.x1 - ?) + abs(g.y0 + g.y1 - ?), r.finished DESC
            LIMIT ?"""
        frame = self._select(
            query, (base_url, path, MOST_RING, x1, x0, y1, y0, x0 + x1, y0 + y1, NEARBY_ROWS)
        )
        if frame.empty:
            return []
        frame = frame.sort_values(
            ["finished", "seq_order"], ascending=False, kind="stable"
        ).drop_duplicates("polygon")
        found: list[Nearby] = []
        for ring, pages in zip(frame["ring"], frame["pages"], strict=True):
            if _ring_meets(str(ring), bounds):
                found.append(Nearby(str(ring), int(pages)))
        return found

    def _records(self, base_url: str, path: str, polygons: list[str]) -> pd.DataFrame:
        """Every run record of these rings (by digest) at ``base_url`` + ``path``, in one
        query a chunk of rings (never one a ring: a refusal of many pieces reads them all)."""
        query = """
            SELECT p.polygon, p.rows, p.pages, p.run_id, p.status, p.changed, r.finished,
                   r.{seq} AS seq_order
            FROM {t}run_pieces p JOIN {t}runs r ON r.run_id = p.run_id
            WHERE r.base_url = ? AND r.path = ? AND p.polygon IN (%s)"""
        frames = [
            self._select(query % ", ".join("?" * len(chunk)), (base_url, path, *chunk))
            for chunk in _chunks(polygons)
        ]
        frames = [f for f in frames if not f.empty]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def _digests(self, pairs: list[tuple[Any, str]]) -> dict[tuple[Any, str], tuple[str, ...]]:
        """The page digests of each (run id, ring digest), in page order."""
        wanted = set(pairs)
        found: dict[tuple[Any, str], list[str]] = {}
        for chunk in _chunks(sorted({run_id for run_id, _ in pairs}, key=str)):
            pages = self._select(
                "SELECT run_id, polygon, page, digest FROM {t}run_pages WHERE run_id IN "
                f"({', '.join('?' * len(chunk))}) ORDER BY page",
                tuple(chunk),
            )
            for run_id, polygon, digest in zip(
                pages["run_id"], pages["polygon"], pages["digest"], strict=True
            ):
                if (run_id, polygon) in wanted:
                    found.setdefault((run_id, polygon), []).append(digest)
        return {key: tuple(values) for key, values in found.items()}


def _detail(text: Any) -> dict[str, Any]:
    """A run's detail (JSON), or ``{}`` when it is not a JSON object a parser reads (a
    history another member wrote may hold anything)."""
    try:
        found = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return {}
    return found if isinstance(found, dict) else {}


def _inflated(blob: bytes, where: str, run_id: str) -> str:
    """One area's GroupIDs from their zlib blob, inflated to at most :data:`MOST_INFLATED`
    times its size (sorted GroupIDs compress about 2 to 3 times; a blob that would inflate
    further was not written by a search).

    Raises
    ------
    InputError
        The blob is not zlib, or inflates further than that.
    """
    inflate = zlib.decompressobj()
    most = max(MOST_INFLATED * len(blob), 1 << 16)
    try:
        text = inflate.decompress(blob, most)
        whole = inflate.eof and not inflate.unconsumed_tail
        decoded = text.decode() if whole else ""
    except (zlib.error, UnicodeDecodeError):
        whole = False
    if not whole:
        raise InputError(
            f"run {run_id[:64]!r} in the run history {where} holds GroupIDs that are not "
            f"what a search writes (a blob of {len(blob):,} bytes inflating past "
            f"{MOST_INFLATED} times its size, or not zlib text): not read",
            hints=[Hint("runs", None, "list the runs with 'parcelsearch runs'")],
        )
    return decoded


def _chunks(values: Sequence[Any], size: int = 500) -> list[Sequence[Any]]:
    """``values`` in slices of at most ``size`` (the bound parameters of one query)."""
    return [values[i : i + size] for i in range(0, len(values), size)]


def ring_box(ring: str) -> tuple[float | None, float | None, float | None, float | None]:
    """A request ring's (polygon JSON, ``[[x, y], ...]``) bounding box: min x, min y, max x,
    max y (``None`` each when it is not a ring of numbers)."""
    try:
        points = json.loads(ring)
        xs = [float(p[0]) for p in points]
        ys = [float(p[1]) for p in points]
    except (ValueError, TypeError, IndexError, KeyError, RecursionError):
        return None, None, None, None
    if not xs:
        return None, None, None, None
    return min(xs), min(ys), max(xs), max(ys)


def _ring_meets(ring: str, bounds: tuple[float, float, float, float]) -> bool:
    """Whether a request ring (polygon JSON, ``[[x, y], ...]``) has a bounding box
    meeting ``bounds``."""
    x0, y0, x1, y1 = ring_box(ring)
    if x0 is None or y0 is None or x1 is None or y1 is None:
        return False
    return bool(x0 <= bounds[2] and x1 >= bounds[0] and y0 <= bounds[3] and y1 >= bounds[1])


def _int(value: Any) -> int | None:
    return None if pd.isna(value) else int(value)
