"""The quota ledger: quotas parsed, attempts counted, budgets and quotas never overspent."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest
from _threads import race

from parcelsearch.errors import ConfigurationError, InputError, QuotaWouldExceedError
from parcelsearch.stores.local.ledger import Ledger
from parcelsearch.stores.quotas import Quota, Usage

FP = "0123456789abcdef"
OTHER = "fedcba9876543210"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("demo", Quota(50, "lifetime"), id="demo"),
        pytest.param("production", Quota(500, "month"), id="production"),
        pytest.param("500/month", Quota(500, "month"), id="per-month"),
        pytest.param(" 50 / Lifetime ", Quota(50, "lifetime"), id="spaces-and-case"),
        pytest.param("none", None, id="none"),
        pytest.param("", None, id="empty"),
    ],
)
def test_quota_parse(text: str, expected: Quota | None) -> None:
    assert Quota.parse(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("500", id="no-period"),
        pytest.param("500/week", id="unknown-period"),
        pytest.param("-5/month", id="negative"),
        pytest.param("lots", id="word"),
    ],
)
def test_quota_parse_refuses_nonsense(text: str) -> None:
    with pytest.raises(ConfigurationError, match="not a quota"):
        Quota.parse(text)


def test_quota_parse_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARCELSEARCH_QUOTA", "7/lifetime")
    assert Quota.parse(None) == Quota(7, "lifetime")
    monkeypatch.setenv("PARCELSEARCH_QUOTA", "bogus")
    with pytest.raises(ConfigurationError, match="PARCELSEARCH_QUOTA"):
        Quota.parse(None)
    monkeypatch.delenv("PARCELSEARCH_QUOTA")
    assert Quota.parse(None) is None


@pytest.mark.parametrize(
    ("quota", "usage", "left"),
    [
        pytest.param(Quota(500, "month"), Usage(lifetime=900, month=120), 380, id="month"),
        pytest.param(Quota(50, "lifetime"), Usage(lifetime=48, month=3), 2, id="lifetime"),
        pytest.param(Quota(50, "lifetime"), Usage(lifetime=60, month=60), 0, id="never-negative"),
    ],
)
def test_quota_remaining(quota: Quota, usage: Usage, left: int) -> None:
    assert quota.remaining(usage) == left


def test_attempts_are_counted_per_key(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite")
    for _ in range(3):
        ledger.reserve(FP, run_id="a")
    ledger.reserve(OTHER, run_id="b")
    assert ledger.usage(FP) == Usage(lifetime=3, month=3)
    assert ledger.usage(OTHER) == Usage(lifetime=1, month=1)
    assert Ledger(tmp_path / "ledger.sqlite").usage(FP).lifetime == 3  # persisted


def test_months_are_calendar_months_in_utc(tmp_path: Path) -> None:
    now = [datetime(2024, 1, 31, 23, 59, tzinfo=UTC)]
    ledger = Ledger(tmp_path / "l.sqlite", clock=lambda: now[0])
    ledger.reserve(FP, run_id="r")
    ledger.reserve(FP, run_id="r")
    now[0] = datetime(2024, 2, 1, 0, 0, tzinfo=UTC)
    ledger.reserve(FP, run_id="r")
    assert ledger.usage(FP) == Usage(lifetime=3, month=1)
    assert ledger.remaining(FP, Quota(500, "month")) == 499
    assert ledger.remaining(FP, Quota(50, "lifetime")) == 47
    assert ledger.remaining(FP, None) is None


def test_quota_used_up_refuses_the_attempt(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.sqlite")
    quota = Quota(3, "lifetime")
    for _ in range(3):
        ledger.reserve(FP, run_id="r", quota=quota)
    with pytest.raises(QuotaWouldExceedError, match="no calls left") as caught:
        ledger.reserve(FP, run_id="r2", quota=quota)
    assert (caught.value.needed, caught.value.allowed) == (1, 0)
    assert ledger.usage(FP).lifetime == 3


def test_a_spent_lifetime_quota_never_suggests_waiting(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.sqlite")
    for period, says in (("lifetime", "never resets"), ("month", "next month")):
        quota = Quota(1, period)  # type: ignore[arg-type]
        fingerprint = FP if period == "lifetime" else OTHER
        ledger.reserve(fingerprint, run_id=period, quota=quota)
        with pytest.raises(QuotaWouldExceedError, match=says):
            ledger.reserve(fingerprint, run_id=period, quota=quota)


def test_refund_takes_back_exactly_that_reservation(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.sqlite")
    first = ledger.reserve(FP, run_id="a")
    second = ledger.reserve(FP, run_id="b")
    assert first != second
    ledger.refund(FP, first)
    assert ledger.usage(FP).lifetime == 1
    ledger.refund(FP, first)  # already taken back: nothing more
    ledger.refund(OTHER, second)  # another key's: not this one
    assert ledger.usage(FP).lifetime == 1


@pytest.mark.parametrize(
    "fingerprint",
    [
        pytest.param("sk-live-0123456789abcdef", id="a-key"),
        pytest.param("0123456789ABCDEF", id="uppercase"),
        pytest.param("0123", id="short"),
    ],
)
def test_only_fingerprints_are_recorded(tmp_path: Path, fingerprint: str) -> None:
    """An error of the one tree (issue 50), still a ValueError, never showing the key."""
    with pytest.raises(ValueError, match="never keys") as caught:
        Ledger(tmp_path / "l.sqlite").reserve(fingerprint, run_id="r")
    assert isinstance(caught.value, InputError) and caught.value.field == "fingerprint"
    assert fingerprint not in str(caught.value)


def test_sixteen_threads_never_exceed_the_quota(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.sqlite")
    granted, refused = race(
        lambda _: ledger.reserve(FP, run_id="run", quota=Quota(37, "month")), QuotaWouldExceedError
    )
    assert (granted, refused) == (37, 160 - 37)
    assert ledger.usage(FP).lifetime == 37


def test_processes_share_one_quota_exactly(tmp_path: Path) -> None:
    path = tmp_path / "l.sqlite"
    Ledger(path)
    script = (
        "import sys\n"
        "from parcelsearch.stores.local.ledger import Ledger\n"
        "from parcelsearch.stores.quotas import Quota\n"
        "from parcelsearch.errors import QuotaWouldExceedError\n"
        "ledger, ok = Ledger(sys.argv[1]), 0\n"
        "for _ in range(40):\n"
        "    try:\n"
        "        ledger.reserve('0123456789abcdef', run_id=sys.argv[2],\n"
        "                       quota=Quota(50, 'lifetime'))\n"
        "        ok += 1\n"
        "    except QuotaWouldExceedError:\n"
        "        pass\n"
        "print(ok)\n"
    )
    children = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(path), f"p{k}"], stdout=subprocess.PIPE, text=True
        )
        for k in range(3)
    ]
    granted = [int(child.communicate(timeout=60)[0]) for child in children]
    assert sum(granted) == 50
    assert Ledger(path).usage(FP).lifetime == 50


def test_the_file_holds_no_key_material(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.reserve(FP, run_id="r")
    with closing(sqlite3.connect(tmp_path / "l.sqlite")) as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(attempts)")]
    assert columns == ["id", "fingerprint", "run_id", "month", "at"]


def test_default_path_is_in_the_cache_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARCELSEARCH_CACHE_DIR", str(tmp_path))
    assert Ledger().path == tmp_path / "ledger.sqlite"


def test_the_vendors_quota_refusal_is_kept_by_fingerprint_until_its_reset(tmp_path: Path) -> None:
    """Issue 56: a key the vendor refused for its quota is kept (its fingerprint only) until
    the reset; then forgotten. A lifetime quota's refusal never lapses; other keys are not
    touched."""
    now = [datetime(2026, 11, 29, 1, 50, tzinfo=UTC)]
    ledger = Ledger(tmp_path / "ledger.sqlite", clock=lambda: now[0])
    reset = datetime(2026, 12, 1, tzinfo=UTC)
    kept = ledger.refused(FP, reset)
    assert ledger.refusal(FP) == kept and ledger.refusal(OTHER) is None
    assert kept.left() == "0 left this month, resets 2026-12-01 00:00 UTC"
    assert kept.describe().startswith(
        "the vendor refused the key for its quota on 2026-11-29 01:50 UTC"
    )
    now[0] = datetime(2026, 11, 30, 23, 59, tzinfo=UTC)
    assert ledger.refusal(FP) is not None
    now[0] = reset
    assert ledger.refusal(FP) is None  # the quota has reset
    ledger.refused(OTHER, None)
    now[0] = datetime(2030, 1, 1, tzinfo=UTC)
    assert ledger.refusal(OTHER) is not None and ledger.refusal(OTHER).until is None  # type: ignore[union-attr]
    with pytest.raises(InputError):
        ledger.refused("the-key-itself", reset)
