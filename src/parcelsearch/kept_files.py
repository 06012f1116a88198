"""Files written whole and never destroyed.

One writer (:func:`atomically`; :func:`write_whole` for bytes): a temporary file beside the
file, made with its mode before data, synced, renamed. A set of files (a Shapefile's ``.shp``,
``.shx``, ``.dbf``, …) is written whole in a temporary folder beside it and moved in together
(:func:`atomically_as_set`). Temporary files and folders a killed writer left behind are
removed by the next write in that folder (:func:`remove_stale`). An existing output is
replaced only by a run at least as complete (:func:`replaces`, :func:`check_replace`), read
back from the file itself (:func:`parcelsearch.formats.file_metadata`).

Standard library only: the cache and the config folder write through it without loading the
geodata stack.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from parcelsearch.errors import Hint, OutputKeptError

__all__ = [
    "atomically",
    "write_whole",
    "temporary_name",
    "atomically_as_set",
    "remove_stale",
    "STALE_SECONDS",
    "replaces",
    "check_replace",
    "aside_path",
]

# -- files written whole -----------------------------------------------------------------


def write_whole(out: Path, data: bytes, *, mode: int = 0o600) -> Path:
    """Write ``data`` to ``out`` whole, safely in a folder others may share: ``out`` holds
    the old bytes or the new, never part of them, nor anything another user planted.

    Written through the one writer (:func:`atomically`): under a temporary name no one can
    predict, with ``mode`` before a byte is written, synced, renamed over ``out``. The
    temporary files a killed writer left beside it are removed first (:func:`remove_stale`).

    Parameters
    ----------
    out
        The file to write.
    data
        Its whole content.
    mode
        Its permissions (0600 by default: readable by its owner only).

    Returns
    -------
    Path
        ``out``.
    """
    remove_stale(out.parent)
    return _replace_whole(out, lambda _temp, handle: handle.write(data), mode)


def atomically(out: Path, write: Callable[[Path], object], *, mode: int | None = None) -> Path:
    """Call ``write(temp)`` on a temporary file beside ``out``, then rename it to ``out``:
    ``out`` holds the old content or the new, never part of them.

    The one writer (:func:`write_whole` is this with bytes): the temporary file
    (:func:`temporary_name`, a name :func:`remove_stale` knows) is made with
    ``O_EXCL | O_NOFOLLOW`` and ``mode`` before ``write`` runs, given ``mode`` again after it
    (a library may make the file anew), synced to disk, then renamed over ``out`` (a symlink
    planted at ``out`` is replaced, never followed). On any failure, an exception inside
    ``write`` included, it is removed and ``out`` is left as it was.

    Parameters
    ----------
    out
        The file to write.
    write
        Writes the whole file at the path it is given.
    mode
        The file's permissions; None: what the umask gives (as ``open`` does).

    Returns
    -------
    Path
        ``out``.
    """

    def fill(temp: Path, handle: BinaryIO) -> None:
        handle.close()  # ``write`` opens the path itself
        write(temp)

    return _replace_whole(out, fill, mode)


def _replace_whole(out: Path, fill: Callable[[Path, BinaryIO], object], mode: int | None) -> Path:
    """Make the temporary file (``mode`` before data), ``fill`` it, sync, rename; removed
    on any failure."""
    temp = temporary_name(out)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    descriptor = os.open(temp, flags | getattr(os, "O_BINARY", 0), 0o666 if mode is None else mode)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            if mode is not None and hasattr(os, "fchmod"):  # the umask narrowed os.open's
                os.fchmod(handle.fileno(), mode)
            fill(temp, handle)
        if mode is not None:
            os.chmod(temp, mode)
        _fsync(temp, strict=True)
        os.replace(temp, out)
    finally:
        temp.unlink(missing_ok=True)
    _fsync(out.parent)
    return out


def temporary_name(out: Path) -> Path:
    """A temporary file's name beside ``out``: ``.NAME-<32 hex digits>.tmp.EXT``."""
    return out.with_name(f".{out.stem}-{uuid.uuid4().hex}.tmp{out.suffix}")


#: Seconds after which a temporary file of ours whose writer is unknown counts as left by a
#: killed run (a writer still at work renames it long before).
STALE_SECONDS = 600
#: Our temporary files: ``.NAME-<32 hex digits>.tmp.EXT`` (:func:`temporary_name`; 8 digits
#: from earlier builds, and no ``.EXT`` from their ``write_whole``), and the journal files
#: SQLite (a GeoPackage) keeps beside one while writing it.
_TEMP_FILE = re.compile(
    r"^\..+-([0-9a-f]{8}|[0-9a-f]{32})\.tmp(\.[A-Za-z0-9]+)?(-journal|-wal|-shm)?$"
)
#: Our temporary folders: ``.NAME-PID-xxxxxxxx.tmp.EXT`` (:func:`atomically_as_set`).
_TEMP_FOLDER = re.compile(r"^\..+-(\d+)-[0-9a-f]{8}\.tmp\.[A-Za-z0-9]+$")
#: In a temporary folder: written once the set in it is whole (it may then be moved in).
_WHOLE = ".whole"


def atomically_as_set(out: Path, write: Callable[[Path], object]) -> None:
    """Call ``write(temp)`` on ``out``'s name in a temporary folder beside it, then move every
    file it wrote beside ``out``: the files already there are kept until the new set is whole.

    The folder is marked whole once written (its files synced); a run killed while moving
    leaves a whole set that the next write in the folder moves in (:func:`remove_stale`), and
    one killed while writing leaves a folder the next write removes.
    """
    folder = out.with_name(f".{out.stem}-{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp{out.suffix}")
    folder.mkdir()
    try:
        write(folder / out.name)
        for path in folder.iterdir():
            _fsync(path)
        (folder / _WHOLE).touch()
        _fsync(folder)
        _move_in(folder, out.parent)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _move_in(folder: Path, into: Path) -> None:
    """Move a whole set's files into ``into`` (the sidecar of the run's metadata, JSON, last:
    a set that says which run wrote it is whole), then drop the folder's mark. Only a set
    of plain files this user owns is moved (another user's, planted in a shared folder,
    stays out)."""
    files = sorted(
        (p for p in folder.iterdir() if p.name != _WHOLE),
        key=lambda p: (p.name.endswith(".json"), p.name),
    )
    if not all(_ours(p) and stat.S_ISREG(p.lstat().st_mode) for p in files):
        return
    for path in files:
        os.replace(path, into / path.name)
    _fsync(into)
    (folder / _WHOLE).unlink(missing_ok=True)


def _fsync(path: Path, *, strict: bool = False) -> None:
    """Flush ``path`` (a file or folder) to disk; failures ignored unless ``strict`` (a
    folder cannot be opened everywhere)."""
    with contextlib.suppress(*(() if strict else (OSError,))):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove_stale(folder: Path, *, now: float | None = None) -> list[Path]:
    """Remove the temporary files and folders of ours a killed writer left in ``folder``:
        a folder whose writer process is gone (moved in first when its set is whole), a file
        older than :data:`STALE_SECONDS`. Only entries this user owns are touched (another user's in
    a shared folder are data, never moved in). Returns what was removed; nothing else is
    touched."""
    removed: list[Path] = []
    now = time.time() if now is None else now
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    for path in entries:
        with contextlib.suppress(OSError):
            if _ours(path) and _stale(path, now):
                if path.is_dir():
                    if (path / _WHOLE).exists():
                        _move_in(path, folder)
                    shutil.rmtree(path)
                else:
                    path.unlink()
                removed.append(path)
    return removed


def _ours(path: Path) -> bool:
    """Whether this user owns ``path`` (itself, not what a symlink names): in a shared
    folder, the temporary files of others are theirs to clean up."""
    owner = getattr(os, "geteuid", None)
    return owner is None or path.lstat().st_uid == owner()


def _stale(path: Path, now: float) -> bool:
    if path.is_symlink():
        return False
    folder = _TEMP_FOLDER.match(path.name)
    if folder is not None and path.is_dir():
        return not _alive(int(folder.group(1)))
    return (
        _TEMP_FILE.match(path.name) is not None
        and path.is_file()
        and now - path.stat().st_mtime > STALE_SECONDS
    )


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- never destroyed: a file is replaced only by something at least as complete ------------


def _found(meta: Mapping[str, Any]) -> int:
    return int(meta.get("group_ids", 0) or 0)


def replaces(new: Mapping[str, Any], old: Mapping[str, Any] | None) -> bool:
    """Whether a run with metadata ``new`` may replace a file whose run had ``old`` (None: a
    file that says nothing of its run): only when it is at least as complete.

    - a complete run that found GroupIDs replaces anything;
    - a complete run that found none replaces only a file that found none either;
    - a partial (or refused) run replaces only a partial file with fewer complete areas, or
      as many and no more GroupIDs.
    """
    if old is None:
        return bool(new.get("complete")) and _found(new) > 0
    if new.get("complete"):
        return _found(new) > 0 or _found(old) == 0
    return not old.get("complete") and _progress(new) >= _progress(old)


def _progress(meta: Mapping[str, Any]) -> tuple[int, int]:
    """How far a partial run got: areas complete, then GroupIDs found."""
    return len(meta.get("areas_complete") or []), _found(meta)


def _describe(meta: Mapping[str, Any] | None) -> str:
    if meta is None:
        return "a file that does not say which run wrote it"
    found = _found(meta)
    if meta.get("complete"):
        return f"a complete result ({found:,} GroupID{'s' * (found != 1)})"
    done = len(meta.get("areas_complete") or [])
    return f"a partial result ({done:,} area{'s' * (done != 1)} complete, {found:,} GroupIDs)"


def check_replace(out: Path, meta: Mapping[str, Any], *, force: bool = False) -> None:
    """Refuse to replace ``out`` with a run's output less complete than what it holds.

    Raises
    ------
    OutputKeptError
        ``out`` exists and :func:`replaces` says no (and not ``force``); nothing is written.
    """
    if force or not out.exists():
        return
    from parcelsearch.formats import file_metadata  # the formats' readers: only when replacing

    old = file_metadata(out)
    if replaces(meta, old):
        return
    raise OutputKeptError(
        f"{str(out)!r} holds {_describe(old)}; this run's is {_describe(meta)}, so the file "
        "is kept as it was",
        path=out,
        hints=[
            Hint("force", None, "pass {knob} to replace it anyway"),
            Hint("out", str(aside_path(out, meta)), "or write this run elsewhere, e.g. {knob}"),
        ],
    )


def aside_path(out: Path, meta: Mapping[str, Any]) -> Path:
    """Where the command line writes a run that may not replace ``out``: beside it, as
    ``NAME.partial.EXT`` (an incomplete run) or ``NAME.empty.EXT`` (a complete run that found
    no GroupID)."""
    mark = "empty" if meta.get("complete") else "partial"
    return out.with_name(f"{out.stem}.{mark}{out.suffix}")
