"""The stores' one entry point: ``stores.open_store(location, …)`` opens this machine's twins
for ``None`` and a team's for a team store's URL (on a throwaway PostgreSQL cluster), the
twin named by the location's scheme in ``stores.TWINS``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from parcelsearch import stores
from parcelsearch.client import Client
from parcelsearch.errors import BudgetExhaustedError, ConfigurationError
from parcelsearch.stores.local.cache import ResponseCache
from parcelsearch.stores.local.history import RunHistory
from parcelsearch.stores.local.ledger import Ledger
from parcelsearch.stores.local.spending import LocalSpending
from parcelsearch.stores.spending import CallSpend

KEY, URL = "k" * 32, "https://127.0.0.1:9"


@pytest.fixture
def client(tmp_path: Path) -> Client:
    return Client(KEY, URL, cache_dir=tmp_path / "cache")


def test_no_location_opens_this_machines_ledger_cache_and_history(
    tmp_path: Path,
    client: Client,
) -> None:
    ledger, cache = Ledger.in_folder(tmp_path), ResponseCache(tmp_path / "cache")
    opened = stores.open_store(None, client.fingerprint, member="alice", cache=cache, ledger=ledger)
    assert isinstance(opened.spending, LocalSpending)
    assert opened.spending.ledger is ledger and opened.spending.cache is cache
    assert opened.spending.fingerprint == client.fingerprint
    assert isinstance(opened.history, RunHistory) and opened.history.path == ledger.path
    assert stores.open_store(None, client.fingerprint).history is None  # no ledger, no run history


def test_a_team_store_url_opens_the_teams_spending_and_history(
    postgres: Any,
    tmp_path: Path,
    client: Client,
) -> None:
    from parcelsearch.stores.team import init_team
    from parcelsearch.stores.team.run_history import TeamRunHistory
    from parcelsearch.stores.team.spending import TeamSpending

    url: str = postgres.database("team")
    init_team(url)
    cache = ResponseCache(tmp_path / "cache")
    opened = stores.open_store(
        url, client.fingerprint, member="alice", cache=cache, ledger=Ledger.in_folder(tmp_path)
    )
    try:
        assert isinstance(opened.spending, TeamSpending)
        assert (opened.spending.url, opened.spending.user) == (url, "alice")
        assert opened.spending.cache is cache  # this machine's copy of the team's pages
        assert isinstance(opened.history, TeamRunHistory)
        assert (opened.history.url, opened.history.member) == (url, "alice")
    finally:
        opened.spending.close()


def test_this_machines_stores_open_without_psycopg(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom parcelsearch import stores\n"
        "from parcelsearch.client import Client\n"
        "from parcelsearch.stores.local.ledger import Ledger\n"
        f"client = Client({KEY!r}, {URL!r}, cache_dir={str(tmp_path)!r})\n"
        f"ledger = Ledger.in_folder({str(tmp_path)!r})\n"
        "opened = stores.open_store(None, client.fingerprint, ledger=ledger)\n"
        "print(type(opened.history).__name__, 'psycopg' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["RunHistory", "False"]


def test_the_stores_take_the_keys_fingerprint_and_never_load_the_client() -> None:
    """Issue 60: the stores are given the key's fingerprint, not the client; every store
    module loads without the client, its transport or ``requests``."""
    code = (
        "import importlib, pkgutil, sys\nimport parcelsearch.stores as s\n"
        "for m in pkgutil.walk_packages(s.__path__, 'parcelsearch.stores.'):\n"
        "    importlib.import_module(m.name)\n"
        "print([n for n in ('parcelsearch.client', 'parcelsearch._fetch.http', 'requests')"
        " if n in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_new_store_is_one_module_and_one_row(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    client: Client,
) -> None:
    import _memory_spending

    monkeypatch.setitem(stores.TWINS, "memory", "_memory_spending")
    cache = ResponseCache(tmp_path / "cache")
    opened = stores.open_store("memory://", client.fingerprint, member="alice", cache=cache)
    assert isinstance(opened.spending, _memory_spending.MemorySpending)
    assert opened.spending.fingerprint == client.fingerprint and opened.spending.cache is cache
    assert opened.history is None
    assert stores.open_history(tmp_path / "ledger.sqlite", team="memory://") is None


@pytest.mark.parametrize("url", ["postgresql://h/db", "postgres://h/db", "POSTGRESQL://h/db"])
def test_both_spellings_of_a_postgresql_url_open_the_team_twin(url: str) -> None:
    assert stores.twin(url).__name__ == "parcelsearch.stores.team"  # type: ignore[attr-defined]


def test_a_location_no_twin_opens_is_refused_naming_the_schemes_not_the_password(
    client: Client,
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        stores.open_store("mysql://bob:secret@h/db", client.fingerprint)
    assert "secret" not in str(caught.value)
    assert "'mysql://bob:***@h/db'" in str(caught.value)
    assert "'postgresql://', 'postgres://'" in str(caught.value)


def test_a_cap_refuses_the_attempt_after_it_before_anything_is_reserved(
    tmp_path: Path,
    client: Client,
) -> None:
    ledger = Ledger.in_folder(tmp_path)
    spending = stores.open_spending(None, client.fingerprint, ledger=ledger)
    spend = CallSpend(spending, run_id="r" * 8, cap=2, capped="the check's {cap} calls")
    try:
        spend.reserve()
        spend.refund()  # not counted by the service: given back, not held against the cap
        spend.reserve()
        spend.reserve()
        with pytest.raises(BudgetExhaustedError, match="the check's 2 calls"):
            spend.reserve()
    finally:
        spending.close()
    assert spend.calls == 2 and ledger.usage(client.fingerprint).lifetime == 2
