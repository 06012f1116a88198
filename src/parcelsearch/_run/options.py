"""The options of one search, checked once, frozen, and carried through the pipeline.

:func:`parcelsearch.search` takes them as keywords (its public face) and builds one
:class:`SearchOptions`; the phases, the run and the spending read that value, never a
keyword handed on.
"""

from __future__ import annotations

import getpass
import os
import re
import unicodedata
from dataclasses import dataclass, fields
from typing import Any

from parcelsearch._shared import check_count
from parcelsearch.errors import ConfigurationError, Hint
from parcelsearch.stores.local.ledger import Quota

__all__ = ["SearchOptions", "DEFAULT_WORKERS", "ENV_TEAM", "ENV_USER", "REFRESH_MODES",
           "DEFAULT_VERIFY_SAMPLE", "refresh_mode", "check_fraction", "agrees_with_plan"]

#: Threads sending requests; the client's shared pacer paces them all.
DEFAULT_WORKERS = 8
#: The team store's URL (``postgresql://…``), read when ``team`` is not given.
ENV_TEAM = "PARCELSEARCH_TEAM"
#: Who is running the search in a team, read when ``user`` is not given.
ENV_USER = "PARCELSEARCH_USER"

_USER = re.compile(r"[a-z0-9_.@-]{1,64}")

#: ``refresh`` values: cached pages reused where present, none reused, or only unchanged.
REFRESH_MODES = ("cached", "all", "changed")
#: Fraction of the pieces inferred unchanged whose other pages a changed-refresh re-reads.
DEFAULT_VERIFY_SAMPLE = 0.0


def refresh_mode(value: object) -> str:
    """``"cached"``, ``"all"`` or ``"changed"`` from ``refresh`` (``False``/``None``: cached;
    ``True``: all, today's meaning).

    Raises
    ------
    ConfigurationError
        Anything else (the message names the values).
    """
    if value is None or value is False:
        return "cached"
    if value is True:
        return "all"
    if isinstance(value, str) and value in REFRESH_MODES:
        return value
    raise ConfigurationError(
        f"refresh must be False, True, 'all' or 'changed', got {value!r}",
        hints=[Hint("refresh", "changed", "for a cheap refresh use {knob}")])


def check_fraction(value: object, mode: str = "changed") -> float:
    """``verify_sample`` as a float in [0, 1] (``None``: the default,
    :data:`DEFAULT_VERIFY_SAMPLE`: no sample unless asked for).

    Raises
    ------
    ConfigurationError
        Not a number between 0 and 1, or given without ``refresh="changed"``.
    """
    if value is None:
        return DEFAULT_VERIFY_SAMPLE if mode == "changed" else 0.0
    if mode != "changed":
        raise ConfigurationError(
            "verify_sample checks what refresh='changed' inferred; it means nothing with "
            f"refresh={mode!r}", hints=[Hint("refresh", "changed", "use {knob}")])
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ConfigurationError(
            f"verify_sample must be a fraction between 0 and 1, got {value!r}",
            hints=[Hint("verify_sample", 0.05, "for example {knob}")])
    return float(value)


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
            f"team must be a postgresql:// URL{source}, got {_no_password(str(team))!r}",
            hints=[Hint("team", "postgresql://host/db", "for example {knob}")])
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
        shown = repr(user[:40]) + (f"… ({len(user)} characters)" if len(user) > 40 else "") \
            if isinstance(user, str) else repr(type(user).__name__)
        raise ConfigurationError(
            f"user must be 1-64 letters, digits or _.@-{source}, got {shown}",
            hints=[Hint("user", "alice", "for example {knob}")])
    return folded


def _no_password(url: str) -> str:
    """A URL as it may be shown: without its password."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


@dataclass(frozen=True)
class SearchOptions:
    """How one search runs (see :func:`parcelsearch.search` for each option's meaning).

    Checked when made: a bad value raises :class:`~parcelsearch.errors.ConfigurationError`
    naming it. ``match`` becomes the matching rule (``None``: ``$PARCELSEARCH_MATCH``, else
    ``"unknown"``). ``quota`` is parsed (``"demo"``, ``"500/month"``, ``None`` reads
    ``$PARCELSEARCH_QUOTA``); ``team`` reads ``$PARCELSEARCH_TEAM`` and ``user``
    ``$PARCELSEARCH_USER`` (default: the login name) when not given. ``refresh`` becomes
    its mode (``"cached"``, ``"all"`` or ``"changed"``: ``False`` and ``True`` mean the first
    two) and ``verify_sample`` a fraction (its default with ``"changed"``, else 0).
    """

    tolerance: float = 0.0
    connectors: bool = True
    match: str | None = None
    id_column: str | None = None
    budget: int | None = None
    quota: Quota | None = None
    allow_partial: bool = False
    max_age: float | None = None
    refresh: bool | str = False
    verify_sample: float | None = None
    active_markets_only: bool = False
    market_column: str = "market"
    progress: bool = True
    workers: int = DEFAULT_WORKERS
    team: str | None = None
    user: str | None = None

    def __post_init__(self) -> None:
        if self.budget is not None:
            check_count(self.budget, 0, "budget", hints=[Hint("budget", None, "set {knob}")])
        check_count(self.workers, 1, "workers")
        if not isinstance(self.connectors, bool):
            raise ConfigurationError(f"connectors must be True or False, got {self.connectors!r}")
        from parcelsearch.planning.plans import resolve_match  # tiling loads only with a search

        object.__setattr__(self, "match", resolve_match(self.match))
        # refresh becomes its mode ("cached", "all", "changed"); verify_sample a fraction.
        mode = refresh_mode(self.refresh)
        object.__setattr__(self, "refresh", mode)
        object.__setattr__(self, "verify_sample", check_fraction(self.verify_sample, mode))
        object.__setattr__(self, "quota", Quota.parse(self.quota))
        object.__setattr__(self, "team", resolve_team(self.team))
        object.__setattr__(self, "user", resolve_user(self.user) if self.team else self.user)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The option names, in order."""
        return tuple(f.name for f in fields(cls))

    def __repr__(self) -> str:
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        if shown["team"]:
            shown["team"] = _no_password(shown["team"])
        return "SearchOptions(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


def agrees_with_plan(plan: Any, **given: Any) -> None:
    """Refuse planning options given beside a plan (:class:`parcelsearch.Plan`) that was made
    with other values (``None``: not given).

    Raises
    ------
    ConfigurationError
        Naming the option, the value given and the plan's.
    """
    made = {"tolerance": plan.tolerance, "connectors": plan.connectors, "match": plan.match,
            "id_column": plan.id_name}
    for name, value in given.items():
        if value is None:
            continue
        if name == "tolerance":
            from parcelsearch.planning.tiling.covers import check_tolerance

            same = check_tolerance(value) == made[name]
        elif name == "match":
            from parcelsearch.planning.plans import resolve_match

            same = resolve_match(value) == made[name]
        else:
            same = value == made[name]
        if not same:
            raise ConfigurationError(
                f"search(plan=...) was given {name}={value!r}, but the plan was made with "
                f"{name}={made[name]!r}; a plan is searched as it was made",
                hints=[Hint(name, made[name], "drop it or pass the plan's {knob}")]
                if name in ("tolerance", "match", "id_column") else [])
