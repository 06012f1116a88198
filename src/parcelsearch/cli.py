"""The ``parcelsearch`` command: demo, plan, search, markets, cache, serve, keys.

This module only builds the parser and maps outcomes to exit codes; it imports nothing heavy,
so ``parcelsearch --help`` is quick. The commands themselves live in
:mod:`parcelsearch.commands` (the analyst's) and :mod:`parcelsearch_service.cli` (the
reference service's), each imported only when one of its commands runs.

Exit codes: 0 complete; 1 failure; 2 usage (what the user gave is wrong: an option or its
value, an unknown output extension, the areas file, a missing key or URL), nothing spent;
3 stopped by the budget or the key's quota (refused before spending, or stopped mid-run with
a partial ``--out`` written: empty, typed and marked incomplete when nothing was spent);
130 / 143 interrupted by SIGINT / SIGTERM (``search`` writes the partial ``--out``). ``plan``,
``markets`` and ``cache`` write no partial output and never exit 3.

Warnings (row numbers as ids, nothing matched, a repaired area, coordinates outside their
CRS's region) are printed as ``parcelsearch: warning: …`` lines naming flags and variables
(:func:`parcelsearch.notices.as_messages`).
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from parcelsearch import __version__, notices, settings
from parcelsearch._shared import count_argument
from parcelsearch.errors import (
    AreasFailedError,
    BudgetError,
    ConfigurationError,
    InputError,
    ParcelSearchError,
    QuotaExhaustedError,
    SearchInterrupted,
)

__all__ = ["main", "run", "build_parser", "EXIT_CODES"]

#: Exit code → what it means (shown in ``--help`` and the README).
EXIT_CODES = {
    0: "complete",
    1: "failed (the message says why)",
    2: "usage: what you gave is wrong (an option, the areas file, a setting); nothing was spent",
    3: "stopped by --budget or the key's quota (refused before spending, or mid-run), or "
       "some areas failed (each named, the others complete); "
       "the partial --out is written",
    130: "interrupted (Ctrl-C); the partial --out is written",
    143: "terminated (SIGTERM); the partial --out is written",
}

#: The reference service's commands: registered from parcelsearch_service.cli only when one of
#: them runs (importing the service is slow and the toolkit does not need it otherwise).
SERVICE_COMMANDS = {
    "serve": "run the reference Search/Markets service over HTTPS (demo data by default)",
    "keys": "create, list or revoke the reference service's API keys",
    "parcels": "make a synthetic fabric for your areas ('parcels synth') or load parcels "
               "into PostgreSQL/PostGIS ('parcels load') for the reference service",
    "portal": "manage accounts of the reference service's developer portal",
}

#: Help for the service's options that have none in parcelsearch_service.cli (this branch does
#: not edit the service): filled in after the service registers its commands.
SERVICE_OPTION_HELP = {
    ("keys", "create", "--name"): "the key's name: unique, used by 'keys list' and 'keys revoke'",
    ("keys", "create", "--type"): "demo: 50 calls for the life of the key; production: 500 "
                                  "calls a calendar month (UTC); both 10 calls/s (default demo)",
    ("keys", "create", "--per-second"): "calls per second the key may make (default: its type's)",
    ("keys", "create", "--quota"): "calls the key may make per quota period (default: its "
                                   "type's)",
    ("keys", "create", "--quota-period"): "lifetime or month: when the quota resets (default: "
                                          "its type's)",
    ("keys", "revoke", "--name"): "the name of the key to stop at once",
}

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
  PARCELSEARCH_TEAM        team store, postgresql://… (--team): calls, pace and pages shared
  PARCELSEARCH_USER        who runs the search in the team (--user; default: login name)"""


#: Exit codes of the commands that never write a partial --out (plan, markets, cache).
EXIT_CODES_NO_OUT = {
    0: "complete",
    1: EXIT_CODES[1],
    2: EXIT_CODES[2],
    130: "interrupted (Ctrl-C)",
    143: "terminated (SIGTERM)",
}


def _exit_codes_text(codes: dict[int, str] = EXIT_CODES) -> str:
    return "exit codes:\n" + "\n".join(f"  {code:<4} {text}" for code, text in codes.items())


# -- option values: checked while parsing, so a bad one exits 2 before anything is spent ------


def _number(kind: Callable[[str], float], *, low: float,
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
_CALLS = _number(int, low=0, what="a whole number", high=2**31 - 1)


def _fraction(text: str) -> float:
    value = float(_number(float, low=0, what="a fraction between 0 and 1")(text))
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be a fraction between 0 and 1, got {text}")
    return value


def _samples(refresh: str | None) -> bool:
    """Whether ``--refresh`` (``None``: not given) takes a ``--verify-sample``: the search
    options' rule, asked while parsing so a mistake exits 2 before anything is read."""
    from parcelsearch._run.options import refresh_mode, samples

    return samples(refresh_mode(refresh))


def _tolerance(text: str) -> float:
    # Lazy: tiling (shapely) is imported only when --tolerance is given.
    from parcelsearch.planning.tiling.covers import check_tolerance

    try:
        return check_tolerance(text)
    except ParcelSearchError as exc:
        raise argparse.ArgumentTypeError(exc.render("cli")) from None


def _quota(text: str) -> str:
    # Lazy: the ledger (sqlite3) is imported only when --quota is given.
    from parcelsearch.stores.local.ledger import Quota

    try:
        Quota.parse(text)
    except ParcelSearchError as exc:
        raise argparse.ArgumentTypeError(exc.render("cli")) from None
    return text


def _crs(text: str) -> str:
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


def _output(check: str) -> Callable[[str], Path]:
    def parse(text: str) -> Path:
        # Lazy: parcelsearch.outputs (geopandas, pyarrow) only when an output is named.
        outputs = importlib.import_module("parcelsearch.outputs")
        try:
            return Path(getattr(outputs, check)(text))
        except ParcelSearchError as exc:
            raise argparse.ArgumentTypeError(exc.render("cli")) from None

    return parse


def _base_url(text: str) -> str:
    try:
        return settings.check_base_url(text)  # the client's rule
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(exc.render("cli")) from None


def _existing_file(text: str) -> str:
    if not Path(text).expanduser().is_file():
        raise argparse.ArgumentTypeError(f"no such file {text!r}")
    return text


# -- the parser --------------------------------------------------------------------------------


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilog's layout (environment variables, exit codes)."""


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser; the service's commands are loaded only if ``argv`` runs one."""
    parser = argparse.ArgumentParser(
        prog="parcelsearch",
        description="Find every parcel GroupID inside study areas with the fewest Search calls.",
        epilog=_exit_codes_text() + "\n\n'parcelsearch COMMAND --help' describes a command.",
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"parcelsearch {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_demo(commands)
    _add_plan(commands)
    _add_search(commands)
    _add_markets(commands)
    _add_doctor(commands)
    _add_cache(commands)
    _add_runs(commands)
    _add_diff(commands)
    _add_team(commands)
    _add_login(commands)
    if _service_command(argv) is not None:
        # Lazy: the reference service (starlette, uvicorn, geopandas) only for serve/keys.
        from parcelsearch_service import cli as service_cli

        service_cli.register(commands)
        _fill_help(commands)
    else:
        for name, summary in SERVICE_COMMANDS.items():
            commands.add_parser(name, help=summary, add_help=False)
    return parser


def _fill_help(commands: Any) -> None:
    for (command, action, option), text in SERVICE_OPTION_HELP.items():
        sub = commands.choices[command]
        for group in sub._actions:  # the ACTION sub-parsers of 'keys'
            parser = getattr(group, "choices", None) or {}
            if action in parser:
                for item in parser[action]._actions:
                    if option in item.option_strings and not item.help:
                        item.help = text


def _service_command(argv: Sequence[str] | None) -> str | None:
    args = list(sys.argv[1:] if argv is None else argv)
    first = next((a for a in args if not a.startswith("-")), None)
    return first if first in SERVICE_COMMANDS else None


def _run(name: str) -> Callable[[argparse.Namespace], int]:
    """The command ``name`` of :mod:`parcelsearch.commands`, imported when it runs."""

    def run(args: argparse.Namespace) -> int:
        # Lazy: the commands import geopandas, pandas, requests …; --help does not need them.
        commands = importlib.import_module("parcelsearch.commands")
        return int(getattr(commands, f"run_{name}")(args) or 0)

    return run


def _add_areas(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "areas", metavar="AREAS",
        help="study areas: any file or GDAL virtual path geopandas reads (GeoPackage, GeoJSON, "
             "Shapefile, GeoParquet, zip://areas.zip!areas.shp, /vsizip/…)",
    )
    parser.add_argument("--layer", metavar="NAME",
                        help="the layer to read from a file with several (required then)")
    parser.add_argument("--crs", type=_crs, metavar="CRS",
                        help="declare the CRS the coordinates are in, e.g. EPSG:4326 (for files "
                             "without one, or with a wrong one; nothing is reprojected)")
    parser.add_argument("--id-column", metavar="COLUMN",
                        help="column identifying the areas (default: the column area_id if "
                             "there is one, else the row numbers 0, 1, … with a warning)")
    parser.add_argument("--tolerance", type=_tolerance, default=0.0, metavar="METRES",
                        help="metres pieces may reach outside the areas to save calls; 0 "
                             "(default) is exact, else at least 0.5")
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


def _add_connection(parser: argparse.ArgumentParser, cache_only: bool = False) -> None:
    if not cache_only:
        parser.add_argument("--base-url", type=_base_url, metavar="URL",
                            help="https:// root of the services (default: "
                                 "$PARCELSEARCH_BASE_URL)")
        parser.add_argument("--ca-bundle", type=_existing_file, metavar="FILE",
                            help="PEM file of CAs to trust, e.g. a local serve's ca.pem "
                                 "(default: $PARCELSEARCH_CA_BUNDLE, else the system's)")
        parser.add_argument("--profile", metavar="NAME",
                            help="the profile saved with 'parcelsearch login' whose key, base "
                                 "URL and CA to use (default: $PARCELSEARCH_PROFILE, else "
                                 "'default' when saved and $PARCELSEARCH_API_KEY is unset)")
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="response cache, market list and quota ledger folder (default: "
                             "$PARCELSEARCH_CACHE_DIR, else ~/.cache/parcelsearch; here: "
                             f"{settings.default_cache_dir()})")


def _add_demo(commands: Any) -> None:
    d = commands.add_parser(
        "demo", help="the whole product on the demo data, no key needed",
        description="Start the reference service on 127.0.0.1 with a fresh demo key, check "
                    "markets, plan, search, write GroupIDs, pieces and an offline HTML map, "
                    "then search again for zero calls.",
    )
    d.add_argument("--out", default="parcelsearch-demo", metavar="DIR",
                   help="folder for the GroupIDs, tiles and map (default ./parcelsearch-demo)")
    d.add_argument("--quiet", action="store_true", help="no progress bar")
    d.set_defaults(func=_run("demo"))


def _add_plan(commands: Any) -> None:
    p = commands.add_parser(
        "plan", help="show the pieces and minimum calls, spending nothing",
        description="Split the study areas into the pieces a search would send and count the "
                    "calls they need at least. Spends nothing, needs no key.",
        epilog=_exit_codes_text(EXIT_CODES_NO_OUT), formatter_class=_Formatter,
    )
    _add_areas(p)
    p.add_argument("--out-tiles", type=_output("check_tiles_path"), metavar="FILE",
                   help="write the pieces: .gpkg, .geojson, .parquet or .shp")
    p.add_argument("--max-calls", type=count_argument(1), metavar="N",
                   help="also print the smallest tolerance whose plan needs at most N calls")
    p.add_argument("--base-url", type=_base_url, metavar="URL",
                   help="the service a search would ask, for the matching rule 'parcelsearch "
                        "doctor --areas' learnt for it (default: $PARCELSEARCH_BASE_URL, or "
                        "the profile's); nothing is sent")
    p.add_argument("--profile", metavar="NAME",
                   help="the saved profile whose base URL to take the learnt rule of (default: "
                        "$PARCELSEARCH_PROFILE); its key is not read")
    _add_out_map(p, "the areas and their pieces")
    p.set_defaults(func=_run("plan"))


def _add_search(commands: Any) -> None:
    s = commands.add_parser(
        "search", help="find every GroupID inside the study areas",
        description="Find every parcel GroupID inside the study areas for the fewest calls. "
                    "Every response is cached: running the same search again spends only "
                    "what is missing.",
        epilog=ENVIRONMENT.format(cache=settings.default_cache_dir()) + "\n\n"
        + _exit_codes_text(),
        formatter_class=_Formatter,
    )
    _add_areas(s)
    s.add_argument("--out", required=True, type=_output("check_ids_path"), metavar="FILE",
                   help="where to write the GroupIDs, by extension: .parquet or .csv (one row "
                        "per area and GroupID, with the area's columns), .gpkg or .geojson "
                        "(one feature per area, its GroupIDs listed in group_ids); "
                        "written even when the run stops early, marked incomplete. Never "
                        "destroyed: a run less complete than the file there (stopped, "
                        "refused, or one that found nothing beside one that found something) "
                        "leaves it as it was and is written beside it, to FILE's name with "
                        ".partial (or .empty) before the extension")
    s.add_argument("--out-tiles", type=_output("check_tiles_path"), metavar="FILE",
                   help="also write the pieces sent, with their rows, pages and calls: "
                        ".gpkg, .geojson, .parquet or .shp")
    _add_out_map(s, "the pieces, coloured by the parcels each found, the pieces a "
                    "--refresh changed run found changed, and any areas skipped")
    s.add_argument("--force", action="store_true",
                   help="replace --out and --out-tiles even with a less complete result")
    s.add_argument("--budget", type=count_argument(0),
                   metavar="N", help="spend at most N calls in this run (refused before "
                                     "spending if the plan needs more, see --allow-partial)")
    s.add_argument("--allow-partial", action="store_true",
                   help="with --budget below the plan's need: spend the budget and resume later")
    s.add_argument("--quota", type=_quota, metavar="QUOTA",
                   help="the key's quota if known: demo, production, 500/month, 50/lifetime "
                        "(default: $PARCELSEARCH_QUOTA); runs that cannot fit are refused")
    s.add_argument("--max-age", type=_number(float, low=0, what="a number of seconds"),
                   metavar="SECONDS", help="reuse cached pages at most this old (default: any)")
    s.add_argument("--refresh", nargs="?", const="all", choices=["all", "changed"],
                   default=None, metavar="all|changed",
                   help="'all' (or --refresh alone): ignore cached pages, fetch everything "
                        "again; 'changed': one call per piece (page 1) finds the pieces that "
                        "changed since the last run, only those fetch their other pages, the "
                        "rest reuse their cached pages (unchanged by inference)")
    s.add_argument("--verify-sample", type=_fraction, default=None, metavar="FRACTION",
                   help="with --refresh changed: also re-read the other pages of this fraction "
                        "of the pieces inferred unchanged (default 0: no sample, so a refresh "
                        "with no change spends exactly one call per piece; e.g. 0.05, priced "
                        "before spending) and estimate, with a 95%% interval, the changed "
                        "pieces inference missed")
    s.add_argument("--active-markets-only", action="store_true",
                   help="skip areas whose market is not active (spends one call on the market "
                        "list, then reuses it for a day; see --market-column)")
    s.add_argument("--market-column", default="market", metavar="COLUMN",
                   help="column naming each area's market (default: market)")
    s.add_argument("--workers", type=count_argument(1),
                   default=8, metavar="N",
                   help="requests in flight at once, all paced by one rate limiter (default 8)")
    s.add_argument("--quiet", action="store_true",
                   help="no progress bar and no price line (the price before spending, "
                        "on stderr)")
    _add_connection(s)
    _add_team_member(s)
    s.set_defaults(func=_run("search"))


def _add_out_map(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--out-map", type=_output("check_map_path"), metavar="FILE",
                        help=f"write an offline HTML map (one file, Leaflet inlined, opens "
                             f"with no network) of {what}: .html")


def _add_markets(commands: Any) -> None:
    m = commands.add_parser(
        "markets", help="list the active markets (spends one call, then cached a day)",
        description="List the markets where zoning calls are worth making. Asking the service "
                    "spends one call of the key's quota; the list is then reused for a day.",
        epilog=ENVIRONMENT.format(cache=settings.default_cache_dir()), formatter_class=_Formatter,
    )
    m.add_argument("--json", action="store_true", help="print a JSON list")
    _add_connection(m)
    m.set_defaults(func=_run("markets"))


def _add_doctor(commands: Any) -> None:
    d = commands.add_parser(
        "doctor", help="check the vendor at the base URL (2 calls, 3 with --areas; priced and "
                       "confirmed first)",
        description="Check what the vendor at the base URL does where its specification is "
                    "silent: TLS, the key, the base URL's stage path, compression, the number "
                    "of the first page, how refusals are worded, the markets and, with "
                    "--areas, how it matches parcels to a polygon. It costs 2 calls of the "
                    "key's quota (3 with --areas; never more than one beyond that, redirects "
                    "and retries included), asked before spending (--yes: without asking; "
                    "--dry-run: none). What it learns is kept in the cache folder, so later "
                    "searches adapt without probing.",
        epilog=ENVIRONMENT.format(cache=settings.default_cache_dir()) + "\n\nexit codes:\n"
               "  0    every check passed or could not tell\n  1    a check failed\n"
               "  2    usage, or the price was not confirmed (nothing was spent)",
        formatter_class=_Formatter,
    )
    d.add_argument("--dry-run", action="store_true",
                   help="list the checks and their price; spend nothing")
    d.add_argument("--yes", action="store_true", help="spend the calls without asking")
    d.add_argument("--areas", metavar="FILE",
                   help="the study areas you mean to search (any file geopandas reads): one "
                        "more call, page 1 of a sliver one grid step tall across the largest, "
                        "learns whether the vendor matches parcels by a point "
                        "(representative-point) or by their footprints (intersects), kept for "
                        "the base URL and used by later searches")
    d.add_argument("--layer", metavar="NAME",
                   help="the layer of --areas to read, from a file with several")
    _add_connection(d)
    d.set_defaults(func=_run("doctor"), crs=None)


def _add_cache(commands: Any) -> None:
    c = commands.add_parser(
        "cache", help="inspect, verify or clear the response cache",
        description="info: files, pages, size, and calls counted per key in the ledger; "
                    "verify: read every cached file and report the unreadable ones (exit 1 if "
                    "any); clear: delete the cached responses and market lists (the ledger of "
                    "calls spent is kept).",
    )
    c.add_argument("action", choices=["info", "verify", "clear"],
                   help="info, verify or clear (see above)")
    _add_connection(c, cache_only=True)
    c.set_defaults(func=_run("cache"))


def _add_spending_nothing(commands: Any, name: str, **parser_options: Any
                          ) -> argparse.ArgumentParser:
    """A command that reads only the cache folder (``--cache-dir``) and spends nothing."""
    parser: argparse.ArgumentParser = commands.add_parser(name, **parser_options)
    _add_connection(parser, cache_only=True)
    parser.set_defaults(func=_run(name))
    return parser


def _add_runs(commands: Any) -> None:
    runs = _add_spending_nothing(
        commands, "runs", help="list the searches recorded in the run history",
        description="List every search recorded in the run history (kept in the ledger of the "
                    "cache folder), the latest first: run id, time, mode, tolerance, areas, "
                    "calls, pieces read, inferred or sampled. Spends nothing.")
    runs.add_argument("--json", action="store_true", help="print a JSON list")
    _add_team_store(runs, "list the runs every member recorded there (team mode records "
                          "them there), with who ran each")


def _add_diff(commands: Any) -> None:
    diff = _add_spending_nothing(
        commands, "diff", help="what changed between two searches of the same areas",
        description="Compare two searches of the same study areas (two --out files of "
                    "'parcelsearch search', or two run ids from 'parcelsearch runs'): one row "
                    "per area and GroupID added or removed, and a summary per area. Searches of "
                    "different areas or tolerance are refused, saying why. Spends nothing.",
        epilog=_exit_codes_text(), formatter_class=_Formatter)
    diff.add_argument("old", metavar="OLD", help="the earlier search: an output file or a run id")
    diff.add_argument("new", metavar="NEW", help="the later search: an output file or a run id")
    diff.add_argument("--out", metavar="FILE",
                      help="write the rows (area id, group_id, change): .csv or .parquet")
    _add_team_store(diff, "the run ids are those of its run history (team mode records "
                          "every member's runs there)")


# -- profiles ----------------------------------------------------------------------------------


def _add_login(commands: Any) -> None:
    login = commands.add_parser(
        "login", help="save your API key in a profile (the OS keyring), never in a notebook",
        description="Save a profile: the API key (read from the terminal without echo, or "
                    "from standard input) in the OS keyring when there is one, else in a file "
                    "readable by you only; the base URL and CA bundle beside it. Then "
                    "'search --profile NAME', $PARCELSEARCH_PROFILE or "
                    "Client(profile=NAME) use it, and 'default' is used when no key is set. "
                    "The key is never printed: only its sha256 fingerprint. Spends nothing.")
    login.add_argument("--profile", default="default", metavar="NAME",
                       help="the profile's name (default: default)")
    login.add_argument("--base-url", type=_base_url, metavar="URL",
                       help="https:// root of the services for this profile")
    login.add_argument("--ca-bundle", type=_existing_file, metavar="FILE",
                       help="PEM file of CAs to trust for this profile")
    login.set_defaults(func=_run("login"))
    logout = commands.add_parser("logout", help="forget a saved profile and its key",
                                 description="Remove a profile saved by 'parcelsearch login' "
                                             "and its key (keyring entry or file line).")
    logout.add_argument("--profile", default="default", metavar="NAME",
                        help="the profile's name (default: default)")
    logout.set_defaults(func=_run("logout"))
    listed = commands.add_parser("profiles", help="list the saved profiles (keys never shown)",
                                 description="The profiles saved by 'parcelsearch login': name, "
                                             "base URL, CA bundle, where the key is kept and "
                                             "its sha256 fingerprint (never the key).")
    listed.add_argument("--json", action="store_true", help="print JSON records")
    listed.set_defaults(func=_run("profiles"))


# -- team mode ---------------------------------------------------------------------------------


def _team_url(text: str) -> str:
    if not text.startswith(("postgresql://", "postgres://")):
        raise argparse.ArgumentTypeError(f"{text!r} is not a postgresql:// URL")
    return text


def _add_team_store(parser: argparse.ArgumentParser,
                    what: str = "the key's calls are reserved, paced and counted there for "
                                "every member, pages are shared") -> None:
    parser.add_argument("--team", type=_team_url, metavar="URL",
                        help="the team store (postgresql://…, made by 'parcelsearch team "
                             f"init'; default: $PARCELSEARCH_TEAM): {what}")


def _add_team_member(parser: argparse.ArgumentParser) -> None:
    _add_team_store(parser)
    parser.add_argument("--user", metavar="NAME",
                        help="who runs this in the team (default: $PARCELSEARCH_USER, else "
                             "the login name)")


def _add_team(commands: Any) -> None:
    t = commands.add_parser(
        "team", help="share one key's calls, pace and pages with a team (PostgreSQL)",
        description="Team mode: one ledger, pacer and page store for a key, in the team's "
                    "PostgreSQL database. 'team init URL' makes (or upgrades) the store; "
                    "searches join it with --team URL (or $PARCELSEARCH_TEAM).",
        epilog=_exit_codes_text(), formatter_class=_Formatter,
    )
    actions = t.add_subparsers(dest="team_action", required=True, metavar="ACTION")
    init = actions.add_parser("init", help="make or upgrade the team store (idempotent)")
    init.add_argument("url", nargs="?", type=_team_url, metavar="URL",
                      help="postgresql://… (default: $PARCELSEARCH_TEAM)")
    init.add_argument("--member-role", metavar="ROLE",
                      help="an existing PostgreSQL role to give what a member needs and no "
                           "more: searching, but not changing the quota, pace or budgets, "
                           "nor rewriting the ledger")
    quota = actions.add_parser("quota", help="store the key's quota ($PARCELSEARCH_API_KEY's); "
                               "a member's own --quota can only lower it")
    quota.add_argument("--calls", required=True, type=_CALLS, metavar="N",
                       help="calls the key may make per period (0 to 2147483647)")
    quota.add_argument("--period", choices=["month", "lifetime"], default="month",
                       help="when the quota resets (default month: calendar month, UTC)")
    pace = actions.add_parser(
        "pace", help="store the key's pace ($PARCELSEARCH_API_KEY's): every member's calls are "
                     "spaced by it, and no member's own settings widen it")
    pace.add_argument("--rate", required=True, type=_number(float, low=0.001, high=1000),
                      metavar="R", help="calls per second the key allows (0.001 to 1000)")
    pace.add_argument("--margin", type=_number(float, low=0, high=0.5), default=0.05,
                      metavar="M", help="share of the rate the pacer keeps in reserve "
                                        "(0 to 0.5, default 0.05)")
    pace.add_argument("--lease", type=_number(float, low=0.5, high=3600), default=6.0,
                      metavar="SECONDS", help="a page lease's length: a member killed while "
                      "fetching holds a page no longer (0.5 to 3600, default 6; a live member "
                      "renews it)")
    budget = actions.add_parser("budget", help="store a member's budget of calls")
    budget.add_argument("--calls", required=True, type=_CALLS, metavar="N",
                        help="calls the member may make per period, all keys together "
                             "(0 to 2147483647)")
    budget.add_argument("--period", choices=["month", "lifetime"], default="month",
                        help="when the budget resets (default month)")
    usage = actions.add_parser("usage", help="calls per key and per member, pages shared")
    usage.add_argument("--json", action="store_true", help="print JSON records")
    for action in (quota, pace, budget, usage):
        _add_team_store(action)
    budget.add_argument("--user", required=True, metavar="NAME", help="the member")
    t.set_defaults(func=_run("team"))


# -- running -----------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (see :data:`EXIT_CODES`)."""
    try:
        parser = build_parser(argv)
    except ConfigurationError as exc:  # a service command without the service extra
        return _fail(exc.render("cli"), 2)
    args = parser.parse_args(argv)
    if getattr(args, "verify_sample", None) is not None and not _samples(args.refresh):
        parser.error("argument --verify-sample: checks what --refresh changed inferred; add "
                     "--refresh changed")
    if args.command in SERVICE_COMMANDS:  # serve handles its own signals (uvicorn)
        return _service(args)
    with interrupts_as_keyboard_interrupt(), notices.as_messages():
        try:
            return int(args.func(args) or 0)
        except SearchInterrupted as exc:
            return _fail(exc.render("cli"), 128 + int(exc.signum), "interrupted")
        except KeyboardInterrupt as exc:
            signum = int(getattr(exc, "signum", signal.SIGINT))
            return _fail("everything fetched so far is cached", 128 + signum, "interrupted")
        except BudgetError as exc:
            return _fail(exc.render("cli"), 3, "stopped")
        except (QuotaExhaustedError, AreasFailedError) as exc:  # refused, or partly: exit 3
            return _fail(exc.render("cli"), 3, "stopped")
        except (ConfigurationError, InputError) as exc:  # what the user gave: a usage error
            return _fail(exc.render("cli"), 2)
        except ParcelSearchError as exc:
            return _fail(exc.render("cli"), 1)
        except OSError as exc:  # a file that cannot be written, a full disk …
            return _fail(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), 1)
        except Exception as exc:  # noqa: BLE001 - a bug: one line, not a traceback
            if os.environ.get("PARCELSEARCH_DEBUG") == "1":
                raise
            return _fail(f"unexpected {type(exc).__name__}: {exc} (a bug in parcelsearch: please "
                         "report it; set PARCELSEARCH_DEBUG=1 to see where it happened)", 1)


def _service(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args) or 0)
    except ParcelSearchError as exc:  # a bad key name, an unreadable parcels file …
        return _fail(exc.render("cli"), 2)


def _fail(message: str, code: int, what: str = "error") -> int:
    print(f"parcelsearch: {what}: {message}", file=sys.stderr)
    return code


@contextmanager
def interrupts_as_keyboard_interrupt() -> Iterator[None]:
    """SIGTERM stops the command like Ctrl-C (a ``KeyboardInterrupt`` carrying ``signum``)."""

    def terminate(signum: int, frame: object) -> None:
        interrupt = KeyboardInterrupt()
        interrupt.signum = signum  # type: ignore[attr-defined]
        raise interrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run() -> None:
    """The console script: exit with :func:`main`'s status.

    After an interrupt it exits at once: requests still on the wire are abandoned rather
    than waited for (everything already fetched is in the cache).
    """
    status = main()
    if status in (128 + signal.SIGINT, 128 + signal.SIGTERM):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


if __name__ == "__main__":  # pragma: no cover
    run()
