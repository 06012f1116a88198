"""What several commands share: option values checked while parsing, option groups, help texts.

An option's value is checked by its argparse ``type``, so a bad one exits 2 naming the option
before anything is read or spent. Nothing heavy is imported here: the checks that need
shapely, pyproj, sqlite3 or geopandas import them when their option is given.
"""

from __future__ import annotations

import argparse
import importlib
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from parcelsearch import settings
from parcelsearch.errors import ConfigurationError, ParcelSearchError

__all__ = ["EXIT_CODES", "EXIT_CODES_NO_OUT", "ENVIRONMENT", "Formatter", "exit_codes_text",
           "number", "CALLS", "fraction", "tolerance", "age", "quota", "crs",
           "output", "base_url", "existing_file", "team_url", "add_areas", "add_connection",
           "add_out_map", "add_team_store", "add_team_member"]

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

#: The ``environment variables:`` block of an epilog; ``{cache}``: the cache folder.
ENVIRONMENT = """\
environment variables:
  PARCELSEARCH_API_KEY     the vendor key (never written to caches, logs or messages)
  PARCELSEARCH_PROFILE     the profile saved by 'parcelsearch login' to use (--profile)
  PARCELSEARCH_BASE_URL    https:// root of the services (--base-url wins)
  PARCELSEARCH_CA_BUNDLE   PEM file of CAs to trust, e.g. a local serve's ca.pem (--ca-bundle)
  PARCELSEARCH_QUOTA       the key's quota: demo, production, 500/month, 50/lifetime (--quota)
  PARCELSEARCH_CACHE_DIR   response cache, market list and ledger folder (--cache-dir);
                           default $XDG_CACHE_HOME/parcelsearch (~/.cache/parcelsearch),
                           here: {cache}
  PARCELSEARCH_RATE        calls per second the key allows (default 10)
  PARCELSEARCH_MAX_AGE     reuse cached pages at most this old: 30d, 12h, seconds (--max-age)
  PARCELSEARCH_RESPONSE_DEADLINE
                           seconds a whole response may take (--response-deadline;
                           default 60)
  PARCELSEARCH_MAX_REQUEST_BYTES
                           the longest request line the gateway takes (--max-request-bytes;
                           default: learnt from its refusal, else 7168)
  PARCELSEARCH_TEAM        team store, postgresql://… (--team): calls, pace and pages shared
  PARCELSEARCH_USER        who runs the search in the team (--user; default: login name)"""


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilog's layout (environment variables, exit codes)."""


def exit_codes_text(codes: dict[int, str] = EXIT_CODES) -> str:
    """The ``exit codes:`` block of an epilog."""
    return "exit codes:\n" + "\n".join(f"  {code:<4} {text}" for code, text in codes.items())


# -- option values: checked while parsing, so a bad one exits 2 before anything is spent ------


def number(kind: Callable[[str], float], *, low: float,
           what: str = "a number", high: float | None = None) -> Callable[[str], Any]:
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
                f"must be from {low:g} to {high:.10g}, got {text[:40]}")
        if not math.isfinite(value) or value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low:g}, got {text[:40]}")
        return value

    return parse


#: A count of calls the team store can hold (a PostgreSQL ``integer``).
CALLS = number(int, low=0, what="a whole number", high=2**31 - 1)


def fraction(text: str) -> float:
    """An argparse type: a fraction from 0 to 1."""
    value = float(number(float, low=0, what="a fraction between 0 and 1")(text))
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be a fraction between 0 and 1, got {text}")
    return value


def tolerance(text: str) -> float:
    """An argparse type: a tolerance in metres, the planner's rule."""
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


# -- option groups -----------------------------------------------------------------------------


def add_areas(parser: argparse.ArgumentParser) -> None:
    """``AREAS`` and how to read and plan them (plan, search)."""
    parser.add_argument(
        "areas", metavar="AREAS",
        help="study areas: any file or GDAL virtual path geopandas reads (GeoPackage, GeoJSON, "
             "Shapefile, GeoParquet, zip://areas.zip!areas.shp, /vsizip/…)",
    )
    parser.add_argument("--layer", metavar="NAME",
                        help="the layer to read from a file with several (required then)")
    parser.add_argument("--crs", type=crs, metavar="CRS",
                        help="declare the CRS the coordinates are in, e.g. EPSG:4326 (for files "
                             "without one, or with a wrong one; nothing is reprojected)")
    parser.add_argument("--id-column", metavar="COLUMN",
                        help="column identifying the areas (default: the column area_id if "
                             "there is one, else the row numbers 0, 1, … with a warning)")
    parser.add_argument("--tolerance", type=tolerance, default=0.0, metavar="METRES",
                        help="metres pieces may reach outside the areas to save calls; 0 "
                             "(default) is exact, else at least 0.5")
    parser.add_argument("--trust-crs", action="store_true",
                        help="take the areas' CRS as declared even where the coordinates look "
                             "wrong for it (degrees in a projected CRS, areas outside the "
                             "region it is meant for, areas over 50 km out at sea), which is "
                             "otherwise refused for free")
    parser.add_argument("--trust-tolerance", action="store_true",
                        help="take a --tolerance over half the widest area's width, "
                             "or over 5000 m, which is otherwise refused for free")
    parser.add_argument("--no-connectors", dest="connectors", action="store_false",
                        help="never let parts of an area (islands) share a piece through a "
                             "connector, a sliver along a link that may cross land outside "
                             "the area: more calls, but no piece reaches beyond the "
                             "tolerance anywhere")
    parser.add_argument("--match", choices=("representative-point", "intersects", "unknown"),
                        default=None, metavar="RULE",
                        help="how the vendor matches parcels to a polygon: "
                             "representative-point, intersects or unknown (default: "
                             "$PARCELSEARCH_MATCH, else the rule 'parcelsearch doctor "
                             "--areas' learnt for the base URL, else unknown); unless "
                             "representative-point, "
                             "no piece reaches beyond the tolerance anywhere (exact: no "
                             "connectors)")


def add_connection(parser: argparse.ArgumentParser, cache_only: bool = False) -> None:
    """``--base-url``, ``--ca-bundle``, ``--profile``, ``--response-deadline``,
    ``--max-request-bytes`` (unless ``cache_only``), ``--cache-dir``."""
    if not cache_only:
        parser.add_argument("--base-url", type=base_url, metavar="URL",
                            help="https:// root of the services (default: "
                                 "$PARCELSEARCH_BASE_URL)")
        parser.add_argument("--ca-bundle", type=existing_file, metavar="FILE",
                            help="PEM file of CAs to trust, e.g. a local serve's ca.pem "
                                 "(default: $PARCELSEARCH_CA_BUNDLE, else the system's)")
        parser.add_argument("--profile", metavar="NAME",
                            help="the profile saved with 'parcelsearch login' whose key, base "
                                 "URL and CA to use (default: $PARCELSEARCH_PROFILE, else "
                                 "'default' when saved and $PARCELSEARCH_API_KEY is unset)")
        parser.add_argument("--response-deadline", type=number(float, low=0.001),
                            metavar="SECONDS",
                            help="seconds one response may take as a whole, however slowly "
                                 "its bytes come; then it is abandoned and retried (default: "
                                 "$PARCELSEARCH_RESPONSE_DEADLINE, else 60)")
        parser.add_argument("--max-request-bytes", type=number(int, low=1024,
                                                               what="a whole number"),
                            metavar="BYTES",
                            help="the longest request line the vendor's gateway takes; pieces "
                                 "are planned to it (default: $PARCELSEARCH_MAX_REQUEST_BYTES, "
                                 "else learnt from its refusal, else 7168)")
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="response cache, market list and quota ledger folder (default: "
                             "$PARCELSEARCH_CACHE_DIR, else ~/.cache/parcelsearch; here: "
                             f"{settings.default_cache_dir()})")


def add_out_map(parser: argparse.ArgumentParser, what: str) -> None:
    """``--out-map FILE``: an offline HTML map of ``what``."""
    parser.add_argument("--out-map", type=output("check_map_path"), metavar="FILE",
                        help=f"write an offline HTML map (one file, Leaflet inlined, opens "
                             f"with no network) of {what}: .html")


def add_team_store(parser: argparse.ArgumentParser,
                   what: str = "the key's calls are reserved, paced and counted there for "
                               "every member, pages are shared") -> None:
    """``--team URL``: the team store, and ``what`` it does for this command."""
    parser.add_argument("--team", type=team_url, metavar="URL",
                        help="the team store (postgresql://…, made by 'parcelsearch team "
                             f"init'; default: $PARCELSEARCH_TEAM): {what}")


def add_team_member(parser: argparse.ArgumentParser, what: str | None = None) -> None:
    """``--team URL`` and ``--user NAME`` (``what`` the store does for this command)."""
    if what is None:
        add_team_store(parser)
    else:
        add_team_store(parser, what)
    parser.add_argument("--user", metavar="NAME",
                        help="who runs this in the team (default: $PARCELSEARCH_USER, else "
                             "the login name)")
