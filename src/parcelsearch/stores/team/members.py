"""Who is in a team: the team store's URL and the member running a search, each from its
argument, else its environment variable (else, for the member, the login name)."""

from __future__ import annotations

import getpass
import os
import re
import unicodedata
from typing import Final

from parcelsearch.errors import ConfigurationError, Hint
from parcelsearch.knobs import variable

__all__ = ["ENV_TEAM", "ENV_USER", "resolve_team", "resolve_user", "shown"]

#: The team store's URL (``postgresql://…``), read when ``team`` is not given.
ENV_TEAM: Final = variable("team")
#: Who is running the search in a team, read when ``user`` is not given.
ENV_USER: Final = variable("user")

_USER = re.compile(r"[a-z0-9_.@-]{1,64}")


def resolve_team(team: str | None) -> str | None:
    """The team store's URL: ``team``, else ``$PARCELSEARCH_TEAM``, else ``None`` (no team).

    Raises
    ------
    ConfigurationError
        Not a ``postgresql://`` URL.
    """
    source = ""
    if team is None:
        team, source = os.environ.get(ENV_TEAM) or None, f" (from {ENV_TEAM})"
        if team is None:
            return None
    if not isinstance(team, str) or not team.startswith(("postgresql://", "postgres://")):
        raise ConfigurationError(
            f"team must be a postgresql:// URL{source}, got {shown(str(team))!r}",
            hints=[Hint("team", "postgresql://host/db", "for example {knob}")],
        )
    return team


def resolve_user(user: str | None) -> str:
    """Who runs the search: ``user``, else ``$PARCELSEARCH_USER``, else the login name;
    NFKC-normalised and case-folded (``Alice``, ``ALICE`` and ``Ａｌｉｃｅ`` are ``alice``).

    Raises
    ------
    ConfigurationError
        A name that is not 1-64 letters, digits or ``_.@-`` (the message shows at most its
        first 40 characters).
    """
    source = ""
    if user is None:
        user, source = os.environ.get(ENV_USER) or None, f" (from {ENV_USER})"
    if user is None:
        try:
            user, source = getpass.getuser(), " (the login name)"
        except (KeyError, OSError):
            user, source = "unknown", ""
    folded = unicodedata.normalize("NFKC", user).casefold() if isinstance(user, str) else ""
    if not _USER.fullmatch(folded):
        shown = (
            repr(user[:40]) + (f"… ({len(user)} characters)" if len(user) > 40 else "")
            if isinstance(user, str)
            else repr(type(user).__name__)
        )
        raise ConfigurationError(
            f"user must be 1-64 letters, digits or _.@-{source}, got {shown}",
            hints=[Hint("user", "alice", "for example {knob}")],
        )
    return folded


def shown(url: str) -> str:
    """The store's URL as it may be shown: without its password."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)
