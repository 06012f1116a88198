"""Each option declared once (parcelsearch.knobs): what the settings read, what the hints of
errors say and what the commands take all follow the declaration."""

from __future__ import annotations

import argparse

import pytest

from parcelsearch import settings
from parcelsearch.cli.registry import Parser, walk
from parcelsearch.errors import Hint
from parcelsearch.knobs import DECLARED, declared


def test_each_setting_reads_the_variable_declared_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in settings.options:
        env = declared(name).env
        assert env is not None, name
        monkeypatch.setenv(env, "7")
        assert settings.options.source(name) == f"${env}", name
        monkeypatch.delenv(env)
        assert settings.options.source(name) == "default", name


def test_a_hint_spells_an_option_as_declared_in_both_dialects() -> None:
    for row in DECLARED:
        python = Hint(row.name, 3).render("python")
        cli = Hint(row.name, 3).render("cli")
        assert python.startswith("set " + row.python.format(value=3)), row.name
        if row.env is not None:
            assert python.endswith(f"the environment variable {row.env}"), row.name
            assert cli.endswith(f"the environment variable {row.env}"), row.name
        if (
            row.flag is not None
            and row.metavar is not None
            and row.cli is None
            and row.cli_bare is None
        ):
            assert cli.startswith(f"set {row.flag} 3"), row.name
            assert Hint(row.name).render("cli").startswith(f"set {row.flag} {row.metavar}")
    assert Hint("yes").render("cli") == "set --yes"  # confirm's flag


def _actions(parser: Parser) -> list[argparse.Action]:
    """Every action of ``parser`` and of its sub-commands, at any depth (read through the
    registry's public :class:`~parcelsearch.cli.registry.Parser` attributes)."""
    return [action for _path, _summary, each in walk(parser, ()) for action in each.arguments]


def test_every_command_takes_an_option_by_its_declared_flag() -> None:
    """An option a command takes (stored under its name) has the declared flag; `parcelsearch
    search --budget` its declared metavar and help line."""
    from parcelsearch.cli import build_parser

    names = {row.name for row in DECLARED}
    taken = [
        action
        for action in _actions(build_parser())
        if action.dest in names and action.option_strings
    ]
    assert {action.dest for action in taken} >= {
        "tolerance",
        "budget",
        "confirm",
        "cache_dir",
        "team",
        "user",
        "progress",
        "match",
    }
    for action in taken:  # (`team pace --rate` is the team's pace: the key's has no flag)
        flag = declared(action.dest).flag
        assert flag is None or flag in action.option_strings, action.dest
    search = {
        action.dest: action
        for action in _actions(build_parser())
        if action.dest in names
        and action.option_strings
        and action.help
        and "--allow-partial" in action.help
    }
    assert search["budget"].help == declared("budget").help_text()
    assert search["budget"].metavar == declared("budget").metavar
