"""``parcelsearch doctor`` and :func:`check_service`: what the vendor at a base URL does
where its specification is silent, in as many calls as it has probes and at most one more
(redirects and retries), priced before any is spent.

Two requests are sent (the *probes*), a third when the areas to be searched are given, and
every check reads what it needs from their answers:

- ``GET <base>/v1/markets``: TLS, the key, the base URL's path (a gateway's 404 when the
  vendor's stage prefix such as ``/prod`` is missing), compression, the markets;
- ``GET <base>/v1/search?…&page=0`` of a tiny ring on Null Island: the number of the first
  page (a vendor counting from 1 refuses page 0) and how the gateway words a refusal;
- with ``areas``, page 1 of a sliver across them (:func:`parcelsearch.rule_probe.sliver`):
  how the vendor matches parcels to a polygon (:func:`parcelsearch.rule_probe.rule_of`).

What is learned (page base, compression, error format, matching rule) is kept in the
vendor's profile in the cache folder (:mod:`parcelsearch._fetch.vendor_profile`), so later
searches adapt without probing. The checks are a list (:data:`CHECKS`): another is one
more function reading the probes' answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from parcelsearch import _wire, settings
from parcelsearch._fetch.answers import count_field
from parcelsearch._fetch.judging import Probe
from parcelsearch._fetch.page import Page
from parcelsearch.client import Client
from parcelsearch.errors import ParcelSearchError
from parcelsearch.market_list import key_spend
from parcelsearch.rule_probe import rule_of, sliver
from parcelsearch.stores.spending import CallSpend

__all__ = ["check_service", "ServiceReport", "Finding", "CHECKS", "PROBES", "RULE_PROBE"]

Verdict = Literal["ok", "warning", "failed", "unknown", "not run"]

#: A ring that matches nothing anywhere a vendor sells parcels (Null Island, ~10 m).
PROBE_RING = _wire.ring_json([(0.0, 0.0), (0.0001, 0.0), (0.0001, 0.0001), (0.0, 0.0)])
#: The requests the checks read, in the order sent: name → request target.
PROBES: dict[str, str] = {
    "markets": settings.MARKETS_PATH,
    "page 0": _wire.search_target(settings.SEARCH_PATH, PROBE_RING, 0),
}
#: The probe sent after :data:`PROBES` when the areas are given: page 1 of a sliver across them.
RULE_PROBE = "matching rule"
#: Calls a check may spend beyond its price (its probes), redirects and retries included.
SLACK = 1
#: Calls a check without areas may spend at most (with areas, one more).
MAX_CALLS = len(PROBES) + SLACK


@dataclass(frozen=True)
class Finding:
    """One check's outcome: its name, a verdict and a sentence saying what was seen."""

    check: str
    verdict: Verdict
    text: str


@dataclass
class ServiceReport:
    """What :func:`check_service` found (or, with ``dry_run``, would check and at what price).

    Attributes
    ----------
    base_url
        The base URL checked.
    price
        Calls the check costs (the probes: 2, or 3 with the areas).
    calls
        Calls spent (0 with ``dry_run``).
    findings
        One :class:`Finding` per check, in :data:`CHECKS` order.
    learned
        What was kept in the vendor's profile (e.g. ``{"page_base": 1}``).
    """

    base_url: str
    price: int
    calls: int = 0
    findings: list[Finding] = field(default_factory=list)
    learned: dict[str, object] = field(default_factory=dict)

    @property
    def cap(self) -> int:
        """Calls the check may spend at most: its price and :data:`SLACK`."""
        return self.price + SLACK

    @property
    def ok(self) -> bool:
        """No check failed."""
        return all(f.verdict != "failed" for f in self.findings)

    def __str__(self) -> str:
        width = max((len(f.check) for f in self.findings), default=0)
        spent = f"{self.calls} call{'' if self.calls == 1 else 's'} spent"
        lines = [
            f"vendor at {self.base_url}: {spent} (price {self.price}, at most "
            f"{self.cap} with redirects and retries)"
        ]
        lines += [f"  {f.check:<{width}}  {f.verdict:<8} {f.text}" for f in self.findings]
        if self.learned:
            kept = ", ".join(f"{k}={v}" for k, v in self.learned.items())
            lines.append(f"  remembered for this base URL: {kept}")
        return "\n".join(lines)


Answers = dict[str, "Probe | Page | ParcelSearchError"]
Check = Callable[[Answers, Client], Finding]


def _first(answers: Answers) -> Probe | ParcelSearchError:
    first = answers["markets"]
    assert not isinstance(first, Page)  # the market list is a probe, never a search page
    return first


def check_tls(answers: Answers, client: Client) -> Finding:
    first = _first(answers)
    if isinstance(first, ParcelSearchError) and "TLS" in str(first):
        return Finding("TLS", "failed", str(first))
    if isinstance(first, ParcelSearchError) and getattr(first, "status", None) is None:
        return Finding("TLS", "unknown", f"no answer: {first}")
    return Finding("TLS", "ok", f"certificate verified against {client.trust}")


def check_network(answers: Answers, client: Client) -> Finding:
    """Which proxy a run would go through and which certificates it trusts (free: read
    from the settings, nothing asked)."""
    return Finding("network", "ok", f"proxy: {client.proxy}; trust: {client.trust}")


def check_key(answers: Answers, client: Client) -> Finding:
    first = _first(answers)
    refusal = first.refusal if isinstance(first, Probe) else None
    if refusal is not None and refusal.kind in ("key", "quota"):
        what = "refused" if refusal.kind == "key" else "has no calls left"
        return Finding(
            "key",
            "failed",
            f"the key {what}: HTTP {first.status}: "  # type: ignore[union-attr]
            f"{refusal.text}",
        )
    if isinstance(first, Probe) and first.status == 200:
        return Finding("key", "ok", f"accepted (sha256:{client.fingerprint}…)")
    return Finding("key", "unknown", "no answer that says")


def check_stage_path(answers: Answers, client: Client) -> Finding:
    first = _first(answers)
    if isinstance(first, Probe) and first.status == 404:
        words = first.refusal.text if first.refusal is not None else ""
        return Finding(
            "stage path",
            "failed",
            f"HTTP 404 ({words}): the base URL may lack "
            "the vendor's stage prefix, e.g. https://host/prod",
        )
    if isinstance(first, Probe) and first.status == 200:
        return Finding(
            "stage path", "ok", f"{settings.MARKETS_PATH} answers under {client.base_url}"
        )
    return Finding("stage path", "unknown", "no answer that says")


def check_compression(answers: Answers, client: Client) -> Finding:
    first = _first(answers)
    if not isinstance(first, Probe):
        return Finding("compression", "unknown", "no answer")
    return Finding("compression", "ok", f"Content-Encoding {first.encoding} (read)")


def check_paging_base(answers: Answers, client: Client) -> Finding:
    probe = answers.get("page 0")
    if not isinstance(probe, Probe):
        return Finding("paging base", "unknown", "not asked")
    if (
        probe.status == 200
        and probe.payload is not None
        and count_field(probe.payload, "page") == 0
    ):
        return Finding("paging base", "ok", "pages are numbered from 0 (page=0 answered)")
    if probe.status == 400 or (
        probe.payload is not None and count_field(probe.payload, "page") == 1
    ):
        return Finding("paging base", "ok", "pages are numbered from 1 (page=0 refused)")
    return Finding("paging base", "unknown", f"page=0 answered HTTP {probe.status}")


def check_error_format(answers: Answers, client: Client) -> Finding:
    probe = answers.get("page 0")
    refusal = probe.refusal if isinstance(probe, Probe) else None
    if refusal is None:
        return Finding("error format", "unknown", "no refusal seen")
    verdict: Verdict = "ok" if refusal.shape in ("envelope", "fault") else "warning"
    return Finding("error format", verdict, f"{refusal.shape}: HTTP {probe.status}: {refusal.text}")  # type: ignore[union-attr]


def check_markets(answers: Answers, client: Client) -> Finding:
    first = _first(answers)
    if not isinstance(first, Probe) or first.payload is None:
        return Finding("markets", "unknown", "no market list")
    names = first.payload.get("data")
    if not isinstance(names, list):
        return Finding("markets", "failed", "the market list has no 'data' list")
    shown = ", ".join(map(str, names[:3])) + (" …" if len(names) > 3 else "")
    return Finding("markets", "ok", f"{len(names)} active ({shown})")


#: How to learn the rule, in the words of either dialect (``--areas`` / ``areas=``).
LEARN_RULE = "give the areas you mean to search to learn it with one more call"


def check_matching_rule(answers: Answers, client: Client) -> Finding:
    answer = answers.get(RULE_PROBE)
    if answer is None:
        kept = client.vendor.match_rule
        if kept is not None:
            return Finding(
                "matching rule", "ok", f"{kept}, learnt earlier for this base URL (not asked again)"
            )
        return Finding(
            "matching rule",
            "unknown",
            "not asked, so searches plan as if parcels "
            "may be matched by their footprints (no connector in exact mode); " + LEARN_RULE,
        )
    if not isinstance(answer, Page):
        return Finding("matching rule", "unknown", f"the sliver was not answered: {answer}")
    rows = answer.rows
    rule = rule_of(rows)
    if rule == "representative-point":
        return Finding(
            "matching rule",
            "ok",
            "representative-point: a sliver one grid step "
            "tall across the areas matched no parcel, so parcels are matched by a "
            "point; searches here use connectors (fewer calls)",
        )
    if rule == "intersects":
        return Finding(
            "matching rule",
            "ok",
            f"intersects: a sliver one grid step tall "
            f"across the areas matched {rows} parcels, so parcels are matched by "
            f"their footprints; searches here use no connector in exact mode, and "
            f"in tolerance mode only those within the tolerance",
        )
    return Finding(
        "matching rule",
        "unknown",
        f"a sliver across the areas matched {rows} "
        f"parcel{'' if rows == 1 else 's'}: too few to tell",
    )


def check_retirement(answers: Answers, client: Client) -> Finding:
    """Whether the vendor answered ``410 Gone`` (a retired endpoint), quoting it."""
    for name in PROBES:
        probe = answers.get(name)
        if isinstance(probe, Probe) and probe.status == 410:
            words = probe.refusal.text if probe.refusal is not None else ""
            when = f"Sunset: {probe.sunset}" if probe.sunset else "no Sunset date"
            return Finding(
                "retirement",
                "failed",
                f"HTTP 410 Gone for {name} ({when}): "
                f"{words}; a search would stop at its first answer",
            )
    if any(isinstance(answers.get(name), Probe) for name in PROBES):
        return Finding("retirement", "ok", "no endpoint answered 410 Gone")
    return Finding("retirement", "unknown", "no answer")


def check_group_ids(answers: Answers, client: Client) -> Finding:
    """What a GroupID must be (the spec says only "a string"); the sliver's ids, if read."""
    rule = (
        f"opaque strings, at most {settings.group_id_max_chars()} characters "
        f"({settings.ENV_GROUP_ID_MAX_CHARS}), no control characters or markup (checked on "
        "every page)"
    )
    page = answers.get(RULE_PROBE)
    if isinstance(page, Page) and page.data:
        longest = max(len(gid) for gid in page.data)
        return Finding(
            "GroupIDs", "ok", f"{rule}; {len(page.data)} read, the longest {longest} characters"
        )
    return Finding("GroupIDs", "ok", rule)


def check_page_size(answers: Answers, client: Client) -> Finding:
    """GroupIDs a page holds, and where that comes from (set, learnt or assumed)."""
    source = {
        "set": f"set: {settings.ENV_PAGE_SIZE}",
        "learnt": "learnt from an answer, kept in the vendor profile",
        "assumed": "assumed until an answer says otherwise",
    }[client.page_size_source]
    return Finding(
        "page size",
        "ok",
        f"{client.page_size} GroupIDs a page ({source}; {settings.ENV_PAGE_SIZE} "
        "sets it; answers are checked against it)",
    )


def check_request_line(answers: Answers, client: Client) -> Finding:
    """The longest request line searches plan to, and where that comes from."""
    source = {
        "set": "set: --max-request-bytes or " + settings.ENV_MAX_REQUEST_BYTES,
        "learnt": "learnt from the gateway's refusal, kept in the vendor profile",
        "assumed": "assumed until the gateway refuses a line",
    }[client.max_request_bytes_source]
    return Finding(
        "request line",
        "ok",
        f"{client.max_request_bytes:,} bytes at most ({source}; "
        f"--max-request-bytes or {settings.ENV_MAX_REQUEST_BYTES} sets it; searches "
        "plan pieces to it)",
    )


def check_result_window(answers: Answers, client: Client) -> Finding:
    """The pages a search is served at most (the vendor's result window), and where that
    comes from."""
    if client.result_window is None:
        return Finding(
            "result window",
            "ok",
            "no limit known (learnt when the vendor refuses a page as too deep; "
            f"{settings.ENV_RESULT_WINDOW} sets it)",
        )
    source = {
        "set": f"set: {settings.ENV_RESULT_WINDOW}",
        "learnt": "learnt from the vendor's refusal, kept in the vendor profile",
    }[client.result_window_source]
    return Finding(
        "result window",
        "ok",
        f"{client.result_window} pages a search at most ({source}; pieces with more "
        "are split until each fits)",
    )


def check_response_deadline(answers: Answers, client: Client) -> Finding:
    """The deadline a whole response has, and where it was set."""
    given = "given to the client"
    if client.response_deadline == settings.options.response_deadline:
        source = settings.options.source("response_deadline")
        given = {"default": "the default", "set": "set in settings.options"}.get(source, source)
    return Finding(
        "response deadline",
        "ok",
        f"{client.response_deadline:g} s for a whole response, however slowly its "
        f"bytes come ({given}; --response-deadline or "
        f"{settings.ENV_RESPONSE_DEADLINE} sets it)",
    )


#: The checks, in the order reported; each reads the probes' answers (extend by appending).
CHECKS: list[Check] = [
    check_network,
    check_tls,
    check_key,
    check_stage_path,
    check_compression,
    check_paging_base,
    check_error_format,
    check_markets,
    check_matching_rule,
    check_retirement,
    check_group_ids,
    check_page_size,
    check_request_line,
    check_result_window,
    check_response_deadline,
]
#: Checks that read no answer (what is assumed or set): shown by a dry run too.
UNPROBED: tuple[Check, ...] = (
    check_network,
    check_group_ids,
    check_page_size,
    check_request_line,
    check_result_window,
    check_response_deadline,
)


def check_service(
    client: Client | None = None,
    *,
    dry_run: bool = False,
    areas: Any = None,
    team: str | None = None,
    user: str | None = None,
) -> ServiceReport:
    """Check the vendor at the client's base URL: TLS, key, stage path, compression, paging
    base, error format and markets: two probes, at most three calls with redirects and
    retries (:data:`MAX_CALLS`); with ``areas``, also the matching rule: three probes, at
    most four calls.

    Parameters
    ----------
    client
        The :class:`~parcelsearch.Client` (base URL, key, CA); default ``Client()``.
    dry_run
        Spend nothing: the report lists the checks as ``"not run"`` and their price.
    areas
        The areas you mean to search (any input :func:`parcelsearch.plan` takes), checked
        before anything is spent: one more call, page 1 of a sliver one grid step tall
        across the largest of them (:func:`parcelsearch.rule_probe.sliver`), learns how the
        vendor matches parcels (``representative-point`` when it matches none,
        ``intersects`` when it matches parcels it crosses), kept for the base URL as
        :func:`parcelsearch.rule_probe.learn_match_rule` keeps it. Without, the report says
        the rule is unknown (or what was learnt before) and how to learn it.
    team, user
        Team mode: the team store (``postgresql://…``; default ``$PARCELSEARCH_TEAM``) whose
        ledger and pacer the probes go through, and who spends them (default
        ``$PARCELSEARCH_USER``, else the login name), so that the team's quota counts them.

    Returns
    -------
    ServiceReport
        ``str(report)`` is the readable report; ``report.ok`` is ``False`` when a check
        failed. What was learned is kept in the vendor's profile in the client's cache
        folder, so later searches adapt without probing.
    """
    ring = sliver(areas) if areas is not None else None  # bad areas: refused, nothing spent
    client = client if client is not None else Client()
    report = ServiceReport(client.base_url, price=len(PROBES) + (ring is not None))
    if dry_run:
        report.findings = [
            Finding(_name(check), "not run", "dry run: nothing spent")
            if (ring is not None or check is not check_matching_rule) and check not in UNPROBED
            else check({}, client)
            for check in CHECKS
        ]
        return report
    with key_spend(
        client, team=team, user=user, cap=report.cap, capped="the check's {cap} calls are spent"
    ) as spend:
        _probe(report, client, spend, ring)
    return report


def _probe(report: ServiceReport, client: Client, spend: CallSpend, ring: str | None) -> None:
    """The probes sent and read into ``report`` (the sliver's with ``ring``)."""
    answers: Answers = {}
    for name, target in PROBES.items():
        try:
            answers[name] = client.probe(target, spend=spend)
        except ParcelSearchError as exc:
            answers[name] = exc
        report.calls = spend.calls
        if not _answered(answers):
            break  # no key, no path, no TLS: the rest would only spend
    report.findings = [check(answers, client) for check in CHECKS]
    report.learned = _learn(report, answers, client)  # the page base, before the sliver
    if ring is not None and _answered(answers):
        try:
            answers[RULE_PROBE] = client.search_page(ring, 1, spend=spend)
        except ParcelSearchError as exc:
            answers[RULE_PROBE] = exc
        report.calls = spend.calls
        report.findings = [check(answers, client) for check in CHECKS]
        report.learned.update(_learn_rule(answers, client))


def _answered(answers: Answers) -> bool:
    """Whether the market list was answered (TLS, key and path work)."""
    first = answers.get("markets")
    return isinstance(first, Probe) and first.status == 200


def _learn_rule(answers: Answers, client: Client) -> dict[str, object]:
    """The matching rule the sliver showed, kept for the base URL; a sliver too few parcels
    matched to tell forgets what was kept (as :func:`parcelsearch.rule_probe.learn_match_rule`
    does)."""
    answer = answers.get(RULE_PROBE)
    if not isinstance(answer, Page):
        return {}
    rule = rule_of(answer.rows)
    if rule == "unknown":
        client.learn(match_rule=None)
        return {}
    client.learn(match_rule=rule)
    return {"match_rule": rule}


def _name(check: Check) -> str:
    """A check's name as reported (``check_stage_path`` → ``stage path``)."""
    name = getattr(check, "__name__", "check").removeprefix("check_").replace("_", " ")
    return "TLS" if name == "tls" else name


def _learn(report: ServiceReport, answers: Answers, client: Client) -> dict[str, object]:
    learned: dict[str, object] = {}
    verdicts = {f.check: f for f in report.findings}
    base = verdicts.get("paging base")
    if base is not None and base.verdict == "ok":
        learned["page_base"] = 0 if "from 0" in base.text else 1
    first = answers.get("markets")
    if isinstance(first, Probe):
        learned["compression"] = first.encoding
    probe = answers.get("page 0")
    if isinstance(probe, Probe) and probe.refusal is not None:
        learned["error_format"] = probe.refusal.shape
    if learned:
        client.learn(**learned)
    return learned
