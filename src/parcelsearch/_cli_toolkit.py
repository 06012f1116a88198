"""The analyst's sub-commands: plan, search, markets, cache."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import geopandas as gpd
import pandas as pd

from parcelsearch.errors import InputError


def read_areas(path: str) -> gpd.GeoDataFrame:
    """Read study areas from any file geopandas reads, with a clear error when it cannot."""
    file = Path(path)
    if not file.exists():
        raise InputError(f"study areas file {path!r} does not exist", field="AREAS")
    try:
        if file.suffix.lower() in (".parquet", ".geoparquet"):
            return gpd.read_parquet(file)
        return gpd.read_file(file)
    except Exception as exc:  # noqa: BLE001 - any reader failure becomes one clear message
        raise InputError(
            f"cannot read study areas from {path!r}: {exc}. Use a file geopandas reads "
            "(GeoPackage, GeoJSON, Shapefile, GeoParquet).",
            field="AREAS",
        ) from None


def _print_table(frame: pd.DataFrame) -> None:
    with pd.option_context("display.max_rows", 200, "display.width", 120):
        print(frame.to_string())


def _client(args: argparse.Namespace) -> Any:
    from parcelsearch.client import Client

    return Client(base_url=args.base_url, ca_bundle=args.ca_bundle)


def _cache(args: argparse.Namespace) -> Any:
    from parcelsearch.cache import ResponseCache

    return ResponseCache(args.cache_dir)


def cmd_plan(args: argparse.Namespace) -> int:
    from parcelsearch.planning import plan

    pieces_plan = plan(read_areas(args.areas), args.tolerance, id_column=args.id_column)
    _print_table(pieces_plan.summary())
    print(f"\n{len(pieces_plan.pieces)} pieces, at least {pieces_plan.min_calls} calls")
    if args.out_tiles:
        out = Path(args.out_tiles)
        tiles = pieces_plan.tiles
        if out.suffix == ".parquet":
            tiles.to_parquet(out)
        else:
            tiles.to_file(out)
        print(f"tiles written to {out}")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from parcelsearch.errors import ParcelSearchError
    from parcelsearch.pipeline import search

    cache = _cache(args)
    try:
        result = search(
            read_areas(args.areas),
            client=_client(args),
            tolerance=args.tolerance,
            id_column=args.id_column,
            budget=args.budget,
            quota=args.quota,
            allow_partial=args.allow_partial,
            cache=cache,
            active_markets_only=args.active_markets_only,
            market_column=args.market_column,
            progress=not args.quiet,
        )
    except ParcelSearchError as exc:
        partial = exc.result
        if partial is not None:  # a stopped run: write what it found, then say why
            _print_table(partial.summary())  # type: ignore[attr-defined]
            path = partial.to_parquet(args.out)  # type: ignore[attr-defined]
            print(f"\npartial result (complete: false) written to {path}", file=sys.stderr)
        raise
    _print_table(result.summary())
    path = result.to_parquet(args.out)
    print(
        f"\n{len(result.group_ids)} unique GroupIDs in {len(result.ids)} (area, group) rows; "
        f"{result.calls} calls made, {result.cached_pages} pages from cache; written to {path}"
    )
    return 0


def cmd_markets(args: argparse.Namespace) -> int:
    from parcelsearch.market_list import markets

    names = markets(_client(args), cache=_cache(args))
    if args.json:
        print(json.dumps(names))
    else:
        print("\n".join(names))
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    cache = _cache(args)
    if args.action == "info":
        from parcelsearch.ledger import Ledger

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
        print("cache OK" if not problems else f"{len(problems)} problem(s) found")
        return 1 if problems else 0
    cache.clear()
    print(f"cache cleared: {cache.directory}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from parcelsearch.demo import run_demo

    return run_demo(args.out, progress=not args.quiet)


def _add_connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", help="service base URL (default: $PARCELSEARCH_BASE_URL)")
    parser.add_argument("--ca-bundle",
                        help="CA file to verify TLS (default: $PARCELSEARCH_CA_BUNDLE)")
    parser.add_argument("--cache-dir",
                        help="response cache folder (default: $PARCELSEARCH_CACHE_DIR)")


def _add_areas(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("areas", metavar="AREAS", help="study areas: any file geopandas reads")
    parser.add_argument("--id-column", help="column identifying areas (default: row order)")
    parser.add_argument("--tolerance", type=float, default=0.0, metavar="T",
                        help="metres pieces may reach outside the areas to save calls "
                             "(default 0: exact)")


def register(commands: Any) -> None:
    """Add plan, search, markets and cache to the top-level sub-parsers."""
    p = commands.add_parser("plan", help="show the pieces and minimum calls, spending nothing")
    _add_areas(p)
    p.add_argument("--out-tiles", metavar="FILE", help="write the pieces (GeoParquet/GeoJSON/GPKG)")
    p.set_defaults(func=cmd_plan)

    s = commands.add_parser("search", help="find every GroupID inside the study areas")
    _add_areas(s)
    s.add_argument("--out", required=True, metavar="FILE.parquet",
                   help="where to write the GroupIDs")
    s.add_argument("--budget", type=int, metavar="N", help="spend at most N calls in this run")
    s.add_argument("--quota",
                   help="the key's quota if known: demo, production, 500/month, 50/lifetime")
    s.add_argument("--allow-partial", action="store_true",
                   help="with --budget below the plan's need: spend the budget and resume later")
    s.add_argument("--active-markets-only", action="store_true",
                   help="skip areas whose market is not active (see --market-column)")
    s.add_argument("--market-column", default="market", help="column naming each area's market")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_connection(s)
    s.set_defaults(func=cmd_search)

    m = commands.add_parser("markets", help="list the markets where zoning calls are worth making")
    m.add_argument("--json", action="store_true", help="print a JSON list")
    _add_connection(m)
    m.set_defaults(func=cmd_markets)

    d = commands.add_parser("demo", help="the whole product on the demo data, no key needed")
    d.add_argument("--out", default="parcelsearch-demo", metavar="DIR",
                   help="folder for the GroupIDs, tiles and map (default ./parcelsearch-demo)")
    d.add_argument("--quiet", action="store_true", help="no progress bar")
    d.set_defaults(func=cmd_demo)

    c = commands.add_parser("cache", help="inspect, verify or clear the response cache")
    c.add_argument("action", choices=["info", "verify", "clear"])
    c.add_argument("--cache-dir",
                   help="response cache folder (default: $PARCELSEARCH_CACHE_DIR)")
    c.set_defaults(func=cmd_cache)
