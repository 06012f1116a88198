"""What the client knows of the vendor at its base URL, and how it learns more.

A :class:`VendorFacts` holds the vendor's facts a search depends on — the first page's
number, the page size, the longest request line the gateway takes, the result window and the
paths same-origin redirects moved — each set by the user, else learnt (kept in the vendor's
profile in the cache folder, :mod:`parcelsearch._fetch.vendor_profile`), else assumed. The
client holds one; answers teach it (:mod:`parcelsearch._fetch.judging`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from parcelsearch import settings
from parcelsearch._fetch.answers import Refusal
from parcelsearch._fetch.failures import strip_query
from parcelsearch._fetch.http import Redirected
from parcelsearch._fetch.page import Page, learnt_page_size
from parcelsearch._fetch.vendor_profile import PROFILES_FILE, load_profile, save_profile
from parcelsearch.errors import Hint
from parcelsearch.notices import LearntFactWarning, warn

__all__ = ["GONE", "LINE_LIMITS", "VendorFacts"]

log = logging.getLogger("parcelsearch.client")  # as before the client was split

#: Request-line limits of usual gateways, largest first (IIS's query string default is 2,048).
LINE_LIMITS = (8192, 7168, 4096, 2048, 1024)
#: Statuses that make a learnt path forgotten: the vendor has moved it back, or away.
GONE = frozenset({404, 410})


class VendorFacts:
    """The vendor's facts at ``base_url``: set by the user, else learnt, else assumed.

    Parameters
    ----------
    base_url
        The checked base URL of the services.
    cache_dir
        The folder whose ``vendors.json`` keeps what is learnt.
    page_size_set, line_limit_set, window_set
        The page size, request-line limit and result window the user set (``None``: not
        set), never learnt over.
    """

    def __init__(
        self,
        base_url: str,
        cache_dir: Path,
        *,
        page_size_set: int | None,
        line_limit_set: int | None,
        window_set: int | None,
    ) -> None:
        self.base_url = base_url
        self.cache_dir = cache_dir
        self._page_size_set = page_size_set
        self._line_limit_set = line_limit_set
        self._window_set = window_set
        #: What is known of the vendor at this base URL (kept in the cache folder; not the
        #: saved credentials ``profile=`` names).
        self.vendor = load_profile(self.cache_dir, self.base_url)
        #: The number the vendor gives its first page (0 or 1): learned, or from the profile.
        self.page_base = self.vendor.page_base if self.vendor.page_base is not None else 1
        #: GroupIDs a full page holds: set by the user, else learnt (kept in the profile),
        #: else 100.
        self.page_size = self._page_size_set or self.vendor.page_size or settings.PAGE_SIZE
        #: The longest request line the gateway takes (pieces are planned to it): set by the
        #: user, else learnt from a refusal (kept in the profile), else 7,168 bytes.
        self.max_request_bytes = (
            self._line_limit_set or self.vendor.max_request_bytes or settings.MAX_REQUEST_LINE_BYTES
        )
        #: Pages the vendor serves a search at most: set by the user, else learnt from its
        #: refusal of a deeper page (kept in the profile), else ``None`` (no limit known).
        self.result_window: int | None = self._window_set or self.vendor.result_window
        self.moved: dict[str, str] = dict(self.vendor.moved)  # paths moved by redirects
        #: Where a fact learnt is told (a run's fetch loop, which says it at once on its own
        #: line); ``None``: warned where it is learnt.
        self.tell: Callable[[LearntFactWarning], None] | None = None
        self._lock = threading.Lock()
        self._forgotten: dict[str, str] = {}  # learnt paths forgotten: the default each replaced

    @property
    def kept_in(self) -> Path:
        """The file what is learnt is kept in."""
        return self.cache_dir / PROFILES_FILE

    @property
    def max_request_bytes_source(self) -> str:
        """Where :attr:`max_request_bytes` comes from: ``"set"``, ``"learnt"`` or
        ``"assumed"``."""
        if self._line_limit_set is not None:
            return "set"
        return "learnt" if self.vendor.max_request_bytes is not None else "assumed"

    @property
    def result_window_source(self) -> str:
        """Where :attr:`result_window` comes from: ``"set"``, ``"learnt"`` or ``"none"``."""
        if self._window_set is not None:
            return "set"
        return "learnt" if self.vendor.result_window is not None else "none"

    @property
    def page_size_source(self) -> str:
        """Where :attr:`page_size` comes from: ``"set"``, ``"learnt"`` or ``"assumed"``."""
        if self._page_size_set is not None:
            return "set"
        return "learnt" if self.vendor.page_size is not None else "assumed"

    @property
    def page_base_known(self) -> bool:
        """Whether the vendor's first page number is known (learned, or in the profile)."""
        return self.vendor.page_base is not None

    def learn_line_limit(self, url: str) -> int | None:
        """After a refusal of ``url``'s request line as too long: the limit it teaches (the
        largest usual gateway limit below that line, kept in the profile), or ``None`` when
        the user set one or it teaches nothing lower."""
        sent = len(f"GET {url.removeprefix(self.base_url) or '/'} HTTP/1.1".encode())
        below = [n for n in LINE_LIMITS if n < min(sent, self.max_request_bytes + 1)]
        if self._line_limit_set is not None or not below:
            return None
        self.max_request_bytes = below[0]
        self.learn(max_request_bytes=below[0])
        return below[0]

    def learn_window(self, refused: int, stated: int | None = None) -> int | None:
        """After the vendor refused our page ``refused`` as beyond its result window: the
        window it teaches (``stated`` by its words, else the page before; kept in the
        profile), or ``None`` when the user set one or it teaches nothing."""
        window = stated if stated is not None else refused - 1
        if self._window_set is not None or window < 1:
            return None
        with self._lock:
            if self.result_window is not None and self.result_window <= window:
                return self.result_window
            self.result_window = window
        self.learn(result_window=window)
        return window

    def page_size_taught(self, page: Page) -> int | None:
        """The page size a page 1 teaches (:func:`learnt_page_size`), never over one the user
        set."""
        if self._page_size_set is not None or page.page != 1:
            return None
        return learnt_page_size(page, self.page_size)

    def size_for(self, page: Page) -> int:
        """The page size ``page`` is checked against: :attr:`page_size`, or, unless the user
        set it, the whole answer when it says it is one page (a vendor serving more a page
        than known: nothing to learn from it, nothing missing)."""
        if (
            self._page_size_set is None
            and page.page == page.pages == 1
            and page.rows == page.data_rows
        ):
            return max(self.page_size, page.rows)
        return self.page_size

    def adopt_page_size(self, size: int) -> None:
        """Keep a learnt page size in the profile and say so (once: answers read at the same
        time that teach the same size are quiet)."""
        with self._lock:
            if self.vendor.page_size == size:
                return
            self.vendor.page_size = size
        self.learn(page_size=size)
        told = LearntFactWarning(
            f"the vendor at {self.base_url} serves {size} ids a page (learnt): re-priced; "
            f"kept in {self.kept_in}",
            hints=[Hint("page_size", size)],
        )
        tell = self.tell
        if tell is not None:
            tell(told)
        else:
            warn(told)

    def learn(self, **observed: Any) -> None:
        """Remember what was observed of the vendor (``page_base=0``, ``moved={...}``,
        ``compression=…``, ``error_format=…``, ``match_rule=…``) in its profile in the cache
        folder; a folder
        that cannot be written only loses the memory, never the run."""
        with self._lock:
            for name, value in observed.items():
                setattr(self.vendor, name, value)
            if "page_base" in observed:
                self.page_base = int(observed["page_base"])
            if observed.get("page_size"):
                self.page_size = int(observed["page_size"])
            try:
                save_profile(self.cache_dir, self.vendor)
            except OSError as exc:
                log.warning("the vendor profile was not kept in %s: %s", self.cache_dir, exc)

    # -- paths moved by redirects ---------------------------------------------------------

    def moved_url(self, url: str) -> str:
        """``url`` on the path a same-origin redirect moved it to earlier, if any."""
        path, sep, query = url.partition("?")
        return self.moved.get(path, path) + sep + query

    def remember_move(self, url: str, target: str) -> None:
        """A same-origin redirect moved ``url``'s path to ``target``'s: kept for the next
        requests, in the profile too."""
        with self._lock:
            self.moved[strip_query(url)] = strip_query(target)
            moved = dict(self.moved)
        self.learn(moved=moved)

    def unlearn(self, status: int, refusal: Refusal, url: str) -> Redirected | None:
        """A learnt path that now answers 404 or 410 (not an empty result worded so): it is
        forgotten, in the vendor profile too, and the request goes again to the path it
        replaced (:class:`~parcelsearch._fetch.http.Redirected`); None for any other answer."""
        if status not in GONE or refusal.kind == "empty":
            return None
        path, sep, query = url.partition("?")
        with self._lock:
            sources = [source for source, moved in self.moved.items() if moved == path]
            for source in sources:
                del self.moved[source]
                self._forgotten[path] = source
            moved = dict(self.moved)
            earlier = self._forgotten.get(path)
        if not sources:  # forgotten already (by another thread's request): the default too
            return None if earlier is None else Redirected(earlier + sep + query)
        log.warning(
            "the learnt path %s answers HTTP %d: forgotten (in %s), the request goes to %s again",
            strip_query(path),
            status,
            self.kept_in,
            strip_query(sources[0]),
        )
        self.learn(moved=moved)
        return Redirected(sources[0] + sep + query)
