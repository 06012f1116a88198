"""``.. parcelsearch-cli::``: every command's ``--help``, walked from ``parcelsearch.cli``'s parser.

:func:`parcelsearch.cli.build_parser` loads the reference service's commands (``serve``,
``keys``, ``parcels``, ``portal``, plugged in through the entry point group
``parcelsearch.commands``) only when the command line runs one of them; asked for
``every_command``, it gives the parser with every command. Each command and sub-command gets
a section (an anchor ``cli-<command>-<sub-command>``) holding exactly what its ``--help``
prints, so the page cannot drift from the command.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from typing import Any

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

from parcelsearch import settings
from parcelsearch.cli import build_parser
from parcelsearch.cli.registry import Parser, walk

#: Width of the help text (argparse reads $COLUMNS): fixed, so every build prints the same.
WIDTH = "80"


def full_parser() -> Parser:
    """The parser with the analyst's and the service's commands."""
    return build_parser([], every_command=True)


def commands(
    parser: Parser, path: tuple[str, ...] = ("parcelsearch",)
) -> Iterator[tuple[tuple[str, ...], str, Parser]]:
    """(command path, one-line summary, parser) of the parser and every sub-command, in order
    (a command's summary: its line in its parent's ``--help``, else its description)."""
    for sub_path, summary, sub_parser in walk(parser, path):
        yield sub_path, summary or sub_parser.description or "", sub_parser


def help_text(parser: argparse.ArgumentParser) -> str:
    """What ``--help`` prints, at a fixed width, with this machine's folders spelled as on Linux.

    The cache and service folders depend on ``$XDG_CACHE_HOME``/``$XDG_DATA_HOME`` and the
    platform; the page shows their usual Linux defaults rather than the build machine's.
    """
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        text = parser.format_help()
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous
    for folder, spelled in ((settings.options.cache_dir, "~/.cache/parcelsearch"),
                            (settings.options.service_dir, "~/.local/share/parcelsearch/service")):
        text = text.replace(str(folder), spelled)
    return text


class CommandLine(SphinxDirective):
    """One section per command (no arguments, no content)."""

    def run(self) -> list[nodes.Node]:
        sections: list[nodes.Node] = []
        for path, summary, parser in commands(full_parser()):
            if len(path) == 1:
                continue  # the top level: the page's own introduction shows it
            section = nodes.section(ids=["cli-" + "-".join(path[1:])])
            section += nodes.title(text=" ".join(path))
            if summary:
                section += nodes.paragraph(text=summary[0].upper() + summary[1:] + ".")
            section += nodes.literal_block(text=help_text(parser), language="text")
            sections.append(section)
        return sections


class TopLevelHelp(SphinxDirective):
    """``parcelsearch --help`` as a literal block."""

    def run(self) -> list[nodes.Node]:
        return [nodes.literal_block(text=help_text(full_parser()), language="text")]


def setup(app: Any) -> dict[str, Any]:
    """Register the directives."""
    app.add_directive("parcelsearch-cli", CommandLine)
    app.add_directive("parcelsearch-cli-top", TopLevelHelp)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
