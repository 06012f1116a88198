"""The gateway: each call admitted by its key store's dialect, on the loop or on a thread.

:data:`ADMISSIONS` is the table of the :class:`~parcelsearch_service.limits.Admission` of
each key store dialect; :func:`admission_for` picks from it. :class:`Gateway` answers a call
from the event loop: by the admission's own :meth:`~parcelsearch_service.limits.Admission.answer`
when that needs no wait, else on a thread — one thread that admits the calls queued
meanwhile in one transaction and answers them with one loop wake-up
(:class:`~parcelsearch_service.batching.Batcher`) when the calls wait only on the CPU, or a
pool of threads when they wait on the network. On a thread, :func:`admit_all` admits calls
together (:meth:`~parcelsearch_service.limits.Admission.decide`), then handles the admitted
ones outside the admission's transaction (a search never holds a lock) and settles their log
rows (:func:`~parcelsearch_service.limits.settling`) in one more.

Examples
--------
>>> import tempfile, pathlib
>>> from parcelsearch_service.keys import KeyStore
>>> store = KeyStore(pathlib.Path(tempfile.mkdtemp()) / "keys.sqlite")
>>> type(admission_for(store)).__name__
'SqliteAdmission'
>>> key = store.create("alice", key_type="demo")
>>> admit(store, key, "markets", "/v1/markets", lambda: Outcome(200, "ok"))
Outcome(status=200, body='ok', polygon_sha256=None, page=None)
>>> store.close()
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from parcelsearch_service import limits
from parcelsearch_service.batching import Batcher
from parcelsearch_service.errors import StoreBusyError
from parcelsearch_service.keys import KeyStore
from parcelsearch_service.limits import Admission, Call, Outcome, Refusal, Result
from parcelsearch_service.portal.storage import PortalStore
from parcelsearch_service.postgis import PostgisParcelStore
from parcelsearch_service.postgres_admission import PostgresAdmission
from parcelsearch_service.sqlite_admission import SqliteAdmission
from parcelsearch_service.store import ParcelStore

__all__ = ["ADMISSIONS", "admission_for", "admit", "admit_all", "Gateway", "THREADS_NETWORKED"]

log = logging.getLogger("parcelsearch.service")

T = TypeVar("T")

#: The admission of each key store dialect (:attr:`KeyStore.dialect`), made with the key
#: store, the parcel store and the portal.
ADMISSIONS: dict[str, Callable[..., Admission]] = {
    "sqlite": SqliteAdmission,
    "postgresql": PostgresAdmission,
}

#: Threads that admit and handle requests whose calls wait on the network (one store in
#: PostgreSQL, the other not), per worker process: enough to keep a worker busy while
#: queries are out (a worker tops out near 1,500 req/s; at 1.5 ms a request in PostgreSQL
#: that is 2–3 in flight), and no more, since idle ones only fight over the GIL. Measured at
#: PostGIS 1 M (then on threads too), one worker, half load: p99 10–14 ms with 8 threads;
#: with 2 and with 4, 5–8 ms in one run and the same within the run-to-run spread in
#: another. Calls that wait on nothing but the CPU (both stores in this process) are served
#: by one thread in batches (:class:`~parcelsearch_service.batching.Batcher`); with both in
#: PostgreSQL, the loop itself serves them.
THREADS_NETWORKED = 4


def admission_for(
    keys: KeyStore,
    parcels: ParcelStore | PostgisParcelStore | None = None,
    portal: PortalStore | None = None,
) -> Admission:
    """The admission of ``keys``' dialect (:data:`ADMISSIONS`); with ``parcels`` and
    ``portal`` it may also admit from the event loop."""
    return ADMISSIONS[keys.dialect](keys, parcels, portal)


def admit(
    store: KeyStore,
    api_key: str,
    service: str,
    path: str,
    handle: Callable[[], Outcome[T]],
    now: Callable[[], float] = time.time,
    presumed: Outcome[Any] | None = None,
) -> Refusal | Outcome[T]:
    """Check ``api_key`` for ``service``; if admitted, count, log, then call ``handle``:
    :func:`admit_all` of one call.

    Parameters
    ----------
    store
        The key store.
    api_key
        The plaintext key from the ``x-api-key`` header.
    service
        ``"search"`` or ``"markets"``.
    path
        The request path, for the log.
    handle
        Produces the response of an admitted request, outside the admission transaction.
        If it raises, the call still counts (logged with status 500) and the exception
        propagates.
    presumed
        The outcome expected (status, polygon, page): the log row is written with it in the
        admission's commit and updated afterwards only if ``handle`` differs. ``None``: status
        0 until handled.

    Returns
    -------
    Refusal or Outcome
        The refusal (401/429) or what ``handle`` returned.

    Raises
    ------
    StoreBusyError
        The key store stayed locked past its busy timeout (nothing was counted).
    """
    (result,) = admit_all(store, [Call(api_key, service, path, handle, presumed)], now)
    if isinstance(result, Exception):
        raise result
    return result


def admit_all(
    store: KeyStore | Admission, calls: Sequence[Call[T]], now: Callable[[], float] = time.time
) -> list[Result[T]]:
    """Several requests, in order: admitted together (by ``store``'s admission), then
    handled outside the admission's transaction, then their log rows settled.

    On SQLite the admissions share one transaction (one lock, one commit), and the log
    rows of the handled requests are settled in one more. Each request still sees the
    ones before it: the counts are exactly those of admitting them one at a time.

    Returns
    -------
    list
        Per call: its refusal, its outcome, or the exception that stopped it — a
        :class:`StoreBusyError` (the store stayed locked: nothing was counted for it) or
        an unexpected error of the store.

    Raises
    ------
    BaseException
        What a ``handle`` raised that is not an :class:`Exception` (an interrupt), once the
        calls handled so far are settled; the call that raised is logged with status 500.
    """
    admission = admission_for(store) if isinstance(store, KeyStore) else store
    decisions = admission.decide(calls, now)
    handled: list[tuple[limits.Admitted, Outcome[Any], Outcome[Any]]] = []
    try:
        return limits.handle_admitted(calls, decisions, handled)
    finally:
        _settle(admission.keys, handled)


def _settle(store: KeyStore, handled: limits.Handled) -> None:
    """Run :func:`~parcelsearch_service.limits.settling`'s statements in one transaction (if
    there are any)."""
    statements = limits.settling(handled)
    if not statements:
        return
    try:
        with store.transaction() as conn:
            for statement, params in statements:
                store.execute(conn, statement, params)
    except StoreBusyError:  # the calls are counted and answered; only their rows lag
        log.warning(limits.SETTLE_LAGS, len(statements))


class Gateway:
    """Admits and handles the calls of one service: on the event loop when its admission
    can do that without waiting, else on a thread.

    Parameters
    ----------
    keys
        The key store; its dialect picks the admission (:func:`admission_for`).
    parcels
        The parcel store.
    portal
        Counts spike-arrest refusals for the portal's usage pages.

    Notes
    -----
    Threads and pools start on first use, so a service forked into workers starts its own.
    """

    def __init__(
        self, keys: KeyStore, parcels: ParcelStore | PostgisParcelStore, portal: PortalStore
    ) -> None:
        self.admission = admission_for(keys, parcels, portal)
        self.portal = portal
        self._batcher: Batcher[Call[bytes], Result[bytes]] | None = None
        self._threads: ThreadPoolExecutor | None = None
        if self.admission.waits:
            self._threads = ThreadPoolExecutor(THREADS_NETWORKED, thread_name_prefix="parcelsearch")
        else:
            self._batcher = Batcher(self._on_thread, name="parcelsearch-gate")

    def __repr__(self) -> str:
        return f"Gateway({self.admission!r})"

    async def answer(self, call: Call[bytes]) -> Result[bytes]:
        """``call``'s refusal, outcome or failure: admitted, handled and settled."""
        result = await self.admission.answer(call)
        if result is not None:
            return result
        if self._batcher is not None:
            return await self._batcher.run(call)
        results = await asyncio.get_running_loop().run_in_executor(
            self._threads, self._on_thread, [call]
        )
        return results[0]

    def _on_thread(self, calls: Sequence[Call[bytes]]) -> list[Result[bytes]]:
        """Admit ``calls`` together, handle the admitted ones; a spike-arrest refusal is
        tallied for the portal's page."""
        results = admit_all(self.admission, calls)
        for call, result in zip(calls, results, strict=True):
            if isinstance(result, Refusal) and result.retry_after is not None:
                self._count_spike_refusal(call.api_key)
        return results

    def _count_spike_refusal(self, api_key: str) -> None:
        try:
            self.portal.count_spike_refusal(api_key)
        except StoreBusyError:  # the refusal is answered; only the portal's tally misses it
            log.warning("spike-arrest refusal not tallied: the key store stayed busy")

    async def close(self) -> None:
        """Close what the admission opened on this loop (pools, the loop's connection)."""
        await self.admission.close()
