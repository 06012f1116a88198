"""The profile commands: login, logout, profiles; each declared beside its run.

A profile keeps the API key in the OS keyring (else a file readable by its owner only); the
key is never printed, only its sha256 fingerprint.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from parcelsearch.cli import arguments
from parcelsearch.cli.printing import print_table
from parcelsearch.cli.registry import Command, Parser
from parcelsearch.errors import ConfigurationError, Hint

if TYPE_CHECKING:
    from parcelsearch.stores.quotas import Quota

__all__ = ["COMMANDS", "run_login", "run_logout", "run_profiles"]


def _declare_login(parser: Parser) -> None:
    parser.add_argument(
        "--profile", default="default", metavar="NAME", help="the profile's name (default: default)"
    )
    parser.add_argument(
        "--base-url",
        type=arguments.base_url,
        metavar="URL",
        help="https:// root of the services for this profile",
    )
    parser.add_argument(
        "--ca-bundle",
        type=arguments.existing_file,
        metavar="FILE",
        help="PEM file of CAs to trust for this profile",
    )
    parser.add_argument(
        "--proxy",
        metavar="URL",
        help="the proxy to reach the service through for this profile, "
        "http://host:port (its address only: a password is refused)",
    )
    arguments.add_option(
        parser,
        "quota",
        help="the key's kind or quota: demo, production, 500/month, 50/lifetime (default: "
        "${env}, else asked on a terminal); searches with this profile and no --quota "
        "use it",
    )


def _read_key() -> str:
    """The key typed at the terminal (no echo) or piped on standard input (one line)."""
    import getpass

    if sys.stdin is not None and sys.stdin.isatty():
        return getpass.getpass("API key (not shown): ")
    return (sys.stdin.readline() if sys.stdin is not None else "").strip()


#: Times a terminal is asked the key's quota before login gives up on the answers.
QUOTA_ASKS = 3


def _read_quota(given: str | None) -> Quota | None:
    """The key's quota: ``--quota``, else ``$PARCELSEARCH_QUOTA``, else asked on a terminal
    (Enter: not known); ``None`` when not known."""
    from parcelsearch.stores.quotas import Quota

    if given is not None:
        return Quota.parse(given)
    told = Quota.parse(None)  # the variable
    if told is not None or sys.stdin is None or not sys.stdin.isatty():
        return told
    for _ in range(QUOTA_ASKS):
        try:
            answer = input(
                "the key's kind or quota (demo, production, 500/month, "
                "50/lifetime; Enter: not known): "
            ).strip()
        except EOFError:  # Ctrl-D: not known
            return None
        if not answer:
            return None
        try:
            return Quota.parse(answer)
        except ConfigurationError as exc:
            print(exc.message, file=sys.stderr)
    raise ConfigurationError(
        f"no quota understood in {QUOTA_ASKS} answers; nothing saved",
        hints=[Hint("quota", "production", "give it with {knob}")],
    )


def run_login(args: argparse.Namespace) -> int:
    """``parcelsearch login``: save a profile; the key in the OS keyring (else a 0600 file),
    its quota beside it when told or answered."""
    from parcelsearch import profiles
    from parcelsearch._fetch.config import resolve_key

    profiles.check_name(args.profile)
    key = resolve_key(_read_key() or None)  # the client's rule: no blanks, ASCII
    quota = _read_quota(args.quota)
    saved = profiles.save(
        args.profile,
        key,
        base_url=args.base_url,
        ca_bundle=args.ca_bundle,
        proxy=args.proxy,
        quota=quota,
    )
    print(
        f"profile {saved.name!r} saved: key sha256:{saved.fingerprint}… kept in "
        f"{saved.kept_in}"
        + (f", base URL {saved.base_url}" if saved.base_url else "")
        + (f", quota {quota.describe()}" if quota is not None else "")
    )
    return 0


LOGIN = Command(
    "login",
    "save your API key in a profile (the OS keyring), never in a notebook",
    _declare_login,
    run_login,
    description="Save a profile: the API key (read from the terminal without echo, or "
    "from standard input) in the OS keyring when there is one, else in a file "
    "readable by you only; the base URL, CA bundle and the key's quota (--quota, "
    "else asked on a terminal) beside it. Then "
    "'search --profile NAME', $PARCELSEARCH_PROFILE or "
    "Client(profile=NAME) use it, and 'default' is used when no key is set. "
    "The key is never printed: only its sha256 fingerprint. Spends nothing.",
)


def _declare_logout(parser: Parser) -> None:
    parser.add_argument(
        "--profile", default="default", metavar="NAME", help="the profile's name (default: default)"
    )


def run_logout(args: argparse.Namespace) -> int:
    """``parcelsearch logout``: forget a profile and its key."""
    from parcelsearch import profiles

    if not profiles.remove(profiles.check_name(args.profile)):
        raise ConfigurationError(
            f"no saved profile {args.profile!r}",
            hints=[Hint("login", args.profile, "save one with {knob}")],
        )
    print(f"profile {args.profile!r} removed, its key with it")
    return 0


LOGOUT = Command(
    "logout",
    "forget a saved profile and its key",
    _declare_logout,
    run_logout,
    description="Remove a profile saved by 'parcelsearch login' and its key (keyring entry "
    "or file line).",
)


def _declare_profiles(parser: Parser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON records")


def run_profiles(args: argparse.Namespace) -> int:
    """``parcelsearch profiles``: the saved profiles, keys shown by fingerprint only."""
    import pandas as pd

    from parcelsearch import profiles

    frame = pd.DataFrame(
        [
            {
                "profile": p.name,
                "base_url": p.base_url,
                "ca_bundle": p.ca_bundle,
                "key": f"sha256:{p.fingerprint}",
                "quota": p.quota,
                "kept_in": p.kept_in,
            }
            for p in profiles.profiles()
        ],
        columns=["profile", "base_url", "ca_bundle", "key", "quota", "kept_in"],
    )
    if args.json:
        print(frame.to_json(orient="records"))
    elif frame.empty:
        print("no profiles saved yet (parcelsearch login)")
    else:
        print_table(frame.set_index("profile"))
    return 0


PROFILES = Command(
    "profiles",
    "list the saved profiles (keys never shown)",
    _declare_profiles,
    run_profiles,
    description="The profiles saved by 'parcelsearch login': name, base URL, CA bundle, where "
    "the key is kept, its sha256 fingerprint (never the key) and its quota.",
)

#: The commands of this module, in the order ``parcelsearch --help`` lists them.
COMMANDS = (LOGIN, LOGOUT, PROFILES)
