"""What several commands share: option values checked while parsing, option groups, help texts.

An option's value is checked by its argparse ``type``, so a bad one exits 2 naming the option
before anything is read or spent. Nothing heavy is imported here: the checks that need
shapely, pyproj, sqlite3 or geopandas import them when their option is given.
"""

from __future__ import annotations

import argparse
import importlib
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from parcelsearch import settings
from parcelsearch._shared import count_argument
from parcelsearch.errors import ConfigurationError, ParcelSearchError
from parcelsearch.knobs import DECLARED, Declaration, declared

if TYPE_CHECKING:
    from parcelsearch._run.options import NumberRule
    from parcelsearch.planning.tiling.covers import Tolerance

__all__ = [
    "EXIT_CODES",
    "EXIT_CODES_NO_OUT",
    "ENVIRONMENT",
    "Formatter",
    "exit_codes_text",
    "number",
    "CALLS",
    "fraction",
    "tolerance",
    "age",
    "quota",
    "crs",
    "output",
    "base_url",
    "existing_file",
    "team_url",
    "TYPES",
    "add_option",
    "add_options",
    "add_areas",
    "add_connection",
    "add_out_map",
    "add_team_store",
    "add_team_member",
]

#: Exit code → what it means (shown in ``--help`` and the README); the exception classes of
#: :mod:`parcelsearch.errors` carry theirs (``exit_code``).
EXIT_CODES = {
    0: "complete",
    1: "failed (the message says why)",
    2: "usage: what you gave is wrong (an option, the areas file, a setting); nothing was spent",
    3: "stopped by --budget or the key's quota (refused before spending, or mid-run), at the "
    "decision point (the price not confirmed: --yes), or some areas failed (each named, "
    "the others complete); "
    "the partial --out is written",
    130: "interrupted (Ctrl-C); the partial --out is written",
    143: "terminated (SIGTERM); the partial --out is written",
}

#: Exit codes of the commands that never write a partial --out (plan, markets, cache).
EXIT_CODES_NO_OUT = {
    0: "complete",
    1: EXIT_CODES[1],
    2: EXIT_CODES[2],
    130: "interrupted (Ctrl-C)",
    143: "terminated (SIGTERM)",
}

#: What the ``environment variables:`` block says of each option's variable (the variable as
#: :mod:`parcelsearch.knobs` declares it); ``{cache}``: the cache folder.
_ENVIRONMENT_LINES = (
    ("api_key", "the vendor key (never written to caches, logs or messages)"),
    ("profile", "the profile saved by 'parcelsearch login' to use (--profile)"),
    ("base_url", "https:// root of the services (--base-url wins)"),
    ("ca_bundle", "PEM file of CAs to trust, e.g. a local serve's ca.pem (--ca-bundle)"),
    ("quota", "the key's quota: demo, production, 500/month, 50/lifetime (--quota)"),
    (
        "cache_dir",
        "response cache, market list and ledger folder (--cache-dir);\n"
        "default $XDG_CACHE_HOME/parcelsearch (~/.cache/parcelsearch),\nhere: {cache}",
    ),
    ("rate", "calls per second the key allows (default 10)"),
    ("max_age", "reuse cached pages at most this old: 30d, 12h, seconds (--max-age)"),
    ("response_deadline", "seconds a whole response may take (--response-deadline;\ndefault 60)"),
    (
        "max_request_bytes",
        "the longest request line the gateway takes (--max-request-bytes;\n"
        "default: learnt from its refusal, else 7168)",
    ),
    ("team", "team store, postgresql://… (--team): calls, pace and pages shared"),
    ("user", "who runs the search in the team (--user; default: login name)"),
)


def _environment() -> str:
    """The ``environment variables:`` block: each variable, then what it is (a name too long
    for the column on its own line)."""
    lines = ["environment variables:"]
    for name, text in _ENVIRONMENT_LINES:
        env = str(declared(name).env)
        first, *more = text.split("\n")
        lines += [f"  {env:<25}{first}"] if len(env) < 25 else [f"  {env}", " " * 27 + first]
        lines += [" " * 27 + line for line in more]
    return "\n".join(lines)


#: The ``environment variables:`` block of an epilog; ``{cache}``: the cache folder.
ENVIRONMENT = _environment()


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilog's layout (environment variables, exit codes)."""


def exit_codes_text(codes: dict[int, str] = EXIT_CODES) -> str:
    """The ``exit codes:`` block of an epilog."""
    return "exit codes:\n" + "\n".join(f"  {code:<4} {text}" for code, text in codes.items())


# -- option values: checked while parsing, so a bad one exits 2 before anything is spent ------


def number(
    kind: Callable[[str], float], *, low: float, what: str = "a number", high: float | None = None
) -> Callable[[str], Any]:
    """An argparse type: ``kind(text)``, finite and at least ``low`` (and at most ``high``)
    (argparse names the option in its message: ``argument --budget: must be at least 0, got
    -1``)."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"takes {what}, got {text[:40]!r}") from None
        if high is not None and not (math.isfinite(value) and low <= value <= high):
            raise argparse.ArgumentTypeError(
                f"must be from {low:g} to {high:.10g}, got {text[:40]}"
            )
        if not math.isfinite(value) or value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low:g}, got {text[:40]}")
        return value

    return parse


#: A count of calls the team store can hold (a PostgreSQL ``integer``).
CALLS = number(int, low=0, what="a whole number", high=2**31 - 1)


def fraction(text: str) -> float:
    """An argparse type: a fraction from 0 to 1 (``verify_sample``'s rule,
    :data:`parcelsearch._run.options.FRACTION`)."""
    from parcelsearch._run.options import FRACTION

    return _by_rule(text, FRACTION)


def share(text: str) -> float:
    """An argparse type: a share above 0, at most 1 (``survey_share``'s rule,
    :data:`parcelsearch._run.options.SHARE`; not a number, NaN and infinities are refused
    with the same words)."""
    from parcelsearch._run.options import SHARE

    return _by_rule(text, SHARE)


def _by_rule(text: str, rule: NumberRule) -> float:
    """``text`` as the number an option's rule takes, in the flags' dialect (argparse names
    the flag: ``argument --survey-share: must be a share above 0 and at most 1, got 0``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes {rule.what}, got {text[:40]!r}") from None
    if not rule.inside(value):
        raise argparse.ArgumentTypeError(f"must be {rule.what}, got {text[:40]}")
    return value


def tolerance(text: str) -> Tolerance:
    """An argparse type: a tolerance in metres, the planner's rule (checked here, once: the
    search and the planner take the :class:`~parcelsearch.planning.tiling.covers.Tolerance`
    as it is)."""
    # Lazy: tiling (shapely) is imported only when --tolerance is given.
    from parcelsearch.planning.tiling.covers import check_tolerance

    try:
        return check_tolerance(text)
    except ParcelSearchError as exc:
        raise argparse.ArgumentTypeError(exc.render("cli")) from None


def age(text: str) -> float:
    """An argparse type: an age in seconds, or with a unit (``30d``, ``12h``, ``90m``)."""
    try:
        return settings.parse_age(text, what="")
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(exc.render("cli")) from None


def quota(text: str) -> str:
    """An argparse type: a quota the ledger reads (``demo``, ``500/month`` …)."""
    # Lazy: the ledger (sqlite3) is imported only when --quota is given.
    from parcelsearch.stores.local.ledger import Quota

    try:
        Quota.parse(text)
    except ParcelSearchError as exc:
        raise argparse.ArgumentTypeError(exc.render("cli")) from None
    return text


def crs(text: str) -> str:
    """An argparse type: a CRS pyproj knows."""
    # Lazy: pyproj is imported only when --crs is given.
    from pyproj import CRS
    from pyproj.exceptions import CRSError

    try:
        CRS.from_user_input(text)
    except CRSError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a CRS; give one like EPSG:4326 or EPSG:32614"
        ) from None
    return text


def output(check: str) -> Callable[[str], Path]:
    """An argparse type: a file :mod:`parcelsearch.outputs`' ``check`` accepts to write."""

    def parse(text: str) -> Path:
        # Lazy: parcelsearch.outputs (geopandas, pyarrow) only when an output is named.
        outputs = importlib.import_module("parcelsearch.outputs")
        try:
            return Path(getattr(outputs, check)(text))
        except ParcelSearchError as exc:
            raise argparse.ArgumentTypeError(exc.render("cli")) from None

    return parse


def base_url(text: str) -> str:
    """An argparse type: an https:// base URL, the client's rule."""
    try:
        return settings.check_base_url(text)
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(exc.render("cli")) from None


def existing_file(text: str) -> str:
    """An argparse type: a file that exists."""
    if not Path(text).expanduser().is_file():
        raise argparse.ArgumentTypeError(f"no such file {text!r}")
    return text


def team_url(text: str) -> str:
    """An argparse type: a ``postgresql://`` URL."""
    if not text.startswith(("postgresql://", "postgres://")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a postgresql:// URL")
    return text


#: The argparse ``type`` of each ``cli_type`` key an option's row in :mod:`parcelsearch.knobs`
#: may name (the rows import nothing of the command line).
TYPES: Final[Mapping[str, Callable[[str], Any]]] = {
    "count>=0": count_argument(0),
    "count>=1": count_argument(1),
    "fraction": fraction,
    "share": share,
    "tolerance": tolerance,
    "age": age,
    "quota": quota,
}


# -- option groups -----------------------------------------------------------------------------


def _declared_details(declaration: Declaration) -> dict[str, Any]:
    """What argparse needs besides the flag, metavar and help, as ``declaration`` (a row)
    says (``cli_type`` made its argparse ``type`` by :data:`TYPES`)."""
    details: dict[str, Any] = {
        "type": None if declaration.cli_type is None else TYPES[declaration.cli_type],
        "action": declaration.action,
        "default": declaration.cli_default,
        "choices": declaration.choices,
        "nargs": declaration.nargs,
        "const": declaration.const,
    }
    return {key: value for key, value in details.items() if value is not None}


def add_option(
    parser: argparse.ArgumentParser, name: str, *, fill: dict[str, str] | None = None, **given: Any
) -> None:
    """The option ``name`` as :mod:`parcelsearch.knobs` declares it: its flag, its metavar
    (when it takes a value), its help line (or ``help``, a command's own; ``{env}`` in either
    is its variable, ``fill`` the line's other fields), stored under its name, with what
    argparse needs besides as declared (``cli_type``: the command line's check, ``action``,
    ``cli_default``, ``choices``, ``nargs``, ``const``); ``given``: any of those (``type``,
    ``default`` …) the command sets itself."""
    declaration = declared(name)
    if declaration.flag is None:
        raise ValueError(f"the option {name} has no flag")
    given = _declared_details(declaration) | given
    if declaration.metavar is not None and "action" not in given:
        given["metavar"] = declaration.metavar
    given["help"] = declaration.help_text(given.get("help"), **(fill or {}))
    parser.add_argument(declaration.flag, dest=name, **given)


def add_options(
    parser: argparse.ArgumentParser, group: str, *, defaults: Mapping[str, Any] | None = None
) -> None:
    """Every option of ``group`` (a row's ``group`` in :mod:`parcelsearch.knobs`), by
    :func:`add_option`, in the rows' order; ``defaults``: an option's default the command
    gives (a setting's, which the rows cannot import)."""
    for declaration in DECLARED:
        if declaration.group == group:
            given = (
                {}
                if defaults is None or declaration.name not in defaults
                else {"default": defaults[declaration.name]}
            )
            add_option(parser, declaration.name, **given)


def add_areas(parser: argparse.ArgumentParser) -> None:
    """``AREAS`` and how to read and plan them (plan, search): ``--layer``, ``--crs`` and the
    options of the group ``"areas"``."""
    parser.add_argument(
        "areas",
        metavar="AREAS",
        help="study areas: any file or GDAL virtual path geopandas reads (GeoPackage, GeoJSON, "
        "Shapefile, GeoParquet, zip://areas.zip!areas.shp, /vsizip/…)",
    )
    parser.add_argument(
        "--layer", metavar="NAME", help="the layer to read from a file with several (required then)"
    )
    parser.add_argument(
        "--crs",
        type=crs,
        metavar="CRS",
        help="declare the CRS the coordinates are in, e.g. EPSG:4326 (for files "
        "without one, or with a wrong one; nothing is reprojected)",
    )
    add_options(parser, "areas")


def add_connection(parser: argparse.ArgumentParser, cache_only: bool = False) -> None:
    """``--base-url``, ``--ca-bundle``, ``--proxy``, ``--profile``, ``--response-deadline``,
    ``--max-request-bytes`` (unless ``cache_only``), ``--cache-dir``."""
    if not cache_only:
        add_option(parser, "base_url", type=base_url)
        add_option(parser, "ca_bundle", type=existing_file)
        add_option(parser, "proxy")
        add_option(parser, "profile")
        add_option(parser, "response_deadline", type=number(float, low=0.001))
        add_option(parser, "max_request_bytes", type=number(int, low=1024, what="a whole number"))
    add_option(parser, "cache_dir", fill={"here": str(settings.default_cache_dir())})


def add_out_map(parser: argparse.ArgumentParser, what: str) -> None:
    """``--out-map FILE``: an offline HTML map of ``what``."""
    parser.add_argument(
        "--out-map",
        type=output("check_map_path"),
        metavar="FILE",
        help=f"write an offline HTML map (one file, Leaflet inlined, opens "
        f"with no network) of {what}: .html",
    )


def add_team_store(
    parser: argparse.ArgumentParser,
    what: str = "the key's calls are reserved, paced and counted there for "
    "every member, pages are shared",
) -> None:
    """``--team URL``: the team store, and ``what`` it does for this command."""
    add_option(parser, "team", type=team_url, fill={"what": what})


def add_team_member(parser: argparse.ArgumentParser, what: str | None = None) -> None:
    """``--team URL`` and ``--user NAME`` (``what`` the store does for this command)."""
    if what is None:
        add_team_store(parser)
    else:
        add_team_store(parser, what)
    add_option(parser, "user")
