"""The options of one search, checked once, frozen, and carried through the pipeline.

:func:`parcelsearch.search` takes them as keywords (its public face) and builds one
:class:`SearchOptions`; the phases, the run and the spending read that value, never a
keyword handed on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final

from parcelsearch import settings
from parcelsearch._shared import check_count
from parcelsearch.errors import ConfigurationError, Hint
from parcelsearch.knobs import declared, variable
from parcelsearch.settings import (
    DEFAULT_ASK_ABOVE,
    DEFAULT_SURVEY_SHARE,
    DEFAULT_WORKERS,
    parse_age,
)
from parcelsearch.stores.quotas import Quota

__all__ = [
    "SearchOptions",
    "DEFAULT_WORKERS",
    "ENV_TEAM",
    "ENV_USER",
    "REFRESH_MODES",
    "DEFAULT_VERIFY_SAMPLE",
    "PLANNING",
    "PRICING",
    "NumberRule",
    "SHARE",
    "FRACTION",
    "refresh_mode",
    "samples",
    "check_fraction",
    "agrees_with_plan",
    "made_with",
    "uses_learnt_match",
]


#: ``refresh`` values: cached pages reused where present, none reused, or only unchanged.
REFRESH_MODES = ("cached", "all", "changed")
#: Fraction of the pieces inferred unchanged whose other pages a changed-refresh re-reads.
DEFAULT_VERIFY_SAMPLE = 0.0
#: The variables of ``team`` and ``user`` (:mod:`parcelsearch.stores.team.members` reads them;
#: not imported here, so that the options load without the team store).
ENV_TEAM: Final = variable("team")
ENV_USER: Final = variable("user")


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
        hints=[Hint("refresh", "changed", "for a cheap refresh use {knob}")],
    )


def samples(mode: str) -> bool:
    """Whether a refresh in ``mode`` (see :func:`refresh_mode`) takes a verify sample: only
    ``"changed"`` infers what it does not read (the one owner of this rule; the command line
    asks it too)."""
    return mode == "changed"


def check_fraction(value: object, mode: str = "changed") -> float:
    """``verify_sample`` as a float in [0, 1] (``None``: the default,
    :data:`DEFAULT_VERIFY_SAMPLE`: no sample unless asked for).

    Raises
    ------
    ConfigurationError
        Not a number between 0 and 1, or given without ``refresh="changed"``.
    """
    if value is None:
        return DEFAULT_VERIFY_SAMPLE if samples(mode) else 0.0
    if not samples(mode):
        raise ConfigurationError(
            "verify_sample checks what refresh='changed' inferred; it means nothing with "
            f"refresh={mode!r}",
            hints=[Hint("refresh", "changed", "use {knob}")],
        )
    return FRACTION.check(value, "verify_sample")


@dataclass(frozen=True)
class NumberRule:
    """The one rule of a number option, which the Python keyword and the command line's flag
    both follow (:mod:`parcelsearch.cli.arguments` speaks it in its flags' dialect): what the
    value must be, in words; whether a value is one (``inside``); an example for the hint."""

    what: str
    inside: Callable[[float], bool]
    example: float

    def check(self, value: object, name: str) -> float:
        """``value`` as a float when it is a number (not a bool) the rule holds, else
        :class:`ConfigurationError` ``<name> must be <what>, got <value>`` with the example
        as the hint."""
        if isinstance(value, bool) or not isinstance(value, int | float) or not self.inside(value):
            raise ConfigurationError(
                f"{name} must be {self.what}, got {value!r}",
                hints=[Hint(name, self.example, "for example {knob}")],
            )
        return float(value)


#: ``survey_share``'s rule (``--survey-share``).
SHARE = NumberRule("a share above 0 and at most 1", lambda v: 0 < v <= 1, example=0.2)
#: ``verify_sample``'s rule (``--verify-sample``).
FRACTION = NumberRule("a fraction between 0 and 1", lambda v: 0 <= v <= 1, example=0.05)


#: Makes an option's value from what the user gave (``None``: not given) and the options
#: made before it (in declaration order): the one place each option is converted and checked.
Converter = Callable[[Any, Mapping[str, Any]], Any]


def _option(default: Any, convert: Converter | None = None, *, optional: bool = False) -> Any:
    """A field of :class:`SearchOptions`: its default, its converter (attrs-style: applied by
    :meth:`SearchOptions.resolve` before the frozen value is made, and checked by it when made
    directly) and whether ``None`` is a value of it (``optional``); its spellings (flag,
    variable, help) are declared in :mod:`parcelsearch.knobs`."""
    return field(default=default, metadata={"convert": convert, "optional": optional})


def _tolerance(value: Any, made: Mapping[str, Any]) -> float:
    """Checked here unless checked already (a ``Tolerance`` from ``--tolerance``, which this
    returns as it is, as :func:`~parcelsearch.planning.plans.plan` then takes it)."""
    from parcelsearch.planning.tiling.covers import check_tolerance  # tiling only with a search

    return 0.0 if value is None else check_tolerance(value)


def _connectors(value: Any, made: Mapping[str, Any]) -> bool:
    if value is None:
        return True
    if not isinstance(value, bool):
        raise ConfigurationError(f"connectors must be True or False, got {value!r}")
    return value


def _match(value: Any, made: Mapping[str, Any]) -> str:
    from parcelsearch.planning.plans import resolve_match  # tiling loads only with a search

    return resolve_match(value)


def _budget(value: Any, made: Mapping[str, Any]) -> int | None:
    if value is None:
        return None
    return check_count(value, 0, "budget", hints=[Hint("budget", None, "set {knob}")])


def _ask_above(value: Any, made: Mapping[str, Any]) -> int:
    from parcelsearch import settings

    if value is None:
        value = settings.options.ask_above
        if isinstance(value, float) and value.is_integer():
            value = int(value)
    return check_count(value, 0, "ask_above", hints=[Hint("ask_above", None, "set {knob} (calls)")])


def _survey_share(value: Any, made: Mapping[str, Any]) -> float:
    if value is None:
        return DEFAULT_SURVEY_SHARE
    return SHARE.check(value, "survey_share")


def _confirm(value: Any, made: Mapping[str, Any]) -> bool | Callable[[Any], bool]:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if callable(value):
        answer: Callable[[Any], bool] = value
        return answer
    raise ConfigurationError(
        f"confirm must be True or False, got {value!r}",
        hints=[Hint("yes", None, "pass {knob} to spend without asking")],
    )


def _workers(value: Any, made: Mapping[str, Any]) -> int:
    return check_count(DEFAULT_WORKERS if value is None else value, 1, "workers")


def _quota(value: Any, made: Mapping[str, Any]) -> Quota | None:
    return Quota.parse(value)


def _max_age(value: Any, made: Mapping[str, Any]) -> float | None:
    if value is None:
        value = settings.options.max_age
        if value is None:
            return None
        return parse_age(value, what=f"max_age (from {settings.options.source('max_age')})")
    return parse_age(value)


def _refresh(value: Any, made: Mapping[str, Any]) -> str:
    return refresh_mode(value)


def _verify_sample(value: Any, made: Mapping[str, Any]) -> float:
    return check_fraction(value, made["refresh"])


def _team(value: Any, made: Mapping[str, Any]) -> str | None:
    from parcelsearch.stores.team.members import resolve_team  # the team store: when searching

    return resolve_team(value)


def _user(value: Any, made: Mapping[str, Any]) -> str | None:
    from parcelsearch.stores.team.members import resolve_user

    return resolve_user(value) if made["team"] else value


@dataclass(frozen=True)
class SearchOptions:
    """How one search runs (see :func:`parcelsearch.search` for each option's meaning): the
    one declaration of a search's options, which :func:`parcelsearch.search`'s keywords and
    ``parcelsearch search``'s flags follow (a test holds them to it).

    :meth:`resolve` makes it from what a user gives: each option is converted by its own
    converter, in order, then the frozen value is made. ``match`` becomes the matching rule
    (``None``: ``$PARCELSEARCH_MATCH``, else ``"unknown"``). ``quota`` is parsed (``"demo"``,
    ``"500/month"``, ``None`` reads ``$PARCELSEARCH_QUOTA``); ``max_age`` becomes seconds
    (``"30d"``, ``"12h"`` or seconds; ``None`` reads ``$PARCELSEARCH_MAX_AGE``); ``team`` reads
    ``$PARCELSEARCH_TEAM`` and ``user`` ``$PARCELSEARCH_USER`` (default: the login name) when
    not given. ``refresh`` becomes its mode (``"cached"``, ``"all"`` or ``"changed"``:
    ``False`` and ``True`` mean the first two) and ``verify_sample`` a fraction (its default
    with ``"changed"``, else 0). Made directly, every value must already be what
    :meth:`resolve` would make of it. Either way a bad value raises
    :class:`~parcelsearch.errors.ConfigurationError` (or
    :class:`~parcelsearch.errors.InputError`) naming it.
    """

    tolerance: float = _option(0.0, _tolerance)
    connectors: bool = _option(True, _connectors)
    match: str = _option("unknown", _match)
    id_column: str | None = _option(None, optional=True)
    trust_crs: bool = _option(False)
    trust_tolerance: bool = _option(False)
    trust_markets: bool = _option(False)
    budget: int | None = _option(None, _budget, optional=True)
    quota: Quota | None = _option(None, _quota, optional=True)
    allow_partial: bool = _option(False)
    ask_above: int = _option(DEFAULT_ASK_ABOVE, _ask_above)
    survey_share: float = _option(DEFAULT_SURVEY_SHARE, _survey_share)
    confirm: bool | Callable[[Any], bool] = _option(False, _confirm)
    max_age: float | None = _option(None, _max_age, optional=True)
    refresh: str = _option("cached", _refresh)
    verify_sample: float = _option(DEFAULT_VERIFY_SAMPLE, _verify_sample)
    active_markets_only: bool = _option(False)
    market_column: str = _option("market")
    progress: bool = _option(True)
    workers: int = _option(DEFAULT_WORKERS, _workers)
    team: str | None = _option(None, _team, optional=True)
    user: str | None = _option(None, _user, optional=True)

    @classmethod
    def resolve(cls, plan: Any = None, **given: Any) -> SearchOptions:
        """The options from what a user gave (``None`` or left out: the default, or the
        environment's where one is read).

        With a ``plan`` (:class:`parcelsearch.Plan`), the planning options are the plan's;
        given as well, they must agree with it (:func:`agrees_with_plan`).

        Raises
        ------
        ConfigurationError, InputError
            A value that is not one of the option's (the message names it), an unknown
            option, or a planning option that disagrees with ``plan``.
        """
        unknown = sorted(set(given) - set(cls.names()))
        if unknown:
            raise ConfigurationError(f"unknown search option(s): {', '.join(unknown)}")
        if plan is not None:
            agrees_with_plan(plan, **{name: given.get(name) for name in PLANNING})
            given.update(made_with(plan))
        made: dict[str, Any] = {}
        for f in fields(cls):
            convert = f.metadata["convert"]
            if convert is not None:
                made[f.name] = convert(given.get(f.name), made)
            else:
                made[f.name] = given.get(f.name, f.default)
        return cls(**made)

    def __post_init__(self) -> None:
        """Made directly: each value must be the default or its converter's own (so the
        declared types hold)."""
        for f in fields(self):
            value, convert = getattr(self, f.name), f.metadata["convert"]
            if (
                convert is None
                or value is None
                and f.metadata["optional"]
                or (value == f.default and type(value) is type(f.default))
            ):
                continue
            made = convert(value, vars(self))
            if made != value or type(made) is not type(value):
                raise ConfigurationError(
                    f"SearchOptions({f.name}={value!r}) is not a value of the option; "
                    f"SearchOptions.resolve({f.name}={value!r}) makes it {made!r}"
                )

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The option names, in order."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def flags(cls) -> dict[str, str]:
        """Each option's flag on ``parcelsearch search``, as :mod:`parcelsearch.knobs`
        declares it (``--`` + its name with ``-`` for ``_``, but ``--no-connectors`` and
        ``--quiet``, which turn a default off, and ``--yes``)."""
        return {f.name: str(declared(f.name).flag) for f in fields(cls)}

    def __repr__(self) -> str:
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        if shown["team"]:
            from parcelsearch.stores.team.members import shown as shown_url

            shown["team"] = shown_url(shown["team"])
        return "SearchOptions(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


def uses_learnt_match(match: object) -> bool:
    """Whether a search plans under the matching rule learnt for its service
    (:func:`parcelsearch.rule_probe.rule_for`): ``match`` neither given (``None``) nor set
    (``settings.options.match``, ``$PARCELSEARCH_MATCH``). ``parcelsearch plan`` asks it too,
    to show the pieces a search would send."""
    return match is None and settings.options.source("match") == "default"


#: The options a plan is made with (see :func:`parcelsearch.plan`): a plan given to a search
#: brings its own.
PLANNING = ("tolerance", "connectors", "match", "id_column")
#: The options :func:`parcelsearch.price` takes as keywords, as :func:`parcelsearch.search`
#: takes them (a test holds its signature and docstring to these).
PRICING = (
    "tolerance",
    "match",
    "id_column",
    "trust_markets",
    "quota",
    "survey_share",
    "refresh",
    "progress",
)


def made_with(plan: Any) -> dict[str, Any]:
    """The planning options (:data:`PLANNING`) ``plan`` (:class:`parcelsearch.Plan`) was made
    with."""
    return {
        "tolerance": plan.tolerance,
        "connectors": plan.connectors,
        "match": plan.match,
        "id_column": plan.id_name,
    }


def agrees_with_plan(plan: Any, **given: Any) -> None:
    """Refuse planning options given beside a plan (:class:`parcelsearch.Plan`) that was made
    with other values (``None``: not given).

    Raises
    ------
    ConfigurationError
        Naming the option, the value given and the plan's.
    """
    made = made_with(plan)
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
                if name in ("tolerance", "match", "id_column")
                else [],
            )
