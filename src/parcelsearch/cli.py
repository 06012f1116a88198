"""The ``parcelsearch`` command: serve, keys, plan, search, markets, cache, demo."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from parcelsearch import __version__
from parcelsearch.errors import (
    BudgetError,
    ConfigurationError,
    InputError,
    ParcelSearchError,
    SearchInterrupted,
)


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
    """Run the command line; returns the exit status (see ``parcelsearch --help``)."""
    args = build_parser().parse_args(argv)
    with interrupts_as_keyboard_interrupt():
        try:
            return int(args.func(args) or 0)
        except SearchInterrupted as exc:
            print(f"parcelsearch: {exc.render('cli')}", file=sys.stderr)
            return 128 + exc.signum
        except BudgetError as exc:
            print(f"parcelsearch: stopped: {exc.render('cli')}", file=sys.stderr)
            return 3
        except (ConfigurationError, InputError) as exc:  # what the user gave: a usage error
            print(f"parcelsearch: error: {exc.render('cli')}", file=sys.stderr)
            return 2
        except ParcelSearchError as exc:
            print(f"parcelsearch: error: {exc.render('cli')}", file=sys.stderr)
            return 1
        except KeyboardInterrupt as exc:
            print("parcelsearch: interrupted", file=sys.stderr)
            return 128 + int(getattr(exc, "signum", signal.SIGINT))


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
