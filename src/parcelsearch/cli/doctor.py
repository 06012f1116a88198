"""``parcelsearch doctor``: the vendor at the base URL checked in a few calls, priced and
confirmed first.

Messages name flags and environment variables, never Python arguments (errors render in the
``"cli"`` dialect).
"""

from __future__ import annotations

import argparse

from parcelsearch.cli.arguments import ENVIRONMENT, add_connection, add_team_member
from parcelsearch.cli.printing import plural
from parcelsearch.cli.registry import Command, Parser
from parcelsearch.cli.searching import _client, _confirmed, check_listening, read_areas
from parcelsearch.errors import ConfigurationError

__all__ = ["DOCTOR", "COMMANDS", "run_doctor"]


def _declare_doctor(parser: Parser) -> None:
    parser.add_argument(
        "--dry-run", action="store_true", help="list the checks and their price; spend nothing"
    )
    parser.add_argument("--yes", action="store_true", help="spend the calls without asking")
    parser.add_argument(
        "--areas",
        metavar="FILE",
        help="the study areas you mean to search (any file geopandas reads): "
        "one more call, page 1 of a sliver one grid step tall across the "
        "largest, learns whether the vendor matches parcels by a point "
        "(representative-point) or by their footprints (intersects), kept "
        "for the base URL and used by later searches",
    )
    parser.add_argument(
        "--layer", metavar="NAME", help="the layer of --areas to read, from a file with several"
    )
    add_connection(parser)
    add_team_member(parser, "the probes are reserved, paced and counted there, in the team's quota")
    parser.set_defaults(crs=None)


def run_doctor(args: argparse.Namespace) -> int:
    """``parcelsearch doctor``: the vendor checked in at most 3 calls (4 with ``--areas``),
    priced first."""
    from parcelsearch.service_check import check_service

    areas = None
    if args.areas is not None:  # read and checked before anything is priced or spent
        areas = read_areas(
            argparse.Namespace(areas=args.areas, layer=args.layer, crs=args.crs)
        ).geometry
    client = _client(args)
    priced = check_service(client, dry_run=True, areas=areas)
    price = priced.price
    if args.dry_run:
        print(priced)
        return 0
    if not args.yes and not _confirmed(
        f"doctor spends {plural(price, 'call')} of the key's "
        f"quota at {client.base_url}. Spend them? [y/N] "
    ):
        raise ConfigurationError(
            f"not confirmed: doctor spends {plural(price, 'call')}; "
            "nothing was spent. Add --yes to spend them without asking, "
            "or --dry-run to spend none"
        )
    check_listening(client.base_url, proxied=client.proxied)
    report = check_service(client, areas=areas, team=args.team, user=args.user)
    print(report)
    if areas is None and any(
        f.check == "matching rule" and f.verdict == "unknown" for f in report.findings
    ):
        print(
            "the vendor's matching rule is unknown: parcelsearch doctor --areas FILE learns "
            "it with one more call"
        )
    return 0 if report.ok else 1


DOCTOR = Command(
    "doctor",
    "check the vendor at the base URL (2 calls, 3 with --areas; priced and confirmed first)",
    _declare_doctor,
    run_doctor,
    description="Check what the vendor at the base URL does where its specification is "
    "silent: TLS, the key, the base URL's stage path, compression, the number "
    "of the first page, how refusals are worded, the markets and, with "
    "--areas, how it matches parcels to a polygon. It costs 2 calls of the "
    "key's quota (3 with --areas; never more than one beyond that, redirects "
    "and retries included), asked before spending (--yes: without asking; "
    "--dry-run: none). What it learns is kept in the cache folder, so later "
    "searches adapt without probing.",
    epilog=ENVIRONMENT + "\n\nexit codes:\n"
    "  0    every check passed or could not tell\n  1    a check failed\n"
    "  2    usage, or the price was not confirmed (nothing was spent)",
)

#: The commands of this module, in the order ``parcelsearch --help`` lists them.
COMMANDS = (DOCTOR,)
