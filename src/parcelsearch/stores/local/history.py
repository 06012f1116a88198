"""The run history on this machine: the tables of :mod:`parcelsearch.stores.history`, kept in
the ledger's SQLite file (the team store keeps the same in
:mod:`parcelsearch.stores.team.run_history`).

Examples
--------
>>> history = RunHistory("/tmp/ledger.sqlite")  # doctest: +SKIP
>>> history.runs()[["run_id", "mode", "calls", "complete"]]  # doctest: +SKIP
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from typing import Any

import pandas as pd

from parcelsearch.errors import ConfigurationError
from parcelsearch.stores.history import History, ring_box
from parcelsearch.stores.local.ledger import Ledger

__all__ = ["RunHistory"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id            TEXT PRIMARY KEY,
    started           TEXT NOT NULL,    -- ISO 8601, UTC
    finished          TEXT NOT NULL,
    fingerprint       TEXT NOT NULL,    -- first 16 hex of sha256(key), never the key
    base_url          TEXT NOT NULL,
    path              TEXT NOT NULL,
    areas_fingerprint TEXT NOT NULL,
    areas             INTEGER NOT NULL,
    id_name           TEXT NOT NULL,
    tolerance         REAL NOT NULL,
    mode              TEXT NOT NULL,    -- cached (default) | all | changed
    complete          INTEGER NOT NULL,
    calls             INTEGER NOT NULL,
    detail            TEXT NOT NULL     -- JSON: areas, areas_complete, verification
);
CREATE TABLE IF NOT EXISTS run_pieces (
    run_id       TEXT NOT NULL,
    area_id      TEXT NOT NULL,         -- JSON of the area id
    piece_id     INTEGER NOT NULL,
    polygon      TEXT NOT NULL,         -- polygon_digest of the request ring
    rows         INTEGER,
    pages        INTEGER,
    status       TEXT NOT NULL,
    changed      INTEGER,               -- 1 changed, 0 unchanged, NULL unknown (first read)
    PRIMARY KEY (run_id, area_id, piece_id)
);
CREATE INDEX IF NOT EXISTS run_pieces_by_polygon ON run_pieces (polygon);
CREATE TABLE IF NOT EXISTS run_pages (
    run_id  TEXT NOT NULL,
    polygon TEXT NOT NULL,
    page    INTEGER NOT NULL,
    digest  TEXT NOT NULL,
    PRIMARY KEY (run_id, polygon, page)
);
CREATE TABLE IF NOT EXISTS rings (
    polygon TEXT PRIMARY KEY,
    ring    TEXT NOT NULL,               -- the canonical ring JSON sent as searchPolygon
    x0 REAL, y0 REAL, x1 REAL, y1 REAL   -- its bounding box (issue 58: nearby() in SQL)
);
CREATE TABLE IF NOT EXISTS run_ids (
    run_id    TEXT NOT NULL,
    area_id   TEXT NOT NULL,
    group_ids BLOB NOT NULL,            -- zlib of the sorted GroupIDs, one a line
    PRIMARY KEY (run_id, area_id)
);
"""


class RunHistory(History):
    """The run history in one SQLite file (the ledger's).

    Parameters
    ----------
    path
        The SQLite file; default the ledger of the cache folder.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.ledger = Ledger(path)  # the file, opened and checked as the ledger opens it
        self.path = self.ledger.path
        self.where = str(self.path)
        try:
            with self.ledger.transaction() as db:
                for statement in _SCHEMA.split(";\n"):  # one statement a line-ending ';'
                    if statement.strip():
                        db.execute(statement)
                _add_boxes(db)
        except sqlite3.Error as exc:
            raise ConfigurationError(f"cannot open the run history {self.path}: {exc}") from None

    def __repr__(self) -> str:
        return f"RunHistory({str(self.path)!r})"

    def _insert(self, rows: dict[str, list[tuple[Any, ...]]]) -> None:
        with self.ledger.transaction() as db:
            for table, values in rows.items():
                if values:
                    verb = "INSERT OR IGNORE" if table == "rings" else "INSERT OR REPLACE"
                    marks = ",".join("?" * len(values[0]))
                    db.executemany(f"{verb} INTO {table} VALUES ({marks})", values)

    def _select(self, query: str, args: Sequence[Any] = ()) -> pd.DataFrame:
        with self.ledger.transaction(immediate=False) as db:
            return pd.read_sql_query(
                query.format(t="", seq="rowid", member=""), db, params=tuple(args)
            )


def _add_boxes(db: sqlite3.Connection) -> None:
    """Give the rings of a history made before issue 58 their bounding boxes (once)."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(rings)")}
    if "x0" in columns:
        return
    for column in ("x0", "y0", "x1", "y1"):
        db.execute(f"ALTER TABLE rings ADD COLUMN {column} REAL")
    boxes = [
        (*ring_box(ring), polygon)
        for polygon, ring in db.execute("SELECT polygon, ring FROM rings")
    ]
    db.executemany("UPDATE rings SET x0 = ?, y0 = ?, x1 = ?, y1 = ? WHERE polygon = ?", boxes)
