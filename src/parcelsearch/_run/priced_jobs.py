"""One price per job: what :func:`parcelsearch.price` found, kept in the process so that
the :func:`parcelsearch.search` that follows asks at once, with the same figures, for no
call.

A job is the same pieces, in the same state, searched at the same service with the same key:
:func:`job_key` digests the service's base URL and path, the key's fingerprint (never the
key), the refresh mode, and every piece's request ring with what its page 1 told (the
pages, or ``None`` when page 1 is still to fetch). After ``price()`` the surveyed pieces'
page 1s are in the page cache, so the search that follows reads them and meets the same
state: :func:`recall` then gives the price ``price()`` returned, whose ``spent`` is what
was spent for this job (its survey), and nothing is surveyed again. A ``price()`` of
another set, another key or another service is another job: it neither adds to this job's
``spent`` nor hides it. Once a search of the job goes past its decision point the price is
:func:`forget`-ten: what is left after it is priced afresh.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from parcelsearch._run.pricing import Price

__all__ = ["job_key", "keep", "recall", "forget", "pricing_only", "is_pricing_only"]

#: How many jobs' prices the process keeps (the oldest dropped first).
KEPT = 32


@dataclass(frozen=True)
class _Priced:
    price: Price
    share: float


_lock = threading.Lock()
_kept: OrderedDict[str, _Priced] = OrderedDict()
_pricing_only: ContextVar[bool] = ContextVar("parcelsearch_pricing_only", default=False)


def job_key(
    *,
    base_url: str,
    path: str,
    fingerprint: str,
    refresh: str,
    pieces: Iterable[tuple[str, int | None]],
) -> str:
    """The digest of a job: where and with which key it is searched, and each piece's
    request ring with the pages its page 1 told (``None``: not fetched yet), in plan order."""
    digest = hashlib.sha256()
    for part in (base_url, path, fingerprint, refresh):
        digest.update(part.encode() + b"\0")
    for ring, pages in pieces:
        digest.update(ring.encode() + b"\0" + str(pages).encode() + b"\n")
    return digest.hexdigest()


def keep(key: str, price: Price, share: float) -> None:
    """Keep the price ``price()`` found for the job ``key`` (its survey at ``share``)."""
    with _lock:
        _kept[key] = _Priced(price, share)
        _kept.move_to_end(key)
        while len(_kept) > KEPT:
            _kept.popitem(last=False)


def recall(key: str, share: float) -> Price | None:
    """The price kept for the job ``key``, when its survey's share was at least ``share``
    (a search that asks for a wider survey surveys more); else ``None``."""
    with _lock:
        priced = _kept.get(key)
    if priced is None or priced.share < share:
        return None
    return priced.price


def forget(key: str) -> None:
    """The job ``key`` went past its decision point: its kept price is no longer the
    price of what is left (a later price or search prices afresh)."""
    with _lock:
        _kept.pop(key, None)


@contextmanager
def pricing_only() -> Iterator[None]:
    """While in it, the searches of this context are :func:`parcelsearch.price`'s: their
    decision point keeps the price for the search that follows."""
    token = _pricing_only.set(True)
    try:
        yield
    finally:
        _pricing_only.reset(token)


def is_pricing_only() -> bool:
    """Whether the search running is :func:`parcelsearch.price`'s."""
    return _pricing_only.get()
