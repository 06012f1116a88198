"""The ``portal`` sub-command of ``parcelsearch``: ``portal add-user``.

The password is read from standard input only (never from the command line or the
environment): typed twice at a terminal, or the first line of piped input.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any, TextIO

from parcelsearch.errors import ConfigurationError

__all__ = ["register", "read_password"]


def read_password(stream: TextIO = sys.stdin) -> str:
    """The new password from ``stream``: prompted twice on a terminal, else its first line.

    Raises
    ------
    ConfigurationError
        Nothing given, or the two typed passwords differ.
    """
    if stream.isatty():
        first = getpass.getpass("Password: ")
        if getpass.getpass("Password again: ") != first:
            raise ConfigurationError("the two passwords differ; run add-user again")
        return first
    line = stream.readline()
    password = line[:-1] if line.endswith("\n") else line
    if password.endswith("\r"):
        password = password[:-1]
    if not password:
        raise ConfigurationError(
            "no password on standard input; pipe it in (printf '%s\\n' \"$PW\" | parcelsearch "
            "portal add-user ...) or run add-user at a terminal to be prompted"
        )
    return password


def _add_user(args: argparse.Namespace) -> int:
    # Deferred: keeps `parcelsearch --help` from importing pandas through the key store.
    from parcelsearch_service.keys import KeyStore, default_keys_location
    from parcelsearch_service.portal.accounts import normalise_email
    from parcelsearch_service.portal.storage import PortalStore

    email = normalise_email(args.email)
    password = read_password()
    keys = KeyStore(args.keys or default_keys_location())
    try:
        user = PortalStore(keys).add_user(email, password, admin=args.admin)
    finally:
        keys.close()
    role = "admin" if user.is_admin else "user"
    print(f"added portal {role} {user.email}", file=sys.stderr)
    return 0


def register(commands: Any) -> None:
    """Add ``portal`` (with ``add-user``) to the top-level sub-parsers ``commands``."""
    portal = commands.add_parser(
        "portal",
        help="manage developer-portal users",
        description="Manage the users of the developer portal (parcelsearch serve --portal).",
    )
    sub = portal.add_subparsers(dest="portal_command", required=True, metavar="ACTION")
    add = sub.add_parser(
        "add-user",
        help="add a portal user (password read from standard input)",
        description="Add a portal user. The password (at least 12 characters) is read from "
        "standard input: prompted twice at a terminal, else the first line. Only a scrypt "
        "hash is stored.",
    )
    add.add_argument(
        "--keys",
        default=None,
        metavar="FILE|URL",
        help="the key store the service uses: a SQLite file or a postgresql:// "
        "URL (default: the per-user keys.sqlite)",
    )
    add.add_argument("--email", required=True, help="the user's e-mail address (sign-in name)")
    add.add_argument(
        "--admin", action="store_true", help="an admin sees every app and can change limits"
    )
    add.set_defaults(func=_add_user)
