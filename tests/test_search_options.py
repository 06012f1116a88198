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


def test_the_team_and_user_come_from_arguments_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PARCELSEARCH_USER", raising=False)
    monkeypatch.setenv("PARCELSEARCH_TEAM", "postgresql://db.example/team")
    options = SearchOptions()
    assert options.team == "postgresql://db.example/team"
    assert options.user == getpass.getuser()  # default: the login name
    monkeypatch.setenv("PARCELSEARCH_USER", "dana")
    assert SearchOptions().user == "dana"
    assert SearchOptions(user="erin").user == "erin"
    monkeypatch.delenv("PARCELSEARCH_TEAM")
    assert SearchOptions().team is None


def test_bad_team_and_user_are_refused_naming_them(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match="team must be a postgresql:// URL") as caught:
        SearchOptions(team="mysql://u:secret@h/db")
    assert "secret" not in str(caught.value)
    monkeypatch.setenv("PARCELSEARCH_TEAM", "sqlite:///x")
    with pytest.raises(ConfigurationError, match=r"\(from PARCELSEARCH_TEAM\)"):
        SearchOptions()
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
    assert SearchOptions().match == "unknown"
    monkeypatch.setenv("PARCELSEARCH_MATCH", "representative-point")
    assert SearchOptions().match == "representative-point"
    assert SearchOptions(match="intersects").match == "intersects"
    monkeypatch.setenv("PARCELSEARCH_MATCH", "centroid")
    with pytest.raises(InputError, match=r"must be one of .*got 'centroid' \(from "
                                         r"\$PARCELSEARCH_MATCH\)") as caught:
        SearchOptions()
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
    with pytest.raises(ConfigurationError, match=r"search\(plan=\.\.\.\) was given tolerance=5, "
                                                 r"but the plan was made with tolerance=0\.0"):
        agrees_with_plan(made, tolerance=5)
    with pytest.raises(ConfigurationError, match="given match='representative-point', but the "
                                                 "plan was made with match='unknown'"):
        agrees_with_plan(made, match="representative-point")
    with pytest.raises(ConfigurationError, match="given connectors=False"):
        agrees_with_plan(made, connectors=False)
