"""Issue 46 (trust boundaries), the files in the cache and config folders: each attack as it
was made on the landed code, now refused.

The cache folder may be on a share, synced, or a teammate's copy; the config folder may have
been made by someone else. What they hold is data to check, not configuration to obey. The
witnesses are the reference service's request log (``service.keys.requests``), a plain
listener's own count of connections, and the files themselves.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import parcelsearch
from parcelsearch import _wire, profiles
from parcelsearch._fetch.vendor_profile import PROFILES_FILE, load_profile
from parcelsearch.client import Client
from parcelsearch.errors import ConfigurationError
from parcelsearch.notices import KeptFileWarning
from parcelsearch.settings import check_base_url
from parcelsearch_service.server import RunningService

#: A square with no parcels in it (near Marfa, outside every demo market).
EMPTY_RING = _wire.ring_json(
    [(-104.02, 30.30), (-104.01, 30.30), (-104.01, 30.31), (-104.02, 30.31), (-104.02, 30.30)]
)
PASSWORD = "hunter2-Sekret"
SECTION = "cache and config folders (issue 46)"
NOBODY = 65534


class Listener:
    """A plain TCP listener on 127.0.0.1 that counts connections and keeps what arrives."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.socket.settimeout(0.2)
        self.port = self.socket.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.socket.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(2)
                try:
                    self.received.append(connection.recv(65536))
                except OSError:
                    self.received.append(b"")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.socket.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    made = Listener()
    yield made
    made.close()


def _plant(cache: Path, base_url: str, moved: dict[str, str]) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    (cache / PROFILES_FILE).write_text(json.dumps({base_url: {"moved": moved}}))


# -- point 3: a planted vendors.json sends the key anywhere --------------------------------


def test_a_planted_vendors_json_cannot_send_the_key_elsewhere(
    service: RunningService,
    make_key: Callable[..., str],
    ca_bundle: str,
    tmp_path: Path,
    listener: Listener,
    figures: Any,
) -> None:
    """Its ``moved`` map was used as read: an entry mapping the search path to ``http://``
    on another port sent the key there in clear text. Now every learnt path that leaves the
    base URL's https origin is ignored, with a warning naming the file and the entry."""
    base = service.base_url
    elsewhere = f"http://127.0.0.1:{listener.port}"
    cache = tmp_path / "shared-cache"
    _plant(
        cache,
        base,
        {
            f"{base}/v1/search": f"{elsewhere}/v1/search",  # clear text, another port
            f"{base}/v1/markets": f"https://127.0.0.1:{listener.port}/v1/markets",  # another port
            f"{base}/v1/x": f"{base}/v1/../../{elsewhere}",  # dot segments
            f"{base}/v1/y": base.replace("https://", f"https://mallory:{PASSWORD}@") + "/v1/y",
        },
    )
    key = make_key("production", quota=100)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        client = Client(key, base, ca_bundle, cache_dir=cache, rate=1000, retries=0)
    try:
        with client:
            assert client.search_page(EMPTY_RING, 1).rows == 0
            assert isinstance(client.markets(), list)
    finally:
        assert listener.received == []  # the witness: not one connection, so never the key
    texts = [str(w.message) for w in warned if w.category is KeptFileWarning]
    assert len(texts) == 4 and all(str(cache / PROFILES_FILE) in t for t in texts)
    assert any(f"{elsewhere}/v1/search" in t for t in texts)
    assert not any(PASSWORD in t for t in texts)  # the planted userinfo is not echoed either
    log = service.keys.requests(key.name)  # type: ignore[attr-defined]
    assert list(log["path"]) == ["/v1/search", "/v1/markets"]  # both served where they belong
    assert client.vendor.moved == {}
    figures.add(SECTION, "planted learnt paths ignored", len(texts))
    figures.note(
        f"planted vendors.json: {len(listener.received)} connections to the "
        "listener it named (the key never sent); both calls served at the base URL"
    )


# -- point 7: learnt facts never unlearnt --------------------------------------------------


def test_a_learnt_path_the_vendor_removed_is_forgotten_and_the_default_asked(
    service: RunningService,
    make_key: Callable[..., str],
    ca_bundle: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    figures: Any,
) -> None:
    """A same-origin redirect learnt once (``/v1/search`` → ``/v1/search/``) and later
    removed by the vendor gave a 404 on every run, forever, naming ``/v1/search``. Now the
    404 makes it forgotten (in ``vendors.json`` too) and the request goes to the default."""
    base = service.base_url
    cache = tmp_path / "cache"
    _plant(cache, base, {f"{base}/v1/search": f"{base}/v1/search/"})  # learnt, now gone
    key = make_key("production", quota=100)
    name = key.name  # type: ignore[attr-defined]
    with caplog.at_level(logging.WARNING), Client(key, base, ca_bundle, cache_dir=cache) as one:
        assert one.search_page(EMPTY_RING, 1).rows == 0
    said = [r.getMessage() for r in caplog.records if "learnt path" in r.getMessage()]
    assert said and f"{base}/v1/search/ answers HTTP 404: forgotten" in said[0]
    assert load_profile(cache, base).moved == {}
    asked = len(service.keys.requests(name))
    with Client(key, base, ca_bundle, cache_dir=cache) as later:  # the next run
        assert later.search_page(EMPTY_RING, 1).rows == 0
    log = service.keys.requests(name)
    assert len(log) == asked + 1 and log["path"].iloc[-1] == "/v1/search"  # straight there
    figures.add(SECTION, "removed learnt paths forgotten")


# -- point 6: kept plans are trusted ---------------------------------------------------------


def test_an_edited_kept_plan_cannot_shrink_an_area(
    service: RunningService,
    make_key: Callable[..., str],
    ca_bundle: str,
    tmp_path: Path,
    figures: Any,
) -> None:
    """A kept plan edited to give an area a tiny piece (same boundary fingerprint) made a
    later search report that area complete with 14 GroupIDs of 541. Now the kept plan is
    ignored (a warning names it) and the area planned afresh: the same GroupIDs, served from
    the cache of the first search (the service's request log: no new call)."""
    areas = parcelsearch.demo_areas().set_index("area_id").loc[["northside"]]
    key = make_key("production", quota=1_000, per_second=50)
    client = Client(key, service.base_url, ca_bundle, cache_dir=tmp_path / "cache")
    first = parcelsearch.search(areas, client=client, progress=False)
    served = len(service.keys.requests(key.name))  # type: ignore[attr-defined]
    assert served == first.calls > 0 and len(first.ids) > 100
    kept = next((tmp_path / "cache" / "plans").iterdir())
    document = json.loads(kept.read_text())
    x, y = areas.geometry.iloc[0].representative_point().coords[0]
    tiny = _wire.ring_json([(x, y), (x + 1e-3, y), (x + 1e-3, y + 1e-3), (x, y)])
    document["pieces"] = [[0, tiny, *document["pieces"][0][2:]]]
    kept.write_text(json.dumps(document))
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        again = parcelsearch.search(areas, client=client, progress=False)
    assert sorted(again.ids["group_id"]) == sorted(first.ids["group_id"])
    said = [str(w.message) for w in warned if w.category is KeptFileWarning]
    assert len(said) == 1 and kept.name in said[0] and "do not cover the area" in said[0]
    log = service.keys.requests(key.name)  # type: ignore[attr-defined]
    assert again.calls == 0 == len(log) - served  # the witness: no new call
    figures.add(SECTION, "edited kept plans ignored")
    figures.note(
        f"edited kept plan: the area planned afresh, {len(again.ids)} GroupIDs as "
        "first found, 0 new calls in the service's request log"
    )


# -- point 5: folders another user controls ---------------------------------------------


@pytest.fixture
def config(tmp_path: Path) -> Path:
    folder = tmp_path / "config"
    profiles.save(
        "work", "sk-the-key-0123", base_url="https://api.example.com", folder=folder, keyring=False
    )
    return folder


def test_a_config_folder_others_can_write_is_refused_with_the_fix(config: Path) -> None:
    """A world-writable config folder was used silently: a swapped ``profiles.json`` sent
    the key to another user's server."""
    config.chmod(0o777)
    with pytest.raises(
        ConfigurationError, match=f"can be written by other users.*chmod 700 {config}"
    ):
        profiles.load("work", folder=config)
    with pytest.raises(ConfigurationError, match="chmod 700"):
        profiles.save("other", "sk-x", folder=config, keyring=False)
    config.chmod(0o700)
    assert profiles.load("work", folder=config) is not None


@pytest.mark.skipif(
    os.name != "posix" or os.geteuid() != 0, reason="giving a folder to another user needs root"
)
def test_a_config_folder_of_another_user_is_refused(config: Path) -> None:
    os.chown(config, NOBODY, NOBODY)
    with pytest.raises(ConfigurationError, match=f"belongs to another user \\(uid {NOBODY}\\)"):
        profiles.profiles(folder=config)
    os.chown(config, os.geteuid(), os.getegid())
    os.chown(config / profiles.PROFILES_FILE, NOBODY, NOBODY)
    with pytest.raises(ConfigurationError, match="belongs to another user"):
        profiles.load("work", folder=config)


def test_a_credentials_file_others_can_read_is_not_used(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``credentials.json`` made 0644 was used silently while ``profiles`` said "readable by
    you only"."""
    credentials = config / profiles.CREDENTIALS_FILE
    credentials.chmod(0o644)
    listed = profiles.load("work", folder=config)
    assert listed is not None and "readable by you only" not in listed.kept_in
    assert f"chmod 600 {credentials}" in listed.kept_in
    monkeypatch.setenv("PARCELSEARCH_CONFIG_DIR", str(config))
    monkeypatch.delenv("PARCELSEARCH_API_KEY", raising=False)
    with pytest.raises(
        ConfigurationError, match=f"read or written by other users.*chmod 600 {credentials}"
    ):
        Client(profile="work")


def test_a_symlink_planted_at_a_temporary_name_is_never_followed(config: Path) -> None:
    """Temporary names were predictable (``.profiles.json.<pid>.tmp``): symlinks planted
    there overwrote one of the victim's own 0600 files with profile JSON, now 0644."""
    victim = config.parent / "victim-own-file"
    victim.write_text("the victim's own data")
    victim.chmod(0o600)
    for pid in range(os.getpid() - 2, os.getpid() + 3):  # the old names, for any pid nearby
        for name in (profiles.PROFILES_FILE, profiles.CREDENTIALS_FILE):
            (config / f".{name}.{pid}.tmp").symlink_to(victim)
    profiles.save("home", "sk-other-key-456", folder=config, keyring=False)
    assert victim.read_text() == "the victim's own data"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert stat.S_IMODE((config / profiles.CREDENTIALS_FILE).stat().st_mode) == 0o600
    assert {p.name for p in profiles.profiles(folder=config)} == {"home", "work"}
    left = sorted(p.name for p in config.iterdir() if not p.is_symlink())
    assert left == [profiles.CREDENTIALS_FILE, profiles.PROFILES_FILE]  # no temporary left


# -- point 10: a password in a URL is echoed ---------------------------------------------


def test_a_password_in_a_profile_s_base_url_is_not_echoed(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A profiles file edited to hold ``user:password@`` in its base URL: the profile's repr
    and the client's refusal show ``***@``."""
    saved = json.loads((config / profiles.PROFILES_FILE).read_text())
    saved["work"]["base_url"] = f"https://ann:{PASSWORD}@api.example.com"
    (config / profiles.PROFILES_FILE).write_text(json.dumps(saved))
    found = profiles.load("work", folder=config)
    assert found is not None and PASSWORD not in repr(found) and "***@" in repr(found)
    assert found.base_url == "https://***@api.example.com"  # as `parcelsearch profiles` shows
    monkeypatch.setenv("PARCELSEARCH_CONFIG_DIR", str(config))
    with pytest.raises(ConfigurationError, match="must not carry .* credentials") as caught:
        Client(profile="work")
    assert PASSWORD not in f"{caught.value} {caught.value!r}"


def test_a_password_in_a_base_url_is_not_echoed() -> None:
    for url in (
        f"https://ann:{PASSWORD}@api.example.com",
        f"http://ann:{PASSWORD}@h/v1",
        f"https://ann:{PASSWORD}@/x",
        f"https://ann:{PASSWORD}@h?q=1",
    ):
        with pytest.raises(ConfigurationError) as caught:
            check_base_url(url)
        assert PASSWORD not in f"{caught.value} {caught.value!r}"
        assert "***@" in str(caught.value)


# -- issue 58, point 4: a set planted in a shared output folder -----------------------------


@pytest.mark.skipif(
    os.name != "posix" or os.geteuid() != 0, reason="planting files as another user needs root"
)
def test_a_set_planted_in_a_shared_folder_is_never_moved_over_our_file(
    tmp_path: Path, figures: Any
) -> None:
    """Another user planted ``.month1-<dead pid>-….tmp.parquet/`` holding a forged
    ``month1.parquet`` (and the mark of a whole set) in a shared sticky folder: the
    victim's next write there "cleaned it up" by moving the forged file over the victim's
    own. Now only entries the caller owns are cleaned up or moved in: the victim's file is
    its own, bytes and owner, and the planted folder is left to its owner."""
    from parcelsearch import kept_files

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    mine = shared / "month1.parquet"
    kept_files.write_whole(mine, b"the victim's ids")
    planted = shared / ".month1-99999999-deadbeef.tmp.parquet"
    planted.mkdir()
    (planted / "month1.parquet").write_bytes(b"1,113 forged ids")
    (planted / ".whole").touch()
    for path in (planted, *planted.iterdir()):
        os.chown(path, NOBODY, NOBODY)
        path.chmod(0o777 if path.is_dir() else 0o666)
    stale = shared / ".month1-0123456789abcdef0123456789abcdef.tmp.parquet"
    stale.write_bytes(b"another user's temporary file")
    os.chown(stale, NOBODY, NOBODY)
    os.utime(stale, (0, 0))
    kept_files.write_whole(shared / "month2.parquet", b"next month")  # cleans up first
    assert mine.read_bytes() == b"the victim's ids"
    assert mine.stat().st_uid == os.geteuid() and stat.S_IMODE(mine.stat().st_mode) == 0o600
    assert (planted / "month1.parquet").exists() and stale.exists()  # theirs, untouched
    own_left = shared / ".month1-99999998-0badcafe.tmp.parquet"  # our killed writer's set
    own_left.mkdir()
    (own_left / "month1.parquet").write_bytes(b"our own whole set")
    (own_left / ".whole").touch()
    kept_files.remove_stale(shared)
    assert mine.read_bytes() == b"our own whole set" and not own_left.exists()
    figures.add(SECTION, "planted sets in a shared folder left out", 1)


# -- issue 58, point 7: a planted vendors.json still decided what is complete ---------------


@pytest.mark.parametrize("planted", ["another user's", "writable by others"])
def test_a_planted_vendors_json_cannot_decide_what_is_complete(
    tmp_path: Path, planted: str, figures: Any
) -> None:
    """``match_rule: representative-point`` against a vendor matching by intersection
    reported an area complete with ids outside it; ``page_base: 0`` failed every area;
    ``result_window: 1`` doubled the calls. Those three facts are now kept only from a file
    the user owns that nobody else may write; from a planted one they are learnt again,
    with a warning naming the file."""
    if planted == "another user's" and (os.name != "posix" or os.geteuid() != 0):
        pytest.skip("giving a file to another user needs root")
    base = "https://vendor.example"
    cache = tmp_path / "shared-cache"
    cache.mkdir()
    facts = {
        "match_rule": "representative-point",
        "page_base": 0,
        "result_window": 1,
        "page_size": 100,
    }
    path = cache / PROFILES_FILE
    path.write_text(json.dumps({base: facts}))
    path.chmod(0o600)
    own = load_profile(cache, base)
    assert (own.match_rule, own.page_base, own.result_window) == ("representative-point", 0, 1)
    if planted == "another user's":
        os.chown(path, NOBODY, NOBODY)
    else:
        path.chmod(0o666)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        profile = load_profile(cache, base)
    assert (profile.match_rule, profile.page_base, profile.result_window) == (None,) * 3
    assert profile.page_size == 100  # checked when used, not deciding completeness
    texts = [str(w.message) for w in warned if w.category is KeptFileWarning]
    assert len(texts) == 1 and str(path) in texts[0] and "match_rule" in texts[0]
    figures.add(SECTION, "planted completeness facts ignored", 3)
