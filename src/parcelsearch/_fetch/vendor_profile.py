"""What parcelsearch has learned about the vendor at one base URL, kept in the cache folder.

The vendor's specification leaves some things unshown (the number of the first page, what
a page past the last looks like, whether answers are compressed, how errors are worded).
What a search or ``parcelsearch doctor`` learns is kept per base URL in
``vendors.json`` beside the response cache, so later runs adapt without probing again.
The file holds no key: only the base URL and what was observed.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["VendorProfile", "load_profile", "save_profile", "PROFILES_FILE"]

#: The file, in the cache folder, holding one profile per base URL.
PROFILES_FILE = "vendors.json"
_LOCK = threading.Lock()


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
    match_rule
        How the vendor matches parcels, learnt by
        :func:`parcelsearch.rule_probe.learn_match_rule`: ``"representative-point"`` or
        ``"intersects"`` (``None``: not known).
    learned_at
        When the profile last changed (UTC, ISO 8601).
    """

    base_url: str
    page_base: int | None = None
    moved: dict[str, str] = field(default_factory=dict)
    compression: str | None = None
    error_format: str | None = None
    match_rule: str | None = None
    learned_at: str = ""


def _path(cache_dir: str | os.PathLike[str]) -> Path:
    return Path(cache_dir) / PROFILES_FILE


def _read_all(cache_dir: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        data = json.loads(_path(cache_dir).read_text())
    except (OSError, ValueError):
        return {}  # none yet, or unreadable: learned again
    return data if isinstance(data, dict) else {}


def load_profile(cache_dir: str | os.PathLike[str], base_url: str) -> VendorProfile:
    """The profile of ``base_url`` (an empty one when nothing is known)."""
    entry = _read_all(cache_dir).get(base_url)
    if not isinstance(entry, dict):
        return VendorProfile(base_url)
    known = {f.name for f in fields(VendorProfile)}
    values = {k: v for k, v in entry.items() if k in known}
    values["base_url"] = base_url
    profile = VendorProfile(**values)
    if profile.page_base not in (None, 0, 1):
        profile.page_base = None
    if not isinstance(profile.moved, dict):
        profile.moved = {}
    if profile.match_rule not in (None, "representative-point", "intersects"):
        profile.match_rule = None
    return profile


def save_profile(cache_dir: str | os.PathLike[str], profile: VendorProfile) -> Path:
    """Keep ``profile`` (atomically; other base URLs' profiles untouched)."""
    folder = Path(cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    profile.learned_at = datetime.now(UTC).isoformat(timespec="seconds")
    with _LOCK:
        data = _read_all(folder)
        data[profile.base_url] = asdict(profile)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".vendors-", suffix=".json")
        with os.fdopen(fd, "w") as out:
            json.dump(data, out, indent=1, sort_keys=True)
        os.replace(tmp, _path(folder))
    return _path(folder)
