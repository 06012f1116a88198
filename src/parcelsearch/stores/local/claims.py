"""Pages claimed across the processes sharing one cache folder: single flight on one machine.

Before a search fetches a page that is not cached, it claims the page: an exclusive advisory
lock (``flock``) on a small file named after the page's request key, in the cache folder's
:data:`~parcelsearch.stores.local.cache.CLAIMS_FOLDER`. A second process (or thread) that
wants the same page finds it claimed and waits for the page to land in the cache instead of
buying it again; when the holder gives up (:meth:`PageClaims.release` without a page) or dies
(the kernel drops the lock of a killed process), the next one takes the claim over.

The lock file is removed by its holder before it lets go, and a claim is only held once the
locked file is still the one under that name (a waiter may have opened the file just removed),
so two holders never believe they own the same page.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from pathlib import Path

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows: no claims, each process fetches its own
    fcntl = None  # type: ignore[assignment]

__all__ = ["PageClaims"]


class PageClaims:
    """Claims on pages, held as locked files in ``folder`` (created when first needed).

    Parameters
    ----------
    folder
        Where the lock files live (a cache folder's
        :data:`~parcelsearch.stores.local.cache.CLAIMS_FOLDER`).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"PageClaims({str(self.folder)!r}, held={len(self._held)})"

    def _path(self, key: str) -> Path:
        return self.folder / f"{hashlib.sha256(key.encode()).hexdigest()[:40]}.lock"

    def take(self, key: str) -> bool:
        """Claim page ``key``: True when this caller holds it now (release it with
        :meth:`release`), False when someone else does."""
        if fcntl is None:  # pragma: no cover - Windows
            return True
        path = self._path(key)
        self.folder.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                return False
            if _still_named(fd, path):
                with self._lock:
                    self._held[key] = fd
                return True
            os.close(fd)  # its holder removed it as we opened it: lock the new one

    def busy(self, key: str) -> bool:
        """Whether page ``key`` is claimed now (by another process, or another thread here):
        a look that takes nothing (a shared lock, let go at once)."""
        if fcntl is None:  # pragma: no cover - Windows
            return False
        try:
            fd = os.open(self._path(key), os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
        finally:
            os.close(fd)  # closing lets go of the shared lock, if taken
        return False

    def release(self, key: str) -> None:
        """Let go of page ``key`` (kept or given up); a no-op when it is not held here."""
        with self._lock:
            fd = self._held.pop(key, None)
        if fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            self._path(key).unlink()  # before unlocking: a waiter then locks a new file
        os.close(fd)

    def held(self) -> int:
        """Claims this instance holds now."""
        with self._lock:
            return len(self._held)

    def release_all(self) -> None:
        """Let go of every claim held here (the run is over)."""
        with self._lock:
            keys = list(self._held)
        for key in keys:
            self.release(key)


def _still_named(fd: int, path: Path) -> bool:
    """Whether the file open as ``fd`` is the one named ``path`` now."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino)
