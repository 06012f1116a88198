"""Parquet response cache: every valid page fetched once is never paid for again.

One record per request (base URL, path, canonical polygon, page), named by
:func:`parcelsearch._wire.request_key` — the API key is in neither the key nor the record.

This module owns the cache folder (:class:`CacheFolder`); nothing else names a file in it::

    seg-<ns>-<id>.parquet     one page each, written by :meth:`ResponseCache.put`
    pages-<ns>-<id>.parquet   many pages, written by :meth:`ResponseCache.compact`
    markets-<url tag>.json    the market list of one base URL (:meth:`CacheFolder.markets`)
    ledger.sqlite             the quota ledger (:class:`parcelsearch.Ledger`; never cleared)
    claims/                   a lock file per page being fetched now
                              (:class:`~parcelsearch.stores.local.claims.PageClaims`)

Each ``put`` writes its own small file (temporary name, ``fsync``, ``os.replace``), so a
page is on disk, whole, the moment ``put`` returns and a crash can never leave half a file
under a real name. Opening a cache with many segments compacts them into one file, so a
rerun reads a thousand pages in a few tens of milliseconds. A file that cannot be read
raises :class:`~parcelsearch.CacheError` naming it: a broken cache is never silently
refetched (that would spend calls).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from parcelsearch._fetch.page import Page, check_page
from parcelsearch.errors import CacheError, MalformedResponseError
from parcelsearch.kept_files import atomically
from parcelsearch.settings import options
from parcelsearch.stores.local.claims import PageClaims

try:  # POSIX: one compaction at a time across processes
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["ResponseCache", "CacheFolder", "SCHEMA", "LEDGER_FILE", "CLAIMS_FOLDER"]

#: Columns of every cache file.
SCHEMA = pa.schema(
    [
        ("request_key", pa.string()),
        ("base_url", pa.string()),
        ("path", pa.string()),
        ("polygon_json", pa.string()),
        ("page", pa.int32()),
        ("rows", pa.int64()),
        ("pages", pa.int32()),
        ("data_rows", pa.int32()),
        ("data", pa.list_(pa.string())),
        ("fetched_at", pa.timestamp("us", tz="UTC")),
    ],
    metadata={"parcelsearch.cache": "1"},
)
#: The quota ledger's file name inside a cache folder.
LEDGER_FILE = "ledger.sqlite"
#: The folder, inside a cache folder, of the claims on pages being fetched (single flight
#: across the processes sharing the folder).
CLAIMS_FOLDER = "claims"
_MARKETS = "markets-"
_SEGMENT = "seg-"
_COMPACTED = "pages-"
_SUFFIX = ".parquet"
#: Temporary files of the page files (``kept_files.temporary_name``; ``.tmp-`` of earlier builds).
_TEMP = (".tmp-", f".{_SEGMENT}", f".{_COMPACTED}")


class ResponseCache:
    """Valid OK pages of search responses, on disk as parquet.

    Parameters
    ----------
    directory
        The cache folder; default ``$PARCELSEARCH_CACHE_DIR``, else a per-user cache folder
        (``~/.cache/parcelsearch``). Created when missing.
    compact_at
        Opening a cache with at least this many files compacts them into one.
    merge_every
        After this many ``put`` calls, the single-page files they wrote are merged into
        one file (so a long run leaves a few files, not thousands).

    Raises
    ------
    CacheError
        A cache file cannot be read (the message names it).

    Examples
    --------
    >>> cache = ResponseCache("/tmp/ps-cache")  # doctest: +SKIP
    >>> cache.get(key) is None or cache.get(key).from_cache  # doctest: +SKIP
    True
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        compact_at: int = 64,
        merge_every: int = 100,
    ) -> None:
        self.directory = Path(directory).expanduser() if directory else options.cache_dir
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CacheError(f"cannot create cache folder {self.directory}: {exc}") from None
        self._lock = threading.RLock()
        self._pages: dict[str, Page] = {}
        self._loaded: set[str] = set()
        self._stamp: int | None = None
        self._own: dict[str, Page] = {}  # single-page files this instance wrote, unmerged
        self._merge_every = max(1, merge_every)
        self._load_new()
        if len(self._loaded) >= max(2, compact_at):
            self.compact()

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.directory)!r}, entries={len(self._pages)})"

    def claims(self) -> PageClaims:
        """The claims on pages of this folder, shared by every process that uses it."""
        return PageClaims(self.directory / CLAIMS_FOLDER)

    def __len__(self) -> int:
        return len(self._pages)

    # -- reading ---------------------------------------------------------------------

    def get(self, key: str, max_age: float | timedelta | None = None) -> Page | None:
        """The cached page named ``key`` (``from_cache=True``), or ``None``.

        Parameters
        ----------
        key
            :func:`parcelsearch._wire.request_key` of the request.
        max_age
            Ignore a page fetched more than this many seconds ago.
        """
        with self._lock:
            page = self._pages.get(key)
            if page is None and self._changed():
                self._load_new()
                page = self._pages.get(key)
        if page is None or max_age is None:
            return page
        limit = max_age if isinstance(max_age, timedelta) else timedelta(seconds=max_age)
        return page if datetime.now(UTC) - page.fetched_at <= limit else None

    def reload(self) -> None:
        """Read the files other processes wrote since, whether or not the folder's time
        stamp moved (two writes within one tick of the file system's clock leave it as it
        was, so :meth:`get` alone may miss a page written a moment ago)."""
        with self._lock:
            self._load_new()

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    # -- writing ---------------------------------------------------------------------

    def put(self, page: Page) -> None:
        """Store one page, durably, before returning.

        Raises
        ------
        MalformedResponseError
            The page does not add up (only valid OK pages are stored).
        CacheError
            The page does not say where it came from (``base_url``/``path``): a cache
            keeps only pages it can tell apart by their service.
        """
        if not page.base_url or not page.path:
            raise CacheError(
                "a cached page needs its base_url and path (the service it came "
                "from); pages made by hand must set both"
            )
        check_page(page)
        stored = replace(page, from_cache=True)
        name = f"{_SEGMENT}{time.time_ns():020d}-{uuid.uuid4().hex[:12]}{_SUFFIX}"
        self._write(_table([stored]), self.directory / name)
        with self._lock:
            self._keep(stored)
            self._loaded.add(name)
            self._own[name] = stored
            if len(self._own) >= self._merge_every:
                self._merge_own()
            self._stamp = _dir_stamp(self.directory)

    def _merge_own(self) -> None:
        """Merge the single-page files this instance wrote into one file, then drop them."""
        name = f"{_COMPACTED}{time.time_ns():020d}-{uuid.uuid4().hex[:12]}{_SUFFIX}"
        self._write(_table(self._own.values()), self.directory / name)
        self._loaded.add(name)
        for old in self._own:
            with contextlib.suppress(FileNotFoundError):
                (self.directory / old).unlink()
            self._loaded.discard(old)
        self._own.clear()

    def compact(self) -> int:
        """Merge every cache file into one; returns the number of files merged.

        Safe while other processes read or write the cache: it only removes files whose
        pages are already in the merged file, and one process compacts at a time.
        """
        with self._lock, _exclusive(self.directory / ".compact.lock") as locked:
            if not locked:
                return 0
            self._load_new()
            merged = [name for name in self._loaded if (self.directory / name).exists()]
            if len(merged) <= 1:
                return 0
            name = f"{_COMPACTED}{time.time_ns():020d}-{uuid.uuid4().hex[:12]}{_SUFFIX}"
            self._write(_table(self._pages.values()), self.directory / name)
            for old in merged:
                with contextlib.suppress(FileNotFoundError):
                    (self.directory / old).unlink()
                self._loaded.discard(old)
            self._own.clear()
            self._loaded.add(name)
            _fsync_dir(self.directory)
            self._stamp = _dir_stamp(self.directory)
            return len(merged)

    def clear(self) -> int:
        """Delete every cached page; returns files removed (see :meth:`CacheFolder.clear`)."""
        removed = 0
        with self._lock:
            for path in self.directory.iterdir():
                ours = path.name.startswith((_SEGMENT, _COMPACTED, *_TEMP))
                if ours and path.is_file():
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
                        removed += 1
            self._pages.clear()
            self._loaded.clear()
            self._own.clear()
            self._stamp = _dir_stamp(self.directory)
        return removed

    # -- inspection ------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """Folder, pages, files, bytes on disk and the oldest/newest fetch time."""
        with self._lock:
            self._load_new()
            files = self._files(_SEGMENT) + self._files(_COMPACTED)
            times = [page.fetched_at for page in self._pages.values()]
            return {
                "directory": str(self.directory),
                "entries": len(self._pages),
                "files": len(files),
                "bytes": sum(_size(path) for path in files),
                "oldest": min(times) if times else None,
                "newest": max(times) if times else None,
            }

    def verify(self) -> list[str]:
        """Read every cache file in full and check every page; returns the problems found."""
        problems: list[str] = []
        for path in self._files(_SEGMENT) + self._files(_COMPACTED):
            try:
                pages = _read(path)
            except FileNotFoundError:
                continue
            except CacheError as exc:
                problems.append(str(exc))
                continue
            for page in pages:
                try:
                    check_page(page)
                except MalformedResponseError as exc:
                    problems.append(f"{path}: {exc}")
        return problems

    # -- internals -------------------------------------------------------------------

    def _files(self, prefix: str) -> list[Path]:
        return sorted(path for path in self.directory.glob(f"{prefix}*{_SUFFIX}") if path.is_file())

    def _changed(self) -> bool:
        return _dir_stamp(self.directory) != self._stamp

    def _load_new(self) -> None:
        """Read the cache files not read yet (files removed meanwhile were compacted)."""
        for _ in range(10):
            self._stamp = _dir_stamp(self.directory)
            fresh = [
                p
                for p in self._files(_COMPACTED) + self._files(_SEGMENT)
                if p.name not in self._loaded
            ]
            vanished = False
            for path in fresh:
                try:
                    pages = _read(path)
                except FileNotFoundError:
                    vanished = True
                    continue
                for page in pages:
                    try:
                        check_page(page)
                    except MalformedResponseError as exc:
                        raise CacheError(
                            f"cache file {path} holds a page that does not add up ({exc}); "
                            "run `parcelsearch cache verify`, or move the file away"
                        ) from None
                    self._keep(page)
                self._loaded.add(path.name)
            if not vanished:
                return

    def _keep(self, page: Page) -> None:
        held = self._pages.get(page.request_key)
        if held is None or held.fetched_at <= page.fetched_at:
            self._pages[page.request_key] = page

    def _write(self, table: pa.Table, path: Path) -> None:
        try:
            atomically(path, lambda temp: pq.write_table(table, temp, compression="zstd"))
        except OSError as exc:
            raise CacheError(f"cannot write cache file {path}: {exc}") from None


def _table(pages: Any) -> pa.Table:
    pages = list(pages)
    columns = {
        "request_key": [p.request_key for p in pages],
        "base_url": [p.base_url for p in pages],
        "path": [p.path for p in pages],
        "polygon_json": [p.polygon_json for p in pages],
        "page": [p.page for p in pages],
        "rows": [p.rows for p in pages],
        "pages": [p.pages for p in pages],
        "data_rows": [p.data_rows for p in pages],
        "data": [list(p.data) for p in pages],
        "fetched_at": [p.fetched_at for p in pages],
    }
    return pa.table(columns, schema=SCHEMA)


def _read(path: Path) -> list[Page]:
    """The pages of one cache file; :class:`CacheError` naming it when unreadable."""
    try:
        table = pq.ParquetFile(path, pre_buffer=False).read(use_threads=False)
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowException) as exc:
        raise CacheError(
            f"cache file {path} cannot be read ({exc}); inspect it with "
            "`parcelsearch cache verify`, or move it away to refetch its pages"
        ) from None
    missing = [f.name for f in SCHEMA if f.name not in table.column_names]
    if missing:
        raise CacheError(f"cache file {path} lacks columns {missing}: not a parcelsearch cache")
    try:
        table = table.select(SCHEMA.names).cast(SCHEMA)
    except (pa.ArrowException, ValueError) as exc:
        raise CacheError(f"cache file {path} has columns of the wrong type ({exc})") from None
    columns = {name: table.column(name).to_pylist() for name in SCHEMA.names}
    return [
        Page(
            request_key=key,
            polygon_json=polygon,
            page=page,
            rows=rows,
            pages=pages,
            data_rows=data_rows,
            data=tuple(data or ()),
            from_cache=True,
            base_url=base_url,
            path=path_,
            fetched_at=fetched_at,
        )
        for key, base_url, path_, polygon, page, rows, pages, data_rows, data, fetched_at in zip(
            *(columns[name] for name in SCHEMA.names), strict=True
        )
    ]


def _dir_stamp(directory: Path) -> int | None:
    try:
        return directory.stat().st_mtime_ns
    except OSError:
        return None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _fsync_dir(directory: Path) -> None:
    """Make a rename durable (POSIX); a no-op where folders cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[bool]:
    """Try to hold an exclusive lock on ``path``; yields whether it is held."""
    if fcntl is None:  # pragma: no cover - Windows: compaction is still safe, just not exclusive
        yield True
        return
    with open(path, "a+b") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class CacheFolder:
    """The cache folder and everything in it: pages, market lists and the ledger's place.

    Parameters
    ----------
    directory
        The folder; default ``settings.options.cache_dir`` (``$PARCELSEARCH_CACHE_DIR``).
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory).expanduser() if directory else options.cache_dir

    def __repr__(self) -> str:
        return f"CacheFolder({str(self.directory)!r})"

    @property
    def ledger_path(self) -> Path:
        """Where the quota ledger of this folder lives."""
        return self.directory / LEDGER_FILE

    def pages(self) -> ResponseCache:
        """The response cache of this folder."""
        return ResponseCache(self.directory)

    def markets_path(self, base_url: str) -> Path:
        """The cached market list of the services at ``base_url``."""
        tag = hashlib.sha256(base_url.rstrip("/").encode()).hexdigest()[:16]
        return self.directory / f"{_MARKETS}{tag}.json"

    def markets(self, base_url: str, max_age: timedelta) -> list[str] | None:
        """The market list fetched from ``base_url`` at most ``max_age`` ago, or ``None``.

        Raises
        ------
        CacheError
            The cached list exists but cannot be read (the message names the file).
        """
        path = self.markets_path(base_url)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            fetched = datetime.fromisoformat(record["fetched_at"])
            names = record["markets"]
            ok = record["base_url"] == base_url and all(isinstance(n, str) for n in names)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CacheError(
                f"cached market list {path} cannot be read ({exc}); delete it to fetch a new one"
            ) from None
        if not ok:
            raise CacheError(f"cached market list {path} is not for {base_url}; delete it")
        return list(names) if datetime.now(UTC) - fetched <= max_age else None

    def keep_markets(self, base_url: str, names: list[str]) -> None:
        """Store the market list of ``base_url`` (atomically)."""
        path = self.markets_path(base_url)
        record = {
            "base_url": base_url,
            "fetched_at": datetime.now(UTC).isoformat(),
            "markets": names,
        }
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomically(path, lambda temp: temp.write_text(json.dumps(record), encoding="utf-8"))
        except OSError as exc:
            raise CacheError(f"cannot write the market list to {path}: {exc}") from None

    def clear(self) -> int:
        """Delete cached pages and market lists; returns files removed.

        The quota ledger is kept: it records calls already spent.
        """
        removed = self.pages().clear()
        for path in self.directory.glob(f"{_MARKETS}*.json"):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed += 1
        return removed
