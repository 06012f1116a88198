"""Small helpers shared by the reliability tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd


def store_bytes(path: Path) -> bytes:
    """The key store file and its WAL/SHM companions, as bytes.

    Read by another process: opening and closing a live SQLite file in the process that
    holds it (the test server runs in this one) drops that process's POSIX locks, after
    which another process may truncate the WAL index under the server (SIGBUS).
    """
    files = [str(p) for p in sorted(path.parent.glob(path.name + "*"))]
    return subprocess.run(["cat", *files], capture_output=True, check=True, timeout=30).stdout


def max_in_window(times: pd.Series, window: float = 1.0) -> int:
    """Most admissions in any half-open window (t - window, t] (the service's own rule)."""
    ts = sorted(times.astype("int64") / 1e9)
    most, start = 0, 0
    for end, t in enumerate(ts):
        while ts[start] <= t - window + 1e-6:
            start += 1
        most = max(most, end - start + 1)
    return most
