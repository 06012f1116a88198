"""Saved profiles: the API key kept out of notebooks, scripts and shell history.

``parcelsearch login`` saves a *profile*: a name, the service's base URL and CA bundle (in
``profiles.json`` in the config folder, ``settings.options.config_dir``, from platformdirs)
and the key — in the OS keyring when there is one (``keyring``: macOS Keychain, Windows
Credential Locker, the Secret Service on Linux desktops), else in ``credentials.json`` beside
the profiles, readable by its owner only (0600), as ``gh`` and the Hugging Face token do.
A profile is then chosen with ``--profile NAME``, ``$PARCELSEARCH_PROFILE`` or
``Client(profile=NAME)``; without one, the profile ``default`` is used when there is no
``$PARCELSEARCH_API_KEY``. Keys are never printed: a profile shows its key's fingerprint.
The folder is used only when it is yours alone: one another user owns or can write, a
profiles or credentials file others can write, a credentials file others can read, is refused
with the ``chmod`` that fixes it. Files are written through
:func:`parcelsearch.kept_files.write_whole` (no predictable temporary name, no symlink
followed).

Examples
--------
>>> from parcelsearch import profiles
>>> profiles.save("work", "the-key", base_url="https://api.example.com")  # doctest: +SKIP
Profile(name='work', base_url='https://api.example.com', key=sha256:…, kept in …)
>>> parcelsearch.Client(profile="work")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from parcelsearch import settings
from parcelsearch.errors import ConfigurationError, Hint
from parcelsearch.kept_files import write_whole
from parcelsearch.stores.quotas import Quota

__all__ = [
    "Profile",
    "save",
    "load",
    "remove",
    "profiles",
    "resolve",
    "chosen",
    "DEFAULT_PROFILE",
    "KEYRING_SERVICE",
    "profile_quota",
]

#: The profile used when none is named and no key is in the environment.
DEFAULT_PROFILE = "default"
#: The keyring service name keys are stored under (one entry per profile).
KEYRING_SERVICE = "parcelsearch"
PROFILES_FILE, CREDENTIALS_FILE = "profiles.json", "credentials.json"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_FILE = "file"


def _fingerprint(key: str) -> str:
    import hashlib

    return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Profile:
    """A saved profile: its name, base URL, CA bundle, where its key is kept (``keyring``
    and the backend's name, or ``file`` and the path), the key's fingerprint and its quota
    (``"500/month"``, ``"50/lifetime"``; ``None``: not told at login)."""

    name: str
    base_url: str | None
    ca_bundle: str | None
    kept_in: str
    fingerprint: str
    quota: str | None = None

    def __repr__(self) -> str:
        quota = f", quota {self.quota}" if self.quota else ""
        return (
            f"Profile(name={self.name!r}, base_url={self.base_url!r}, "
            f"key=sha256:{self.fingerprint}…{quota}, kept in {self.kept_in})"
        )


def _folder(folder: str | os.PathLike[str] | None) -> Path:
    return Path(folder) if folder is not None else Path(settings.options.config_dir)


def check_name(name: str) -> str:
    """``name`` if it can name a profile (letters, digits, ``_ . -``; at most 64)."""
    if not _NAME.fullmatch(name or ""):
        raise ConfigurationError(
            f"{name!r} cannot name a profile: use letters, digits, '_', '.' or '-' (at most "
            "64, starting with a letter or digit)",
            hints=[Hint("profile", DEFAULT_PROFILE)],
        )
    return name


def _keyring() -> Any:
    """The keyring module when the OS has a usable keyring, else None."""
    try:
        import keyring
        from keyring.backends import fail, null
    except ImportError:  # pragma: no cover - a declared dependency
        return None
    backend = keyring.get_keyring()
    return None if isinstance(backend, fail.Keyring | null.Keyring) else keyring


def _backend_name() -> str:
    import keyring

    backend = keyring.get_keyring()
    return f"the OS keyring ({type(backend).__module__}.{type(backend).__name__})"


def _check_folder(folder: Path) -> None:
    """Refuse a config folder another user owns or can write (they could swap the profiles
    file, and with it where the key is sent). POSIX only: Windows folders carry ACLs."""
    if os.name != "posix" or not folder.exists():
        return
    found = folder.stat()
    if found.st_uid != os.geteuid():
        raise ConfigurationError(
            f"the config folder {folder} belongs to another user (uid {found.st_uid}): its "
            "profiles would choose where your key is sent; use a folder of your own, or take "
            f"this one (chown $USER {folder} && chmod 700 {folder})"
        )
    if found.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ConfigurationError(
            f"the config folder {folder} can be written by other users (mode "
            f"{stat.S_IMODE(found.st_mode):04o}): they could change where your key is sent; "
            f"make it yours alone: chmod 700 {folder}"
        )


def _check_file(path: Path, *, private: bool) -> None:
    """Refuse a profiles or credentials file another user owns or can write, and a
    credentials file another user can read."""
    if os.name != "posix" or not path.exists():
        return
    found = path.stat()
    mode = stat.S_IMODE(found.st_mode)
    shared = (stat.S_IRWXG | stat.S_IRWXO) if private else (stat.S_IWGRP | stat.S_IWOTH)
    if found.st_uid != os.geteuid():
        raise ConfigurationError(
            f"{path} belongs to another user (uid {found.st_uid}); delete it and log in again"
        )
    if mode & shared:
        what = "read or written" if private else "written"
        raise ConfigurationError(
            f"{path} can be {what} by other users (mode {mode:04o}): make it yours alone "
            f"with chmod 600 {path}"
            + (" (and replace the keys in it: others may have read them)" if private else "")
        )


def _read(path: Path, *, private: bool = False) -> dict[str, Any]:
    _check_folder(path.parent)
    _check_file(path, private=private)
    if not path.exists():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(
            f"the profiles file {path} cannot be read ({exc}); fix or delete it and log in again"
        ) from None
    return dict(value) if isinstance(value, dict) else {}


def _write(path: Path, value: dict[str, Any], *, private: bool) -> None:
    """Written whole (:func:`parcelsearch.kept_files.write_whole`); a credentials file is
    made 0600 before the key is in it."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _check_folder(path.parent)
    text = json.dumps(value, indent=1, sort_keys=True)
    write_whole(path, text.encode("utf-8"), mode=0o600 if private else 0o644)


def save(
    name: str,
    api_key: str,
    *,
    base_url: str | None = None,
    ca_bundle: str | None = None,
    folder: str | os.PathLike[str] | None = None,
    keyring: bool = True,
    proxy: str | None = None,
    quota: Quota | str | None = None,
) -> Profile:
    """Save a profile: its key in the OS keyring (``keyring=True`` and there is one), else
    in ``credentials.json`` (0600); its base URL and CA bundle in ``profiles.json``.

    Parameters
    ----------
    name
        The profile's name (``Client(profile=name)``, ``--profile NAME``).
    api_key
        The key to keep for it (never written to ``profiles.json``).
    base_url
        The service's ``https://`` root, if the profile names one.
    ca_bundle
        A PEM file of CAs to trust (kept as an absolute path).
    folder
        The config folder (default: this user's).
    keyring
        ``False``: file the key in ``credentials.json`` even where there is a keyring.
    proxy
        The proxy to reach the service through (``http://host:port``): its address only,
        never a password (refused: give it in ``HTTPS_PROXY`` or ``PARCELSEARCH_PROXY``).
    quota
        The key's quota (``"demo"``, ``"production"``, ``"500/month"``, ``"50/lifetime"``):
        a search with this profile's key and no quota of its own then uses it.

    Returns
    -------
    Profile
        The profile as saved (read back).
    """
    check_name(name)
    base = _folder(folder)
    if base_url is not None:
        base_url = settings.check_base_url(base_url)
    if ca_bundle is not None:
        ca_bundle = str(Path(ca_bundle).expanduser().resolve())
    if proxy is not None:
        proxy = _address_only(proxy)
    known = None if quota is None or quota == "" else Quota.parse(quota)
    store = _keyring() if keyring else None
    credentials_path = base / CREDENTIALS_FILE
    credentials = _read(credentials_path, private=True)
    if store is not None:
        store.set_password(KEYRING_SERVICE, name, api_key)
        kept = "keyring"
        if credentials.pop(name, None) is not None:  # a key filed before: not twice
            _write(credentials_path, credentials, private=True)
    else:
        credentials[name] = api_key
        _write(credentials_path, credentials, private=True)
        kept = _FILE
    saved = _read(base / PROFILES_FILE)
    saved[name] = {
        "base_url": base_url,
        "ca_bundle": ca_bundle,
        "key": kept,
        "fingerprint": _fingerprint(api_key),
    }
    if proxy is not None:
        saved[name]["proxy"] = proxy
    if known is not None:
        saved[name]["quota"] = str(known)
    _write(base / PROFILES_FILE, saved, private=False)
    found = load(name, folder=base)
    assert found is not None
    return found


def _address_only(proxy: str) -> str:
    """A proxy a profile may keep: its address, never credentials."""
    from urllib.parse import urlsplit

    from parcelsearch._fetch.network import check_proxy, shown_proxy

    checked = check_proxy(proxy)
    if "@" in urlsplit(checked).netloc:
        raise ConfigurationError(
            f"the proxy {shown_proxy(checked)} holds a user name and password: a profile keeps "
            "a proxy's address only, never its password. Save http://host:port, and give the "
            "credentials in the proxy URL of HTTPS_PROXY or PARCELSEARCH_PROXY when you run.",
            hints=[Hint("proxy", phrase="give the address alone with {knob}")],
        )
    return checked


def profile_proxy(profile: str | None, api_key: str | None) -> str | None:
    """The proxy of the profile a client uses (:func:`chosen`), if it keeps one."""
    named = chosen(profile, api_key)
    if named is None:
        return None
    entry = _read(_folder(None) / PROFILES_FILE).get(named) or {}
    proxy = entry.get("proxy")
    return str(proxy) if proxy else None


def profile_quota(
    profile: str | None, api_key: str | None, fingerprint: str
) -> tuple[str, Quota] | None:
    """The quota saved with the profile a client uses (:func:`chosen`) and the profile's
    name, when its key is the one used (``fingerprint``: an ``api_key`` given beside a
    profile is another key, whose quota the profile does not know)."""
    named = chosen(profile, api_key)
    if named is None:
        return None
    found = load(named)
    if found is None or found.quota is None or found.fingerprint != fingerprint:
        return None
    try:
        quota = Quota.parse(found.quota)
    except ConfigurationError as exc:
        raise ConfigurationError(
            f"the quota saved with the profile {named!r} ({found.quota[:40]!r}) is not a "
            f"quota: {exc.message}",
            hints=[Hint("login", named, "save it again with {knob}")],
        ) from None
    return None if quota is None else (named, quota)


def _file_kept_in(path: Path) -> str:
    """Where a key filed in ``path`` is kept, and who can read it (as it is, not as meant)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return f"{path} (missing)"
    if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
        return f"{path} (mode {mode:04o}, open to other users: chmod 600 {path})"
    return f"{path} (readable by you only)"


def _profile(name: str, entry: dict[str, Any], base: Path) -> Profile:
    kept = (
        _backend_name() if entry.get("key") == "keyring" else _file_kept_in(base / CREDENTIALS_FILE)
    )
    base_url = entry.get("base_url")  # a password in it (an edited file) is never shown
    quota = entry.get("quota")
    return Profile(
        name,
        None if base_url is None else settings.without_userinfo(str(base_url)),
        entry.get("ca_bundle"),
        kept,
        str(entry.get("fingerprint", "")),
        str(quota) if quota else None,
    )


def load(name: str, *, folder: str | os.PathLike[str] | None = None) -> Profile | None:
    """The saved profile ``name``, or None."""
    base = _folder(folder)
    entry = _read(base / PROFILES_FILE).get(name)
    return None if entry is None else _profile(name, entry, base)


def profiles(folder: str | os.PathLike[str] | None = None) -> list[Profile]:
    """Every saved profile, by name."""
    base = _folder(folder)
    return [_profile(n, e, base) for n, e in sorted(_read(base / PROFILES_FILE).items())]


def _key(name: str, base: Path) -> str | None:
    entry = _read(base / PROFILES_FILE).get(name) or {}
    if entry.get("key") == "keyring":
        store = _keyring()
        return None if store is None else store.get_password(KEYRING_SERVICE, name)
    value = _read(base / CREDENTIALS_FILE, private=True).get(name)
    return None if value is None else str(value)


def remove(name: str, *, folder: str | os.PathLike[str] | None = None) -> bool:
    """Forget a profile and its key (keyring entry or file line); True if there was one."""
    base = _folder(folder)
    saved = _read(base / PROFILES_FILE)
    entry = saved.pop(name, None)
    if entry is None:
        return False
    if entry.get("key") == "keyring":
        store = _keyring()
        if store is not None:
            try:
                store.delete_password(KEYRING_SERVICE, name)
            except Exception:  # noqa: BLE001 - keyring's PasswordDeleteError: already gone
                pass
    credentials = _read(base / CREDENTIALS_FILE, private=True)
    if credentials.pop(name, None) is not None:
        _write(base / CREDENTIALS_FILE, credentials, private=True)
    _write(base / PROFILES_FILE, saved, private=False)
    return True


def chosen(profile: str | None, api_key: str | None = None) -> str | None:
    """The profile a client uses: ``profile``, else ``$PARCELSEARCH_PROFILE``, else — when no
    key is given nor in ``$PARCELSEARCH_API_KEY`` — ``default`` if it is saved; else None."""
    named = profile if profile is not None else settings.options.profile
    if named is not None:
        return str(named)
    if api_key is not None or os.environ.get(settings.ENV_API_KEY, "").strip():
        return None
    return DEFAULT_PROFILE if load(DEFAULT_PROFILE) is not None else None


def resolve(
    profile: str | None,
    api_key: str | None,
    base_url: str | None,
    ca_bundle: str | os.PathLike[str] | None,
) -> tuple[str | None, str | None, str | os.PathLike[str] | None]:
    """The key, base URL and CA bundle a client uses, with a profile's filling what was not
    given as an argument.

    The profile is :func:`chosen`. A profile named but not saved, or whose key is gone, is an
    error that says how to log in. A key given (or in ``$PARCELSEARCH_API_KEY``) with no
    profile named still takes the base URL and CA bundle of the ``default`` profile, when
    saved, where neither an argument nor the environment gives them.
    """
    named = chosen(profile, api_key)
    if named is None:
        return (api_key, *_default_place(profile, base_url, ca_bundle))
    check_name(named)
    base = _folder(None)
    found = load(named, folder=base)
    key = _key(named, base) if found is not None else None
    if found is None or key is None:
        what = "no saved profile" if found is None else "no key kept for the profile"
        raise ConfigurationError(
            f"{what} {named!r} (in {base})", hints=[Hint("login", named, "save it with {knob}")]
        )
    return (
        api_key if api_key is not None else key,
        base_url if base_url is not None else found.base_url,
        ca_bundle if ca_bundle is not None else found.ca_bundle,
    )


def _default_place(
    profile: str | None, base_url: str | None, ca_bundle: str | os.PathLike[str] | None
) -> tuple[str | None, str | os.PathLike[str] | None]:
    """The base URL and CA bundle: the arguments, else the environment's, else the saved
    ``default`` profile's (when no profile is named: its key is not used, its place is; its
    CA bundle only with its base URL)."""
    if profile is not None or settings.options.profile is not None:
        return base_url, ca_bundle
    found = load(DEFAULT_PROFILE)
    if found is None:
        return base_url, ca_bundle
    if base_url is not None or settings.options.base_url:
        return base_url, ca_bundle  # another place: the profile's CA would not be its CA
    if ca_bundle is None and not settings.options.ca_bundle:
        ca_bundle = found.ca_bundle
    return found.base_url, ca_bundle
