"""The commands of ``parcelsearch``: what one is, and those other packages plug in.

The toolkit's commands are :class:`Command` records, each declared in the module that runs it.
Another package adds commands through the entry point group :data:`GROUP` (the reference
service: ``serve``, ``keys``, ``parcels``, ``portal``, in ``pyproject.toml``); a plugged
command is imported only when the command line names one, so ``parcelsearch --help`` and the
toolkit's commands never import the service.

The parsers are :class:`Parser`\\ s: argparse keeps what was declared on a parser in private
attributes only, so :class:`Parser` keeps it in public ones (:attr:`Parser.arguments`,
:attr:`Parser.subcommands`) for the help checks and the reference page.
"""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Protocol

from parcelsearch import settings
from parcelsearch.cli.arguments import Formatter

__all__ = ["GROUP", "LISTED", "Parser", "Subcommands", "Runnable", "Command", "plugged", "walk"]

#: The entry point group through which a package adds commands to ``parcelsearch``: each entry
#: point is named after its command and loads a :class:`Runnable`.
GROUP = "parcelsearch.commands"

#: The line ``parcelsearch --help`` shows for a plugged command, which it lists without
#: importing the package that plugs it (a test checks the service plugs exactly these).
LISTED = {
    "serve": "run the reference Search/Markets service over HTTPS (demo data by default)",
    "keys": "create, list or revoke the reference service's API keys",
    "parcels": "make a synthetic fabric for your areas ('parcels synth') or load parcels "
    "into PostgreSQL/PostGIS ('parcels load') for the reference service",
    "portal": "manage accounts of the reference service's developer portal",
}


class Parser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` that keeps what was declared on it.

    Attributes
    ----------
    arguments
        Every argument added, in order (``-h`` first).
    subcommands
        The sub-commands added with :meth:`add_subparsers`, or None.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.arguments: list[argparse.Action] = []  # before argparse adds -h
        self.subcommands: Subcommands | None = None
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """:meth:`argparse.ArgumentParser.add_argument`, kept in :attr:`arguments`."""
        action = super().add_argument(*args, **kwargs)
        self.arguments.append(action)
        return action

    def add_subparsers(self, **kwargs: Any) -> Subcommands:  # type: ignore[override]
        """:meth:`argparse.ArgumentParser.add_subparsers`, kept in :attr:`subcommands`."""
        self.subcommands = Subcommands(super().add_subparsers(**kwargs))
        return self.subcommands


class Subcommands:
    """The sub-commands of a :class:`Parser`: each one's parser and one-line summary."""

    def __init__(self, action: Any) -> None:
        self._action = action
        #: Name → the sub-command's parser.
        self.parsers: dict[str, Parser] = {}
        #: Name → the line its parent's ``--help`` shows (None: not listed).
        self.summaries: dict[str, str | None] = {}

    def add_parser(self, name: str, **kwargs: Any) -> Parser:
        """Add the sub-command ``name`` (the keywords of argparse's ``add_parser``)."""
        parser: Parser = self._action.add_parser(name, **kwargs)
        self.parsers[name] = parser
        self.summaries[name] = kwargs.get("help")
        return parser


def walk(
    parser: Parser, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], str | None, Parser]]:
    """(command path, summary, parser) of ``parser`` (summary None) and every sub-command below
    it, depth first in the order they were added."""
    yield path, None, parser
    if parser.subcommands is not None:
        for name, sub in parser.subcommands.parsers.items():
            for sub_path, summary, sub_parser in walk(sub, (*path, name)):
                yield (
                    sub_path,
                    (parser.subcommands.summaries[name] if sub_path == (*path, name) else summary),
                    sub_parser,
                )


class Runnable(Protocol):
    """What a plugged command's entry point loads."""

    #: True: the command runs as it is, handling its own signals and warnings (``serve`` runs
    #: uvicorn); only its errors are mapped to exit codes.
    handles_signals: bool

    def add_to(self, commands: Subcommands) -> None:
        """Add the command's parser (and its options) to ``commands``."""

    def run(self, args: argparse.Namespace) -> int:
        """Run the command parsed into ``args``; its exit status."""


@dataclass(frozen=True)
class Command:
    """One of the toolkit's commands, declared in the module that runs it.

    Attributes
    ----------
    name, summary
        The command and its line in ``parcelsearch --help``.
    declare
        Adds the command's options to its parser.
    run
        Runs the command parsed: its exit status.
    description, epilog
        Its ``--help``'s text above and below the options (an epilog keeps its layout;
        ``{cache}`` in it is the cache folder when the parser is built).
    """

    name: str
    summary: str
    declare: Callable[[Parser], None]
    run: Callable[[argparse.Namespace], int]
    description: str | None = None
    epilog: str | None = None
    handles_signals = False

    def add_to(self, commands: Subcommands) -> None:
        """Add the command's parser and options to ``commands``."""
        self.declare(
            commands.add_parser(
                self.name,
                help=self.summary,
                description=self.description,
                epilog=self.epilog and self.epilog.format(cache=settings.default_cache_dir()),
                formatter_class=Formatter if self.epilog else argparse.HelpFormatter,
            )
        )


def plugged() -> dict[str, EntryPoint]:
    """Command name → its entry point in :data:`GROUP`: as installed, over those declared in
    the source tree's ``pyproject.toml`` when the package runs from a checkout (whose installed
    metadata may predate them)."""
    found = _declared_in_tree()
    found.update((entry.name, entry) for entry in entry_points(group=GROUP))
    return found


def _declared_in_tree() -> dict[str, EntryPoint]:
    pyproject = Path(__file__).parents[3] / "pyproject.toml"  # src/parcelsearch/cli/ → root
    if not pyproject.is_file():
        return {}
    project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    if project.get("name") != "parcelsearch":
        return {}
    declared = project.get("entry-points", {}).get(GROUP, {})
    return {name: EntryPoint(name, value, GROUP) for name, value in declared.items()}
