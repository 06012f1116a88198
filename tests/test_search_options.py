"""SearchOptions: checked once when made, frozen, the team and user resolved."""

from __future__ import annotations

import dataclasses
import getpass

import pytest

from parcelsearch._run.options import SearchOptions
from parcelsearch.errors import ConfigurationError
from parcelsearch.stores.local.ledger import Quota


def test_options_are_checked_once_and_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PARCELSEARCH_QUOTA", raising=False)
    options = SearchOptions(budget=5, quota=Quota.parse("demo"))
    assert options.quota == Quota(50, "lifetime") and options.team is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.budget = 6  # type: ignore[misc]
    with pytest.raises(ConfigurationError, match="budget must be a whole number >= 0"):
        SearchOptions(budget=-1)
    with pytest.raises(ConfigurationError, match="workers must be a whole number >= 1"):
        SearchOptions(workers=0)
    for share in (0, -0.1, 1.5, float("nan"), True, "0.2"):
        with pytest.raises(
            ConfigurationError,
            match="survey_share must be a share above 0 and at most 1.*survey_share=0.2",
        ):
            SearchOptions.resolve(survey_share=share)
    assert SearchOptions.resolve(survey_share=1).survey_share == 1.0


def test_the_team_and_user_come_from_arguments_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PARCELSEARCH_USER", raising=False)
    monkeypatch.setenv("PARCELSEARCH_TEAM", "postgresql://db.example/team")
    options = SearchOptions.resolve()
    assert options.team == "postgresql://db.example/team"
    assert options.user == getpass.getuser()  # default: the login name
    monkeypatch.setenv("PARCELSEARCH_USER", "dana")
    assert SearchOptions.resolve().user == "dana"
    assert SearchOptions.resolve(user="erin").user == "erin"
    monkeypatch.delenv("PARCELSEARCH_TEAM")
    assert SearchOptions.resolve().team is None


def test_bad_team_and_user_are_refused_naming_them(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="team must be a postgresql:// URL") as caught:
        SearchOptions(team="mysql://u:secret@h/db")
    assert "secret" not in str(caught.value)
    monkeypatch.setenv("PARCELSEARCH_TEAM", "sqlite:///x")
    with pytest.raises(ConfigurationError, match=r"\(from PARCELSEARCH_TEAM\)"):
        SearchOptions.resolve()
    with pytest.raises(ConfigurationError, match="user must be 1-64 letters"):
        SearchOptions(team="postgresql://h/db", user="a b")


def test_the_repr_hides_the_team_store_password() -> None:
    shown = repr(SearchOptions(team="postgresql://alice:s3cret@h/db", user="alice"))
    assert "s3cret" not in shown and "alice:***@h/db" in shown


def test_connectors_is_a_plain_switch() -> None:
    assert SearchOptions().connectors is True
    assert SearchOptions(connectors=False).connectors is False
    with pytest.raises(ConfigurationError, match="connectors must be True or False"):
        SearchOptions(connectors="no")  # type: ignore[arg-type]


def test_the_matching_rule_comes_from_the_argument_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from parcelsearch.errors import InputError

    monkeypatch.delenv("PARCELSEARCH_MATCH", raising=False)
    assert SearchOptions.resolve().match == "unknown"
    monkeypatch.setenv("PARCELSEARCH_MATCH", "representative-point")
    assert SearchOptions.resolve().match == "representative-point"
    assert SearchOptions.resolve(match="intersects").match == "intersects"
    monkeypatch.setenv("PARCELSEARCH_MATCH", "centroid")
    with pytest.raises(
        InputError,
        match=r"must be one of .*got 'centroid' \(from "
        r"\$PARCELSEARCH_MATCH\)",
    ) as caught:
        SearchOptions.resolve()
    assert caught.value.field == "match"


def test_a_planning_option_given_beside_a_plan_must_agree_with_it() -> None:
    """search(plan=p, tolerance=5) is refused naming both values, never silently ignored;
    the same value, or none, is fine."""
    from shapely import box

    from parcelsearch._run.options import agrees_with_plan
    from parcelsearch.planning.plans import plan

    made = plan([box(0, 0, 0.01, 0.01)])
    agrees_with_plan(made, tolerance=None, connectors=True, match="unknown", id_column=None)
    agrees_with_plan(made, tolerance=0, match=None)
    with pytest.raises(
        ConfigurationError,
        match=r"search\(plan=\.\.\.\) was given tolerance=5, "
        r"but the plan was made with tolerance=0\.0",
    ):
        agrees_with_plan(made, tolerance=5)
    with pytest.raises(
        ConfigurationError,
        match="given match='representative-point', but the plan was made with match='unknown'",
    ):
        agrees_with_plan(made, match="representative-point")
    with pytest.raises(ConfigurationError, match="given connectors=False"):
        agrees_with_plan(made, connectors=False)


def test_made_directly_the_declared_types_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """resolve() converts what a user gives (attrs-style, before the frozen value is made);
    made directly, only values of the declared types are taken."""
    import typing

    monkeypatch.delenv("PARCELSEARCH_QUOTA", raising=False)
    made = SearchOptions.resolve(refresh=True, quota="demo", tolerance=5, budget=3)
    assert (made.refresh, made.verify_sample, made.quota) == ("all", 0.0, Quota(50, "lifetime"))
    hints = typing.get_type_hints(SearchOptions)
    for options in (made, SearchOptions(), SearchOptions.resolve(refresh="changed")):
        for name in SearchOptions.names():
            assert isinstance(getattr(options, name), hints[name]), name
    for name, value in (("refresh", True), ("quota", "demo"), ("tolerance", 5), ("match", None)):
        with pytest.raises(ConfigurationError, match=rf"SearchOptions.resolve\({name}="):
            SearchOptions(**{name: value})
    with pytest.raises(
        ConfigurationError, match="verify_sample .* means nothing with refresh='cached'"
    ):
        SearchOptions(verify_sample=0.1)
    with pytest.raises(ConfigurationError, match="unknown search option.*: toleranse"):
        SearchOptions.resolve(toleranse=5)


def test_a_plan_brings_its_planning_options_and_a_disagreeing_one_is_refused() -> None:
    """search(plan=p, tolerance=5) with a plan made at 0 m names both values, before
    anything is sent; the options of a search of a plan are the plan's."""
    from shapely import box

    import parcelsearch
    from parcelsearch.planning.plans import plan

    made = plan([box(0, 0, 0.01, 0.01)], tolerance=20, match="intersects")
    options = SearchOptions.resolve(made, tolerance=20)
    assert (options.tolerance, options.connectors, options.match, options.id_column) == (
        20.0,
        True,
        "intersects",
        made.id_name,
    )
    with pytest.raises(
        ConfigurationError,
        match=r"given tolerance=5, but the plan was made "
        r"with tolerance=20\.0",
    ):
        parcelsearch.search(
            None,
            plan=made,
            tolerance=5,
            progress=False,
            client=parcelsearch.Client(api_key="k" * 32, base_url="https://127.0.0.1:9"),
        )


#: What parcelsearch.search takes besides its options: the areas (or a plan), the client,
#: and the stores it keeps pages and spending in.
_PYTHON_INPUTS = {"areas", "client", "cache", "ledger", "plan"}
#: The flags of `parcelsearch search` that are not options: reading the areas, writing the
#: outputs, and the connection (client and cache folder).
_CLI_INPUTS = {
    "--layer",
    "--crs",
    "--out",
    "--out-tiles",
    "--out-map",
    "--force",
    "--base-url",
    "--ca-bundle",
    "--proxy",
    "--profile",
    "--cache-dir",
    "--response-deadline",
    "--max-request-bytes",
}


def test_the_python_keywords_and_the_cli_flags_are_the_options_declared(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search's options are declared once, in SearchOptions: parcelsearch.search's
    keywords (and its docstring's parameters) and `parcelsearch search`'s flags are exactly
    those (names with - for _), beside what is not an option; their defaults are the
    options' defaults (that the command hands every one on: the test below)."""
    import inspect
    import re

    import parcelsearch
    from parcelsearch.cli import main

    names = set(SearchOptions.names())
    parameters = inspect.signature(parcelsearch.search).parameters
    assert set(parameters) == names | _PYTHON_INPUTS and not names & _PYTHON_INPUTS
    doc = inspect.getdoc(parcelsearch.search) or ""
    listed = doc.split("Parameters\n----------\n")[1].split("\nReturns\n")[0]
    documented = {
        name
        for line in re.findall(r"^([a-z_]+(?:, [a-z_]+)*)$", listed, re.M)
        for name in line.split(", ")
    }
    assert documented == set(parameters)
    monkeypatch.delenv("PARCELSEARCH_TEAM", raising=False)
    assert (
        SearchOptions.resolve(**{n: parameters[n].default for n in names})
        == SearchOptions.resolve()
    )

    flags = SearchOptions.flags()
    assert flags["trust_markets"] == "--trust-markets"  # as --trust-crs (issue 49)
    assert {
        name: flag for name, flag in flags.items() if flag != "--" + name.replace("_", "-")
    } == {"connectors": "--no-connectors", "progress": "--quiet", "confirm": "--yes"}
    with pytest.raises(SystemExit):
        main(["search", "--help"])
    usage = capsys.readouterr().out.split("\n\n")[0]
    assert set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", usage)) == set(flags.values()) | _CLI_INPUTS


#: A flag of `parcelsearch search` for each search option, giving it a value not its default.
_GIVEN_ON_THE_COMMAND_LINE = {
    "tolerance": (["--tolerance", "5"], 5.0),
    "connectors": (["--no-connectors"], False),
    "match": (["--match", "intersects"], "intersects"),
    "id_column": (["--id-column", "parcel"], "parcel"),
    "trust_crs": (["--trust-crs"], True),
    "trust_tolerance": (["--trust-tolerance"], True),
    "trust_markets": (["--trust-markets"], True),
    "budget": (["--budget", "3"], 3),
    "quota": (["--quota", "demo"], Quota(50, "lifetime")),
    "allow_partial": (["--allow-partial"], True),
    "ask_above": (["--ask-above", "7"], 7),
    "survey_share": (["--survey-share", "0.25"], 0.25),
    "confirm": (["--yes"], True),
    "max_age": (["--max-age", "1h"], 3_600.0),
    "refresh": (["--refresh", "changed"], "changed"),
    "verify_sample": (["--refresh", "changed", "--verify-sample", "0.1"], 0.1),
    "active_markets_only": (["--active-markets-only"], True),
    "market_column": (["--market-column", "state"], "state"),
    "progress": (["--quiet"], False),
    "workers": (["--workers", "3"], 3),
    "team": (["--team", "postgresql://db.example/team"], "postgresql://db.example/team"),
    "user": (["--team", "postgresql://db.example/team", "--user", "dana"], "dana"),
}


def test_every_search_option_given_on_the_command_line_reaches_the_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`parcelsearch search` hands parcelsearch.search every option its flags gave (what
    run_search passes on, resolved as the search resolves it), and with no flag the
    options are the search's defaults."""
    from parcelsearch.cli import build_parser
    from parcelsearch.cli.searching import search_options

    for name in ("TEAM", "USER", "QUOTA", "MATCH", "MAX_AGE", "ASK_ABOVE"):
        monkeypatch.delenv(f"PARCELSEARCH_{name}", raising=False)
    assert set(_GIVEN_ON_THE_COMMAND_LINE) == set(SearchOptions.names())
    parser = build_parser()

    def resolved(*flags: str) -> SearchOptions:
        return SearchOptions.resolve(
            **search_options(parser.parse_args(["search", "a.gpkg", "--out", "o.csv", *flags]))
        )

    unflagged = resolved()
    assert callable(unflagged.confirm)  # asked on a terminal unless --yes
    assert {name: getattr(unflagged, name) for name in SearchOptions.names()} == {
        name: getattr(SearchOptions.resolve(), name)
        for name in SearchOptions.names()
        if name != "confirm"
    } | {"confirm": unflagged.confirm}
    for name, (flags, value) in _GIVEN_ON_THE_COMMAND_LINE.items():
        options = resolved(*flags)
        assert getattr(options, name) == value != getattr(unflagged, name), name
        assert SearchOptions.flags()[name] in flags, name


#: A value each command-line check a row may name (its ``cli_type``) refuses.
_REFUSED_BY = {
    "count>=0": "-1",
    "count>=1": "0",
    "fraction": "1.5",
    "share": "0",
    "tolerance": "0.2",
    "age": "soon",
    "quota": "lots",
}
#: How each command is given areas (and an output) so that only the flag under test is wrong.
_COMMAND_LINES = {"plan": ["plan", "a.gpkg"], "search": ["search", "a.gpkg", "--out", "o.csv"]}


def test_each_flag_a_group_declares_is_on_its_commands_with_its_check(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every option parcelsearch.knobs puts in a group of flags ("areas": `plan` and
    `search`; "search": `search`) is a flag of those commands, in the rows' order, storing
    what it is given under its name; a value its declared check (or its choices) refuses
    exits 2 with a message naming the flag, before anything is read."""
    import re

    from _cli import run

    from parcelsearch.cli import build_parser
    from parcelsearch.cli.arguments import TYPES
    from parcelsearch.knobs import DECLARED

    monkeypatch.setenv("COLUMNS", "100")
    grouped = [row for row in DECLARED if row.group is not None]
    assert {row.group for row in grouped} == {"areas", "search"}
    assert {row.name for row in grouped} <= set(SearchOptions.names())
    assert {row.cli_type for row in grouped} - {None} == set(TYPES) == set(_REFUSED_BY)
    parser = build_parser()
    for command, given in _COMMAND_LINES.items():
        rows = [row for row in grouped if command == "search" or row.group == "areas"]
        with pytest.raises(SystemExit):
            parser.parse_args([command, "--help"])
        usage = capsys.readouterr().out.split("\n\n")[0]
        shown = [
            flag
            for flag in re.findall(r"(?<![\w-])--[a-z][a-z-]*", usage)
            if flag in {row.flag for row in rows}
        ]
        assert shown == [row.flag for row in rows], command
        unflagged = parser.parse_args(given)
        for row in rows:
            flags = _GIVEN_ON_THE_COMMAND_LINE[row.name][0]
            assert getattr(parser.parse_args([*given, *flags]), row.name) != getattr(
                unflagged, row.name
            ), (command, row.name)
            refused = None if row.cli_type is None else _REFUSED_BY[row.cli_type]
            if refused is None and row.choices is not None:
                refused = "neither"
            if refused is None:
                continue
            code, _out, err = run([*given, str(row.flag), refused], capsys)
            assert code == 2 and f"argument {row.flag}: " in err, (command, row.name, err)


def test_a_row_of_the_search_group_is_enough_for_its_flag(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new search option's flag takes no line of the command line: its row (group
    "search", its check named by a key) puts it on `parcelsearch search`, after the group's
    other flags, checked as declared."""
    from parcelsearch import knobs
    from parcelsearch.cli import arguments, build_parser

    row = knobs.Declaration(
        "max_pieces",
        "max_pieces={value}",
        "--max-pieces",
        "N",
        help="refuse a plan of more than N pieces",
        group="search",
        cli_type="count>=1",
    )
    monkeypatch.setattr(arguments, "DECLARED", (*knobs.DECLARED, row))
    monkeypatch.setitem(knobs._BY_NAME, "max_pieces", row)
    parser = build_parser()
    given = _COMMAND_LINES["search"]
    assert parser.parse_args([*given, "--max-pieces", "3"]).max_pieces == 3
    assert parser.parse_args(given).max_pieces is None
    with pytest.raises(SystemExit) as exited:
        parser.parse_args([*given, "--max-pieces", "0"])
    assert exited.value.code == 2
    assert "argument --max-pieces: must be a whole number >= 1, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["search", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "[--quiet] [--max-pieces N] [--base-url URL]" in shown
    assert "--max-pieces N refuse a plan of more than N pieces" in shown


def test_max_age_takes_days_and_hours_in_python_and_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 49: max_age='30d' / '12h' / seconds / a timedelta; None reads
    $PARCELSEARCH_MAX_AGE, whose bad value is named with where it came from."""
    from datetime import timedelta

    monkeypatch.delenv("PARCELSEARCH_MAX_AGE", raising=False)
    assert SearchOptions.resolve().max_age is None
    assert SearchOptions.resolve(max_age="30d").max_age == 30 * 86_400
    assert SearchOptions.resolve(max_age="12h").max_age == 12 * 3_600
    assert SearchOptions.resolve(max_age=90).max_age == 90.0
    assert SearchOptions.resolve(max_age=timedelta(minutes=5)).max_age == 300.0
    monkeypatch.setenv("PARCELSEARCH_MAX_AGE", "2w")
    assert SearchOptions.resolve().max_age == 14 * 86_400
    assert SearchOptions.resolve(max_age="1h").max_age == 3_600  # given wins
    monkeypatch.setenv("PARCELSEARCH_MAX_AGE", "a month")
    with pytest.raises(
        ConfigurationError,
        match=r"max_age \(from \$PARCELSEARCH_MAX_AGE\) "
        r"takes an age: .*30d days.*got 'a month'",
    ):
        SearchOptions.resolve()
    with pytest.raises(ConfigurationError, match=r"max_age must be at least 0"):
        SearchOptions.resolve(max_age="-1d")


def test_a_tolerance_is_checked_once_at_the_edge_and_taken_inside_as_it_is() -> None:
    """--tolerance's argparse type makes a checked Tolerance; the rule then returns it as it
    is, and the search's options keep that very value (nothing inside checks it again). A
    checked 0 is still refused where exact pieces are not allowed."""
    from parcelsearch.cli.arguments import tolerance
    from parcelsearch.errors import InputError
    from parcelsearch.planning.tiling.covers import Tolerance, check_tolerance

    checked = tolerance("5")
    assert isinstance(checked, Tolerance) and checked == 5.0 and repr(checked) == "5.0"
    assert check_tolerance(checked) is checked
    assert SearchOptions.resolve(tolerance=checked).tolerance is checked
    assert isinstance(SearchOptions.resolve(tolerance=5).tolerance, Tolerance)
    with pytest.raises(InputError, match="must be at least 0.5 metres"):
        check_tolerance(check_tolerance(0), allow_exact=False)


def test_price_takes_the_pricing_options_as_search_does() -> None:
    """parcelsearch.price's keywords are the options PRICING declares (a subset of the
    search's) beside what is not an option, each documented, each with the search's default
    but ``progress`` (off: the price is returned, not shown)."""
    import inspect
    import re

    import parcelsearch
    from parcelsearch._run.options import PLANNING, PRICING

    names = set(SearchOptions.names())
    assert set(PRICING) <= names and set(PLANNING) <= names
    priced = inspect.signature(parcelsearch.price).parameters
    searched = inspect.signature(parcelsearch.search).parameters
    assert set(priced) == set(PRICING) | {"areas", "client", "plan"}
    assert {n: priced[n].default for n in PRICING if n != "progress"} == {
        n: searched[n].default for n in PRICING if n != "progress"
    }
    assert priced["progress"].default is False is not searched["progress"].default
    doc = inspect.getdoc(parcelsearch.price) or ""
    listed = doc.split("Parameters\n----------\n")[1].split("\nReturns\n")[0]
    documented = {
        name
        for line in re.findall(r"^([a-z_]+(?:, [a-z_]+)*)$", listed, re.M)
        for name in line.split(", ")
    }
    assert documented == set(priced)


def test_search_hands_each_option_on_by_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """parcelsearch.search hands each of its option keywords to SearchOptions under that
    keyword's name (an explicit mapping: a keyword left out or misnamed there fails here)."""
    import parcelsearch

    handed: dict[str, object] = {}

    class Handed(Exception):
        pass

    def resolve(cls: type, plan: object = None, **given: object) -> SearchOptions:
        handed.update(given)
        raise Handed

    monkeypatch.setattr(SearchOptions, "resolve", classmethod(resolve))
    marks = {name: object() for name in SearchOptions.names()}
    with pytest.raises(Handed):
        parcelsearch.search(None, **marks)  # type: ignore[arg-type]
    assert handed.keys() == marks.keys()
    assert all(handed[name] is marks[name] for name in marks)


def test_the_options_load_nothing_heavy() -> None:
    """The options (their names, defaults and checks) load without numpy, pandas, requests
    or the team store: the command line and the knobs read them before any search."""
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, parcelsearch._run.options\n"
            "print([m for m in ('numpy', 'pandas', 'requests', 'shapely',"
            " 'parcelsearch.stores.team.store') if m in sys.modules])",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("name", "extra"), [("survey_share", {}), ("verify_sample", {"refresh": "changed"})]
)
def test_a_number_options_keyword_and_flag_follow_its_one_rule(
    name: str,
    extra: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``survey_share`` and ``verify_sample`` each have one rule (in _run/options): the
    Python keyword and the flag take and refuse the same values, each in its dialect's words
    (the keyword named in Python, the flag on the command line)."""
    from parcelsearch._run import options
    from parcelsearch.cli import build_parser

    monkeypatch.delenv("PARCELSEARCH_TEAM", raising=False)
    rule = {"survey_share": options.SHARE, "verify_sample": options.FRACTION}[name]
    flag = SearchOptions.flags()[name]
    parser = build_parser()
    line = ["search", "a.gpkg", "--out", "o.csv", *[f"--{k}={v}" for k, v in extra.items()]]
    for text in ("0", "1e-9", "0.5", "1", "1.5", "-1", "nan", "inf"):
        try:
            SearchOptions.resolve(**{name: float(text)}, **extra)
            in_python = ""
        except ConfigurationError as error:
            in_python = str(error)
        try:
            parser.parse_args([*line, flag, text])
            on_the_command_line = ""
        except SystemExit:
            on_the_command_line = capsys.readouterr().err
        assert bool(in_python) == bool(on_the_command_line), (text, in_python)
        if in_python:
            assert f"{name} must be {rule.what}" in in_python
            assert f"argument {flag}: must be {rule.what}, got {text}" in on_the_command_line


def test_the_guide_names_every_place_a_search_option_touches_and_its_tests() -> None:
    """docs/guide/development.md "Adding a search option": each file it names exists, and
    each test it names exists (in this file or tests/test_accessor.py)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    guide = (root / "docs" / "guide" / "development.md").read_text(encoding="utf-8")
    section = guide.split("## Adding a search option\n")[1].split("\n## ")[0]
    files = re.findall(r"^\| `([^`]+)` \|", section, re.M)
    assert "src/parcelsearch/_run/options.py" in files and len(files) == 6
    assert all((root / f).is_file() for f in files), files
    named = re.findall(r"`(test_[a-z_]+)`", section)
    assert len(named) == 7
    tests = {
        f: (root / "tests" / f).read_text(encoding="utf-8")
        for f in ("test_search_options.py", "test_accessor.py")
    }
    for name in named:
        assert any(f"def {name}(" in text for text in tests.values()), name
