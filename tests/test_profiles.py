"""Saved profiles: keys in the OS keyring, else a 0600 file; never shown."""

from __future__ import annotations

import stat
from pathlib import Path

import keyring
import pytest
from jaraco.classes import properties
from keyring.backend import KeyringBackend

import parcelsearch
from parcelsearch import profiles

KEY = "k3y-Sh0uld-N3ver-Sh0w-up-9f8e7d6c"


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PARCELSEARCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.delenv("PARCELSEARCH_API_KEY", raising=False)
    monkeypatch.delenv("PARCELSEARCH_PROFILE", raising=False)
    monkeypatch.delenv("PARCELSEARCH_BASE_URL", raising=False)
    return tmp_path / "config"


class _MemoryKeyring(KeyringBackend):
    """Stand-in for an OS keyring, which this machine has none of (no desktop session):
    the keyring library's own backend interface, entries kept in memory. Never chosen by
    keyring itself (not viable): only when set explicitly."""

    @properties.classproperty
    def priority(cls) -> float:  # noqa: N805 - keyring's class property
        raise RuntimeError("a stand-in, used only when set explicitly")

    def __init__(self) -> None:
        super().__init__()
        self.entries: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.entries.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.entries[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        del self.entries[(service, username)]


def test_without_a_keyring_the_key_is_kept_in_a_file_only_its_owner_reads(config: Path) -> None:
    assert profiles._keyring() is None  # this machine: keyring's "fail" backend
    saved = profiles.save("work", KEY, base_url="https://api.example.com")
    credentials = config / profiles.CREDENTIALS_FILE
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    assert KEY in credentials.read_text() and KEY not in (config / "profiles.json").read_text()
    assert KEY not in repr(saved) and "credentials.json (readable by you only)" in repr(saved)
    client = parcelsearch.Client(profile="work")
    assert client.base_url == "https://api.example.com" and KEY not in repr(client)
    assert client.fingerprint == saved.fingerprint
    assert profiles.remove("work") and KEY not in credentials.read_text()
    with pytest.raises(parcelsearch.ConfigurationError, match="no saved profile 'work'") as e:
        parcelsearch.Client(profile="work")
    assert "parcelsearch login --profile work" in e.value.render("cli")


def test_with_a_keyring_the_key_stays_out_of_every_file(config: Path) -> None:
    backend, before = _MemoryKeyring(), keyring.get_keyring()
    keyring.set_keyring(backend)
    try:
        saved = profiles.save("default", KEY)
        assert backend.entries == {(profiles.KEYRING_SERVICE, "default"): KEY}
        assert "the OS keyring" in saved.kept_in
        assert not any(KEY in p.read_text() for p in config.iterdir())
        client = parcelsearch.Client(base_url="https://api.example.com")  # 'default' used
        assert client.fingerprint == saved.fingerprint
        assert profiles.remove("default") and not backend.entries
    finally:
        keyring.set_keyring(before)


def test_an_environment_key_wins_over_the_default_profile(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    profiles.save("default", KEY, base_url="https://api.example.com")
    monkeypatch.setenv("PARCELSEARCH_API_KEY", "another-key")
    other = parcelsearch.Client(base_url="https://api.example.com")
    assert other.fingerprint != profiles.load("default").fingerprint
    monkeypatch.setenv("PARCELSEARCH_PROFILE", "default")  # named: the profile's
    assert parcelsearch.Client().fingerprint == profiles.load("default").fingerprint
    with pytest.raises(parcelsearch.ConfigurationError, match="cannot name a profile"):
        profiles.save("../x", KEY)


def test_an_environment_key_still_goes_where_the_default_profile_says(
    config: Path, monkeypatch: pytest.MonkeyPatch, service, make_key, ca_bundle
) -> None:
    """The issue's analyst: a profile saved by 'login', then a key exported for a run —
    the key is the environment's, the base URL and CA the profile's (not "no base URL")."""
    profiles.save("default", "the-profile-key", base_url=service.base_url, ca_bundle=ca_bundle)
    key = make_key("production", quota=10)
    monkeypatch.setenv("PARCELSEARCH_API_KEY", key)
    monkeypatch.delenv("PARCELSEARCH_CA_BUNDLE", raising=False)
    client = parcelsearch.Client()
    assert (client.base_url, client.ca_bundle) == (service.base_url, ca_bundle)
    assert client.fingerprint != profiles.load("default").fingerprint  # the key: not saved one
    assert "Abilene, TX" in client.markets()
    used = {row["name"]: row for row in service.keys.list()}[key.name]
    assert used["used_lifetime"] == 1  # the service's count: the call carried the env's key
    # the environment's base URL is another place: the profile's CA is not taken with it
    monkeypatch.setenv("PARCELSEARCH_BASE_URL", "https://api.example.com")
    assert parcelsearch.Client().ca_bundle is None


def test_a_base_url_with_the_v1_the_client_adds_is_told_so(
    config: Path, monkeypatch: pytest.MonkeyPatch, service, make_key, ca_bundle
) -> None:
    client = parcelsearch.Client(
        make_key("production", quota=10), base_url=service.base_url + "/v1/", ca_bundle=ca_bundle
    )
    with pytest.raises(parcelsearch.ServiceError) as raised:
        client.markets()
    text = str(raised.value)
    assert f"the base URL {service.base_url}/v1 ends in /v1, which the client adds " in text
    assert f"drop the /v1 and give {service.base_url}" in text
    assert "may lack the vendor's path" not in text


def test_a_profile_keeps_a_proxy_address_never_its_password(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
        "PARCELSEARCH_PROXY",
    ):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(
        parcelsearch.ConfigurationError, match="a profile keeps a proxy's address only"
    ) as caught:
        profiles.save(
            "work",
            KEY,
            base_url="https://api.example.com",
            proxy="http://ana:pr0xy-pass@proxy.example.com:3128",
        )
    assert "pr0xy-pass" not in str(caught.value)
    assert "http://***@proxy.example.com:3128" in str(caught.value)
    profiles.save("work", KEY, base_url="https://api.example.com", proxy="proxy.example.com:3128")
    assert "pr0xy-pass" not in (config / "profiles.json").read_text()
    client = parcelsearch.Client(profile="work")
    assert client.proxy == "http://proxy.example.com:3128 (from the profile)"
    assert client.proxied
    monkeypatch.setenv("PARCELSEARCH_PROXY", "http://ana:pr0xy-pass@other.example.com:8080")
    client = parcelsearch.Client(profile="work")  # the environment's wins, shown without it
    assert client.proxy == "http://***@other.example.com:8080 (from PARCELSEARCH_PROXY)"
    assert "pr0xy-pass" not in repr(parcelsearch.settings.options)
    monkeypatch.setenv("NO_PROXY", ".example.com")
    assert not parcelsearch.Client(profile="work").proxied


def test_a_profile_keeps_its_keys_quota_for_that_key_only(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 56: the key's quota saved with the profile (its kind's figures) is the quota
    of a client using that profile's key, and of no other key."""
    monkeypatch.delenv("PARCELSEARCH_QUOTA", raising=False)
    saved = profiles.save(
        "work", KEY, base_url="https://api.example.com", quota="production", keyring=False
    )
    assert saved.quota == "500/month" and "quota 500/month" in repr(saved)
    client = parcelsearch.Client(profile="work")
    assert client.profile_quota == ("work", parcelsearch.Quota(500, "month"))
    other = parcelsearch.Client(profile="work", api_key="an0ther-key-of-the-same-user-1234")
    assert other.profile_quota is None  # another key: the profile does not know its quota
    profiles.save("plain", KEY, base_url="https://api.example.com", keyring=False)
    assert profiles.load("plain").quota is None  # type: ignore[union-attr]
    assert parcelsearch.Client(profile="plain").profile_quota is None
    with pytest.raises(parcelsearch.ConfigurationError, match="is not a quota"):
        profiles.save("bad", KEY, quota="lots", keyring=False)
    assert profiles.load("bad") is None  # refused before anything was saved


def test_login_asks_the_keys_kind_on_a_terminal_and_takes_it_from_a_flag(
    config: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`login` on a terminal asks the key's kind after the key (a wrong answer asked again,
    Enter: not known); `--quota` or $PARCELSEARCH_QUOTA tell it without asking."""
    from parcelsearch.cli import main

    monkeypatch.delenv("PARCELSEARCH_QUOTA", raising=False)
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("getpass.getpass", lambda prompt: KEY)
    answers = iter(["lots", "production"])
    asked: list[str] = []
    monkeypatch.setattr("builtins.input", lambda q: asked.append(q) or next(answers))
    assert main(["login", "--profile", "asked"]) == 0
    assert len(asked) == 2 and asked[0].startswith("the key's kind or quota (demo, production")
    out, err = capsys.readouterr()
    assert "'lots' is not a quota" in err and KEY not in out + err
    assert "quota 500 calls a calendar month (UTC)" in out
    assert profiles.load("asked").quota == "500/month"  # type: ignore[union-attr]

    monkeypatch.setattr("builtins.input", lambda q: "")
    assert main(["login", "--profile", "unknown"]) == 0
    assert profiles.load("unknown").quota is None  # type: ignore[union-attr]

    monkeypatch.setattr("builtins.input", lambda q: pytest.fail("asked despite the flag"))
    assert main(["login", "--profile", "told", "--quota", "demo"]) == 0
    assert profiles.load("told").quota == "50/lifetime"  # type: ignore[union-attr]
    monkeypatch.setenv("PARCELSEARCH_QUOTA", "700/month")
    assert main(["login", "--profile", "variable"]) == 0
    assert profiles.load("variable").quota == "700/month"  # type: ignore[union-attr]
    assert main(["profiles", "--json"]) == 0
    assert '"quota":"700\\/month"' in capsys.readouterr().out


def test_the_default_profiles_proxy_is_used_when_no_profile_is_named(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``default`` profile fills the key, and its proxy with it (the proxy was looked up
    with the key the profile had just filled in, which reads as "no profile")."""
    for name in (
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
        "PARCELSEARCH_PROXY",
        "PARCELSEARCH_PROFILE",
        "PARCELSEARCH_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    profiles.save(
        "default", KEY, base_url="https://api.example.com", proxy="proxy.example.com:3128"
    )
    client = parcelsearch.Client()
    assert client.proxy == "http://proxy.example.com:3128 (from the profile)"
    assert not parcelsearch.Client(api_key="another-key-1234567890").proxied
