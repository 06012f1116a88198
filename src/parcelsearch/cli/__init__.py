"""The ``parcelsearch`` command: demo, plan, search, markets, cache, serve, keys.

This module builds the parser from the commands (:mod:`parcelsearch.cli.registry`): the
toolkit's, each declared beside what runs it (:mod:`~parcelsearch.cli.searching`,
:mod:`~parcelsearch.cli.records`, :mod:`~parcelsearch.cli.team_mode`,
:mod:`~parcelsearch.cli.login`), and those plugged in through the entry point group
``parcelsearch.commands`` (the reference service's, imported only when one of them runs or its
help is asked); it runs the command named and maps its errors to exit codes, each error
class's ``exit_code``. Nothing heavy is imported until a command runs, so
``parcelsearch --help`` is quick.

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

import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from parcelsearch import __version__, notices
from parcelsearch._shared import terminal_text
from parcelsearch.cli import doctor, login, records, searching, team_mode
from parcelsearch.cli.arguments import EXIT_CODES, Formatter, exit_codes_text
from parcelsearch.cli.registry import LISTED, Command, Parser, Runnable, plugged
from parcelsearch.errors import ParcelSearchError

__all__ = ["main", "run", "build_parser", "EXIT_CODES", "interrupts_as_keyboard_interrupt"]

#: The toolkit's commands, in the order ``parcelsearch --help`` lists them (the plugged ones
#: follow).
TOOLKIT: tuple[Command, ...] = (
    *searching.COMMANDS,
    *doctor.COMMANDS,
    *records.COMMANDS,
    *team_mode.COMMANDS,
    *login.COMMANDS,
)


def build_parser(argv: Sequence[str] | None = None, *, every_command: bool = False) -> Parser:
    """The argument parser; a plugged command is loaded only if ``argv`` runs it (or
    ``every_command``: all of them, as the reference page shows them).

    Raises
    ------
    ConfigurationError
        ``argv`` runs a plugged command whose package's extra is not installed.
    """
    return _parser_and_commands(argv, every_command)[0]


def _parser_and_commands(
    argv: Sequence[str] | None, every_command: bool = False
) -> tuple[Parser, dict[str, Runnable]]:
    parser = Parser(
        prog="parcelsearch",
        description="Find every parcel GroupID inside study areas with the fewest Search calls.",
        epilog=exit_codes_text() + "\n\n'parcelsearch COMMAND --help' describes a command.",
        formatter_class=Formatter,
    )
    parser.add_argument("--version", action="version", version=f"parcelsearch {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    table: dict[str, Runnable] = {command.name: command for command in TOOLKIT}
    for command in TOOLKIT:
        command.add_to(commands)
    named = _named(argv)
    for name, entry in plugged().items():
        if every_command or name == named:
            table[name] = entry.load()
            table[name].add_to(commands)
        else:  # listed, not imported (the service: starlette, uvicorn, geopandas; slow)
            commands.add_parser(name, help=LISTED.get(name), add_help=False)
    return parser, table


def _named(argv: Sequence[str] | None) -> str | None:
    """The command ``argv`` names (its first word that is not an option)."""
    args = list(sys.argv[1:] if argv is None else argv)
    return next((a for a in args if not a.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (see :data:`EXIT_CODES`)."""
    try:
        parser, table = _parser_and_commands(argv)
    except ParcelSearchError as exc:  # a plugged command without its extra
        return _fail(exc)
    args = parser.parse_args(argv)
    if getattr(args, "verify_sample", None) is not None and not searching.takes_sample(
        args.refresh
    ):
        parser.error(
            "argument --verify-sample: checks what --refresh changed inferred; add "
            "--refresh changed"
        )
    command = table[args.command]
    if command.handles_signals:  # serve handles its own signals (uvicorn)
        try:
            return command.run(args)
        except ParcelSearchError as exc:  # a bad key name, an unreadable parcels file …
            return _fail(exc)
    with interrupts_as_keyboard_interrupt(), notices.as_messages():
        try:
            return command.run(args)
        except ParcelSearchError as exc:  # SearchInterrupted too: it carries its signal
            return _fail(exc)
        except KeyboardInterrupt as exc:
            signum = int(getattr(exc, "signum", signal.SIGINT))
            return _say("everything fetched so far is cached", 128 + signum)
        except OSError as exc:  # a file that cannot be written, a full disk …
            return _say(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), 1)
        except Exception as exc:  # noqa: BLE001 - a bug: one line, not a traceback
            if os.environ.get("PARCELSEARCH_DEBUG") == "1":
                raise
            return _say(
                f"unexpected {type(exc).__name__}: {exc} (a bug in parcelsearch: please "
                "report it; set PARCELSEARCH_DEBUG=1 to see where it happened)",
                1,
            )


def _fail(exc: ParcelSearchError) -> int:
    """The one place an error becomes an exit status: its class's ``exit_code``."""
    return _say(exc.render("cli"), exc.exit_code)


def _say(message: str, code: int) -> int:
    what = "interrupted" if code >= 128 else "stopped" if code == 3 else "error"
    print(f"parcelsearch: {what}: {terminal_text(message, keep=chr(10))}", file=sys.stderr)
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
