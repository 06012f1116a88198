"""A key's usage as the portal shows it: calls counted per UTC day (from the request log) and
spike-arrest refusals per day (counted here, for the gateway: the request log holds admitted
requests only)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import NamedTuple

import pandas as pd

from parcelsearch_service.keys.store import hash_key
from parcelsearch_service.portal.tables import StorePart

__all__ = ["Usage", "DayUsage", "CHART_DAYS", "HISTORY_DAYS"]

#: Days in each app's calls-per-day chart (today included).
CHART_DAYS = 30
#: Days of usage history kept on each app (the longer chart; today included).
HISTORY_DAYS = 90


class DayUsage(NamedTuple):
    """One UTC day of a key's usage: calls counted and spike-arrest refusals."""

    day: date
    calls: int
    refused: int


class Usage(StorePart):
    """Keys' usage per day (table ``spike_refusals`` and the request log)."""

    def daily(self, key_id: int, log: pd.DataFrame, today: date) -> tuple[DayUsage, ...]:
        """The last :data:`HISTORY_DAYS` days of key ``key_id`` (today last): calls counted
        in its request log ``log`` and spike-arrest refusals."""
        first = today - timedelta(days=HISTORY_DAYS - 1)
        counted = log.loc[log["counted"], "time"].dt.date
        per_day = counted[counted >= first].value_counts()
        refusals = {
            date.fromisoformat(r["day"]): int(r["count"])
            for r in self.keys.query(
                "SELECT day, count FROM spike_refusals WHERE key_id = ? AND day >= ?",
                (key_id, first.isoformat()),
            ).fetchall()
        }
        return tuple(
            DayUsage(day, int(per_day.get(day, 0)), refusals.get(day, 0))
            for day in (first + timedelta(days=i) for i in range(HISTORY_DAYS))
        )

    def refused(self, key_id: int) -> int:
        """Spike-arrest refusals of key ``key_id``, all days."""
        return int(
            self.keys.query(
                "SELECT coalesce(sum(count), 0) AS n FROM spike_refusals WHERE key_id = ?",
                (key_id,),
            ).fetchone()["n"]
        )

    def count_spike_refusal(self, api_key: str) -> None:
        """Count one spike-arrest refusal of ``api_key`` today (UTC)."""
        with self.keys.transaction() as conn:
            self.keys.execute(conn, *self.spike_refusal(api_key))

    def spike_refusal(self, api_key: str) -> tuple[str, tuple[str, str]]:
        """The statement (``?`` placeholders) and parameters that count one spike-arrest
        refusal of ``api_key`` today (UTC); it counts nothing for an unknown key."""
        day = datetime.fromtimestamp(self.clock(), UTC).date().isoformat()
        return (
            "INSERT INTO spike_refusals (key_id, day, count) SELECT id, ?, 1 FROM keys"
            " WHERE key_hash = ?"
            " ON CONFLICT (key_id, day) DO UPDATE SET count = spike_refusals.count + 1",
            (day, hash_key(api_key)),
        )
