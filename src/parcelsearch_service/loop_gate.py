"""Admission and search on the event loop, when both stores are in this process.

With keys in SQLite and parcels in memory, a request's admission is a few microseconds of
SQLite and its search, for the small polygons a client sends, about as long: less than
handing it to a thread and back, which costs two wake-ups and a round of GIL hand-offs
(more still when the server shares its cores with other work). :class:`LoopGate` does
them on the loop — but only when neither can make the loop wait:

- the requests that reached the gate in one turn of the loop are admitted together, in
  one write transaction taken **only if the key store's locks are free at once** (the
  writers' file lock without blocking, then ``BEGIN IMMEDIATE`` with no busy timeout); a
  lock held elsewhere (another worker, a key being created, another program on the file)
  sends them to the thread that waits for it;
- a request is handled on the loop only if its search is brief: its hit list cached, or
  at most :data:`LOOP_SEARCH_LIMIT` parcels to test
  (:meth:`~parcelsearch_service.store.ParcelStore.work`, an upper bound known before
  searching); a larger one goes to the thread.

Each request is handled in the transaction that admits it and logged there with its final
status, so one commit covers the batch's counts, log rows and spike-arrest tallies: the
calls answered are exactly the calls committed, and any failure of the store rolls the
whole batch back (nothing counted) and sends it to the thread, which admits it as
:func:`~parcelsearch_service.limits.admit_all` always does.

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from parcelsearch_service import limits
from parcelsearch_service.keys import SqliteKeyStore
from parcelsearch_service.portal.storage import PortalStore
from parcelsearch_service.store import ParcelStore

__all__ = ["LoopGate", "LOOP_SEARCH_LIMIT", "CHECKPOINT_EVERY"]

log = logging.getLogger("parcelsearch.service")

#: The most parcels a search may have to test to run on the loop. At this size a cold
#: search takes about 0.2 ms here (STRtree query and points in a polygon), no longer than
#: a TLS handshake; the polygons the toolkit sends test far fewer.
LOOP_SEARCH_LIMIT = 4096

#: Commits on the loop between two checkpoints (SQLite's own default is about 1,000 pages of
#: WAL, some 250 such commits).
CHECKPOINT_EVERY = 256

#: What the gate decided for one call: its refusal, outcome or failure as
#: :func:`~parcelsearch_service.limits.admit_all` gives them; ``None``: not on the loop.
Result = limits.Refusal | limits.Outcome[bytes] | Exception | None


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
                1, thread_name_prefix="parcelsearch-checkpoint")
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


class LoopGate:
    """Admits and handles, on the event loop, the requests that need not wait.

    Parameters
    ----------
    keys
        The key store (SQLite).
    store
        The parcel store (in memory).
    portal
        Whose statement tallies a spike-arrest refusal (in the admission's transaction).
    limit
        The most parcels a search may test to run on the loop (default
        :data:`LOOP_SEARCH_LIMIT`).
    """

    def __init__(self, keys: SqliteKeyStore, store: ParcelStore, portal: PortalStore,
                 limit: int | None = None) -> None:
        self.keys = keys
        self.store = store
        self.portal = portal
        self.limit = LOOP_SEARCH_LIMIT if limit is None else limit
        self._writer = _WriteAtOnce(keys)
        self._pending: list[tuple[limits.Call[bytes], asyncio.Future[Result]]] = []

    def __repr__(self) -> str:
        return f"LoopGate(keys={self.keys.location!r}, {len(self.store):,} parcels)"

    def brief(self, call: limits.Call[bytes]) -> bool:
        """Whether ``call`` may be handled on the loop (no search, or a brief one)."""
        return call.search is None or self.store.work(call.search) <= self.limit

    async def answer(self, call: limits.Call[bytes]) -> Result:
        """``call`` admitted and, if admitted, handled here with the calls that reached the
        gate in this turn of the loop; ``None`` if that cannot be done without waiting (its
        search is not brief, or a lock is held elsewhere): then nothing was counted."""
        if not self.brief(call):
            return None
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Result] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._flush)
        self._pending.append((call, future))
        return await future

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        try:
            results = self._admit([call for call, _ in batch])
        except BaseException as exc:  # no caller is left waiting, whatever happens
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            raise
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)

    def _admit(self, calls: list[limits.Call[bytes]],
               now: Callable[[], float] = time.time) -> list[Result]:
        """Each call's result, all in one transaction; ``None`` for all when the locks are
        held elsewhere or the store failed (rolled back: the thread admits them)."""
        try:
            with self._writer.transaction() as conn:
                if conn is None:
                    return [None] * len(calls)
                results = limits.admit_in(self.keys, conn, calls, now)
                for call, result in zip(calls, results, strict=True):
                    if isinstance(result, limits.Refusal) and result.retry_after is not None:
                        self.keys.execute(conn, *self.portal.spike_refusal(call.api_key))
                return list(results)
        except Exception:  # rolled back; the thread admits them and reports what fails
            log.debug("admission on the loop failed; handed to the thread", exc_info=True)
            return [None] * len(calls)

    def close(self) -> None:
        """Close this gate's connection and lock file."""
        self._writer.close()
