"""The analyst's commands (plan, search, markets, cache, demo), run from parsed arguments.

:mod:`parcelsearch.cli` parses and validates the options and maps errors to exit codes;
this module does the work, writing results with :mod:`parcelsearch.outputs`. Messages name
flags and environment variables, never Python arguments (errors render in the ``"cli"``
dialect).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from urllib.parse import urlsplit

import geopandas as gpd
import pandas as pd

from parcelsearch import demo, market_list, outputs, pipeline, planning
from parcelsearch.cache import ResponseCache
from parcelsearch.client import Client
from parcelsearch.errors import Hint, InputError, ParcelSearchError, TransportError
from parcelsearch.ledger import Ledger, Quota
from parcelsearch.result import SearchResult
from parcelsearch.vector_files import read_vector

__all__ = ["run_plan", "run_search", "run_markets", "run_cache", "run_demo", "plural",
           "check_listening"]

#: Seconds to wait for the service to accept a connection before saying nothing listens.
CONNECT_PROBE_SECONDS = 1.5


def plural(n: int, word: str, many: str | None = None) -> str:
    """``"1 piece"``, ``"2 pieces"``, ``"1 call"``, ``"0 calls"``."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def read_areas(args: argparse.Namespace) -> gpd.GeoDataFrame:
    """The study areas named on the command line (``AREAS``, ``--layer``, ``--crs``)."""
    areas = read_vector(args.areas, layer=args.layer, crs=args.crs, what="study areas file")
    if not areas.index.equals(pd.RangeIndex(len(areas))):  # a GeoParquet's stored index:
        areas = areas.reset_index()  # a column like any other, under the CLI's id rule
    if areas.crs is None:  # said here in the file's words, not the data frame's
        raise InputError(
            f"study areas file {args.areas!r} has no CRS, so its coordinates cannot be placed "
            "on Earth", field="crs",
            hints=[Hint("crs", "EPSG:4326", "declare it with {knob} (or the CRS the data is "
                                            "in)")])
    return areas


def _print_table(frame: pd.DataFrame, where: str = "") -> None:
    print(outputs.terminal_table(frame, noun="area", where=where))


def _client(args: argparse.Namespace) -> Client:
    return Client(base_url=args.base_url, ca_bundle=args.ca_bundle, cache_dir=args.cache_dir)


def check_listening(base_url: str, timeout: float = CONNECT_PROBE_SECONDS) -> None:
    """Fail fast, spending nothing, when no service accepts connections at ``base_url``.

    One TCP connection is opened and closed (no request is sent, no call counted), so a
    service that is not running is reported at once, not after the client's retries.

    Raises
    ------
    TransportError
        Nothing listens there (or the host is unknown); the message names the URL and how
        to start the reference service.
    """
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    port = parts.port or 443
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        reason = "connection refused" if isinstance(exc, ConnectionRefusedError) else (
            "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc)))
        raise TransportError(
            f"nothing is listening at {base_url} ({reason})",
            url=base_url,
            hints=[Hint("serve", phrase="start the reference service with {knob}"),
                   Hint("base_url", phrase="or point at a running service with {knob}")],
        ) from None


# -- plan ----------------------------------------------------------------------------------


def run_plan(args: argparse.Namespace) -> int:
    """``parcelsearch plan``: print the pieces and minimum calls; write them if asked."""
    made = planning.plan(read_areas(args), args.tolerance, id_column=args.id_column)
    _print_table(made.summary(), "every piece in --out-tiles FILE")
    print(f"\n{plural(len(made.pieces), 'piece')}, at least {plural(made.min_calls, 'call')}")
    if args.out_tiles is not None:
        path = outputs.write_tiles(made.tiles, args.out_tiles)
        print(f"pieces written to {path}")
    return 0


# -- search --------------------------------------------------------------------------------


def run_search(args: argparse.Namespace) -> int:
    """``parcelsearch search``: every GroupID inside the areas, written to ``--out``.

    Whenever the run stops with a partial result (budget, quota, a failure, an interrupt),
    that result is written to ``--out`` (marked incomplete) before the error is re-raised.
    """
    areas = read_areas(args)
    client = _client(args)
    quota = Quota.parse(args.quota)  # None: $PARCELSEARCH_QUOTA, checked before connecting
    check_listening(client.base_url)
    try:
        result = pipeline.search(
            areas,
            client=client,
            tolerance=args.tolerance,
            id_column=args.id_column,
            budget=args.budget,
            quota=quota,
            allow_partial=args.allow_partial,
            max_age=args.max_age,
            refresh=args.refresh,
            active_markets_only=args.active_markets_only,
            market_column=args.market_column,
            progress=not args.quiet,
            workers=args.workers,
        )
    except ParcelSearchError as exc:
        if isinstance(exc.result, SearchResult):
            _write(exc.result, args, partial=True)
        raise
    _write(result, args, partial=False)
    return 0


def _write(result: SearchResult, args: argparse.Namespace, *, partial: bool) -> None:
    _print_table(result.summary(), f"every area in {args.out}")
    path = outputs.write_ids(result, args.out)
    if args.out_tiles is not None:
        outputs.write_tiles(result.tiles, args.out_tiles, outputs.run_metadata(result))
    state = "PARTIAL result (complete: false)" if partial else "complete"
    print(
        f"\n{plural(len(result.group_ids), 'unique GroupID')} in "
        f"{plural(len(result.ids), '(area, group) row')}; {plural(result.calls, 'call')} made, "
        f"{plural(result.cached_pages, 'page')} from cache; {state}, written to {path}",
        file=sys.stderr if partial else sys.stdout,
    )
    if result.calls == 0 and result.cached_pages and not partial:
        print("every page came from the cache: no call was made, so the key was not used "
              "(nor checked)")
    if len(result.skipped):
        shown = ", ".join(map(str, result.skipped.index[:outputs.TERMINAL_ROWS]))
        more = len(result.skipped) - outputs.TERMINAL_ROWS
        print(f"{plural(len(result.skipped), 'area')} skipped (market not active): {shown}"
              + (f" … {more:,} more (listed under 'skipped' in {args.out})" if more > 0
                 else ""))


# -- markets, cache, demo --------------------------------------------------------------------


def run_markets(args: argparse.Namespace) -> int:
    """``parcelsearch markets``: the active markets (one call, then cached a day)."""
    client = _client(args)
    check_listening(client.base_url)
    names = market_list.markets(client)
    print(json.dumps(names) if args.json else "\n".join(names))
    return 0


def run_cache(args: argparse.Namespace) -> int:
    """``parcelsearch cache info|verify|clear``."""
    cache = ResponseCache(args.cache_dir)
    if args.action == "info":
        for key, value in cache.info().items():
            print(f"{key}: {value}")
        usage = Ledger.in_folder(cache.directory).usage_by_key()
        for fingerprint, used in usage.items():
            print(f"calls by key sha256:{fingerprint}: {used.lifetime} for life, "
                  f"{used.month} this month")
        return 0
    if args.action == "verify":
        problems = cache.verify()
        for problem in problems:
            print(problem, file=sys.stderr)
        print("cache OK" if not problems else f"{plural(len(problems), 'problem')} found")
        return 1 if problems else 0
    cache.clear()
    print(f"cache cleared: {cache.directory}")
    return 0


def run_demo(args: argparse.Namespace) -> int:
    """``parcelsearch demo``: the whole product on the demo data."""
    return demo.run_demo(args.out, progress=not args.quiet)
