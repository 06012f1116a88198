"""``parcelsearch doctor`` and :func:`check_service`: what the vendor at a base URL does
where its specification is silent, in at most three calls, priced before any is spent.

Two requests are sent (the *probes*), and every check reads what it needs from their
answers:

- ``GET <base>/v1/markets``: TLS, the key, the base URL's path (a gateway's 404 when the
  vendor's stage prefix such as ``/prod`` is missing), compression, the markets;
- ``GET <base>/v1/search?…&page=0`` of a tiny ring on Null Island: the number of the first
  page (a vendor counting from 1 refuses page 0) and how the gateway words a refusal.

What is learned (page base, compression, error format) is kept in the vendor's profile in
the cache folder (:mod:`parcelsearch.vendor_profile`), so later searches adapt without
probing. The checks are a list (:data:`CHECKS`): another is one more function reading the
probes' answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from parcelsearch import _wire, settings
from parcelsearch.client import Client, Probe
from parcelsearch.errors import BudgetExhaustedError, ParcelSearchError
from parcelsearch.market_list import LedgerSpend
from parcelsearch.vendor_answers import count_field

__all__ = ["check_service", "ServiceReport", "Finding", "CHECKS", "PROBES"]

Verdict = Literal["ok", "warning", "failed", "unknown", "not run"]

#: A ring that matches nothing anywhere a vendor sells parcels (Null Island, ~10 m).
PROBE_RING = _wire.ring_json([(0.0, 0.0), (0.0001, 0.0), (0.0001, 0.0001), (0.0, 0.0)])
#: Calls a check may spend at most, redirects and retries included.
MAX_CALLS = 3
#: The requests the checks read, in the order sent: name → request target.
PROBES: dict[str, str] = {
    "markets": settings.MARKETS_PATH,
    "page 0": _wire.search_target(settings.SEARCH_PATH, PROBE_RING, 0),
}


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
        Calls the check costs (the probes).
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
    def ok(self) -> bool:
        """No check failed."""
        return all(f.verdict != "failed" for f in self.findings)

    def __str__(self) -> str:
        width = max((len(f.check) for f in self.findings), default=0)
        spent = f"{self.calls} call{'' if self.calls == 1 else 's'} spent"
        lines = [f"vendor at {self.base_url}: {spent} (price {self.price}, at most "
                 f"{MAX_CALLS} with redirects and retries)"]
        lines += [f"  {f.check:<{width}}  {f.verdict:<8} {f.text}" for f in self.findings]
        if self.learned:
            kept = ", ".join(f"{k}={v}" for k, v in self.learned.items())
            lines.append(f"  remembered for this base URL: {kept}")
        return "\n".join(lines)


Answers = dict[str, "Probe | ParcelSearchError"]
Check = Callable[[Answers, Client], Finding]


def _first(answers: Answers) -> Probe | ParcelSearchError:
    return answers["markets"]


def check_tls(answers: Answers, client: Client) -> Finding:
    first = _first(answers)
    if isinstance(first, ParcelSearchError) and "TLS" in str(first):
        return Finding("TLS", "failed", str(first))
    if isinstance(first, ParcelSearchError) and getattr(first, "status", None) is None:
        return Finding("TLS", "unknown", f"no answer: {first}")
    trusted = f"CA bundle {client.ca_bundle}" if client.ca_bundle else "the system's CAs"
    return Finding("TLS", "ok", f"certificate verified against {trusted}")


def check_key(answers: Answers, client: Client) -> Finding:
    first = _first(answers)
    refusal = first.refusal if isinstance(first, Probe) else None
    if refusal is not None and refusal.kind in ("key", "quota"):
        what = "refused" if refusal.kind == "key" else "has no calls left"
        return Finding("key", "failed", f"the key {what}: HTTP {first.status}: "  # type: ignore[union-attr]
                       f"{refusal.text}")
    if isinstance(first, Probe) and first.status == 200:
        return Finding("key", "ok", f"accepted (sha256:{client.fingerprint}…)")
    return Finding("key", "unknown", "no answer that says")


def check_stage_path(answers: Answers, client: Client) -> Finding:
    first = _first(answers)
    if isinstance(first, Probe) and first.status == 404:
        words = first.refusal.text if first.refusal is not None else ""
        return Finding("stage path", "failed", f"HTTP 404 ({words}): the base URL may lack "
                       "the vendor's stage prefix, e.g. https://host/prod")
    if isinstance(first, Probe) and first.status == 200:
        return Finding("stage path", "ok", f"{settings.MARKETS_PATH} answers under "
                       f"{client.base_url}")
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
    if probe.status == 200 and probe.payload is not None and \
            count_field(probe.payload, "page") == 0:
        return Finding("paging base", "ok", "pages are numbered from 0 (page=0 answered)")
    if probe.status == 400 or (probe.payload is not None
                               and count_field(probe.payload, "page") == 1):
        return Finding("paging base", "ok", "pages are numbered from 1 (page=0 refused)")
    return Finding("paging base", "unknown", f"page=0 answered HTTP {probe.status}")


def check_error_format(answers: Answers, client: Client) -> Finding:
    probe = answers.get("page 0")
    refusal = probe.refusal if isinstance(probe, Probe) else None
    if refusal is None:
        return Finding("error format", "unknown", "no refusal seen")
    verdict: Verdict = "ok" if refusal.shape in ("envelope", "fault") else "warning"
    return Finding("error format", verdict,
                   f"{refusal.shape}: HTTP {probe.status}: {refusal.text}")  # type: ignore[union-attr]


def check_markets(answers: Answers, client: Client) -> Finding:
    first = _first(answers)
    if not isinstance(first, Probe) or first.payload is None:
        return Finding("markets", "unknown", "no market list")
    names = first.payload.get("data")
    if not isinstance(names, list):
        return Finding("markets", "failed", "the market list has no 'data' list")
    shown = ", ".join(map(str, names[:3])) + (" …" if len(names) > 3 else "")
    return Finding("markets", "ok", f"{len(names)} active ({shown})")


#: The checks, in the order reported; each reads the probes' answers (extend by appending).
CHECKS: list[Check] = [check_tls, check_key, check_stage_path, check_compression,
                       check_paging_base, check_error_format, check_markets]


def check_service(client: Client | None = None, *, dry_run: bool = False) -> ServiceReport:
    """Check the vendor at the client's base URL: TLS, key, stage path, compression, paging
    base, error format and markets: two probes, at most three calls with redirects and
    retries (:data:`MAX_CALLS`).

    Parameters
    ----------
    client
        The :class:`~parcelsearch.Client` (base URL, key, CA); default ``Client()``.
    dry_run
        Spend nothing: the report lists the checks as ``"not run"`` and their price.

    Returns
    -------
    ServiceReport
        ``str(report)`` is the readable report; ``report.ok`` is ``False`` when a check
        failed. What was learned is kept in the vendor's profile in the client's cache
        folder, so later searches adapt without probing.
    """
    client = client if client is not None else Client()
    report = ServiceReport(client.base_url, price=len(PROBES))
    if dry_run:
        report.findings = [Finding(_name(check), "not run", "dry run: nothing spent")
                           for check in CHECKS]
        return report
    answers: Answers = {}
    spend = _Capped(client, MAX_CALLS)
    for name, target in PROBES.items():
        try:
            answers[name] = client.probe(target, spend=spend)
        except ParcelSearchError as exc:
            answers[name] = exc
        report.calls = spend.calls
        first = answers["markets"]
        if not isinstance(first, Probe) or first.status != 200:
            break  # no key, no path, no TLS: the rest would only spend
    report.findings = [check(answers, client) for check in CHECKS]
    report.learned = _learn(report, answers, client)
    return report


class _Capped(LedgerSpend):
    """The ledger's spend hook, refusing the call after ``cap`` (redirects and retries would
    otherwise take a check past its price)."""

    def __init__(self, client: Client, cap: int) -> None:
        super().__init__(client)
        self.cap = cap

    def reserve(self) -> None:
        if self.calls >= self.cap:
            raise BudgetExhaustedError(f"the check's {self.cap} calls are spent", spent=self.calls,
                                       budget=self.cap)
        super().reserve()


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
