"""The commands that read the cache folder and spend nothing: cache, runs, diff.

Each is declared beside its run; they import the cache, the ledger and pandas only when they
run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from parcelsearch.cli.arguments import add_connection, add_team_store, exit_codes_text
from parcelsearch.cli.printing import plural, print_table
from parcelsearch.cli.registry import Command, Parser
from parcelsearch.settings import options

if TYPE_CHECKING:
    from parcelsearch.comparison import Side

__all__ = ["COMMANDS", "run_cache", "run_runs", "run_diff"]


# -- cache ---------------------------------------------------------------------------------


def _declare_cache(parser: Parser) -> None:
    parser.add_argument(
        "action", choices=["info", "verify", "clear"], help="info, verify or clear (see above)"
    )
    add_connection(parser, cache_only=True)


def run_cache(args: argparse.Namespace) -> int:
    """``parcelsearch cache info|verify|clear``."""
    from parcelsearch.stores.local.cache import ResponseCache
    from parcelsearch.stores.local.ledger import Ledger

    cache = ResponseCache(args.cache_dir)
    if args.action == "info":
        for key, value in cache.info().items():
            print(f"{key}: {value}")
        usage = Ledger.in_folder(cache.directory).usage_by_key()
        for fingerprint, used in usage.items():
            print(
                f"calls by key sha256:{fingerprint}: {used.lifetime} for life, "
                f"{used.month} this month"
            )
        return 0
    if args.action == "verify":
        problems = cache.verify()
        for problem in problems:
            print(problem, file=sys.stderr)
        print("cache OK" if not problems else f"{plural(len(problems), 'problem')} found")
        return 1 if problems else 0
    cache.clear()
    print(f"cache cleared: {cache.directory}")
    return 0


CACHE = Command(
    "cache",
    "inspect, verify or clear the response cache",
    _declare_cache,
    run_cache,
    description="info: files, pages, size, and calls counted per key in the ledger; "
    "verify: read every cached file and report the unreadable ones (exit 1 if "
    "any); clear: delete the cached responses and market lists (the ledger of "
    "calls spent is kept).",
)


# -- run history and diffs -------------------------------------------------------------------


def _declare_runs(parser: Parser) -> None:
    add_connection(parser, cache_only=True)
    parser.add_argument("--json", action="store_true", help="print a JSON list")
    add_team_store(
        parser,
        "list the runs every member recorded there (team mode records "
        "them there), with who ran each",
    )


def run_runs(args: argparse.Namespace) -> int:
    """``parcelsearch runs``: the run history, the latest first (a table or JSON)."""
    from parcelsearch._run.recorded_runs import runs
    from parcelsearch.stores.team.members import resolve_team

    frame = runs(args.cache_dir, team=resolve_team(args.team))
    if args.json:
        print(frame.to_json(orient="records", indent=1))
        return 0
    if frame.empty:
        print("no runs recorded yet (every search records one)")
        return 0
    shown = frame.assign(run_id=frame["run_id"].str[:12], started=frame["started"].str[:19])
    columns = [
        "run_id",
        "started",
        "mode",
        "tolerance",
        "areas",
        "pieces",
        "read",
        "inferred",
        "sampled",
        "changed",
        "calls",
        "complete",
    ]
    print_table(shown[columns + [c for c in ("member",) if c in shown.columns]].set_index("run_id"))
    return 0


def _side(text: str, cache_dir: str | None, team: str | None) -> Side:
    """A side of a diff: a file (a name with an extension, or any that exists), else a run id
    of the run history in the cache folder (or the team store)."""
    from parcelsearch.comparison import Side
    from parcelsearch.stores import open_history
    from parcelsearch.stores.local.cache import CacheFolder

    if Path(text).suffix or Path(text).exists():
        return Side.of_file(text)
    return Side.of_run(
        open_history(CacheFolder(cache_dir or options.cache_dir).ledger_path, team=team), text
    )


RUNS = Command(
    "runs",
    "list the searches recorded in the run history",
    _declare_runs,
    run_runs,
    description="List every search recorded in the run history (kept in the ledger of the "
    "cache folder), the latest first: run id, time, mode, tolerance, areas, "
    "calls, pieces read, inferred or sampled. Spends nothing.",
)


def _declare_diff(parser: Parser) -> None:
    add_connection(parser, cache_only=True)
    parser.add_argument("old", metavar="OLD", help="the earlier search: an output file or a run id")
    parser.add_argument("new", metavar="NEW", help="the later search: an output file or a run id")
    parser.add_argument(
        "--out", metavar="FILE", help="write the rows (area id, group_id, change): .csv or .parquet"
    )
    add_team_store(
        parser,
        "the run ids are those of its run history (team mode records every member's runs there)",
    )


def run_diff(args: argparse.Namespace) -> int:
    """``parcelsearch diff OLD NEW``: the rows added and removed, and a summary per area."""
    from parcelsearch.comparison import compare
    from parcelsearch.stores.team.members import resolve_team

    team = resolve_team(args.team)
    diff = compare(_side(args.old, args.cache_dir, team), _side(args.new, args.cache_dir, team))
    print_table(diff.summary)
    if diff.summary["pieces"].isna().all():
        print(
            "pieces, read, inferred, sampled, changed_pieces: unknown (<NA>), since the new "
            "side is a file of GroupIDs; compare run ids (parcelsearch runs) to count them"
        )
    print(
        f"\n{plural(diff.added, 'GroupID')} added, {plural(diff.removed, 'GroupID')} removed "
        f"({diff.old} → {diff.new})"
    )
    if args.out:
        print(f"rows written to {diff.to_file(args.out)}")
    return 0


DIFF = Command(
    "diff",
    "what changed between two searches of the same areas",
    _declare_diff,
    run_diff,
    description="Compare two searches of the same study areas (two --out files of "
    "'parcelsearch search', or two run ids from 'parcelsearch runs'): one row "
    "per area and GroupID added or removed, and a summary per area. Searches of "
    "different areas or tolerance are refused, saying why. Spends nothing.",
    epilog=exit_codes_text(),
)

#: The commands of this module, in the order ``parcelsearch --help`` lists them.
COMMANDS = (CACHE, RUNS, DIFF)
