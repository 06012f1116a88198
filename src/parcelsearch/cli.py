"""The ``parcelsearch`` command: serve, keys, plan, search, markets, cache, demo."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from parcelsearch import __version__
from parcelsearch.errors import ParcelSearchError


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every sub-command."""
    parser = argparse.ArgumentParser(
        prog="parcelsearch",
        description="Find every parcel GroupID inside study areas with the fewest Search calls.",
    )
    parser.add_argument("--version", action="version", version=f"parcelsearch {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    from parcelsearch import _cli_toolkit
    from parcelsearch.service import cli as service_cli

    service_cli.register(commands)
    _cli_toolkit.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ParcelSearchError as exc:
        print(f"parcelsearch: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("parcelsearch: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
