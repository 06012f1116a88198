"""The run history in the team store: every member's searches, visible to every member.

The same tables and queries (:class:`parcelsearch.stores.history.History`) as
:class:`parcelsearch.stores.local.history.RunHistory` (schema version 2 of
:mod:`parcelsearch.stores.team.store`), plus who ran each search. A ``refresh="changed"`` search in
team mode compares each piece with its latest record by any member.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from parcelsearch.stores.history import History
from parcelsearch.stores.team.store import SCHEMA, check_schema, connect, shown

__all__ = ["TeamRunHistory"]


class TeamRunHistory(History):
    """The run history in the team store at ``url``, recording as ``member``.

    Raises
    ------
    TeamStoreError
        The store cannot be reached, or lacks this toolkit's schema version (the message says
        to run ``parcelsearch team init``).
    """

    def __init__(self, url: str, member: str = "") -> None:
        self.url = url
        self.member = member
        self.where = f"of the team store {shown(url)}"
        with connect(url) as conn:
            check_schema(url, conn)

    def __repr__(self) -> str:
        return f"TeamRunHistory({shown(self.url)!r}, member={self.member!r})"

    def _insert(self, rows: dict[str, list[tuple[Any, ...]]]) -> None:
        rows = {**rows, "runs": [(*r, self.member) for r in rows["runs"]]}
        with connect(self.url, "cannot record the run") as conn, conn.transaction():
            for table, values in rows.items():
                if values:
                    marks = ",".join(["%s"] * len(values[0]))
                    with conn.cursor() as cur:
                        cur.executemany(
                            f"INSERT INTO {SCHEMA}.{table} VALUES ({marks}) ON CONFLICT DO NOTHING",
                            values,
                        )

    def _select(self, query: str, args: Sequence[Any] = ()) -> pd.DataFrame:
        text = query.format(t=f"{SCHEMA}.", seq="seq", member=", r.member").replace("?", "%s")
        with connect(self.url, "cannot read the run history") as conn, conn.cursor() as cur:
            cur.execute(text, tuple(args))
            columns = [c.name for c in cur.description or ()]
            return pd.DataFrame(cur.fetchall(), columns=columns)
