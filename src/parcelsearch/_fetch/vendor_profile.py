"""What parcelsearch has learned about the vendor at one base URL, kept in the cache folder.

The vendor's specification leaves some things unshown (the number of the first page, what
a page past the last looks like, whether answers are compressed, how errors are worded).
What a search or ``parcelsearch doctor`` learns is kept per base URL in
``vendors.json`` beside the response cache, so later runs adapt without probing again.
The file holds no key: only the base URL and what was observed.

The file is data to check, not configuration to obey: the cache folder may be shared,
synced or copied from someone else. Each learnt path (``moved``) is checked when read and
used only if it stays on the base URL's own ``https://`` host and port (no other scheme,
host or port, no userinfo, query or ``..``); any other entry is ignored with a
:class:`~parcelsearch.notices.KeptFileWarning` naming the file and the entry.
A learnt page size is used only if it is a whole number in ``1..MAX_PAGE_SIZE``, a learnt
request-line limit only in ``1024..65536``, a learnt result window only a whole number of at
least 1 page; another is learnt again. The facts that decide what a search calls complete
(the matching rule, the page base, the result window: :data:`DECISIVE`) are kept only from a
file this user owns that nobody else may write; from another, they are learnt again, with a
warning.
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from parcelsearch.kept_files import write_whole
from parcelsearch.notices import KeptFileWarning, warn
from parcelsearch.settings import without_userinfo

__all__ = [
    "VendorProfile",
    "load_profile",
    "save_profile",
    "same_origin_path",
    "PROFILES_FILE",
    "DECISIVE",
]

#: The file, in the cache folder, holding one profile per base URL.
PROFILES_FILE = "vendors.json"
_LOCK = threading.Lock()
#: The largest page size a profile may hold (a larger one is learnt again).
MAX_PAGE_SIZE = 10_000
#: What a path may be made of (RFC 3986 ``pchar`` and ``/``): no space, backslash or control.
_PATH = re.compile(r"/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*")


@dataclass
class VendorProfile:
    """What is known of the vendor at ``base_url`` (``None``: not known yet).

    Attributes
    ----------
    base_url
        The base URL the profile describes.
    page_base
        The number of the first page: 1 (``page=1..pages``) or 0 (``page=0..pages-1``).
    moved
        Paths a same-origin redirect moved (``/v1/search`` → ``/v1/search/``).
    compression
        The ``Content-Encoding`` of a search answer (``"identity"`` when none).
    error_format
        How the gateway words a refusal: ``"envelope"``, ``"fault"``, ``"html"`` …
    page_size
        GroupIDs a full page holds, learnt from a page 1 whose counts agree with it
        (``None``: not learnt; 100 is assumed).
    max_request_bytes
        The longest request line the gateway takes, learnt from its refusal of a longer one
        (``None``: not learnt; 7,168 bytes assumed).
    result_window
        Pages the vendor serves a search at most, learnt from its refusal of a deeper page
        (``None``: not learnt; no limit assumed).
    match_rule
        How the vendor matches parcels, learnt by
        :func:`parcelsearch.rule_probe.learn_match_rule`: ``"representative-point"`` or
        ``"intersects"`` (``None``: not known).
    ids_once
        Whether the vendor lists each GroupID once: ``False`` once a page held one twice
        (a condominium's parcels, listed each), ``True`` once enough GroupIDs were read with
        none twice in a page (``None``: not known). Against a vendor listing each once, a
        GroupID repeated at a page boundary is a slipped page, not a condominium.
    learned_at
        When the profile last changed (UTC, ISO 8601).
    """

    base_url: str
    page_base: int | None = None
    moved: dict[str, str] = field(default_factory=dict)
    compression: str | None = None
    error_format: str | None = None
    page_size: int | None = None
    max_request_bytes: int | None = None
    result_window: int | None = None
    match_rule: str | None = None
    ids_once: bool | None = None
    learned_at: str = ""


def _path(cache_dir: str | os.PathLike[str]) -> Path:
    return Path(cache_dir) / PROFILES_FILE


def _read_all(cache_dir: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        data = json.loads(_path(cache_dir).read_text())
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: learned again
    return data if isinstance(data, dict) else {}


def same_origin_path(base_url: str, url: object) -> bool:
    """Whether ``url`` may carry the key of ``base_url``: an ``https://`` URL on the same host
    and port, without userinfo, query or fragment, whose path has no ``.`` or ``..``
    segment (also percent-encoded) nor a character a path cannot hold."""
    if not isinstance(url, str):
        return False
    try:
        base, there = urlsplit(base_url), urlsplit(url)
    except ValueError:
        return False
    segments = unquote(there.path).split("/")
    return (
        there.scheme == "https"
        and there.netloc == base.netloc
        and "@" not in there.netloc
        and not there.query
        and not there.fragment
        and "." not in segments
        and ".." not in segments
        and _PATH.fullmatch(there.path) is not None
    )


def _checked_moved(
    cache_dir: str | os.PathLike[str], base_url: str, moved: object
) -> dict[str, str]:
    """The learnt paths of ``moved`` that stay on ``base_url``'s origin; each other entry
    ignored with a warning naming the file and the entry."""
    if not isinstance(moved, dict):
        return {}
    kept = {}
    for source, target in moved.items():
        if same_origin_path(base_url, source) and same_origin_path(base_url, target):
            kept[source] = target
            continue
        warn(
            KeptFileWarning(
                f"{_path(cache_dir)}: the learnt path {without_userinfo(str(source))!r} → "
                f"{without_userinfo(str(target))!r} is ignored: a learnt path must stay on "
                f"{base_url} (https, the same host and port, no userinfo, query or '..'); the "
                "default path is used"
            )
        )
    return kept


def load_profile(cache_dir: str | os.PathLike[str], base_url: str) -> VendorProfile:
    """The profile of ``base_url`` (an empty one when nothing is known); learnt paths that
    leave the base URL's origin are ignored (:func:`same_origin_path`), with a warning."""
    entry = _read_all(cache_dir).get(base_url)
    if not isinstance(entry, dict):
        return VendorProfile(base_url)
    known = {f.name for f in fields(VendorProfile)}
    values = {k: v for k, v in entry.items() if k in known}
    values["base_url"] = base_url
    values["moved"] = _checked_moved(cache_dir, base_url, values.get("moved"))
    profile = VendorProfile(**values)
    if profile.page_base not in (None, 0, 1):
        profile.page_base = None
    if (
        isinstance(profile.page_size, bool)
        or not isinstance(profile.page_size, int)
        or not 1 <= profile.page_size <= MAX_PAGE_SIZE
    ):
        profile.page_size = None  # learnt again from the next page 1
    limit = profile.max_request_bytes
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1024 <= limit <= 65536:
        profile.max_request_bytes = None  # learnt again from the next refusal
    window = profile.result_window
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        profile.result_window = None  # learnt again from the next refusal
    if profile.match_rule not in (None, "representative-point", "intersects"):
        profile.match_rule = None
    if profile.ids_once not in (None, True, False):
        profile.ids_once = None
    _forget_unless_ours(cache_dir, profile)
    return profile


#: The facts that change what a search calls complete: kept only in a file only this user
#: can write (else learnt again).
DECISIVE = ("match_rule", "page_base", "result_window", "ids_once")


def _only_ours(path: Path) -> bool:
    """Whether ``path`` is this user's and nobody else may write it (always, where there
    are no user ids)."""
    owner = getattr(os, "geteuid", None)
    if owner is None:
        return True
    try:
        info = path.stat()
    except OSError:
        return True  # no file: nothing read from it
    return info.st_uid == owner() and not info.st_mode & 0o022


def _forget_unless_ours(cache_dir: str | os.PathLike[str], profile: VendorProfile) -> None:
    """Forget the :data:`DECISIVE` facts of a file another user wrote or may write (a shared
    cache folder): each is learnt again, with a warning naming the file and the fact."""
    path = _path(cache_dir)
    held = [name for name in DECISIVE if getattr(profile, name) is not None]
    if not held or _only_ours(path):
        return
    for name in held:
        setattr(profile, name, None)
    warn(
        KeptFileWarning(
            f"{path}: {', '.join(held)} ignored: the file can be written by another user (it "
            "is not yours, or its mode lets others write it), and these decide what a search "
            "calls complete; they are learnt again (chmod 600 a file of your own to keep them)"
        )
    )


def save_profile(cache_dir: str | os.PathLike[str], profile: VendorProfile) -> Path:
    """Keep ``profile`` (written whole by :func:`parcelsearch.kept_files.write_whole`; other
    base URLs' profiles untouched)."""
    folder = Path(cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    profile.learned_at = datetime.now(UTC).isoformat(timespec="seconds")
    with _LOCK:
        data = _read_all(folder)
        data[profile.base_url] = asdict(profile)
        write_whole(_path(folder), json.dumps(data, indent=1, sort_keys=True).encode("utf-8"))
    return _path(folder)
