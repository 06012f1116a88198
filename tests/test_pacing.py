"""The pacer's slots, pace and permits (:mod:`parcelsearch._fetch.pacing`)."""

from __future__ import annotations

import threading
import time

import pytest

from parcelsearch._fetch.pacing import FIRST_CALL_ALLOWANCE, Cancelled, RateLimiter
from parcelsearch.stores.spending import RESERVE_LEAD


def test_limiter_leaves_room_for_a_first_call_and_its_reservation() -> None:
    """Measured before: a first call 57 ms late at the server and the next on time packed
    11 calls into 1.0 s at 10/s; a call due at once was sent late by its reservation."""
    limiter = RateLimiter(40.0)
    start = time.monotonic()
    first = limiter.wait(lead=RESERVE_LEAD)  # returns the lead before the slot
    second, third = limiter.wait(), limiter.wait()
    assert first >= start + RESERVE_LEAD  # room to reserve before even the first slot
    assert second - first == pytest.approx(limiter.interval + FIRST_CALL_ALLOWANCE)
    assert third - second == pytest.approx(limiter.interval)


def test_a_pause_moves_every_later_slot_past_it() -> None:
    limiter = RateLimiter(1000.0)
    limiter.wait()
    paused_at = time.monotonic()
    limiter.pause(0.2)
    assert limiter.wait() >= paused_at + 0.2  # a slot claimed after the pause


def test_a_call_holding_a_slot_is_held_until_the_pause_ends() -> None:
    limiter = RateLimiter(1000.0)
    limiter.wait()  # this call's slot came before the Retry-After …
    paused_at = time.monotonic()
    limiter.pause(0.2)
    limiter.hold()  # … and it still does not leave before the pause ends
    assert time.monotonic() >= paused_at + 0.2


def test_a_stop_wakes_a_held_call() -> None:
    limiter = RateLimiter(1000.0)
    limiter.pause(600)
    stop = threading.Event()
    threading.Timer(0.05, stop.set).start()
    with pytest.raises(Cancelled):
        limiter.hold(stop)


def test_each_refusal_slows_the_pace_and_each_call_brings_it_back() -> None:
    """Issue 59: AIMD. A refusal (a Retry-After) multiplies the pace by DECREASE; each call
    adds INCREASE of the rate back, up to CEILING of the pace refused at; strict spacing (the
    bench's baseline) keeps its pace."""
    limiter, strict = RateLimiter(1000.0), RateLimiter(1000.0, adaptive=False)
    full = limiter.pace
    for pacer in (limiter, strict):
        pacer.pause(0.0)
    assert limiter.pace == pytest.approx(full * RateLimiter.DECREASE)
    assert limiter.interval == pytest.approx(1 / limiter.pace)
    assert strict.pace == full and (limiter.refusals, strict.refusals) == (1, 1)
    for _ in range(50):  # back up to the most learnt: CEILING of the pace refused at, probed
        limiter.wait()
    assert limiter.pace == pytest.approx(full * RateLimiter.CEILING + 50 * RateLimiter.PROBE * 1000)
    for _ in range(200):  # the probe reaches the rate less the margin again
        limiter.wait()
    assert limiter.pace == pytest.approx(full)
    assert "1 refusals met" in repr(limiter)
    for _ in range(50):
        limiter.pause(0.0)
    assert limiter.pace == pytest.approx(RateLimiter.FLOOR * 1000)


class _Clock:
    """A fake clock for the pacer's own arithmetic: ``sleep`` moves time on at once."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)

    def time(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    from parcelsearch._fetch import pacing

    fake = _Clock()
    monkeypatch.setattr(pacing, "time", fake)
    return fake


@pytest.mark.parametrize(
    ("rate", "window"),
    [
        (10.0, (10, 1.0)),
        (2.5, (2, 1.0)),
        (1.0, (1, 1.0)),
        (0.5, (1, 2.0)),
    ],
)
def test_the_pacer_holds_the_spike_arrests_window(rate: float, window: tuple[int, float]) -> None:
    from parcelsearch._fetch.pacing import spike_window
    from parcelsearch_service.limits import spike_window as services

    assert spike_window(rate) == window == services(rate)  # the vendor's rule, as served
    assert RateLimiter(rate).window == window


@pytest.mark.parametrize("rate", [1001.0, 1e308, float("inf")])
def test_a_rate_past_any_vendors_is_paced_by_spacing_alone(rate: float) -> None:
    limiter = RateLimiter(rate)  # no million permits, no overflow
    assert limiter.window is None
    limiter.wait()
    limiter.done()


def test_a_permit_is_free_a_window_after_the_answer_of_the_call_that_used_it(clock: _Clock) -> None:
    """Issue 59, point 4: the server counts calls by its own admission time, which the
    send→admission delay moves; a call's permit comes back a window after its *answer*, so
    the next call on it reaches the server more than a window after that admission."""
    limiter = RateLimiter(2.5, margin=0.0)  # the server allows 2 in any second
    slots, answers = [], []
    for _ in range(5):
        slots.append(limiter.wait())
        clock.sleep(0.3)  # the round trip: the answer comes 0.3 s after the call left
        answers.append(clock.monotonic())
        limiter.done()
    for i in range(2, 5):  # the i-th call leaves no sooner than call i - 2's answer + 1 s
        assert slots[i] >= answers[i - 2] + 1.0
    assert slots[2] == pytest.approx(answers[0] + 1.0)  # spacing alone: slots[1] + 0.4
    strict = RateLimiter(2.5, margin=0.0, permits=False)  # before: three calls in 1 s
    first = strict.wait()
    strict.wait()
    assert strict.wait() - first < 1.0


def test_a_call_never_sent_gives_its_permit_back_at_once(clock: _Clock) -> None:
    limiter = RateLimiter(1.0, margin=0.0)  # one call in any second
    first = limiter.wait()
    clock.sleep(0.3)
    limiter.done(sent=False)  # refused a connection: the service never saw it
    assert limiter.wait() == pytest.approx(first + 1.0 + FIRST_CALL_ALLOWANCE)  # spacing only
    clock.sleep(0.3)
    answered = clock.monotonic()
    limiter.done()  # answered (a 429 too): free a second after the answer
    assert limiter.wait() == pytest.approx(answered + 1.0)


def test_a_thread_waiting_again_hands_back_its_last_permit_as_answered_now(clock: _Clock) -> None:
    """A caller that never says :meth:`done` (the thread is back: its call is over) keeps
    the rule and never runs out of permits."""
    limiter = RateLimiter(1.0, margin=0.0)
    limiter.wait()
    clock.sleep(0.5)
    again = clock.monotonic()
    assert limiter.wait() == pytest.approx(again + 1.0)
    limiter.done()
    limiter.done()  # no permit held: nothing to hand back
    assert len(limiter._free or []) == 1


def test_a_stop_while_waiting_gives_the_permit_back() -> None:
    limiter = RateLimiter(1.0)
    limiter.wait()
    limiter.done()  # answered: the one permit is free a second from now
    stop = threading.Event()
    threading.Timer(0.05, stop.set).start()
    with pytest.raises(Cancelled):
        limiter.wait(stop)
    assert len(limiter._free or []) == 1  # given back, not lost


def test_every_permit_in_flight_holds_the_next_call_until_an_answer() -> None:
    limiter = RateLimiter(1.0)
    limiter.wait()  # this thread's call is in flight
    left = []

    def other() -> None:
        left.append(limiter.wait())
        limiter.done(sent=False)

    waiter = threading.Thread(target=other)
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and not left  # no permit: held
    limiter.done()  # the answer came
    waiter.join(10)
    assert len(left) == 1
