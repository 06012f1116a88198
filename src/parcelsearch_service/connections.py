"""One database connection per thread, all closed together: the key store's and PostGIS's."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["ThreadConnections"]


class ThreadConnections:
    """A connection for each thread that asks, opened on first use, reopened when closed.

    Parameters
    ----------
    connect
        Opens a new connection.
    """

    def __init__(self, connect: Callable[[], Any]) -> None:
        self._connect = connect
        self._local = threading.local()
        self._opened: list[Any] = []
        self._lock = threading.Lock()

    def get(self) -> Any:
        """This thread's connection."""
        conn = getattr(self._local, "conn", None)
        if conn is None or getattr(conn, "closed", False):
            conn = self._connect()
            self._local.conn = conn
            with self._lock:
                self._opened.append(conn)
        return conn

    def forget(self) -> None:
        """Drop this thread's connection (it was lost): the next :meth:`get` reconnects."""
        self._local.conn = None

    def close(self) -> None:
        """Close every connection opened (they reopen when used again, e.g. after a fork)."""
        with self._lock:
            for conn in self._opened:
                conn.close()
            self._opened.clear()
        self._local = threading.local()
