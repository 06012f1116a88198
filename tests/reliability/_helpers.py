"""Small helpers shared by the reliability tests."""

from __future__ import annotations

import subprocess
from pathlib import Path


def store_bytes(path: Path) -> bytes:
    """The key store file and its WAL/SHM companions, as bytes.

    Read by another process: opening and closing a live SQLite file in the process that
    holds it (the test server runs in this one) drops that process's POSIX locks, after
    which another process may truncate the WAL index under the server (SIGBUS).
    """
    files = [str(p) for p in sorted(path.parent.glob(path.name + "*"))]
    return subprocess.run(["cat", *files], capture_output=True, check=True, timeout=30).stdout
