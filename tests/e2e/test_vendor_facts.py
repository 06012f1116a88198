"""The vendor's facts learnt, not assumed (issue 47, points 3, 5, 6 and 7): opaque GroupIDs,
a retired endpoint, maintenance pages sent with status 200, a body trickled past the response
deadline, and a long ``Retry-After``. The stand-in vendor's request log (tests/_vendor.py) is
the witness of every call."""

from __future__ import annotations

import time

import pytest
from _vendor import GONE_WORDS, MINIMUM, SUNSET, exact, fault_on, search, shown_id

#: Threads of the runs below that check what leaves after an answer: at most one other call
#: can be on its way when the answer comes.
WORKERS = "2"


def arrivals_after(vendor, moment: float) -> list:
    return [a for a in vendor.log if a.at > moment]


@pytest.mark.parametrize("style", ["upper", "opaque"])
def test_group_ids_are_opaque_strings(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys, style
) -> None:
    vendor_env.set(ids=style)
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 0, err
    expected = {
        area: {shown_id(g, style) for g in group} for area, group in vendor_fabric[2].items()
    }
    assert exact(ids, expected) and meta["complete"] is True
    assert vendor_env.calls() == MINIMUM


def test_ids_with_markup_are_refused_naming_why(
    vendor_env, vendor_areas, tmp_path, capsys, monkeypatch
) -> None:
    import _vendor

    monkeypatch.setattr(_vendor, "shown_id", lambda gid, style: f"<b>{gid}</b>")
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 3, err
    assert "are not usable ids" in err and "holds markup" in err
    assert "<" not in err  # said by position, never shown as markup


@pytest.mark.parametrize("workers", ["1", "4"])
def test_a_retired_endpoint_stops_the_run_at_the_first_answer(
    vendor_env, vendor_areas, tmp_path, capsys, workers
) -> None:
    vendor_env.set(fault=fault_on(None, "gone410"))
    code, out, err, ids, meta = search(
        capsys, vendor_areas, tmp_path / "ids.parquet", "--workers", workers
    )
    assert code == 1, err
    assert GONE_WORDS in err and f"Sunset: {SUNSET}" in err and "HTTP 410" in err
    assert vendor_env.calls() == 1  # the first answer: not one call per area


def test_a_retirement_mid_run_lets_no_call_leave_after_it(
    vendor_env, vendor_areas, tmp_path, capsys
) -> None:
    vendor_env.set(fault=lambda arrival: "gone410" if arrival.number >= 3 else None)
    code, out, err, ids, meta = search(
        capsys, vendor_areas, tmp_path / "ids.parquet", "--workers", WORKERS
    )
    assert code == 1, err
    assert GONE_WORDS in err and SUNSET in err
    first = min(a.answered for a in vendor_env.log if a.status == 410)
    late = arrivals_after(vendor_env, first)
    assert len(late) <= int(WORKERS) - 1  # only a call already on its way, no new one
    assert meta == {} or meta["complete"] is False


@pytest.mark.slow
def test_maintenance_pages_are_backed_off_never_probed(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys
) -> None:
    window: dict[str, float] = {}

    def maintenance(arrival):  # down for 1.5 s from the second call on
        if arrival.number < 2:
            return None
        start = window.setdefault("start", arrival.at)
        return "maint200" if arrival.at < start + 1.5 else None

    vendor_env.set(fault=maintenance)
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet")
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    down = [a for a in vendor_env.log if a.status == 200 and maintenance(a)]
    assert down  # the behaviour was met
    assert vendor_env.calls() == MINIMUM + len(down)  # each page paid once, plus the pages
    assert not [a for a in vendor_env.log if a.page == 0]  # no paging probe
    tries: dict[tuple[str | None, int | None], int] = {}
    for a in down:
        tries[(a.polygon, a.page)] = tries.get((a.polygon, a.page), 0) + 1
    assert max(tries.values()) <= 3  # backed off (0, 1, 2 s), not hammered


@pytest.mark.slow
def test_a_maintenance_page_first_is_met_by_one_request(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys
) -> None:
    # down for 1.5 s from the first call: with four workers, only the run's first request
    # is on the wire until an answer comes back, so only it meets the maintenance page
    window: dict[str, float] = {}

    def maintenance(arrival):
        start = window.setdefault("start", arrival.at)
        return "maint200" if arrival.at < start + 1.5 else None

    vendor_env.set(fault=maintenance)
    code, out, err, ids, meta = search(
        capsys, vendor_areas, tmp_path / "ids.parquet", "--workers", "4"
    )
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    down = [a for a in vendor_env.log if a.status == 200 and maintenance(a)]
    assert down and len({(a.polygon, a.page) for a in down}) == 1  # one request met it
    assert vendor_env.calls() == MINIMUM + len(down)
    assert not [a for a in vendor_env.log if a.page == 0]  # no paging probe


@pytest.mark.slow
@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_trickled_body_is_abandoned_at_the_deadline(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys, monkeypatch, how
) -> None:
    # about 2 KB, 4 bytes every 0.5 s: four minutes whole, each gap far within a read timeout
    vendor_env.set(trickle=lambda arrival: arrival.number == 2)
    extra: tuple[str, ...] = ()
    if how == "flag":
        extra = ("--response-deadline", "2")
    else:
        monkeypatch.setenv("PARCELSEARCH_RESPONSE_DEADLINE", "2")
    code, out, err, ids, meta = search(capsys, vendor_areas, tmp_path / "ids.parquet", *extra)
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    assert vendor_env.calls() == MINIMUM + 1  # the trickled answer, asked once more
    trickled = vendor_env.log[1]
    for _ in range(100):  # the stand-in learns of the hang-up at its next write
        if trickled.hung_up:
            break
        time.sleep(0.1)
    assert trickled.hung_up  # abandoned mid-body, not read to its end


@pytest.mark.slow
def test_retry_after_holds_every_thread_of_the_key(
    vendor_env, vendor_areas, vendor_fabric, tmp_path, capsys
) -> None:
    vendor_env.set(fault=fault_on({2}, "wait429"), retry_after=2)  # 2 more page 1s to ask
    code, out, err, ids, meta = search(
        capsys, vendor_areas, tmp_path / "ids.parquet", "--workers", WORKERS
    )
    assert code == 0, err
    assert exact(ids, vendor_fabric[2]) and meta["complete"] is True
    assert vendor_env.calls() == MINIMUM + 1
    told = vendor_env.log[1].answered
    during = [a for a in vendor_env.log if told < a.at < told + 2]
    assert len(during) <= int(WORKERS) - 1  # at most a call already on its way …
    assert all(a.at < told + 0.5 for a in during)  # … arriving at once, none sent later


def test_a_retry_after_longer_than_a_run_waits_stops_it(
    vendor_env, vendor_areas, tmp_path, capsys
) -> None:
    vendor_env.set(fault=fault_on({3}, "wait429"), retry_after=600)
    code, out, err, ids, meta = search(
        capsys, vendor_areas, tmp_path / "ids.parquet", "--workers", WORKERS
    )
    assert code == 1, err
    assert "wait 600 s (Retry-After)" in err and "no request was sent before that time" in err
    told = vendor_env.log[2].answered
    late = arrivals_after(vendor_env, told)
    assert len(late) <= int(WORKERS) - 1 and all(a.at < told + 0.5 for a in late)
