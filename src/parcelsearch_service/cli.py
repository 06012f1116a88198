"""The reference service's commands of ``parcelsearch``: ``serve``, ``keys``, ``parcels`` and
``portal`` (:mod:`parcelsearch_service.portal.commands`).

Each is plugged into the one ``parcelsearch`` command through the entry point group
``parcelsearch.commands`` (``pyproject.toml``), which loads :data:`SERVE`, :data:`KEYS`,
:data:`PARCELS` and :data:`PORTAL` only when the command line names one of them.

Defaults: the bundled demo data; the key store and certificates in the per-user service
directory — ``$PARCELSEARCH_SERVICE_DIR`` if set, else ``$XDG_DATA_HOME/parcelsearch/service``
(``~/.local/share/parcelsearch/service``) — as ``keys.sqlite`` and ``certs/``. ``--keys``
also takes a ``postgresql://`` URL (keys, counters and the request log in PostgreSQL, shared by
several service hosts).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from parcelsearch._shared import count_argument, plural
from parcelsearch.errors import ConfigurationError
from parcelsearch.settings import KEY_TYPES
from parcelsearch_service.keys import KeyStore
from parcelsearch_service.keys.rules import (
    MAX_QUOTA,
    MAX_RATE,
    MIN_RATE,
    QUOTA_PERIODS,
    SERVICES,
    check_limits,
)
from parcelsearch_service.keys.store import BUSY_TIMEOUT, default_keys_location, is_postgres_url
from parcelsearch_service.portal import commands as portal_commands
from parcelsearch_service.store import MATCH_MODES
from parcelsearch_service.tls import default_cert_dir

__all__ = ["ServiceCommand", "SERVE", "KEYS", "PARCELS", "PORTAL"]


def _keys_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--keys",
        default=None,
        metavar="FILE|URL",
        help="key store: a SQLite file or a postgresql:// URL "
        f"(default: {default_keys_location()})",
    )


def _key_store(args: argparse.Namespace) -> KeyStore:
    return KeyStore(
        args.keys or default_keys_location(),
        busy_timeout=getattr(args, "busy_timeout", BUSY_TIMEOUT),
    )


def _serve(args: argparse.Namespace) -> int:
    from parcelsearch_service.app import create_app  # lazy: CLI start-up stays fast
    from parcelsearch_service.postgis import open_parcel_store
    from parcelsearch_service.server import bind_socket, build_server, run_workers
    from parcelsearch_service.tls import ensure_certificates

    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    if not args.access_log:
        logging.getLogger("parcelsearch.service.access").setLevel(logging.WARNING)
    cert_dir = args.cert_dir or default_cert_dir()
    certs = ensure_certificates(cert_dir, [args.host])
    keys = _key_store(args)
    store = open_parcel_store(_parcels_source(args.parcels), match=args.match)
    markets, brought = _markets_source(args)
    app = create_app(store, markets, keys, portal=args.portal, portal_ca=certs.ca)
    sock = bind_socket(args.host, args.port)
    port = sock.getsockname()[1]
    host = f"[{args.host}]" if ":" in args.host else args.host

    line = f"serving https://{host}:{port} (CA: {certs.ca})"
    if brought:
        line += f"; {plural(len(brought), 'market')} from the parcels' market column"
    portal_line = f"portal at https://{host}:{port}/portal/ (users: parcelsearch portal add-user)"
    if args.workers > 1:  # the socket listens already: connections queue until a worker takes
        print(f"{line} with {args.workers} workers", flush=True)
        if args.portal:
            print(portal_line, flush=True)

    def ready() -> None:
        if args.workers == 1:
            print(line, flush=True)
            if args.portal:
                print(portal_line, flush=True)

    def build() -> Any:
        return build_server(
            app, certs.cert, certs.key, on_ready=ready, forwarded_allow_ips=args.forwarded_allow_ips
        )

    def before_fork() -> None:  # connections cannot cross a fork: each worker opens its own
        keys.close()
        store.close()

    try:
        return run_workers(build, sock, args.workers, before_fork=before_fork)
    finally:
        sock.close()
        keys.close()
        store.close()


def _markets_source(args: argparse.Namespace) -> tuple[Any, list[str]]:
    """The market list to serve: ``--markets``, else the markets of the ``--parcels`` files
    (their ``market`` column: a fabric of ``parcels synth`` brings its markets), else the
    bundled list; and the names the parcels brought (empty: none)."""
    if args.markets is not None or not args.parcels:
        return args.markets, []
    from parcelsearch_service.store import fabric_markets  # lazy: CLI start-up

    brought = fabric_markets(args.parcels)
    return (brought, brought) if brought else (None, [])


def _parcels_source(given: list[str] | None) -> Any:
    """What ``--parcels`` names: nothing (the demo), one file or URL, or several files
    (served together)."""
    if not given or len(given) == 1:
        return given[0] if given else None
    if any(is_postgres_url(source) for source in given):
        raise ConfigurationError(
            "--parcels: a postgresql:// URL is served alone; to serve several files together "
            "give only files (or load them all with 'parcels load')"
        )
    from parcelsearch_service.store import combined_parcels  # lazy: CLI start-up

    return combined_parcels(given)


def _parcels_load(args: argparse.Namespace) -> int:
    from parcelsearch_service.postgis import load_parcels_into  # lazy: CLI start-up

    if not is_postgres_url(args.into):
        raise ConfigurationError(f"--into must be a postgresql:// URL, got {args.into!r}")
    count = load_parcels_into(args.file, args.into, replace=args.replace)
    print(f"loaded {count:,} parcels into parcelsearch.parcels", flush=True)
    return 0


def _parcels_synth(args: argparse.Namespace) -> int:
    from parcelsearch.planning.vector_files import read_vector
    from parcelsearch_service.synth import fabric_for, plan_fabric  # lazy: CLI start-up

    out = Path(args.out).expanduser()
    if out.suffix.lower() not in SYNTH_FORMATS:
        raise ConfigurationError(
            f"--out {out}: {out.suffix or 'no extension'} is not one of the formats written "
            f"({', '.join(SYNTH_FORMATS)}); name a file such as --out parcels.parquet"
        )
    if not out.parent.is_dir():
        raise ConfigurationError(f"--out {out}: the folder {str(out.parent)!r} does not exist")
    areas = read_vector(args.areas, layer=args.layer, crs=args.crs, what="study areas file")
    try:
        plan = plan_fabric(areas, seed=args.seed, margin=args.margin, place=args.place)
        parcels = fabric_for(
            areas,
            seed=args.seed,
            margin=args.margin,
            max_parcels=args.max_parcels,
            place=args.place,
            plan=plan,
        )
    except ValueError as exc:
        raise ConfigurationError(
            str(exc)
            .replace("raise the limit", "raise --max-parcels")
            .replace("(place='rural')", "(--place rural)")
            .replace("set one (areas.set_crs(...)) first", "declare it with --crs")
        ) from None
    if out.suffix.lower() == ".parquet":
        parcels.to_parquet(out, index=False)
    else:
        parcels.to_file(out)
    places = "; ".join(
        f"{plural(n, 'area')} {PLACE_WORDS[kind]}" for kind, n in plan.areas_by_place.items()
    )
    how = "by size (--place to choose)" if args.place == "auto" else f"--place {args.place}"
    print(
        f"{len(parcels):,} parcels (about {plan.estimate:,.0f} estimated; "
        f"{parcels['group_id'].nunique():,} GroupIDs; ids from "
        f"{int(parcels['parcel_id'].min()) if len(parcels) else plan.id_base + 1:,}) over "
        f"{plural(len(areas), 'area')} — {places}, {how} — written to {out}; serve them "
        f"with 'parcelsearch serve --parcels {out}' (repeat --parcels for other fabrics)",
        flush=True,
    )
    return 0


#: How ``parcels synth`` names each kind of place it lays.
PLACE_WORDS = {
    "urban": "urban (city lots about 8 m wide, flats)",
    "suburban": "suburban (lots about 17 m wide)",
    "rural": "rural (coarser lots of about 8 hectares)",
}


#: What ``parcels synth --out`` writes.
SYNTH_FORMATS = (".parquet", ".gpkg", ".geojson")


def _max_parcels(text: str) -> int:
    digits = text.replace(",", "").replace("_", "")
    if not (digits.isascii() and digits.isdigit() and 0 < int(digits) < 10_000_000):
        raise argparse.ArgumentTypeError(
            f"must be a whole number from 1 to 9,999,999, got {text[:40]!r}"
        )
    return int(digits)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"must be a number of seconds from 0 to 3,600, got {text}")
    return value


def _addresses(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        if name == "*" or name.startswith("unix:"):
            continue
        try:
            ipaddress.ip_network(name, strict=False)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not an IP address or network: {name!r}; give e.g. 10.0.0.5,10.1.0.0/16"
            ) from None
    return names


def _rate(text: str) -> float:
    try:
        value = float(text) if text.isascii() else math.nan
    except ValueError:
        value = math.nan
    try:
        check_limits(value, None)
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(f"{exc} ({text[:40]!r})") from None
    return value


def _quota(text: str) -> int:
    digits = text.replace(",", "").replace("_", "")
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 20):
        raise argparse.ArgumentTypeError(
            f"must be a whole number from 0 to {MAX_QUOTA:,}, got {text[:40]!r}"
        )
    try:
        check_limits(MIN_RATE, int(digits))
    except ConfigurationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return int(digits)


def _keys_create(args: argparse.Namespace) -> int:
    store = _key_store(args)
    try:
        key = store.create(
            args.name,
            key_type=args.type,
            per_second=args.per_second,
            quota=args.quota,
            quota_period=args.quota_period,
            services=args.services,
        )
    finally:
        store.close()
    print(key, flush=True)
    return 0


def _keys_list(args: argparse.Namespace) -> int:
    location = args.keys or default_keys_location()
    if not is_postgres_url(location) and not Path(location).exists():
        raise ConfigurationError(f"no key store at {location}; create a key first (keys create)")
    store = KeyStore(location)
    try:
        rows = store.list()
    finally:
        store.close()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(_table(rows))
    return 0


def _table(rows: list[dict[str, Any]]) -> str:
    head = [
        "name",
        "type",
        "per_second",
        "quota",
        "period",
        "services",
        "used",
        "this_month",
        "revoked",
    ]
    body = [
        [
            r["name"],
            r["type"],
            f"{r['per_second']:g}",
            "-" if r["quota"] is None else str(r["quota"]),
            r["quota_period"],
            ",".join(r["services"]),
            str(r["used_lifetime"]),
            str(r["used_month"]),
            "yes" if r["revoked"] else "no",
        ]
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=False)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
        for line in [head, *body]
    ]
    return "\n".join(lines) if body else "\n".join(lines) + "\n(no keys)"


def _keys_revoke(args: argparse.Namespace) -> int:
    store = _key_store(args)
    try:
        store.revoke(args.name)
    finally:
        store.close()
    print(f"revoked {args.name}", file=sys.stderr)
    return 0


class Subcommands(Protocol):
    """Where a command adds its parser: the ``parcelsearch`` command's sub-commands
    (:class:`parcelsearch.cli.registry.Subcommands`), as argparse's ``add_parser``."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        """Add the sub-command ``name``; its parser."""
        ...


def _add_serve(commands: Subcommands) -> None:
    serve = commands.add_parser(
        "serve",
        help="run the reference Search and Markets service over HTTPS",
        description="Run the reference service. With no data options it serves the bundled "
        "demo data. Prints one line 'serving https://HOST:PORT (CA: DIR/ca.pem)' when ready.",
    )
    serve.add_argument(
        "--parcels",
        action="append",
        default=None,
        metavar="FILE|URL",
        help="parcels: any file geopandas reads (parcel_id, group_id, geometry), "
        "or a postgresql:// URL of a database loaded with 'parcels load'; "
        "repeat it to serve several files together (e.g. fabrics made by "
        "'parcels synth' for different areas)",
    )
    serve.add_argument(
        "--markets",
        type=Path,
        default=None,
        metavar="FILE",
        help="market names, one per line or a JSON list (default: the "
        "markets of the --parcels files' market column, as 'parcels synth' "
        "names them, else the bundled list)",
    )
    _keys_arg(serve)
    serve.add_argument(
        "--cert-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"CA and server certificate (default: {default_cert_dir()})",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8443, help="port (0 picks a free one)")
    serve.add_argument(
        "--workers",
        type=count_argument(1),
        default=1,
        metavar="N",
        help="worker processes sharing the port (default 1); limits stay exact",
    )
    serve.add_argument(
        "--busy-timeout",
        type=_positive_float,
        default=BUSY_TIMEOUT,
        metavar="SECONDS",
        help=f"wait this long for a key store lock, then answer 503 (default {BUSY_TIMEOUT:g})",
    )
    serve.add_argument(
        "--match",
        choices=MATCH_MODES,
        default="representative-point",
        help="how a parcel matches a polygon (default representative-point)",
    )
    serve.add_argument(
        "--portal", action="store_true", help="also serve the developer portal at /portal/"
    )
    serve.add_argument(
        "--forwarded-allow-ips",
        type=_addresses,
        default=[],
        metavar="ADDRS",
        help="comma-separated addresses or networks of the reverse proxies in "
        "front of the service whose X-Forwarded-For/-Proto headers are believed "
        "(the client address for sign-in limits and the access log); '*' "
        "trusts any. Default: none, the headers are ignored",
    )
    serve.add_argument(
        "--access-log",
        action="store_true",
        help="log every request (method, path, status, milliseconds; never "
        "queries or headers) to stderr; every call is in the key store's "
        "request log either way",
    )
    serve.set_defaults(func=_serve)


def _add_keys(commands: Subcommands) -> None:
    keys = commands.add_parser(
        "keys",
        help="create, list and revoke API keys",
        description="Manage the service's API keys.",
    )
    sub = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    create = sub.add_parser("create", help="create a key and print it (shown once)")
    _keys_arg(create)
    create.add_argument(
        "--name",
        required=True,
        help="the key's name: unique, used by 'keys list' and 'keys revoke'",
    )
    create.add_argument(
        "--type",
        choices=list(KEY_TYPES),
        default="demo",
        help="demo: 50 calls for the life of the key; production: 500 calls a "
        "calendar month (UTC); both 10 calls/s (default demo)",
    )
    create.add_argument(
        "--per-second",
        type=_rate,
        default=None,
        metavar="N",
        help=f"calls a second, {MIN_RATE:g} to {MAX_RATE:,.0f} (default: the type's)",
    )
    create.add_argument(
        "--quota",
        type=_quota,
        default=None,
        metavar="N",
        help=f"calls, 0 to {MAX_QUOTA:,} (default: the type's)",
    )
    create.add_argument(
        "--quota-period",
        choices=QUOTA_PERIODS,
        default=None,
        help="lifetime or month: when the quota resets (default: its type's)",
    )
    create.add_argument(
        "--services",
        default=",".join(SERVICES),
        help="comma-separated: search,markets (default both)",
    )
    create.set_defaults(func=_keys_create)
    listing = sub.add_parser("list", help="list keys, limits and calls used")
    _keys_arg(listing)
    listing.add_argument("--json", action="store_true", help="JSON instead of a table")
    listing.set_defaults(func=_keys_list)
    revoke = sub.add_parser("revoke", help="revoke a key")
    _keys_arg(revoke)
    revoke.add_argument("--name", required=True, help="the name of the key to stop at once")
    revoke.set_defaults(func=_keys_revoke)


def _add_parcels(commands: Subcommands) -> None:
    parcels = commands.add_parser(
        "parcels",
        help="make parcels for your areas, or load parcels into PostGIS",
        description="The service's parcels: 'synth' makes a synthetic fabric over any study "
        "areas; 'load' loads a parcels file into PostGIS.",
    )
    parcel_sub = parcels.add_subparsers(dest="parcels_command", required=True, metavar="ACTION")
    load = parcel_sub.add_parser(
        "load", help="load a parcels file into parcelsearch.parcels (COPY), print the count"
    )
    load.add_argument(
        "file",
        type=Path,
        metavar="FILE",
        help="any file geopandas reads: parcel_id, group_id, geometry",
    )
    load.add_argument(
        "--into", required=True, metavar="URL", help="postgresql:// URL of a database with PostGIS"
    )
    load.add_argument("--replace", action="store_true", help="replace the parcels already loaded")
    load.set_defaults(func=_parcels_load)
    synth = parcel_sub.add_parser(
        "synth",
        help="make a synthetic parcel fabric over your own study areas",
        description="Lay a synthetic street grid (blocks, lots, condominiums, assemblages, "
        "parks) of each area's kind of place — urban, suburban or rural — under "
        "any study areas, for 'serve --parcels' to serve: try parcelsearch on "
        "your own areas without a vendor key. Prints the parcels made and the "
        "estimate it checked --max-parcels against. Deterministic for a seed; "
        "the parcels are made up, their ids drawn from the areas and the seed so "
        "that fabrics for different areas can be served together.",
    )
    synth.add_argument(
        "areas", metavar="AREAS", help="study areas: any file geopandas reads, in any CRS"
    )
    synth.add_argument(
        "--out",
        required=True,
        metavar="FILE",
        help="where to write the parcels: .parquet (GeoParquet), .gpkg or .geojson",
    )
    synth.add_argument("--layer", metavar="NAME", help="the layer of AREAS to read")
    synth.add_argument(
        "--crs", metavar="CRS", help="declare the CRS of AREAS when the file has none"
    )
    synth.add_argument(
        "--seed",
        type=int,
        default=20240611,
        metavar="N",
        help="the generator's seed (default 20240611, the demo's)",
    )
    synth.add_argument(
        "--margin",
        type=float,
        default=50.0,
        metavar="METRES",
        help="metres of fabric around each area (default 50)",
    )
    synth.add_argument(
        "--place",
        choices=("auto", "urban", "suburban", "rural"),
        default="auto",
        help="the kind of place the grid imitates: urban (narrow lots, flats), "
        "suburban (the demo's) or rural (lots of several hectares, for a "
        "county); auto, the default, takes each area's from its size "
        "(under 5 km² urban, under 50 km² suburban, else rural)",
    )
    synth.add_argument(
        "--max-parcels",
        type=_max_parcels,
        default=1_000_000,
        metavar="N",
        help="refuse areas that would need more parcels (default 1,000,000, at most 9,999,999)",
    )
    synth.set_defaults(func=_parcels_synth)


@dataclass(frozen=True)
class ServiceCommand:
    """A command of the service: ``add`` adds its parser, each (sub-)parser sets ``func``, the
    function that runs it. It handles its own signals (``serve`` runs uvicorn)."""

    add: Callable[[Subcommands], None]
    handles_signals = True

    def add_to(self, commands: Subcommands) -> None:
        """Add the command's parser and options to the sub-commands ``commands``."""
        self.add(commands)

    def run(self, args: argparse.Namespace) -> int:
        """Run the function the parser chose: its exit status."""
        return int(args.func(args) or 0)


SERVE = ServiceCommand(_add_serve)
KEYS = ServiceCommand(_add_keys)
PARCELS = ServiceCommand(_add_parcels)
PORTAL = ServiceCommand(portal_commands.register)
