"""``parcelsearch team``: the team store (PostgreSQL) and who spent what, declared beside its
run; the store's code (psycopg) is imported only when it runs."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from parcelsearch.cli.arguments import (
    CALLS,
    add_team_store,
    exit_codes_text,
    number,
    team_url,
)
from parcelsearch.cli.printing import print_table
from parcelsearch.cli.registry import Command, Parser
from parcelsearch.errors import ConfigurationError, Hint

__all__ = ["COMMANDS", "run_team"]


def _declare_team(parser: Parser) -> None:
    actions = parser.add_subparsers(dest="team_action", required=True, metavar="ACTION")
    init = actions.add_parser("init", help="make or upgrade the team store (idempotent)")
    init.add_argument(
        "url",
        nargs="?",
        type=team_url,
        metavar="URL",
        help="postgresql://… (default: $PARCELSEARCH_TEAM)",
    )
    init.add_argument(
        "--member-role",
        metavar="ROLE",
        help="an existing PostgreSQL role to give what a member needs and no "
        "more: searching, but not changing the quota, pace or budgets, "
        "nor rewriting the ledger (one role a person: members sharing a "
        "role cannot be told apart)",
    )
    quota = actions.add_parser(
        "quota",
        help="store the key's quota ($PARCELSEARCH_API_KEY's); "
        "a member's own --quota can only lower it",
    )
    quota.add_argument(
        "--calls",
        required=True,
        type=CALLS,
        metavar="N",
        help="calls the key may make per period (0 to 2147483647)",
    )
    quota.add_argument(
        "--period",
        choices=["month", "lifetime"],
        default="month",
        help="when the quota resets (default month: calendar month, UTC)",
    )
    pace = actions.add_parser(
        "pace",
        help="store the key's pace ($PARCELSEARCH_API_KEY's): every member's calls are "
        "spaced by it, and no member's own settings widen it",
    )
    pace.add_argument(
        "--rate",
        type=number(float, low=0.001, high=1000),
        metavar="R",
        help="calls per second the key allows (0.001 to 1000; "
        "required unless --clear-pause is given)",
    )
    pace.add_argument(
        "--margin",
        type=number(float, low=0, high=0.5),
        default=0.05,
        metavar="M",
        help="share of the rate the pacer keeps in reserve (0 to 0.5, default 0.05)",
    )
    pace.add_argument(
        "--lease",
        type=number(float, low=0.5, high=3600),
        default=6.0,
        metavar="SECONDS",
        help="a page lease's length: a member killed while "
        "fetching holds a page no longer (0.5 to 3600, default 6; a live member "
        "renews it)",
    )
    pace.add_argument(
        "--clear-pause",
        action="store_true",
        help="end the key's pause and free its pacer's next turn now (what a "
        "429 or a member left there; 'team usage' shows who paused, until "
        "when); only the store's owner can",
    )
    budget = actions.add_parser("budget", help="store a member's budget of calls")
    budget.add_argument(
        "--calls",
        required=True,
        type=CALLS,
        metavar="N",
        help="calls the member may make per period, all keys together (0 to 2147483647)",
    )
    budget.add_argument(
        "--period",
        choices=["month", "lifetime"],
        default="month",
        help="when the budget resets (default month)",
    )
    usage = actions.add_parser("usage", help="calls per key and per member, pages shared")
    usage.add_argument("--json", action="store_true", help="print JSON records")
    for action in (quota, pace, budget, usage):
        add_team_store(action)
    budget.add_argument("--user", required=True, metavar="NAME", help="the member")


def run_team(args: argparse.Namespace) -> int:
    """``parcelsearch team init|quota|pace|budget|usage``: the team store and who spent what."""
    from parcelsearch.stores.team.members import resolve_team

    url = resolve_team(getattr(args, "url", None) or args.team)
    if url is None:
        raise ConfigurationError("no team store given", hints=[Hint("team", None, "pass {knob}")])
    ACTIONS[args.team_action](url, args)
    return 0


def _init(url: str, args: argparse.Namespace) -> None:
    from parcelsearch.stores import team

    before, after = team.init_team(url, args.member_role)
    print(
        f"team store at version {after}" + (" (already)" if before == after else f" (was {before})")
    )
    if args.member_role:
        print(
            f"role {args.member_role} may search, not change the policy or the ledger; "
            "give it to one person only (the store tells members apart by their role)"
        )


def _key() -> str:
    """The fingerprint of $PARCELSEARCH_API_KEY's key (the key itself is never shown)."""
    from parcelsearch._fetch.config import resolve_key
    from parcelsearch.client import key_fingerprint

    return key_fingerprint(resolve_key(None))


def _quota(url: str, args: argparse.Namespace) -> None:
    from parcelsearch.stores import team

    fingerprint = _key()
    stored = team.set_quota(url, fingerprint, args.calls, args.period)
    print(f"key sha256:{fingerprint}: quota {stored.describe()}")


def _pace(url: str, args: argparse.Namespace) -> None:
    from parcelsearch.stores import team

    if args.rate is None and not args.clear_pause:
        raise ConfigurationError(
            "team pace needs --rate R (calls per second, 0.001 to 1000) or --clear-pause"
        )
    fingerprint = _key()
    if args.clear_pause:
        team.clear_pause(url, fingerprint)
        print(f"key sha256:{fingerprint}: pause cleared, the next call goes at once")
        if args.rate is None:
            return
    pace = team.set_pace(url, fingerprint, team.Pace(args.rate, args.margin, args.lease))
    print(
        f"key sha256:{fingerprint}: {pace.rate:g} calls a second (a call every "
        f"{pace.interval * 1000:.0f} ms, margin {pace.margin:g}), leases of "
        f"{pace.lease_seconds:g} s"
    )


def _budget(url: str, args: argparse.Namespace) -> None:
    from parcelsearch.stores import team
    from parcelsearch.stores.team.members import resolve_user

    stored = team.set_budget(url, args.user, args.calls, args.period)
    print(
        f"{resolve_user(args.user)}: budget {stored.limit} calls "
        + ("a calendar month (UTC)" if stored.period == "month" else "for life")
    )


def _usage(url: str, args: argparse.Namespace) -> None:
    from parcelsearch.stores import team

    frame = team.team_usage(url)
    if args.json:
        print(frame.astype(object).where(frame.notna(), None).to_json(orient="records"))
        return
    print_table(frame)
    print(
        "\na key's row counts the calls its members made in team mode through this "
        "store; calls made with the same key outside team mode (a search without "
        "--team, another tool) are not seen here: the vendor's portal counts them all"
    )


#: ``team ACTION`` → what runs it, given the team store's URL.
ACTIONS: dict[str, Callable[[str, argparse.Namespace], None]] = {
    "init": _init,
    "quota": _quota,
    "pace": _pace,
    "budget": _budget,
    "usage": _usage,
}


TEAM = Command(
    "team",
    "share one key's calls, pace and pages with a team (PostgreSQL)",
    _declare_team,
    run_team,
    description="Team mode: one ledger, pacer and page store for a key, in the team's "
    "PostgreSQL database. 'team init URL' makes (or upgrades) the store; "
    "searches join it with --team URL (or $PARCELSEARCH_TEAM).",
    epilog=exit_codes_text(),
)

#: The commands of this module, in the order ``parcelsearch --help`` lists them.
COMMANDS = (TEAM,)
