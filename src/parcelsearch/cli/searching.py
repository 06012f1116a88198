"""The analyst's commands: demo, plan, search, markets; each declared beside its run
(doctor: :mod:`parcelsearch.cli.doctor`).

Options are checked while parsing (:mod:`parcelsearch.cli.arguments`); the work imports
geopandas, the client and the pipeline only when a command runs, so ``--help`` stays quick.
Messages name flags and environment variables, never Python arguments (errors render in the
``"cli"`` dialect).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from parcelsearch._shared import count_argument
from parcelsearch.cli import arguments
from parcelsearch.cli.arguments import (
    ENVIRONMENT,
    EXIT_CODES_NO_OUT,
    add_areas,
    add_connection,
    add_option,
    add_options,
    add_out_map,
    add_team_member,
    exit_codes_text,
)
from parcelsearch.cli.printing import plural, print_table
from parcelsearch.cli.registry import Command, Parser
from parcelsearch.errors import (
    Hint,
    InputError,
    OutputKeptError,
    ParcelSearchError,
    PriceNotConfirmedError,
    TransportError,
)
from parcelsearch.notices import LearntFactWarning, PartialResultWarning
from parcelsearch.settings import DEFAULT_WORKERS, options

if TYPE_CHECKING:
    import geopandas as gpd

    from parcelsearch._run.pricing import Price
    from parcelsearch.client import Client
    from parcelsearch.result import SearchResult

__all__ = [
    "COMMANDS",
    "run_plan",
    "run_search",
    "run_markets",
    "run_demo",
    "search_options",
    "read_areas",
    "check_listening",
    "refresh_line",
]

#: Seconds to wait for the service to accept a connection before saying nothing listens.
CONNECT_PROBE_SECONDS = 1.5


def read_areas(args: argparse.Namespace) -> gpd.GeoDataFrame:
    """The study areas named on the command line (``AREAS``, ``--layer``, ``--crs``)."""
    import pandas as pd

    from parcelsearch.planning.vector_files import read_vector

    areas = read_vector(args.areas, layer=args.layer, crs=args.crs, what="study areas file")
    if not areas.index.equals(pd.RangeIndex(len(areas))):  # a GeoParquet's stored index:
        areas = areas.reset_index()  # a column like any other, under the CLI's id rule
    if areas.crs is None:  # said here in the file's words, not the data frame's
        raise InputError(
            f"study areas file {args.areas!r} has no CRS, so its coordinates cannot be placed "
            "on Earth",
            field="crs",
            hints=[Hint("crs", "EPSG:4326", "declare it with {knob} (or the CRS the data is in)")],
        )
    return areas


def _client(args: argparse.Namespace) -> Client:
    from parcelsearch.client import Client

    return Client(
        base_url=args.base_url,
        ca_bundle=args.ca_bundle,
        proxy=args.proxy,
        cache_dir=args.cache_dir,
        profile=args.profile,
        response_deadline=args.response_deadline,
        max_request_bytes=args.max_request_bytes,
    )


def check_listening(
    base_url: str, timeout: float = CONNECT_PROBE_SECONDS, *, proxied: bool = False
) -> None:
    """Fail fast, spending nothing, when no service accepts connections at ``base_url``.

    One TCP connection is opened and closed (no request is sent, no call counted), so a
    service that is not running is reported at once, not after the client's retries. Not
    when the requests go through a proxy (``proxied``): only the proxy can reach the host,
    and it says itself when it cannot.

    Raises
    ------
    TransportError
        Nothing listens there (or the host is unknown); the message names the URL and how
        to start the reference service.
    """
    if proxied:
        return
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    port = parts.port or 443
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        reason = (
            "connection refused"
            if isinstance(exc, ConnectionRefusedError)
            else ("timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc)))
        )
        raise TransportError(
            f"nothing is listening at {base_url} ({reason})",
            url=base_url,
            hints=[
                Hint("serve", phrase="start the reference service with {knob}"),
                Hint("base_url", phrase="or point at a running service with {knob}"),
            ],
        ) from None


# -- demo ----------------------------------------------------------------------------------


def _declare_demo(parser: Parser) -> None:
    parser.add_argument(
        "--out",
        default="parcelsearch-demo",
        metavar="DIR",
        help="folder for the GroupIDs, tiles and map (default ./parcelsearch-demo)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run_demo(args: argparse.Namespace) -> int:
    """``parcelsearch demo``: the whole product on the demo data."""
    from parcelsearch import demo  # lazy: the reference service

    return demo.run_demo(args.out, progress=not args.quiet)


DEMO = Command(
    "demo",
    "the whole product on the demo data, no key needed",
    _declare_demo,
    run_demo,
    description="Start the reference service on 127.0.0.1 with a fresh demo key, check "
    "markets, plan, search, write GroupIDs, pieces and an offline HTML map, "
    "then search again for zero calls.",
)


# -- plan ----------------------------------------------------------------------------------


def _declare_plan(parser: Parser) -> None:
    add_areas(parser)
    parser.add_argument(
        "--out-tiles",
        type=arguments.output("check_tiles_path"),
        metavar="FILE",
        help="write the pieces: .gpkg, .geojson, .parquet or .shp",
    )
    parser.add_argument(
        "--max-calls",
        type=count_argument(1),
        metavar="N",
        help="also print the smallest tolerance whose plan needs at most N calls",
    )
    add_option(
        parser,
        "base_url",
        type=arguments.base_url,
        help="the service a search would ask, for the matching rule 'parcelsearch "
        "doctor --areas' learnt for it (default: ${env}, or the profile's); "
        "nothing is sent",
    )
    add_option(
        parser,
        "profile",
        help="the saved profile whose base URL to take the learnt "
        "rule of (default: ${env}); its key is not read",
    )
    add_out_map(parser, "the areas and their pieces")


def run_plan(args: argparse.Namespace) -> int:
    """``parcelsearch plan``: print the pieces and minimum calls; write them if asked.

    The pieces are those a search would send: under the matching rule ``--match`` names,
    else the one ``doctor --areas`` learnt for the service
    (:func:`parcelsearch.rule_probe.rule_for`); for each area an earlier search kept pieces
    for in any CRS, those (:mod:`parcelsearch.planning.reuse`, read from the cache folder, never
    written), else new ones."""
    from parcelsearch import outputs
    from parcelsearch._run.options import uses_learnt_match
    from parcelsearch.planning import plans as planning
    from parcelsearch.planning import reuse as plan_reuse

    match, learnt_for = args.match, None
    if uses_learnt_match(match):  # as a search would plan
        from parcelsearch.rule_probe import rule_for

        match, learnt_for = rule_for(args.base_url, args.profile, options.cache_dir)
    made = plan_reuse.reuse(
        planning.plan(
            read_areas(args),
            args.tolerance,
            id_column=args.id_column,
            connectors=args.connectors,
            match=match,
            trust_crs=args.trust_crs,
            trust_tolerance=args.trust_tolerance,
        ),
        options.cache_dir,
        keep=False,
    )
    print_table(made.summary(), "every piece in --out-tiles FILE")
    if match is not None and learnt_for is not None:
        print(f"\nplanned under the matching rule learnt for {learnt_for}: {match}")
    print(
        f"\n{plural(len(made.pieces), 'piece')}, at least {plural(made.min_calls, 'call')}; "
        f"{made.price_facts()}"
    )
    if args.max_calls is not None:
        found = planning.suggest_tolerance(made, args.max_calls)
        print(
            f"no tolerance fits {plural(args.max_calls, 'call')}: each area needs at least "
            f"one, so {plural(len(made.areas), 'area')} need at least "
            f"{plural(len(made.areas), 'call')}"
            if args.max_calls < len(made.areas)
            else f"no tolerance up to {planning.tolerance_ceiling(made):g} m fits "
            f"{plural(args.max_calls, 'call')}"
            if found is None
            else f"the smallest tolerance whose plan fits {plural(args.max_calls, 'call')}: "
            f"--tolerance {found:g}"
        )
    if made.match == "unknown" and made.point_savings:
        print(
            f"connectors could save up to {plural(made.point_savings, 'call')} if the vendor "
            "matches by a point (--match representative-point)"
        )
    if args.out_tiles is not None:
        path = outputs.write_tiles(made.tiles, args.out_tiles)
        print(f"pieces written to {path}")
    if args.out_map is not None:
        print(f"map written to {outputs.write_map(made, args.out_map)}")
    return 0


PLAN = Command(
    "plan",
    "show the pieces and minimum calls, spending nothing",
    _declare_plan,
    run_plan,
    description="Split the study areas into the pieces a search would send and count the "
    "calls they need at least. Spends nothing, needs no key.",
    epilog=exit_codes_text(EXIT_CODES_NO_OUT),
)


# -- search --------------------------------------------------------------------------------


def _declare_search(parser: Parser) -> None:
    add_areas(parser)
    parser.add_argument(
        "--out",
        required=True,
        type=arguments.output("check_ids_path"),
        metavar="FILE",
        help="where to write the GroupIDs, by extension: .parquet or .csv (one row "
        "per area and GroupID, with the area's columns), .gpkg or .geojson "
        "(one feature per area, its GroupIDs listed in group_ids); "
        "written even when the run stops early, marked incomplete. Never "
        "destroyed: a run less complete than the file there (stopped, "
        "refused, or one that found nothing beside one that found something) "
        "leaves it as it was and is written beside it, to FILE's name with "
        ".partial (or .empty) before the extension",
    )
    parser.add_argument(
        "--out-tiles",
        type=arguments.output("check_tiles_path"),
        metavar="FILE",
        help="also write the pieces sent, with their rows, pages and calls: "
        ".gpkg, .geojson, .parquet or .shp",
    )
    add_out_map(
        parser,
        "the pieces, coloured by the parcels each found, the pieces a "
        "--refresh changed run found changed, and any areas skipped",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace --out and --out-tiles even with a less complete result",
    )
    add_options(parser, "search", defaults={"workers": DEFAULT_WORKERS})
    add_connection(parser)
    add_team_member(parser)


def takes_sample(refresh: str | None) -> bool:
    """Whether ``--refresh`` (``None``: not given) takes a ``--verify-sample``: the search
    options' rule, asked while parsing so a mistake exits 2 before anything is read."""
    from parcelsearch._run.options import refresh_mode, samples

    return samples(refresh_mode(refresh))


def search_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keywords ``parcelsearch search`` hands :func:`parcelsearch.search`: every search
    option (:class:`~parcelsearch._run.options.SearchOptions`), under its flag's ``dest``; the
    quota parsed (``None``: ``$PARCELSEARCH_QUOTA``) and ``confirm`` asked on a terminal
    unless ``--yes``."""
    from parcelsearch._run.options import SearchOptions
    from parcelsearch.stores.local.ledger import Quota

    given = {name: getattr(args, name) for name in SearchOptions.names()}
    given.update(quota=Quota.parse(args.quota), confirm=True if args.confirm else PriceQuestion())
    return given


def run_search(args: argparse.Namespace) -> int:
    """``parcelsearch search``: every GroupID inside the areas, written to ``--out``.

    Whenever the run stops with a partial result (budget, quota, a failure, an interrupt),
    that result is written to ``--out`` (marked incomplete) before the error is re-raised.
    """
    from parcelsearch._run import search_run as pipeline
    from parcelsearch.result import SearchResult

    areas = read_areas(args)
    client = _client(args)
    given = search_options(args)  # the quota checked before connecting
    _prepare_outputs(args)  # before anything is spent: a folder made, or a clear error
    check_listening(client.base_url, proxied=client.proxied)
    shown = warnings.showwarning  # the command line's (notices.as_messages)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", PartialResultWarning)
            warnings.showwarning = _learnt_at_once(shown, caught)
            result = _search_asking(pipeline.search, areas, client, given)
    except ParcelSearchError as exc:
        if isinstance(exc.result, SearchResult):
            _write(exc.result, args, partial=True, refused=client.limiter.refusals)
        raise
    stopped = _partial_error(caught)
    _write(result, args, partial=stopped is not None, refused=client.limiter.refusals)
    if stopped is not None:
        raise stopped  # --allow-partial: the partial is written, the stop is told as before
    return 0


def _prepare_outputs(args: argparse.Namespace) -> None:
    """``--out``, ``--out-tiles`` and ``--out-map`` made ready to write (their folders made,
    proven writable), so a search never spends and then fails to write."""
    from parcelsearch import outputs

    for knob in ("out", "out_tiles", "out_map"):
        if getattr(args, knob, None) is not None:
            outputs.prepare_path(Path(getattr(args, knob)), knob)


def _learnt_at_once(shown: Any, caught: list[warnings.WarningMessage]) -> Any:
    """A ``showwarning`` that shows a fact learnt of the vendor when it is learnt (the run
    says it on its own line) and keeps every other warning for after the run."""

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        if isinstance(message, LearntFactWarning):
            shown(message, category, filename, lineno, file, line)
        else:
            caught.append(warnings.WarningMessage(message, category, filename, lineno, file, line))

    return show


def _partial_error(caught: list[warnings.WarningMessage]) -> ParcelSearchError | None:
    """The stop a partial result was returned with (``--allow-partial``), if any; every
    other warning caught is shown as it would have been."""
    stopped = None
    for item in caught:
        error = getattr(item.message, "error", None)
        if isinstance(item.message, PartialResultWarning) and isinstance(error, ParcelSearchError):
            stopped = error
        else:
            warnings.showwarning(item.message, item.category, item.filename, item.lineno)
    return stopped


def _probes_text(probes: int) -> str:
    """The run's probes of the vendor, named (they are among its calls and its budget)."""
    if not probes:
        return ""
    return f" ({plural(probes, 'probe')} of the vendor's paging among them)"


class PriceQuestion:
    """The decision point on the command line: asked on a terminal, never on a pipe (a
    script says --yes, or a --budget that covers the price). When the survey stopped at its
    cap with a wide interval, a third answer, ``s``, surveys more first: the share the price
    names (:attr:`survey_more`, for :func:`_search_asking`), then asks again; offered
    :data:`SURVEYS_MORE` times at most."""

    #: How many times one command surveys more at the user's word before it stops offering.
    SURVEYS_MORE = 3

    def __init__(self) -> None:
        #: The survey share the user asked for at the last question (``s``), else ``None``.
        self.survey_more: float | None = None
        self._offers_left = self.SURVEYS_MORE

    def __call__(self, price: Price) -> bool:
        self.survey_more = None
        question = (
            f"spend {price.needs().replace('calls', 'calls in all')} "
            f"({price.remaining:,} still to spend)? "
        )
        if price.planned is not None:  # the quota cannot hold the job: what can happen
            question = f"{price.plan}: spend the {price.planned:,} now? "
        if price.wider_share is None or not self._offers_left or not sys.stdin.isatty():
            return _confirmed(question + "[y/N] ")
        answer = input(
            question + f"[y/N, or s: survey more first (a survey share of "
            f"{price.wider_share:g}) to narrow the interval to about ±20%] "
        )
        if answer.strip().lower() in ("s", "survey"):
            self.survey_more = price.wider_share
            self._offers_left -= 1
        return answer.strip().lower() in ("y", "yes")


def _search_asking(search: Any, areas: Any, client: Any, given: dict[str, Any]) -> Any:
    """``search(areas, client=client, **given)``; when the user answered ``s`` at the
    decision point (:class:`PriceQuestion`), the search again with the survey share named
    (the pages surveyed so far are cached: the new survey is of the pieces not surveyed
    yet)."""
    asked = given["confirm"]
    while True:
        try:
            return search(areas, client=client, **given)
        except PriceNotConfirmedError:
            if not isinstance(asked, PriceQuestion) or asked.survey_more is None:
                raise
            given = {**given, "survey_share": asked.survey_more}


def _write(
    result: SearchResult, args: argparse.Namespace, *, partial: bool, refused: int = 0
) -> None:
    """Write the result's files and print its summary; ``refused``: the refusals the pacer
    met (spike arrest, a busy service: each retried, and the pace slowed)."""
    from parcelsearch import outputs

    out, tiles_out, kept = _destinations(result, args)
    if kept is not None and _kept_aside(result, out, kept):
        return
    print_table(result.summary(), f"every area in {out}")
    path = outputs.write_ids(result, out, force=True)
    if tiles_out is not None:
        outputs.write_tiles(result.tiles, tiles_out, outputs.run_metadata(result), force=True)
    if args.out_map is not None:
        map_out = Path(args.out_map)
        if kept is not None:  # beside the kept map too, named as the run's other files
            map_out = outputs.aside_path(map_out, outputs.run_metadata(result))
        print(
            f"map written to {outputs.write_map(result, map_out)}",
            file=sys.stderr if partial else sys.stdout,
        )
    state = "PARTIAL result (complete: false)" if partial else "complete"
    print(
        f"\n{plural(len(result.group_ids), 'unique GroupID')} in "
        f"{plural(len(result.ids), '(area, group) row')}; {plural(result.calls, 'call')} made"
        f"{_probes_text(result.probes)}, "
        f"{plural(refused, 'refusal') + ' met and retried (the pace slowed), ' if refused else ''}"
        f"{plural(result.cached_pages, 'page')} from cache"
        f"{' (' + result.cache_age_text() + ')' if result.cached_pages else ''}; {state}, "
        f"written to {path}",
        file=sys.stderr if partial else sys.stdout,
    )
    if kept is not None:
        print(
            f"parcelsearch: note: {kept.args[0]}; this run was written beside it, to {path} "
            "(--force replaces it)",
            file=sys.stderr,
        )
    if result.calls == 0 and result.cached_pages and not partial:
        print(
            "every page came from the cache: no call was made, so the key was not used "
            "(nor checked)"
        )
    if len(result.skipped):
        shown = ", ".join(map(str, result.skipped.index[: outputs.TERMINAL_ROWS]))
        more = len(result.skipped) - outputs.TERMINAL_ROWS
        print(
            f"{plural(len(result.skipped), 'area')} skipped (market not active): {shown}"
            + (f" … {more:,} more (listed under 'skipped' in {args.out})" if more > 0 else "")
        )
    if result.refresh == "changed":
        print(refresh_line(result))
    if result.run_id:
        print(
            f"run {result.run_id[:12]} recorded (parcelsearch runs; parcelsearch diff OLD "
            f"{result.run_id[:12]})"
        )


def _kept_aside(result: SearchResult, aside: Path, kept: OutputKeptError) -> bool:
    """Whether the file beside a kept one (``NAME.partial.EXT``) holds a run more complete than
    this one: then it is kept too, nothing of this run is written, and the user is told."""
    from parcelsearch import outputs

    try:
        outputs.check_replace(aside, outputs.run_metadata(result))
    except OutputKeptError as better:
        print(
            f"parcelsearch: note: {kept.args[0]}; and {better.args[0]}: this run was not "
            "written (what it fetched is cached: running the search again resumes; --force "
            "replaces them)",
            file=sys.stderr,
        )
        return True
    return False


def _destinations(
    result: SearchResult, args: argparse.Namespace
) -> tuple[Path, Path | None, OutputKeptError | None]:
    """Where ``--out`` and ``--out-tiles`` go: as named, or beside them
    (:func:`parcelsearch.outputs.aside_path`) when they hold a more complete result than this
    run's, which are then kept as they were (unless ``--force``); and why, if so."""
    from parcelsearch import outputs

    meta = outputs.run_metadata(result)
    named = [Path(args.out)] + ([Path(args.out_tiles)] if args.out_tiles is not None else [])
    kept = None
    if not args.force:
        for path in named:
            try:
                outputs.check_replace(path, meta)
            except OutputKeptError as exc:
                kept = kept or exc
    if kept is not None:
        named = [outputs.aside_path(path, meta) for path in named]
    return named[0], (named[1] if len(named) > 1 else None), kept


def refresh_line(result: SearchResult) -> str:
    """What a ``--refresh changed`` run read, inferred and sampled, and what it may miss."""
    status = result.tiles["status"].value_counts()
    changed = int(result.tiles["changed"].fillna(False).sum())
    verification = result.verification
    low, high = verification.get("missed_interval", [0, 0])
    sampled = verification.get("sampled", 0)
    line = (
        f"refresh: {plural(changed, 'piece')} changed; {int(status.get('read', 0)):,} "
        f"re-read, {int(status.get('inferred', 0)):,} unchanged by inference, "
        f"{int(status.get('sampled', 0)):,} sampled ({verification.get('found_changed', 0)} "
        f"of them changed)"
    )
    if sampled:
        line += (
            f"; changed pieces missed: about {verification['missed_estimate']:g} "
            f"(95% interval {low:g}-{high:g})"
        )
    else:
        line += f"; changed pieces missed: unknown (no sample; at most {high:g})"
    if verification.get("sample_dropped"):
        line += f"; sample dropped: {verification['sample_dropped']}"
    return line


SEARCH = Command(
    "search",
    "find every GroupID inside the study areas",
    _declare_search,
    run_search,
    description="Find every parcel GroupID inside the study areas for the fewest calls. "
    "Every response is cached: running the same search again spends only "
    "what is missing.",
    epilog=ENVIRONMENT + "\n\n" + exit_codes_text(),
)


# -- markets, doctor -----------------------------------------------------------------------


def _declare_markets(parser: Parser) -> None:
    parser.add_argument("--json", action="store_true", help="print a JSON list")
    add_connection(parser)
    add_team_member(parser, "the call is reserved, paced and counted there, in the team's quota")


def run_markets(args: argparse.Namespace) -> int:
    """``parcelsearch markets``: the active markets (one call, then cached a day)."""
    from parcelsearch import market_list

    client = _client(args)
    check_listening(client.base_url, proxied=client.proxied)
    names = market_list.markets(client, team=args.team, user=args.user)
    print(json.dumps(names) if args.json else "\n".join(names))
    return 0


MARKETS = Command(
    "markets",
    "list the active markets (spends one call, then cached a day)",
    _declare_markets,
    run_markets,
    description="List the markets where zoning calls are worth making. Asking the service "
    "spends one call of the key's quota; the list is then reused for a day.",
    epilog=ENVIRONMENT,
)


def _confirmed(question: str) -> bool:
    """The user's yes on a terminal; never on a pipe (a script must say --yes)."""
    if not sys.stdin.isatty():
        return False
    return input(question).strip().lower() in ("y", "yes")


#: The commands of this module, in the order ``parcelsearch --help`` lists them.
COMMANDS = (DEMO, PLAN, SEARCH, MARKETS)
