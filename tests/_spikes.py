"""The spike arrest as the service sees it: its own tally of a key's refusals, and the
pacer's promise checked on its own clock.

A pacer promises slots at least ``interval`` apart on the client's clock; a call leaves at
its slot or later (a thread woken late on a busy machine leaves late), never sooner. So,
whatever the scheduler does, the k-th call the service admits (oldest first, on the
service's clock) arrived no sooner than ``start + k × interval`` — less ``lead`` when the
caller is let through that long before its slot — where ``start`` is a moment before the
first slot was taken. What a busy machine can do is bunch calls that left late with calls
that left on time: the service may then refuse one (a spike arrest, not counted, answered
with ``Retry-After``), which the client waits out and retries. That is the allowance; a call
admitted sooner than its slot allows is a regression of the pacer, whatever the load.
"""

from __future__ import annotations

import pandas as pd

from parcelsearch_service.keys import KeyStore

#: Two clocks of one machine (the service's ``time.time``, the pacer's ``time.monotonic``)
#: may drift apart by a few parts in ten thousand while the kernel slews the wall clock: at
#: most 5 ms over a test's seconds of pacing.
CLOCKS = 0.005


def spike_refusals(keys: KeyStore, name: str) -> int:
    """The spike-arrest refusals the service tallied for key ``name`` (its portal's count,
    all days)."""
    row = keys.query(
        "SELECT coalesce(sum(s.count), 0) AS n FROM spike_refusals s"
        " JOIN keys k ON k.id = s.key_id WHERE k.name = ?",
        (name,),
    ).fetchone()
    return int(row["n"])


def admitted(log: pd.DataFrame) -> list[float]:
    """The moments (epoch seconds, the service's clock) of the admissions in the service's
    request log ``log``, oldest first."""
    return sorted(moment.timestamp() for moment in log["time"])


def early_admissions(
    log: pd.DataFrame, start: float, interval: float, *, lead: float = 0.0, first: float = 0.0
) -> dict[int, float]:
    """The admissions in the service's request log ``log`` sooner than a pacer keeping its
    promise could have sent them: ``{k: seconds too soon}`` for the k-th admission (oldest
    first) before ``start + k × interval - lead`` (plus ``first``, the pacer's allowance
    after its first slot, for k ≥ 1), beyond :data:`CLOCKS`. ``start`` is a wall-clock time
    (``time.time()``) before the first slot was taken."""
    times = admitted(log)
    bounds = [start + k * interval - lead + (first if k else 0.0) for k in range(len(times))]
    return {
        k: round(bound - t, 4)
        for k, (t, bound) in enumerate(zip(times, bounds, strict=True))
        if t < bound - CLOCKS
    }


def lateness(log: pd.DataFrame, interval: float, *, lead: float = 0.0) -> float:
    """How late (seconds) some call must have reached the service for a pacer keeping its
    promise to have sent the admissions in ``log`` as the service saw them: the most, over
    every pair of admissions (oldest first) i < j, by which they came closer together than
    ``(j - i) × interval - lead``. A pacer sends no call sooner than its turn, so without
    late calls this is at most 0; a late call makes it at most how late that call was."""
    times = admitted(log)
    return max(
        (
            0.0,
            *(
                (j - i) * interval - lead - (times[j] - times[i])
                for i in range(len(times))
                for j in range(i + 1, len(times))
            ),
        )
    )


def sooner_than_turns(
    times: list[float], slots: list[float], *, lead: float = 0.0
) -> dict[int, float]:
    """The calls let through (``times``: e.g. :func:`admitted`, the service's admissions,
    or the moments members were released) sooner than the pacer's turns allow:
    ``{k: seconds too soon}`` for the k-th (oldest first) before the k-th of ``slots``
    (wall-clock times no later than the turns given, one for each call sent, admitted or
    refused) less ``lead``, beyond :data:`CLOCKS`. A call leaves at its turn or later, so
    each comes after its own turn, and the k-th after the k-th turn, whatever the scheduler
    does."""
    pairs = enumerate(zip(sorted(times), sorted(slots), strict=False))
    return {k: round(slot - lead - t, 4) for k, (t, slot) in pairs if t < slot - lead - CLOCKS}
