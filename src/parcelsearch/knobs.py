"""Every option a user sets, declared once: its spellings (Python, flag, environment variable),
its ``--help`` line and its line in :data:`parcelsearch.settings.options`.

The rest is derived from these rows: the knobs an error's hints name
(:data:`parcelsearch.errors.KNOBS`), the options of :data:`parcelsearch.settings.options`
(their variables and doc lines; the settings add each one's default and parser), the flags
the commands add (:func:`parcelsearch.cli.arguments.add_option`; a group's in one loop,
:func:`~parcelsearch.cli.arguments.add_options`, with each flag's argparse check, action and
default as declared here, and :meth:`parcelsearch._run.options.SearchOptions.flags`) and the
docs' options table. A search option's type, default and check are its field of
:class:`parcelsearch._run.options.SearchOptions`. This module imports nothing of the package,
so the exception tree, at the bottom of the house, can read it, and ``--help`` stays light.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "Declaration",
    "DECLARED",
    "declared",
    "variable",
    "DEFAULT_ASK_ABOVE",
    "DEFAULT_SURVEY_SHARE",
]

#: Calls a search spends past its survey without asking (a fifth of a 500-call month):
#: ``ask_above``'s default (:data:`parcelsearch.settings.DEFAULT_ASK_ABOVE`), stated by its help.
DEFAULT_ASK_ABOVE: Final = 100
#: The survey's cost at most, a share of a low bound of the search's cost (a tenth):
#: ``survey_share``'s default, stated by its help.
DEFAULT_SURVEY_SHARE: Final = 0.1


@dataclass(frozen=True)
class Declaration:
    """One option, as the user gives it.

    ``python`` is how Python code sets it, a template with ``{value}`` (e.g.
    ``budget={value}``); ``flag`` and ``metavar`` its command-line flag (``None``: none);
    ``env`` its environment variable; ``help`` its ``--help`` line (``{env}`` stands for the
    variable); ``doc`` its line in :data:`parcelsearch.settings.options` (``None``: not one of
    those, e.g. a search's own). ``cli`` and the ``*_bare`` templates (no value suggested) are
    derived from the flag and metavar unless given (``""``: there is no such form).

    The rest is what argparse needs besides, for the command line only: ``group`` the
    commands' group of flags that adds it (``"areas"``: ``plan`` and ``search``, ``"search"``:
    ``search``; ``None``: a command adds it on its own), ``cli_type`` its check while parsing,
    named by a key of :data:`parcelsearch.cli.arguments.TYPES` (``"count>=0"``, ``"quota"`` …;
    this module imports neither the command line nor the run), ``action`` (``"store_true"``
    …), ``cli_default`` (``None``: argparse's), ``choices``, ``nargs`` and ``const``.
    """

    name: str
    python: str
    flag: str | None = None
    metavar: str | None = None
    env: str | None = None
    help: str | None = None
    doc: str | None = None
    python_bare: str | None = None
    cli: str | None = None
    cli_bare: str | None = None
    group: str | None = None
    cli_type: str | None = None
    action: str | None = None
    cli_default: object = None
    choices: tuple[str, ...] | None = None
    nargs: str | None = None
    const: str | None = None

    @property
    def cli_template(self) -> str | None:
        """The flag with ``{value}`` (``--budget {value}``), or the switch alone."""
        if self.cli is not None:
            return self.cli or None
        if self.flag is None:
            return None
        return f"{self.flag} {{value}}" if self.metavar else self.flag

    @property
    def cli_bare_template(self) -> str | None:
        """The flag with its metavar (``--budget N``), when it takes a value."""
        if self.cli_bare is not None:
            return self.cli_bare or None
        return f"{self.flag} {self.metavar}" if self.flag and self.metavar else None

    def help_text(self, line: str | None = None, **fill: str) -> str | None:
        """The ``--help`` line (or ``line``, a command's own), its ``{env}`` (and any other
        field, from ``fill``) filled in."""
        line = self.help if line is None else line
        return None if line is None else line.format(env=self.env, **fill)


_P = "PARCELSEARCH_"

#: The options: the settings with no flag of a group first, then a search's own, each group's
#: in the order its flags are added (the settings' order is
#: :data:`parcelsearch.settings.options`' own, not these rows').
DECLARED: Final = (
    Declaration(
        "base_url",
        "Client(base_url='https://...')",
        "--base-url",
        "URL",
        _P + "BASE_URL",
        help="https:// root of the services (default: ${env})",
        doc="root URL of the Search and Markets services (https:// only)",
        cli="--base-url https://...",
        cli_bare="",
    ),
    Declaration(
        "ca_bundle",
        "Client(ca_bundle={value!r})",
        "--ca-bundle",
        "FILE",
        _P + "CA_BUNDLE",
        help="PEM file of CAs to trust, e.g. a local serve's ca.pem (default: ${env}, else "
        "the system's)",
        doc="PEM file of certificate authorities to trust (TLS is always verified)",
        python_bare="Client(ca_bundle=...)",
    ),
    Declaration(
        "proxy",
        "Client(proxy={value!r})",
        "--proxy",
        "URL",
        _P + "PROXY",
        help="the proxy to reach the vendor through, http://[user:password@]host:port "
        "(default: ${env}, else HTTPS_PROXY / ALL_PROXY; NO_PROXY honoured)",
        doc="proxy to reach the vendor through (default: HTTPS_PROXY / ALL_PROXY; NO_PROXY "
        "honoured; its password is never shown)",
        python_bare="Client(proxy=...)",
        cli="--proxy http://host:port",
        cli_bare="",
    ),
    Declaration(
        "rate",
        "Client(rate={value})",
        env=_P + "RATE",
        doc="calls per second the key allows (spike arrest)",
        python_bare="Client(rate=...)",
    ),
    Declaration(
        "response_deadline",
        "Client(response_deadline={value})",
        "--response-deadline",
        "SECONDS",
        _P + "RESPONSE_DEADLINE",
        help="seconds one response may take as a whole, however slowly its bytes come; then "
        "it is abandoned and retried (default: ${env}, else 60)",
        doc="seconds one response may take as a whole, however slowly its bytes come (then "
        "abandoned and retried like a timeout)",
        python_bare="Client(response_deadline=...)",
    ),
    Declaration(
        "group_id_max_chars",
        "settings.options.group_id_max_chars = {value}",
        env=_P + "GROUP_ID_MAX_CHARS",
        doc="the longest GroupID accepted (the vendor's ids are opaque strings; longer ones "
        "fail their area)",
    ),
    Declaration(
        "page_size",
        "settings.options.page_size = {value}",
        env=_P + "PAGE_SIZE",
        doc="GroupIDs the vendor serves a page (default: learnt from its first answer, else "
        "100); when set, answers are checked against it and nothing is learnt",
    ),
    Declaration(
        "result_window",
        "settings.options.result_window = {value}",
        env=_P + "RESULT_WINDOW",
        doc="pages the vendor serves a search at most (default: learnt from its refusal of a "
        "deeper page, else no limit); pieces with more are split",
    ),
    Declaration(
        "max_request_bytes",
        "Client(max_request_bytes={value})",
        "--max-request-bytes",
        "BYTES",
        _P + "MAX_REQUEST_BYTES",
        help="the longest request line the vendor's gateway takes; pieces are planned to it "
        "(default: ${env}, else learnt from its refusal, else 7168)",
        doc="the longest request line the vendor's gateway takes, in bytes (default: learnt "
        "from a refusal, else 7168); searches plan pieces to it",
        python_bare="Client(max_request_bytes=...)",
    ),
    Declaration(
        "cache_dir",
        "Client(cache_dir={value!r})",
        "--cache-dir",
        "DIR",
        _P + "CACHE_DIR",
        help="response cache, market list and quota ledger folder (default: ${env}, else "
        "~/.cache/parcelsearch; here: {here})",
        doc="folder of the response cache, market list and quota ledger",
        python_bare="Client(cache_dir=...)",
    ),
    Declaration(
        "service_dir",
        "settings.options.service_dir = {value!r}",
        env=_P + "SERVICE_DIR",
        doc="folder of the reference service's key store and certificates",
    ),
    Declaration(
        "profile",
        "Client(profile={value!r})",
        "--profile",
        "NAME",
        _P + "PROFILE",
        help="the profile saved with 'parcelsearch login' whose key, base URL and CA to use "
        "(default: ${env}, else 'default' when saved and $PARCELSEARCH_API_KEY is "
        "unset)",
        doc="the saved profile (parcelsearch login) whose key, base URL and CA to use "
        "(default: 'default', when saved)",
        python_bare="Client(profile=...)",
    ),
    Declaration(
        "config_dir",
        "settings.options.config_dir = {value!r}",
        env=_P + "CONFIG_DIR",
        doc="folder of the saved profiles (never their keys, which stay in the OS keyring, "
        "or a file readable by you only when there is none)",
    ),
    # -- a search's own (SearchOptions; some are settings too) ----------------------------------
    #    A group's flags are added in one loop (cli.arguments.add_options), in the order of
    #    these rows: their order in --help.
    #    group "areas": `plan` and `search` (cli.arguments.add_areas)
    Declaration(
        "id_column",
        "id_column={value!r}",
        "--id-column",
        "COLUMN",
        help="column identifying the areas (default: the column area_id if there is one, else "
        "the row numbers 0, 1, … with a warning)",
        python_bare="id_column=",
        group="areas",
    ),
    Declaration(
        "tolerance",
        "tolerance={value}",
        "--tolerance",
        "METRES",
        help="metres pieces may reach outside the areas to save calls; 0 (default) is exact, "
        "else at least 0.5",
        python_bare="tolerance=",
        group="areas",
        cli_type="tolerance",
        cli_default=0.0,
    ),
    Declaration(
        "trust_crs",
        "trust_crs=True",
        "--trust-crs",
        help="take the areas' CRS as declared even where the coordinates look wrong for it "
        "(degrees in a projected CRS, areas outside the region it is meant for, areas "
        "over 50 km out at sea), which is otherwise refused for free",
        group="areas",
        action="store_true",
    ),
    Declaration(
        "trust_tolerance",
        "trust_tolerance=True",
        "--trust-tolerance",
        help="take a --tolerance over half the widest area's width, or over 5000 m, which is "
        "otherwise refused for free",
        group="areas",
        action="store_true",
    ),
    Declaration(
        "connectors",
        "connectors={value}",
        "--no-connectors",
        cli="",
        help="never let parts of an area (islands) share a piece through a connector, a "
        "sliver along a link that may cross land outside the area: more calls, but no "
        "piece reaches beyond the tolerance anywhere",
        group="areas",
        action="store_false",
    ),
    Declaration(
        "match",
        "match={value!r}",
        "--match",
        "RULE",
        _P + "MATCH",
        help="how the vendor matches parcels to a polygon: representative-point, intersects "
        "or unknown (default: ${env}, else the rule 'parcelsearch doctor --areas' learnt "
        "for the base URL, else unknown); unless representative-point, no piece reaches "
        "beyond the tolerance anywhere (exact: no connectors)",
        doc="how the vendor matches parcels: representative-point, intersects or unknown",
        python_bare="match=",
        group="areas",
        choices=("representative-point", "intersects", "unknown"),
    ),
    #    group "search": `search`
    Declaration(
        "budget",
        "budget={value}",
        "--budget",
        "N",
        help="spend at most N calls in this run (refused before spending if the plan needs "
        "more, see --allow-partial)",
        python_bare="budget=",
        group="search",
        cli_type="count>=0",
    ),
    Declaration(
        "allow_partial",
        "allow_partial=True",
        "--allow-partial",
        help="with --budget below the plan's need: spend the budget and resume later",
        group="search",
        action="store_true",
    ),
    Declaration(
        "ask_above",
        "ask_above={value}",
        "--ask-above",
        "N",
        _P + "ASK_ABOVE",
        help="the decision point: after the survey, when the price leaves more than N calls "
        "to spend, ask on a terminal (y/N) and stop otherwise, nothing lost (default: "
        f"${{env}}, else {DEFAULT_ASK_ABOVE}); a --budget covering the price's interval goes on",
        doc="calls a search spends past its price without asking (--yes or confirm=True to go on)",
        python_bare="ask_above=",
        group="search",
        cli_type="count>=0",
    ),
    Declaration(
        "survey_share",
        "survey_share={value}",
        "--survey-share",
        "SHARE",
        help="the survey before the decision point spends at most this share of a low "
        "bound of the search's cost: the least it can cost for sure and, after the "
        "first round, a quarter of the way from it to the interval's low end "
        f"(default {DEFAULT_SURVEY_SHARE:g}, a tenth; at most 1); a price line "
        "that says the interval is wide names the share that narrows it to about "
        "±20%% (on a terminal, answer s at the decision point to survey that much "
        "more): the survey's pages are the search's own, cached and used",
        doc="the survey's cost at most, a share of a low bound of the search's cost "
        f"(default {DEFAULT_SURVEY_SHARE:g})",
        python_bare="survey_share=",
        group="search",
        cli_type="share",
    ),
    Declaration(
        "confirm",
        "confirm=True",
        "--yes",
        help="go past the decision point without asking (for scripts)",
        group="search",
        action="store_true",
    ),
    Declaration(
        "quota",
        "quota={value!r}",
        "--quota",
        "QUOTA",
        _P + "QUOTA",
        help="the key's quota if known: demo, production, 500/month, 50/lifetime (default: "
        "${env}); runs that cannot fit are refused",
        doc="the key's quota: demo, production, N/month or N/lifetime",
        python_bare="quota=",
        group="search",
        cli_type="quota",
    ),
    Declaration(
        "max_age",
        "max_age={value!r}",
        "--max-age",
        "AGE",
        _P + "MAX_AGE",
        help="reuse cached pages at most this old: 30d (days), 12h (hours), 90m (minutes) or "
        "seconds (default: ${env}, else any age)",
        doc="reuse cached pages at most this old (30d, 12h, seconds; default: any)",
        python_bare="max_age=",
        group="search",
        cli_type="age",
    ),
    Declaration(
        "refresh",
        "refresh={value!r}",
        "--refresh",
        "all|changed",
        help="'all' (or --refresh alone): ignore cached pages, fetch everything again; "
        "'changed': one call per piece (page 1) finds the pieces that changed since the "
        "last run, only those fetch their other pages, the rest reuse their cached pages "
        "(unchanged by inference)",
        python_bare="refresh=True",
        cli_bare="--refresh",
        group="search",
        nargs="?",
        const="all",
        choices=("all", "changed"),
    ),
    Declaration(
        "verify_sample",
        "verify_sample={value}",
        "--verify-sample",
        "FRACTION",
        help="with --refresh changed: also re-read the other pages of this fraction of the "
        "pieces inferred unchanged (default 0: no sample, so a refresh with no change "
        "spends exactly one call per piece; e.g. 0.05, priced before spending) and "
        "estimate, with a 95%% interval, the changed pieces inference missed",
        python_bare="verify_sample=",
        group="search",
        cli_type="fraction",
    ),
    Declaration(
        "trust_markets",
        "trust_markets=True",
        "--trust-markets",
        help="search areas more than 50 km from every US state with an active market, which "
        "is otherwise refused for free when the market list is in the cache",
        group="search",
        action="store_true",
    ),
    Declaration(
        "active_markets_only",
        "active_markets_only=True",
        "--active-markets-only",
        help="skip areas whose market is not active (spends one call on the market list, then "
        "reuses it for a day; see --market-column)",
        group="search",
        action="store_true",
    ),
    Declaration(
        "market_column",
        "market_column={value!r}",
        "--market-column",
        "COLUMN",
        help="column naming each area's market (default: market)",
        python_bare="market_column=",
        group="search",
        cli_default="market",
    ),
    Declaration(
        "workers",
        "workers={value}",
        "--workers",
        "N",
        help="requests in flight at once, all paced by one rate limiter (default %(default)s)",
        python_bare="workers=",
        group="search",
        cli_type="count>=1",
    ),
    Declaration(
        "progress",
        "progress={value}",
        "--quiet",
        cli="",
        help="no progress bar and no price lines (the price before spending, each whole on its "
        "own line on stderr)",
        group="search",
        action="store_false",
    ),
    #    the team store, added per command (cli.arguments.add_team_member)
    Declaration(
        "team",
        "team={value!r}",
        "--team",
        "URL",
        _P + "TEAM",
        help="the team store (postgresql://…, made by 'parcelsearch team init'; default: "
        "${env}): {what}",
        python_bare="team=",
    ),
    Declaration(
        "user",
        "user={value!r}",
        "--user",
        "NAME",
        _P + "USER",
        help="who runs this in the team (default: ${env}, else the login name)",
        python_bare="user=",
    ),
    # -- a secret, not an option: only its spellings ------------------------------------------
    Declaration("api_key", "Client(api_key=...)", env=_P + "API_KEY"),
)

_BY_NAME: Final = {row.name: row for row in DECLARED}


def declared(name: str) -> Declaration:
    """The declaration of the option ``name``.

    Raises
    ------
    KeyError
        No option of that name.
    """
    return _BY_NAME[name]


def variable(name: str) -> str:
    """The environment variable of the option ``name``, as declared.

    Raises
    ------
    KeyError
        No option of that name, or it has no variable.
    """
    env = declared(name).env
    if env is None:
        raise KeyError(f"{name} has no environment variable")
    return env
