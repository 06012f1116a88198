"""The key store in one SQLite file (WAL, owner-only), one writer at a time."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from parcelsearch_service.keys.schema import SQLITE_SCHEMA
from parcelsearch_service.keys.store import BUSY_TIMEOUT, KeyStore

__all__ = ["SqliteKeyStore"]


def _owner_only(path: Path) -> None:
    """Create the store file readable by its owner only (0600) — it holds password and session
    hashes, CSRF tokens and the request log — and take group and other access away from an
    existing one and its companions (SQLite gives ``-wal``/``-shm`` the file's own mode)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    for companion in ("", "-wal", "-shm", "-journal", ".writer"):
        target = path.with_name(path.name + companion)
        try:
            if target.stat().st_mode & 0o077:
                os.chmod(target, 0o600)
        except FileNotFoundError:
            pass


class SqliteKeyStore(KeyStore):
    """The key store in one SQLite file (WAL), created if missing.

    Every write is one ``BEGIN IMMEDIATE`` transaction, so counts stay exact across threads
    and processes on one machine.
    """

    dialect = "sqlite"

    def __init__(self, location: str | Path, busy_timeout: float = BUSY_TIMEOUT) -> None:
        super().__init__(location, busy_timeout)
        self._writer = threading.Lock()
        self._writer_fd: int | None = None
        self._writer_pid = 0
        self.path = Path(location)
        self.location = str(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _owner_only(self.path)
        self.connection().executescript(SQLITE_SCHEMA)

    @property
    def writer_lock(self) -> Path:
        """The file (``<file>.writer``) whose ``flock`` writers from every process queue on."""
        return self.path.with_name(self.path.name + ".writer")

    def open_connection(self) -> sqlite3.Connection:
        """A new connection with the store's settings (WAL, ``synchronous=NORMAL``), owned by
        the caller, not one of the store's per-thread connections."""
        return self._connect()

    def is_busy(self, exc: BaseException) -> bool:
        """Whether ``exc`` says the file is locked by another writer."""
        return self._busy(exc)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    @contextmanager
    def _one_writer(self) -> Iterator[None]:
        """One writer at a time among this store's users, queued on locks that wake waiters
        at once: a lock between threads, then a file lock (``flock``) on ``<file>.writer``
        between processes (the kernel drops it if a process dies).

        SQLite itself makes a blocked writer poll with growing sleeps (up to 100 ms each), so
        writers that all waited on its lock would answer late and leave the CPU idle; here
        only a writer from elsewhere (another program on the file) meets SQLite's polling.
        """
        if not self._writer.acquire(timeout=self.busy_timeout):
            raise self._stayed_busy()
        try:
            fd = self._writer_file()
            fcntl.flock(fd, fcntl.LOCK_EX)  # held by another worker only while it admits
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            self._writer.release()

    def close(self) -> None:
        super().close()
        if self._writer_fd is not None and self._writer_pid == os.getpid():
            os.close(self._writer_fd)
        self._writer_fd = None

    def _writer_file(self) -> int:
        """This process's descriptor of the writer lock file (opened again after a fork: a
        descriptor inherited from the parent would share the parent's lock)."""
        if self._writer_fd is None or self._writer_pid != os.getpid():
            self._writer_fd = os.open(self.writer_lock, os.O_RDWR | os.O_CREAT, 0o600)
            self._writer_pid = os.getpid()
        return self._writer_fd

    def _begin(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")

    def _rollback(self, conn: Any) -> None:
        if conn.in_transaction:
            conn.execute("ROLLBACK")

    def _busy(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.OperationalError) and (
            "locked" in str(exc) or "busy" in str(exc)
        )

    def _duplicate(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.IntegrityError)
