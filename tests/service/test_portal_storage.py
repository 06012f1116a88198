"""The portal's storage: password hashes, session expiry, sign-in throttling (fake clock)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from parcelsearch.errors import ConfigurationError
from parcelsearch_service.keys import KeyStore
from parcelsearch_service.portal.accounts import SIGNINS_KEPT, normalise_email
from parcelsearch_service.portal.passwords import hash_password, verify_password
from parcelsearch_service.portal.signin import Throttle
from parcelsearch_service.portal.storage import PortalStore
from parcelsearch_service.portal.usage import HISTORY_DAYS

PASSWORD = "correct horse battery staple"


class Clock:
    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(keys_location: str, clock: Clock) -> Iterator[PortalStore]:
    keys = KeyStore(keys_location)
    yield PortalStore(
        keys, idle_timeout=600, max_age=3600, throttle=Throttle(3, 5, 900), clock=clock
    )
    keys.close()


def test_password_hash_is_salted_scrypt() -> None:
    first, second = hash_password(PASSWORD), hash_password(PASSWORD)
    assert first != second  # a fresh salt each time
    assert first.startswith("scrypt$") and PASSWORD not in first
    assert verify_password(PASSWORD, first) and verify_password(PASSWORD, second)
    assert not verify_password(PASSWORD + "!", first)
    assert not verify_password(PASSWORD, "md5$whatever")


def test_only_the_hash_is_stored(store: PortalStore) -> None:
    store.add_user("Alice@Example.com ", PASSWORD)
    row = store.keys.execute(
        store.keys.connection(), "SELECT email, password_hash FROM portal_users"
    ).fetchone()
    assert row["email"] == "alice@example.com"
    assert PASSWORD not in row["password_hash"]
    assert store.authenticate("ALICE@example.com", PASSWORD) is not None
    assert store.authenticate("alice@example.com", "wrong password here") is None


@pytest.mark.parametrize(
    ("email", "password", "message"),
    [
        pytest.param("not-an-address", PASSWORD, "not an e-mail address", id="bad-email"),
        pytest.param("a@example.com", "short", "at least 12 characters", id="short-password"),
    ],
)
def test_bad_users_are_refused(store: PortalStore, email: str, password: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as caught:
        store.add_user(email, password)
    if password != PASSWORD:  # a refused password is never echoed
        assert password not in str(caught.value)


def test_a_user_is_added_once(store: PortalStore) -> None:
    store.add_user("bob@example.com", PASSWORD)
    with pytest.raises(ConfigurationError, match="bob@example.com already exists"):
        store.add_user("BOB@example.com", PASSWORD)


def test_session_expires_when_idle_and_at_max_age(store: PortalStore, clock: Clock) -> None:
    user = store.add_user("carol@example.com", PASSWORD)
    token, _ = store.new_session(user)
    clock.now += 599
    assert store.session(token) is not None  # seen: the idle clock restarts
    clock.now += 599
    assert store.session(token) is not None
    clock.now += 601
    assert store.session(token) is None  # idle too long
    token, _ = store.new_session(user)
    for _ in range(7):
        clock.now += 500
        assert store.session(token) is not None
    clock.now += 500  # 4,000 s after sign-in: past max_age although never idle
    assert store.session(token) is None


def test_ended_session_is_gone(store: PortalStore) -> None:
    token, session = store.new_session(None)
    assert store.session(token) == session
    store.end_session(token)
    assert store.session(token) is None
    assert store.session("x" * 500) is None and store.session(None) is None


def _fail(store: PortalStore, email: str, address: str, device: str | None = None) -> None:
    attempt = store.begin_signin(email, address, device)
    assert isinstance(attempt, int), attempt
    store.signin_failed(attempt, device)


def test_throttle_per_account_then_per_address(store: PortalStore, clock: Clock) -> None:
    for _ in range(3):
        assert store.signin_wait("dan@example.com", "10.0.0.1") is None
        _fail(store, "dan@example.com", "10.0.0.1")
    kind, wait = store.signin_wait("DAN@example.com", "10.0.0.9") or ("", 0.0)
    assert kind == "account" and 0 < wait <= 900
    _fail(store, "eve@example.com", "10.0.0.1")
    _fail(store, "fay@example.com", "10.0.0.1")
    blocked = store.begin_signin("gus@example.com", "10.0.0.1")
    assert isinstance(blocked, tuple) and blocked[0] == "address"
    assert store.signin_wait("gus@example.com", "10.0.0.2") is None
    clock.now += 901
    assert store.signin_wait("dan@example.com", "10.0.0.1") is None


def test_account_throttle_slows_down_and_never_locks(store: PortalStore, clock: Clock) -> None:
    """After the free failures each attempt waits twice as long as the one before, up to
    ``max_delay`` (15 minutes): never longer, however many guesses came before."""
    waits = []
    for n in range(12):
        blocked = store.begin_signin("ida@example.com", f"10.1.0.{n}")
        if isinstance(blocked, tuple):
            waits.append(blocked[1])
            clock.now += blocked[1]
            blocked = store.begin_signin("ida@example.com", f"10.1.0.{n}")
        assert isinstance(blocked, int)
        store.signin_failed(blocked)
    assert waits[:5] == [30.0, 60.0, 120.0, 240.0, 480.0]
    assert max(waits) == 900.0 == waits[-1]


def test_a_device_that_signed_in_before_is_not_slowed_down(store: PortalStore) -> None:
    user = store.add_user("joe@example.com", PASSWORD)
    attempt = store.begin_signin("joe@example.com", "10.2.0.1")
    assert isinstance(attempt, int)
    device = store.signin_succeeded(attempt, user, "10.2.0.1")
    for _ in range(3):  # someone else guesses: the account is slowed down for them
        _fail(store, "joe@example.com", "10.9.9.9")
    assert isinstance(store.begin_signin("joe@example.com", "10.9.9.9"), tuple)
    for _ in range(3):  # the owner's browser is not; its own failures end its exemption
        _fail(store, "joe@example.com", "10.2.0.1", device)
    assert isinstance(store.begin_signin("joe@example.com", "10.2.0.1", device), tuple)
    assert isinstance(store.begin_signin("joe@example.com", "10.2.0.1", "not-a-device"), tuple)


def test_a_device_cookie_passes_a_throttled_address(store: PortalStore) -> None:
    user = store.add_user("lee@example.com", PASSWORD)
    attempt = store.begin_signin("lee@example.com", "10.4.0.1")
    assert isinstance(attempt, int)
    device = store.signin_succeeded(attempt, user, "10.4.0.1")
    for n in range(5):  # password spraying from the same address (NAT): 5 per address here
        _fail(store, f"other{n}@example.com", "10.4.0.1")
    blocked = store.begin_signin("lee@example.com", "10.4.0.1")
    assert isinstance(blocked, tuple) and blocked[0] == "address"
    assert isinstance(store.begin_signin("lee@example.com", "10.4.0.1", device), int)


@pytest.mark.parametrize(
    "password",
    [
        "aaaaaaaaaaaa",
        "abcabcabcabc",
        "abcdefghijklmnop",
        "qwertyuiopasdf",
        "1234567890123",
        "zzzzzzzzzzzab12",
    ],
)
def test_weak_passwords_are_refused_with_the_reason(store: PortalStore, password: str) -> None:
    with pytest.raises(ConfigurationError, match="the password is too easy to guess") as caught:
        store.add_user("kim@example.com", password)
    assert password not in str(caught.value)


def test_app_names_are_unique_per_user_not_across_users(store: PortalStore) -> None:
    amy = store.add_user("amy@example.com", PASSWORD)
    ben = store.add_user("ben@example.com", PASSWORD)
    store.create_app(amy, "shared", "demo", ["search"])
    store.create_app(ben, "shared", "demo", ["search"])  # another tenant: allowed, no hint
    with pytest.raises(ConfigurationError, match="you already have an app named 'shared'"):
        store.create_app(amy, " shared ", "demo", ["search"])
    assert [a.name for a in store.apps(amy)] == [a.name for a in store.apps(ben)] == ["shared"]


def test_email_normalised() -> None:
    assert normalise_email("  Ann@Example.ORG") == "ann@example.org"
    with pytest.raises(ConfigurationError, match="analyst@example.com"):
        normalise_email("<script>@x")


def test_tables_live_in_the_key_store(store: PortalStore) -> None:
    PortalStore(store.keys)  # opening again is harmless
    assert store.users() == []


def test_password_change_needs_the_current_one_and_ends_the_other_sessions(
    store: PortalStore,
) -> None:
    user = store.add_user("hal@example.com", PASSWORD)
    here, current = store.new_session(user)
    others = [store.new_session(user)[0] for _ in range(2)]
    stranger = store.new_session(store.add_user("ivy@example.com", PASSWORD))[0]
    with pytest.raises(ConfigurationError, match="the current password is wrong"):
        store.change_password(user, "not the password", "a new passphrase here", current)
    with pytest.raises(ConfigurationError, match="at least 12 characters") as caught:
        store.change_password(user, PASSWORD, "short", current)
    assert "short" not in str(caught.value)
    assert all(store.session(t) is not None for t in others)  # nothing changed yet
    assert store.change_password(user, PASSWORD, "a new passphrase here", current) == 2
    assert [store.session(t) for t in others] == [None, None]
    assert store.session(here) is not None and store.session(stranger) is not None
    assert store.authenticate("hal@example.com", PASSWORD) is None
    assert store.authenticate("hal@example.com", "a new passphrase here") == user


def test_sessions_and_sign_ins_of_an_account(store: PortalStore, clock: Clock) -> None:
    user = store.add_user("jo@example.com", PASSWORD)
    _, current = store.new_session(user)
    clock.now += 10
    store.new_session(user)
    listed = store.active_sessions(user, current)
    assert [s.current for s in listed] == [True, False]
    assert store.end_other_sessions(user, current) == 1
    assert len(store.active_sessions(user, current)) == 1
    for i in range(SIGNINS_KEPT + 3):
        clock.now += 1
        store.record_signin(user, f"10.0.0.{i}", "x" * 500)
    recent = store.signins(user, limit=100)
    assert len(recent) == SIGNINS_KEPT  # older ones are forgotten
    assert recent[0].address == f"10.0.0.{SIGNINS_KEPT + 2}"  # the newest first
    assert len(recent[0].agent) == 200
    assert recent[0].time == datetime.fromtimestamp(clock.now, UTC)


def test_usage_history_is_90_days_with_refusals_per_day(store: PortalStore, clock: Clock) -> None:
    user = store.add_user("kim@example.com", PASSWORD)
    _, api_key = store.create_app(user, "history", "demo", ["search"])
    for days_ago in (0, 0, 89, 90):
        store.clock = Clock(clock.now - days_ago * 86400)
        store.count_spike_refusal(api_key)
    store.clock = clock
    (app,) = store.apps(user)
    assert len(app.daily) == HISTORY_DAYS == 90
    assert app.daily[-1].day == datetime.fromtimestamp(clock.now, UTC).date()
    assert [d.refused for d in app.daily if d.refused] == [1, 2]  # day 90 is out of range
    assert app.spike_refusals == 4 and sum(d.calls for d in app.daily) == 0
    assert app.last_days(30) == app.daily[-30:]
