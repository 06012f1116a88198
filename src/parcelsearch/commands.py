"""The analyst's commands (plan, search, markets, cache, demo), run from parsed arguments.

:mod:`parcelsearch.cli` parses and validates the options and maps errors to exit codes;
this module does the work, writing results with :mod:`parcelsearch.outputs`. Messages name
flags and environment variables, never Python arguments (errors render in the ``"cli"``
dialect).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

import geopandas as gpd
import pandas as pd

from parcelsearch import demo, market_list, outputs
from parcelsearch._fetch.client import Client
from parcelsearch._run import search_run as pipeline
from parcelsearch._run.options import resolve_team, resolve_user
from parcelsearch._run.recorded_runs import open_history, runs
from parcelsearch.comparison import Side, compare
from parcelsearch.errors import (
    ConfigurationError,
    Hint,
    InputError,
    OutputKeptError,
    ParcelSearchError,
    TransportError,
)
from parcelsearch.planning import plans as planning
from parcelsearch.planning import reuse as plan_reuse
from parcelsearch.planning.vector_files import read_vector
from parcelsearch.result import SearchResult
from parcelsearch.settings import options
from parcelsearch.stores.local.cache import CacheFolder, ResponseCache
from parcelsearch.stores.local.ledger import Ledger, Quota

__all__ = ["run_plan", "run_search", "run_markets", "run_cache", "run_demo", "run_team",
           "run_runs", "run_diff", "run_login", "run_logout", "run_profiles", "plural",
           "check_listening"]

#: Seconds to wait for the service to accept a connection before saying nothing listens.
CONNECT_PROBE_SECONDS = 1.5


def plural(n: int, word: str, many: str | None = None) -> str:
    """``"1 piece"``, ``"2 pieces"``, ``"1 call"``, ``"0 calls"``."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def read_areas(args: argparse.Namespace) -> gpd.GeoDataFrame:
    """The study areas named on the command line (``AREAS``, ``--layer``, ``--crs``)."""
    areas = read_vector(args.areas, layer=args.layer, crs=args.crs, what="study areas file")
    if not areas.index.equals(pd.RangeIndex(len(areas))):  # a GeoParquet's stored index:
        areas = areas.reset_index()  # a column like any other, under the CLI's id rule
    if areas.crs is None:  # said here in the file's words, not the data frame's
        raise InputError(
            f"study areas file {args.areas!r} has no CRS, so its coordinates cannot be placed "
            "on Earth", field="crs",
            hints=[Hint("crs", "EPSG:4326", "declare it with {knob} (or the CRS the data is "
                                            "in)")])
    return areas


def _print_table(frame: pd.DataFrame, where: str = "") -> None:
    print(outputs.terminal_table(frame, noun="area", where=where))


def _client(args: argparse.Namespace) -> Client:
    return Client(base_url=args.base_url, ca_bundle=args.ca_bundle, cache_dir=args.cache_dir,
                  profile=args.profile)


def check_listening(base_url: str, timeout: float = CONNECT_PROBE_SECONDS) -> None:
    """Fail fast, spending nothing, when no service accepts connections at ``base_url``.

    One TCP connection is opened and closed (no request is sent, no call counted), so a
    service that is not running is reported at once, not after the client's retries.

    Raises
    ------
    TransportError
        Nothing listens there (or the host is unknown); the message names the URL and how
        to start the reference service.
    """
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    port = parts.port or 443
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        reason = "connection refused" if isinstance(exc, ConnectionRefusedError) else (
            "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc)))
        raise TransportError(
            f"nothing is listening at {base_url} ({reason})",
            url=base_url,
            hints=[Hint("serve", phrase="start the reference service with {knob}"),
                   Hint("base_url", phrase="or point at a running service with {knob}")],
        ) from None


# -- plan ----------------------------------------------------------------------------------


def run_plan(args: argparse.Namespace) -> int:
    """``parcelsearch plan``: print the pieces and minimum calls; write them if asked.

    The pieces are those a search would send: under the matching rule ``--match`` names,
    else the one ``doctor --areas`` learnt for the service
    (:func:`parcelsearch.rule_probe.rule_for`); for each area an earlier search kept pieces
    for in any CRS, those (:mod:`parcelsearch.planning.reuse`, read from the cache folder, never
    written), else new ones."""
    match, learnt_for = args.match, None
    if match is None and options.source("match") == "default":  # as a search would plan
        from parcelsearch.rule_probe import rule_for

        match, learnt_for = rule_for(args.base_url, args.profile, options.cache_dir)
    made = plan_reuse.reuse(
        planning.plan(read_areas(args), args.tolerance, id_column=args.id_column,
                      connectors=args.connectors, match=match),
        options.cache_dir, keep=False)
    _print_table(made.summary(), "every piece in --out-tiles FILE")
    if match is not None and learnt_for is not None:
        print(f"\nplanned under the matching rule learnt for {learnt_for}: {match}")
    print(f"\n{plural(len(made.pieces), 'piece')}, at least {plural(made.min_calls, 'call')}")
    if args.max_calls is not None:
        found = planning.suggest_tolerance(made, args.max_calls)
        print(f"no tolerance up to {planning.TOLERANCE_LADDER[-1]:g} m fits "
              f"{plural(args.max_calls, 'call')}" if found is None else
              f"the smallest tolerance whose plan fits {plural(args.max_calls, 'call')}: "
              f"--tolerance {found:g}")
    if made.match == "unknown" and made.point_savings:
        print(f"connectors could save up to {plural(made.point_savings, 'call')} if the vendor "
              "matches by a point (--match representative-point)")
    if args.out_tiles is not None:
        path = outputs.write_tiles(made.tiles, args.out_tiles)
        print(f"pieces written to {path}")
    if args.out_map is not None:
        print(f"map written to {outputs.write_map(made, args.out_map)}")
    return 0


# -- search --------------------------------------------------------------------------------


def run_search(args: argparse.Namespace) -> int:
    """``parcelsearch search``: every GroupID inside the areas, written to ``--out``.

    Whenever the run stops with a partial result (budget, quota, a failure, an interrupt),
    that result is written to ``--out`` (marked incomplete) before the error is re-raised.
    """
    areas = read_areas(args)
    client = _client(args)
    quota = Quota.parse(args.quota)  # None: $PARCELSEARCH_QUOTA, checked before connecting
    check_listening(client.base_url)
    try:
        result = pipeline.search(
            areas,
            client=client,
            tolerance=args.tolerance,
            connectors=args.connectors,
            match=args.match,
            id_column=args.id_column,
            budget=args.budget,
            quota=quota,
            allow_partial=args.allow_partial,
            max_age=args.max_age,
            refresh=args.refresh,
            verify_sample=args.verify_sample,
            active_markets_only=args.active_markets_only,
            market_column=args.market_column,
            progress=not args.quiet,
            workers=args.workers,
            team=args.team,
            user=args.user,
        )
    except ParcelSearchError as exc:
        if isinstance(exc.result, SearchResult):
            _write(exc.result, args, partial=True)
        raise
    _write(result, args, partial=False)
    return 0


def _write(result: SearchResult, args: argparse.Namespace, *, partial: bool) -> None:
    out, tiles_out, kept = _destinations(result, args)
    _print_table(result.summary(), f"every area in {out}")
    path = outputs.write_ids(result, out, force=True)
    if tiles_out is not None:
        outputs.write_tiles(result.tiles, tiles_out, outputs.run_metadata(result), force=True)
    if args.out_map is not None:
        map_out = Path(args.out_map)
        if kept is not None:  # beside the kept map too, named as the run's other files
            map_out = outputs.aside_path(map_out, outputs.run_metadata(result))
        print(f"map written to {outputs.write_map(result, map_out)}",
              file=sys.stderr if partial else sys.stdout)
    state = "PARTIAL result (complete: false)" if partial else "complete"
    print(
        f"\n{plural(len(result.group_ids), 'unique GroupID')} in "
        f"{plural(len(result.ids), '(area, group) row')}; {plural(result.calls, 'call')} made, "
        f"{plural(result.cached_pages, 'page')} from cache; {state}, written to {path}",
        file=sys.stderr if partial else sys.stdout,
    )
    if kept is not None:
        print(f"parcelsearch: note: {kept.args[0]}; this run was written beside it, to {path} "
              "(--force replaces it)", file=sys.stderr)
    if result.calls == 0 and result.cached_pages and not partial:
        print("every page came from the cache: no call was made, so the key was not used "
              "(nor checked)")
    if len(result.skipped):
        shown = ", ".join(map(str, result.skipped.index[:outputs.TERMINAL_ROWS]))
        more = len(result.skipped) - outputs.TERMINAL_ROWS
        print(f"{plural(len(result.skipped), 'area')} skipped (market not active): {shown}"
              + (f" … {more:,} more (listed under 'skipped' in {args.out})" if more > 0
                 else ""))
    if result.refresh == "changed":
        print(refresh_line(result))
    if result.run_id:
        print(f"run {result.run_id[:12]} recorded (parcelsearch runs; parcelsearch diff OLD "
              f"{result.run_id[:12]})")


def _destinations(result: SearchResult, args: argparse.Namespace
                  ) -> tuple[Path, Path | None, OutputKeptError | None]:
    """Where ``--out`` and ``--out-tiles`` go: as named, or beside them
    (:func:`parcelsearch.outputs.aside_path`) when they hold a more complete result than this
    run's, which are then kept as they were (unless ``--force``); and why, if so."""
    meta = outputs.run_metadata(result)
    named = [Path(args.out)] + ([Path(args.out_tiles)] if args.out_tiles is not None else [])
    kept = None
    if not args.force:
        for path in named:
            try:
                outputs.check_replace(path, meta)
            except OutputKeptError as exc:
                kept = kept or exc
    if kept is not None:
        named = [outputs.aside_path(path, meta) for path in named]
    return named[0], (named[1] if len(named) > 1 else None), kept


def refresh_line(result: SearchResult) -> str:
    """What a ``--refresh changed`` run read, inferred and sampled, and what it may miss."""
    status = result.tiles["status"].value_counts()
    changed = int(result.tiles["changed"].fillna(False).sum())
    verification = result.verification
    low, high = verification.get("missed_interval", [0, 0])
    sampled = verification.get("sampled", 0)
    line = (f"refresh: {plural(changed, 'piece')} changed; {int(status.get('read', 0)):,} "
            f"re-read, {int(status.get('inferred', 0)):,} unchanged by inference, "
            f"{int(status.get('sampled', 0)):,} sampled ({verification.get('found_changed', 0)} "
            f"of them changed)")
    if sampled:
        line += (f"; changed pieces missed: about {verification['missed_estimate']:g} "
                 f"(95% interval {low:g}-{high:g})")
    else:
        line += f"; changed pieces missed: unknown (no sample; at most {high:g})"
    if verification.get("sample_dropped"):
        line += f"; sample dropped: {verification['sample_dropped']}"
    return line


# -- markets, cache, demo --------------------------------------------------------------------


def run_markets(args: argparse.Namespace) -> int:
    """``parcelsearch markets``: the active markets (one call, then cached a day)."""
    client = _client(args)
    check_listening(client.base_url)
    names = market_list.markets(client)
    print(json.dumps(names) if args.json else "\n".join(names))
    return 0


def run_doctor(args: argparse.Namespace) -> int:
    """``parcelsearch doctor``: the vendor checked in at most 3 calls (4 with ``--areas``),
    priced first."""
    from parcelsearch.service_check import check_service

    areas = None
    if args.areas is not None:  # read and checked before anything is priced or spent
        areas = read_areas(argparse.Namespace(areas=args.areas, layer=args.layer,
                                              crs=args.crs)).geometry
    client = _client(args)
    priced = check_service(client, dry_run=True, areas=areas)
    price = priced.price
    if args.dry_run:
        print(priced)
        return 0
    if not args.yes and not _confirmed(f"doctor spends {plural(price, 'call')} of the key's "
                                       f"quota at {client.base_url}. Spend them? [y/N] "):
        raise ConfigurationError(f"not confirmed: doctor spends {plural(price, 'call')}; "
                                 "nothing was spent. Add --yes to spend them without asking, "
                                 "or --dry-run to spend none")
    check_listening(client.base_url)
    report = check_service(client, areas=areas)
    print(report)
    if areas is None and any(f.check == "matching rule" and f.verdict == "unknown"
                             for f in report.findings):
        print("the vendor's matching rule is unknown: parcelsearch doctor --areas FILE learns "
              "it with one more call")
    return 0 if report.ok else 1


def _confirmed(question: str) -> bool:
    """The user's yes on a terminal; never on a pipe (a script must say --yes)."""
    if not sys.stdin.isatty():
        return False
    return input(question).strip().lower() in ("y", "yes")


def run_cache(args: argparse.Namespace) -> int:
    """``parcelsearch cache info|verify|clear``."""
    cache = ResponseCache(args.cache_dir)
    if args.action == "info":
        for key, value in cache.info().items():
            print(f"{key}: {value}")
        usage = Ledger.in_folder(cache.directory).usage_by_key()
        for fingerprint, used in usage.items():
            print(f"calls by key sha256:{fingerprint}: {used.lifetime} for life, "
                  f"{used.month} this month")
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


def run_demo(args: argparse.Namespace) -> int:
    """``parcelsearch demo``: the whole product on the demo data."""
    return demo.run_demo(args.out, progress=not args.quiet)


# -- run history and diffs -------------------------------------------------------------------


def run_runs(args: argparse.Namespace) -> int:
    """``parcelsearch runs``: the run history, the latest first (a table or JSON)."""
    frame = runs(args.cache_dir, team=resolve_team(args.team))
    if args.json:
        print(frame.to_json(orient="records", indent=1))
        return 0
    if frame.empty:
        print("no runs recorded yet (every search records one)")
        return 0
    shown = frame.assign(run_id=frame["run_id"].str[:12], started=frame["started"].str[:19])
    columns = ["run_id", "started", "mode", "tolerance", "areas", "pieces", "read", "inferred",
               "sampled", "changed", "calls", "complete"]
    _print_table(shown[columns + [c for c in ("member",) if c in shown.columns]]
                 .set_index("run_id"))
    return 0


def _side(text: str, cache_dir: str | None, team: str | None) -> Side:
    """A side of a diff: a file (a name with an extension, or any that exists), else a run id
    of the run history in the cache folder (or the team store)."""
    if Path(text).suffix or Path(text).exists():
        return Side.of_file(text)
    return Side.of_run(open_history(CacheFolder(cache_dir or options.cache_dir).ledger_path,
                                    team=team), text)


def run_diff(args: argparse.Namespace) -> int:
    """``parcelsearch diff OLD NEW``: the rows added and removed, and a summary per area."""
    team = resolve_team(args.team)
    diff = compare(_side(args.old, args.cache_dir, team), _side(args.new, args.cache_dir, team))
    _print_table(diff.summary)
    if diff.summary["pieces"].isna().all():
        print("pieces, read, inferred, sampled, changed_pieces: unknown (<NA>), since the new "
              "side is a file of GroupIDs; compare run ids (parcelsearch runs) to count them")
    print(f"\n{plural(diff.added, 'GroupID')} added, {plural(diff.removed, 'GroupID')} removed "
          f"({diff.old} → {diff.new})")
    if args.out:
        print(f"rows written to {diff.to_file(args.out)}")
    return 0


# -- profiles --------------------------------------------------------------------------------


def _read_key() -> str:
    """The key typed at the terminal (no echo) or piped on standard input (one line)."""
    import getpass

    if sys.stdin is not None and sys.stdin.isatty():
        return getpass.getpass("API key (not shown): ")
    return (sys.stdin.readline() if sys.stdin is not None else "").strip()


def run_login(args: argparse.Namespace) -> int:
    """``parcelsearch login``: save a profile; the key in the OS keyring (else a 0600 file)."""
    from parcelsearch import profiles
    from parcelsearch._fetch.client import _resolve_key

    profiles.check_name(args.profile)
    key = _resolve_key(_read_key() or None)  # the client's rule: no blanks, ASCII
    saved = profiles.save(args.profile, key, base_url=args.base_url,
                          ca_bundle=args.ca_bundle)
    print(f"profile {saved.name!r} saved: key sha256:{saved.fingerprint}… kept in "
          f"{saved.kept_in}" + (f", base URL {saved.base_url}" if saved.base_url else ""))
    return 0


def run_logout(args: argparse.Namespace) -> int:
    """``parcelsearch logout``: forget a profile and its key."""
    from parcelsearch import profiles

    if not profiles.remove(profiles.check_name(args.profile)):
        raise ConfigurationError(f"no saved profile {args.profile!r}",
                                 hints=[Hint("login", args.profile, "save one with {knob}")])
    print(f"profile {args.profile!r} removed, its key with it")
    return 0


def run_profiles(args: argparse.Namespace) -> int:
    """``parcelsearch profiles``: the saved profiles, keys shown by fingerprint only."""
    from parcelsearch import profiles

    frame = pd.DataFrame([{"profile": p.name, "base_url": p.base_url, "ca_bundle": p.ca_bundle,
                           "key": f"sha256:{p.fingerprint}", "kept_in": p.kept_in}
                          for p in profiles.profiles()],
                         columns=["profile", "base_url", "ca_bundle", "key", "kept_in"])
    if args.json:
        print(frame.to_json(orient="records"))
    elif frame.empty:
        print("no profiles saved yet (parcelsearch login)")
    else:
        _print_table(frame.set_index("profile"))
    return 0


# -- team ------------------------------------------------------------------------------------


def run_team(args: argparse.Namespace) -> int:
    """``parcelsearch team init|quota|pace|budget|usage``: the team store and who spent what."""
    from parcelsearch._fetch.client import _resolve_key, key_fingerprint
    from parcelsearch.stores import team

    url = resolve_team(getattr(args, "url", None) or args.team)
    if url is None:
        raise ConfigurationError("no team store given",
                                 hints=[Hint("team", None, "pass {knob}")])
    if args.team_action == "init":
        before, after = team.init_team(url, args.member_role)
        print(f"team store at version {after}" + (" (already)" if before == after else
                                                  f" (was {before})"))
        if args.member_role:
            print(f"role {args.member_role} may search, not change the policy or the ledger")
    elif args.team_action == "quota":
        fingerprint = key_fingerprint(_resolve_key(None))
        stored = team.set_quota(url, fingerprint, args.calls, args.period)
        print(f"key sha256:{fingerprint}: quota {stored.describe()}")
    elif args.team_action == "pace":
        fingerprint = key_fingerprint(_resolve_key(None))
        pace = team.set_pace(url, fingerprint, team.Pace(args.rate, args.margin, args.lease))
        print(f"key sha256:{fingerprint}: {pace.rate:g} calls a second (a call every "
              f"{pace.interval * 1000:.0f} ms, margin {pace.margin:g}), leases of "
              f"{pace.lease_seconds:g} s")
    elif args.team_action == "budget":
        stored = team.set_budget(url, args.user, args.calls, args.period)
        print(f"{resolve_user(args.user)}: budget {stored.limit} calls "
              + ("a calendar month (UTC)" if stored.period == "month" else "for life"))
    else:
        frame = team.team_usage(url)
        if args.json:
            print(frame.astype(object).where(frame.notna(), None).to_json(orient="records"))
        else:
            _print_table(frame)
            print("\na key's row counts the calls its members made in team mode through this "
                  "store; calls made with the same key outside team mode (a search without "
                  "--team, another tool) are not seen here: the vendor's portal counts them all")
    return 0
