"""Admission on a SQLite key store: in one write transaction, from a thread or the loop.

The checks (:mod:`parcelsearch_service.limits`) run as statements after ``BEGIN
IMMEDIATE`` (the whole store locked). An admission is usually one statement: an ``INSERT …
SELECT`` that logs the request only if every check passes (the key's rate, read before,
guards that it is still the same), and a trigger that counts it; only when that inserts
nothing do the checks run one by one, to find which refusal applies.

On a thread (:meth:`SqliteAdmission.decide`) the calls of a batch share one transaction
(one lock, one commit) and see each other's rows, so a batch is as exact as one at a time;
they are handled outside it (a search never holds a lock).

On the event loop (:meth:`SqliteAdmission.answer`), with the parcels in this process too,
a request's admission is a few microseconds of SQLite and its search, for the small
polygons a client sends, about as long: less than handing it to a thread and back, which
costs two wake-ups and a round of GIL hand-offs. So they run there — but only when neither
can make the loop wait:

- the requests that reached the gate in one turn of the loop are admitted together, in
  one write transaction taken **only if the key store's locks are free at once** (the
  writers' file lock without blocking, then ``BEGIN IMMEDIATE`` with no busy timeout); a
  lock held elsewhere (another worker, a key being created, another program on the file)
  sends them to the thread that waits for it;
- a request is handled on the loop only if its search is brief: its hit list cached, or
  at most :data:`LOOP_SEARCH_LIMIT` parcels to test
  (:meth:`~parcelsearch_service.store.ParcelStore.work`, an upper bound known before
  searching); a larger one goes to the thread.

There each request is handled in the transaction that admits it and logged there with its
final status, so one commit covers the turn's counts, log rows and spike-arrest tallies:
the calls answered are exactly the calls committed, and any failure of the store rolls the
whole turn back (nothing counted) and sends it to the thread.

A commit is as durable as on the thread (the store's WAL with ``synchronous=NORMAL``: in the
file when answered, on disk at the next checkpoint). Checkpoints, which copy the WAL into the
database and wait for the disk, never run on the loop: its connection does not checkpoint
by itself, and every :data:`CHECKPOINT_EVERY` commits a passive checkpoint runs on a thread
of its own (it waits for no writer, and no writer waits for it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import fcntl
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from parcelsearch._shared import month_of
from parcelsearch_service.errors import StoreBusyError
from parcelsearch_service.keys import SqliteKeyStore, hash_key
from parcelsearch_service.limits import (
    INVALID_FOR_RESOURCE,
    INVALID_KEY,
    Admitted,
    Call,
    Outcome,
    Refusal,
    Result,
    admission_failed,
    handle_admitted,
    loggable,
    quota_message,
    settling,
    spike_refusal,
    spike_window,
)
from parcelsearch_service.portal.storage import PortalStore
from parcelsearch_service.postgis import PostgisParcelStore
from parcelsearch_service.store import ParcelStore

__all__ = ["SqliteAdmission", "LOOP_SEARCH_LIMIT", "CHECKPOINT_EVERY"]

log = logging.getLogger("parcelsearch.service")

#: The most parcels a search may have to test to run on the loop. At this size a cold
#: search takes about 0.2 ms here (STRtree query and points in a polygon), no longer than
#: a TLS handshake; the polygons the toolkit sends test far fewer.
LOOP_SEARCH_LIMIT = 4096

#: Commits on the loop between two checkpoints (SQLite's own default is about 1,000 pages of
#: WAL, some 250 such commits).
CHECKPOINT_EVERY = 256


class _WriteAtOnce:
    """Write transactions on a SQLite key store that are taken only when free at once.

    The writers of a :class:`~parcelsearch_service.keys.SqliteKeyStore` queue on a file lock
    (``<file>.writer``) before ``BEGIN IMMEDIATE``; this takes the same file lock through
    its own descriptor without blocking (so it excludes them, and they it), then begins on
    its own connection with no busy timeout (a writer from another program: busy at once)
    and no automatic checkpoint: every :data:`CHECKPOINT_EVERY` commits, a passive one on a
    thread of its own. Opened again in a forked process.
    """

    def __init__(self, keys: SqliteKeyStore) -> None:
        self.keys = keys
        self._lock_path = keys.writer_lock
        self._pid = 0
        self._fd = -1
        self._conn: Any = None
        self._commits = 0
        self._checkpoints: concurrent.futures.ThreadPoolExecutor | None = None

    def _opened(self) -> tuple[int, Any]:
        if self._pid != os.getpid():
            self._fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            self._conn = self.keys.open_connection()  # the store's settings (WAL, synchronous)
            self._conn.execute("PRAGMA busy_timeout = 0")
            self._conn.execute("PRAGMA wal_autocheckpoint = 0")
            self._checkpoints = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix="parcelsearch-checkpoint"
            )
            self._commits = 0
            self._pid = os.getpid()
        return self._fd, self._conn

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """The connection in a write transaction (committed at the end, rolled back on
        error), or ``None`` if a lock is held elsewhere (nothing begun)."""
        fd, conn = self._opened()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        try:
            if not self._began(conn):
                yield None
                return
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
        self._commits += 1
        if self._commits % CHECKPOINT_EVERY == 0 and self._checkpoints is not None:
            self._checkpoints.submit(self._checkpoint)

    def _checkpoint(self) -> None:
        """A passive checkpoint, on the checkpoint thread's own connection."""
        try:
            self.keys.connection().execute("PRAGMA wal_checkpoint(PASSIVE)")
        except Exception:  # the next one catches up; meanwhile the WAL grows a little
            log.warning("checkpoint of the key store failed", exc_info=True)

    def _began(self, conn: Any) -> bool:
        try:
            conn.execute("BEGIN IMMEDIATE")
        except Exception as exc:
            if self.keys.is_busy(exc):
                return False
            raise
        return True

    def close(self) -> None:
        """Close the connection and the lock file, after a last checkpoint (in the process
        that opened them)."""
        if self._pid == os.getpid():
            if self._checkpoints is not None:
                self._checkpoints.submit(self._checkpoint)
                self._checkpoints.shutdown(wait=True)
            self._conn.close()
            os.close(self._fd)
        self._pid = 0


class SqliteAdmission:
    """Admits calls on a SQLite key store: a batch in one transaction on a thread, or the
    brief calls of a turn of the event loop in one transaction there.

    Parameters
    ----------
    keys
        The key store (SQLite).
    parcels
        The parcel store. Calls are admitted on the loop only when it is in memory and
        ``portal`` counts on ``keys``; otherwise every call goes to a thread.
    portal
        Whose statement tallies a spike-arrest refusal (in the admission's transaction).
    limit
        The most parcels a search may test to run on the loop (default
        :data:`LOOP_SEARCH_LIMIT`).
    """

    def __init__(
        self,
        keys: SqliteKeyStore,
        parcels: ParcelStore | PostgisParcelStore | None = None,
        portal: PortalStore | None = None,
        limit: int | None = None,
    ) -> None:
        self.keys = keys
        self.parcels = parcels
        self.portal = portal
        self.limit = LOOP_SEARCH_LIMIT if limit is None else limit
        in_memory = parcels if isinstance(parcels, ParcelStore) else None
        #: Handed to a thread, calls wait on the network when the parcels are elsewhere.
        self.waits = parcels is not None and in_memory is None
        #: The parcels searched on the loop (``None``: nothing is admitted there).
        self._searched = in_memory if portal is not None and portal.keys is keys else None
        self._writer = _WriteAtOnce(keys)
        self._pending: list[tuple[Call[bytes], asyncio.Future[Result[bytes] | None]]] = []

    def __repr__(self) -> str:
        parcels = "no parcels" if self.parcels is None else f"{len(self.parcels):,} parcels"
        return f"SqliteAdmission(keys={self.keys.location!r}, {parcels})"

    # ------------------------------------------------------------------ on a thread

    def decide(
        self, calls: Sequence[Call[Any]], now: Callable[[], float] = time.time
    ) -> list[Refusal | Admitted | Exception]:
        """Each call's admission, all in one transaction (if that fails for another reason
        than a lock, each alone, so that only the call at fault fails)."""
        if len(calls) == 1:
            return [self._alone(calls[0], now)]
        try:
            with self.keys.transaction() as conn:
                return [self._admit(conn, call, now()) for call in calls]
        except StoreBusyError as exc:
            return [exc] * len(calls)
        except Exception:
            log.exception("a batch of %d admissions failed; admitting each alone", len(calls))
            return [self._alone(call, now) for call in calls]

    def _alone(self, call: Call[Any], now: Callable[[], float]) -> Refusal | Admitted | Exception:
        try:
            with self.keys.transaction() as conn:
                return self._admit(conn, call, now())
        except Exception as exc:  # busy, or the store failed: this call's answer
            return admission_failed(call, exc)

    def _admit(self, conn: Any, call: Call[Any], t: float) -> Refusal | Admitted:
        """The checks inside a write transaction (the whole store locked): the one
        statement that admits, else the checks one by one."""
        digest = hash_key(call.api_key)
        guess = call.presumed or Outcome(0, None)
        month = month_of(t)
        admitted = self._in_one_statement(conn, digest, call, t, month, guess)
        if admitted is not None:
            return admitted
        return self._one_by_one(conn, digest, call, t, month, guess)

    def _in_one_statement(
        self, conn: Any, digest: str, call: Call[Any], t: float, month: str, guess: Outcome[Any]
    ) -> Admitted | None:
        """The admission as one statement, for a key whose rate is known; ``None`` if it
        inserted nothing (a refusal, or the key changed: the checks one by one decide)."""
        per_second = self.keys.rates.get(digest)
        if per_second is None:
            return None
        allowed, window = spike_window(per_second)
        row = self.keys.execute(
            conn,
            _ADMIT_IN_ONE_STATEMENT,
            (
                t,
                call.path,
                guess.polygon_sha256,
                loggable(guess.page),
                guess.status,
                digest,
                per_second,
                f",{call.service},",
                t - window,
                allowed - 1,
                month,
            ),
        ).fetchone()
        return None if row is None else (int(row["key_id"]), month, int(row["id"]))

    def _one_by_one(
        self, conn: Any, digest: str, call: Call[Any], t: float, month: str, guess: Outcome[Any]
    ) -> Refusal | Admitted:
        """The checks one by one, which name the refusal that applies."""
        row = self.keys.execute(
            conn,
            "SELECT id, name, per_second, quota, quota_period, services, revoked,"
            " used_lifetime, used_month, month FROM keys WHERE key_hash = ?",
            (digest,),
        ).fetchone()
        if row is None or row["revoked"] is not None:
            return Refusal(401, INVALID_KEY)
        self.keys.rates[digest] = row["per_second"]
        if call.service not in row["services"].split(","):
            return Refusal(401, INVALID_FOR_RESOURCE)
        allowed, window = spike_window(row["per_second"])
        oldest = self.keys.execute(
            conn,
            "SELECT time FROM requests WHERE key_id = ? AND time > ? ORDER BY time DESC"
            " LIMIT 1 OFFSET ?",
            (row["id"], t - window, allowed - 1),
        ).fetchone()
        if oldest is not None:
            return spike_refusal(oldest["time"], row["per_second"], t)
        used = (
            row["used_lifetime"]
            if row["quota_period"] == "lifetime"
            else (row["used_month"] if row["month"] == month else 0)
        )
        if row["quota"] is not None and used >= row["quota"]:
            self._log(conn, row["id"], t, call.path, Outcome(429, None), counted=False)
            return Refusal(429, quota_message(row["name"]))
        # The trigger ``requests_count`` counts the call as its row is logged.
        return row["id"], month, self._log(conn, row["id"], t, call.path, guess, counted=True)

    def _log(
        self, conn: Any, key_id: int, t: float, path: str, outcome: Outcome[Any], counted: bool
    ) -> int:
        row = self.keys.execute(
            conn,
            "INSERT INTO requests (key_id, time, path, polygon_sha256, page, status, counted)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                key_id,
                t,
                path,
                outcome.polygon_sha256,
                loggable(outcome.page),
                outcome.status,
                counted,
            ),
        ).fetchone()
        return int(row["id"])

    # ------------------------------------------------------------------ on the loop

    def brief(self, call: Call[bytes]) -> bool:
        """Whether ``call`` may be handled on the loop (no search, or a brief one)."""
        if self._searched is None:
            return False
        return call.search is None or self._searched.work(call.search) <= self.limit

    async def answer(self, call: Call[bytes]) -> Result[bytes] | None:
        """``call`` admitted and, if admitted, handled here with the calls that reached the
        gate in this turn of the loop; ``None`` if that cannot be done without waiting (its
        search is not brief, or a lock is held elsewhere): then nothing was counted."""
        if not self.brief(call):
            return None
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Result[bytes] | None] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._flush)
        self._pending.append((call, future))
        return await future

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        try:
            results = self._turn([call for call, _ in batch])
        except BaseException as exc:  # no caller is left waiting, whatever happens
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            raise
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)

    def _turn(
        self, calls: list[Call[bytes]], now: Callable[[], float] = time.time
    ) -> list[Result[bytes] | None]:
        """Each call's result, all in one transaction, each handled at once and its log row
        written with its final outcome; ``None`` for all when the locks are held elsewhere
        or the store failed (rolled back: the thread admits them)."""
        try:
            with self._writer.transaction() as conn:
                if conn is None:
                    return [None] * len(calls)
                results: list[Result[bytes] | None] = []
                for call in calls:
                    handled: list[tuple[Admitted, Outcome[Any], Outcome[Any]]] = []
                    results += handle_admitted([call], [self._admit(conn, call, now())], handled)
                    for statement, params in settling(handled):
                        self.keys.execute(conn, statement, params)
                self._tally_spikes(conn, calls, results)
                return results
        except Exception:  # rolled back; the thread admits them and reports what fails
            log.debug("admission on the loop failed; handed to the thread", exc_info=True)
            return [None] * len(calls)

    def _tally_spikes(
        self, conn: Any, calls: list[Call[bytes]], results: list[Result[bytes] | None]
    ) -> None:
        assert self.portal is not None  # on the loop only with a portal on these keys
        for call, result in zip(calls, results, strict=True):
            if isinstance(result, Refusal) and result.retry_after is not None:
                self.keys.execute(conn, *self.portal.spike_refusal(call.api_key))

    async def close(self) -> None:
        """Close the loop's connection and lock file."""
        self._writer.close()


#: Logs (and so, by the trigger ``requests_count``, counts) a request only if every check
#: passes; ``per_second`` must still be the rate the window and count were taken from.
_ADMIT_IN_ONE_STATEMENT = """
INSERT INTO requests (key_id, time, path, polygon_sha256, page, status, counted)
SELECT id, ?, ?, ?, ?, ?, 1 FROM keys
WHERE key_hash = ? AND revoked IS NULL AND per_second = ?
  AND instr(',' || services || ',', ?) > 0
  AND NOT EXISTS (SELECT 1 FROM requests WHERE key_id = keys.id AND time > ?
                  ORDER BY time DESC LIMIT 1 OFFSET ?)
  AND (quota IS NULL OR CASE WHEN quota_period = 'lifetime' THEN used_lifetime
                             WHEN month = ? THEN used_month ELSE 0 END < quota)
RETURNING id, key_id
"""
