"""The one exception tree of parcelsearch.

Every error the toolkit raises on purpose derives from :class:`ParcelSearchError`,
so ``except parcelsearch.ParcelSearchError`` catches them all::

    ParcelSearchError
    ├── ConfigurationError        missing key or base URL, http:// URL, bad setting
    ├── InputError                study areas that cannot be planned (row, field, fix)
    │   ├── NotComparableError      a diff of searches of different areas or tolerance
    │   └── OutputKeptError         a less complete result would replace a file (kept)
    ├── BudgetError               a run that would spend more than allowed
    │   ├── QuotaWouldExceedError   refused before spending: plan > known remaining quota
    │   ├── PriceNotConfirmedError  stopped after the survey: the price was not confirmed
    │   └── BudgetExhaustedError    stopped at ``budget=N``; everything fetched is kept
    ├── SearchInterrupted         Ctrl-C / SIGTERM / kernel interrupt (also a KeyboardInterrupt)
    ├── CacheError                an unreadable or corrupt cache file (named)
    ├── TeamStoreError            the team's PostgreSQL store unreachable, lost or not made
    ├── AreasFailedError          some areas failed (each named); the others are complete
    ├── TransportError            no usable HTTP response after retries (timeouts, resets)
    ├── MalformedResponseError    a response whose body or counts do not add up
    │   ├── CutBodyError            a body cut short on the way (the connection's fault)
    │   ├── PageGoneError           a page past the last: the result changed since page 1
    │   └── UnstableOrderError      pages of one piece overlap: the vendor's order moved
    └── ServiceError              the service answered with an error envelope
        ├── AuthenticationError     401 (the service's message verbatim)
        ├── RateLimitError          429 spike arrest that outlasted the retries
        ├── QuotaExhaustedError     429 quota violation: the key has no calls left
        ├── BadPolygonError         400
        ├── RequestTooLargeError    414
        ├── ResultWindowError       400 (a page beyond the vendor's result window)
        ├── ServiceFailureError     5xx, or a 200 HTML page (maintenance), through the retries
        └── EndpointGoneError       410: the vendor retired the endpoint (its Sunset quoted)

The reference service (the ``service`` extra) has two of its own, in
:mod:`parcelsearch_service.errors`; the toolkit only ever sees the answers made of them::

    ParcelSearchError
    ├── BadRequestError           a searchPolygon or page the service refuses (answered 400)
    └── StoreBusyError            the key or parcel store stayed locked or away (answered 503)

Errors raised about a request carry its *redacted* URL (never the API key) and,
for service errors, the HTTP status and the service's ``messages`` verbatim.

One message, two dialects: an error's advice is a list of :class:`Hint` values (which knob,
what value), not prose. ``str(error)`` speaks Python (``budget=12``, ``Client(api_key=...)``);
``error.render("cli")`` speaks the command line (``--budget 12``, ``$PARCELSEARCH_API_KEY``).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from parcelsearch.knobs import DECLARED, Declaration, declared

Dialect = Literal["python", "cli"]

#: The widest line of an error's card in a notebook (:meth:`ParcelSearchError.card`).
CARD_WIDTH = 100


@dataclass(frozen=True)
class Knob:
    """How one setting is spelled where the user gives it.

    ``python`` and ``cli`` are templates with ``{value}``; ``None`` when the dialect has no
    such knob (then ``env`` is named instead, or the knob is left out).
    """

    python: str | None
    cli: str | None
    env: str | None = None
    #: Template when no value is suggested (e.g. ``budget=`` / ``--budget N``).
    python_bare: str | None = None
    cli_bare: str | None = None


def _derived(declaration: Declaration) -> Knob:
    """The knob of a declared option (:mod:`parcelsearch.knobs`), spelled as declared."""
    return Knob(
        declaration.python,
        declaration.cli_template,
        declaration.env,
        declaration.python_bare,
        declaration.cli_bare_template,
    )


#: Every knob an error can point at, spelled in both dialects: each option's as declared in
#: :mod:`parcelsearch.knobs` (``yes`` is ``confirm``'s flag), then knobs that are not options.
KNOBS: dict[str, Knob] = {
    **{declaration.name: _derived(declaration) for declaration in DECLARED},
    "yes": _derived(declared("confirm")),
    "max_calls": Knob(
        "parcelsearch.suggest_tolerance(plan, {value})",
        "`parcelsearch plan AREAS --max-calls {value}`",
    ),
    "runs": Knob("parcelsearch.runs()", "parcelsearch runs"),
    "crs": Knob(
        "areas.set_crs({value!r})",
        "--crs {value}",
        python_bare="areas.set_crs(<EPSG code>)",
        cli_bare="--crs EPSG:CODE",
    ),
    "crs_override": Knob(
        "areas.set_crs({value!r}, allow_override=True)",
        "--crs {value}",
        python_bare="areas.set_crs(<EPSG code>, allow_override=True)",
        cli_bare="--crs EPSG:CODE",
    ),
    "layer": Knob(
        "geopandas.read_file(path, layer={value!r})",
        "--layer {value}",
        python_bare="geopandas.read_file(path, layer=...)",
        cli_bare="--layer NAME",
    ),
    "markets": Knob("markets=parcelsearch.markets(client)", "parcelsearch markets"),
    "out": Knob("path={value!r}", "--out {value}", python_bare="path=", cli_bare="--out FILE"),
    "force": Knob("force=True", "--force"),
    "login": Knob(
        "parcelsearch.profiles.save({value!r}, api_key)", "`parcelsearch login --profile {value}`"
    ),
    "out_map": Knob(
        "path={value!r}", "--out-map {value}", python_bare="path=", cli_bare="--out-map FILE"
    ),
    "out_tiles": Knob(
        "path={value!r}", "--out-tiles {value}", python_bare="path=", cli_bare="--out-tiles FILE"
    ),
    "serve": Knob("parcelsearch.local_service()", "`parcelsearch serve`"),
    "team_init": Knob(
        "parcelsearch.stores.team.init_team({value!r})", "`parcelsearch team init {value}`"
    ),
    "team_budget": Knob(
        "parcelsearch.stores.team.set_budget(url, {value!r}, calls)",
        "`parcelsearch team budget --user {value} --calls N`",
    ),
}


@dataclass(frozen=True)
class Hint:
    """One thing the user can change: which knob, what value, in a short phrase.

    ``phrase`` holds ``{knob}`` where the knob's spelling goes, e.g.
    ``Hint("budget", 12, "raise {knob}")`` → ``raise budget=12`` / ``raise --budget 12``.
    """

    knob: str
    value: object = None
    phrase: str = "set {knob}"

    def render(self, dialect: Dialect = "python") -> str:
        """The phrase with the knob spelled in ``dialect``."""
        return self.phrase.format(knob=_spell(self.knob, self.value, dialect))


def _spell(name: str, value: object, dialect: Dialect) -> str:
    """The knob as the user writes it in ``dialect``, with its environment variable if any."""
    knob = KNOBS[name]
    template = knob.python if dialect == "python" else knob.cli
    bare = knob.python_bare if dialect == "python" else knob.cli_bare
    if value is None and bare is not None:
        template = bare
    spelled = template.format(value=value) if template is not None else None
    env = f"the environment variable {knob.env}" if knob.env else None
    return " or ".join(part for part in (spelled, env) if part) or name


__all__ = [
    "Hint",
    "ParcelSearchError",
    "ConfigurationError",
    "InputError",
    "NotComparableError",
    "OutputKeptError",
    "BudgetError",
    "QuotaWouldExceedError",
    "PriceNotConfirmedError",
    "BudgetExhaustedError",
    "SearchInterrupted",
    "TeamStoreError",
    "CacheError",
    "TransportError",
    "MalformedResponseError",
    "ServiceError",
    "AuthenticationError",
    "RateLimitError",
    "QuotaExhaustedError",
    "BadPolygonError",
    "RequestTooLargeError",
    "ResultWindowError",
    "ServiceFailureError",
    "EndpointGoneError",
    "PageGoneError",
    "CutBodyError",
    "UnstableOrderError",
    "AreasFailedError",
]


class ParcelSearchError(Exception):
    """Base class of every error parcelsearch raises on purpose.

    Attributes
    ----------
    result
        When a search stops on this error: the partial
        :class:`~parcelsearch.SearchResult` of everything fetched (all of it cached).
    exit_code
        The ``parcelsearch`` command's exit status when it stops on this error: 1 failed,
        2 usage (what the user gave is wrong; nothing was spent), 3 stopped (refused or
        partly done), 128 + the signal when interrupted.
    """

    result: object = None
    exit_code: int = 1

    def __init__(self, message: str = "", *, hints: Sequence[Hint] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.hints = tuple(hints)

    def render(self, dialect: Dialect = "python") -> str:
        """The message and its hints, each hint a sentence, spelled for ``dialect``."""
        message = self._text().rstrip()
        if message and self.hints and message[-1] not in ".!?":
            message += "."  # the hints follow as sentences
        sentences = [message] if message else []
        for hint in self.hints:
            text = hint.render(dialect)
            sentences.append(text[:1].upper() + text[1:] + ".")
        return " ".join(sentences)

    def __str__(self) -> str:
        return self.render("python")

    def _text(self) -> str:
        """The message as shown (a subclass may add what it learnt since it was made)."""
        return self.message

    def card(self) -> list[str]:
        """The error as a short card: its name and message (lines of at most
        :data:`CARD_WIDTH` characters), the figures it carries (a price's block), then the
        code to run next (its hints, in Python)."""
        lines = [f"{type(self).__name__}:"]
        lines += textwrap.wrap(
            self._text().strip(),
            CARD_WIDTH,
            initial_indent="  ",
            subsequent_indent="  ",
            break_on_hyphens=False,
        )
        lines += ["  " + line for line in self._figures()]
        if self.hints:
            lines.append("next:")
            lines += ["  " + hint.render("python") for hint in self.hints]
        return lines

    def _figures(self) -> list[str]:
        """Lines of figures the card shows after the message (a subclass's)."""
        return []

    def _render_traceback_(self) -> list[str]:
        """IPython's rendering of this error (a notebook, the IPython shell): the
        :meth:`card`, not a stack of internal frames; elsewhere the plain message."""
        return self.card()


class ConfigurationError(ParcelSearchError):
    """A setting is missing or unusable; the message says how to set it."""

    exit_code = 2


class InputError(ParcelSearchError, ValueError):
    """Study areas that cannot be planned.

    Parameters
    ----------
    message
        What is wrong and how to fix it.
    row
        The area id (or index label) of the offending row, when one is to blame.
    field
        The column at fault (usually ``"geometry"``).
    """

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        row: object = None,
        field: str | None = None,
        hints: Sequence[Hint] = (),
    ) -> None:
        super().__init__(message, hints=hints)
        self.row = row
        self.field = field


class NotComparableError(InputError):
    """Two searches that cannot be compared (different areas or tolerance); the message
    says what differs and what would compare."""


class OutputKeptError(InputError):
    """A result less complete than the file it would replace (a partial or refused run, or
    one that found nothing, beside a complete file that found something): the file is kept.

    Attributes
    ----------
    path
        The file kept as it was.
    """

    def __init__(self, message: str, *, path: object = None, hints: Sequence[Hint] = ()) -> None:
        super().__init__(message, field="out", hints=hints)
        self.path = path


class BudgetError(ParcelSearchError):
    """A run would spend, or has spent, all the calls it was allowed.

    Attributes
    ----------
    price
        The price the stop is about (:class:`~parcelsearch.Price`), when known: its block
        is on the error's card (:meth:`ParcelSearchError.card`); else ``None``.
    """

    exit_code = 3
    price: object = None

    def _figures(self) -> list[str]:
        block = getattr(self.price, "block", None)
        return list(block()) if callable(block) else []


class QuotaWouldExceedError(BudgetError):
    """Refused before spending anything: the plan needs more calls than allowed."""

    def __init__(
        self,
        message: str,
        *,
        needed: int,
        allowed: int,
        hints: Sequence[Hint] = (),
        price: object = None,
    ) -> None:
        super().__init__(message, hints=hints)
        self.needed = needed
        self.allowed = allowed
        self.price = price


class PriceNotConfirmedError(BudgetError):
    """Stopped at the decision point, after the survey and before the bulk: the price is
    above what may be spent without asking, and nobody said yes. Nothing fetched is lost.

    Attributes
    ----------
    needed
        Calls still to spend.
    threshold
        What may be spent without asking (``ask_above``).
    survey_share
        When the survey stopped at its cap with the interval wider than ±20 %: the survey
        share that would narrow it to about that (search again with
        ``survey_share=error.survey_share``); else ``None``.
    price
        The :class:`~parcelsearch.Price` asked about: the survey's, or the exact price
        after page 1 of every piece when it rose past what was chosen.
    """

    def __init__(
        self,
        message: str,
        *,
        needed: int,
        threshold: int,
        hints: Sequence[Hint] = (),
        survey_share: float | None = None,
        price: object = None,
    ) -> None:
        super().__init__(message, hints=hints)
        self.needed = needed
        self.threshold = threshold
        self.survey_share = survey_share
        self.price = price


class BudgetExhaustedError(BudgetError):
    """A run stopped at its budget; everything fetched so far is cached."""

    def __init__(
        self,
        message: str,
        *,
        spent: int,
        budget: int,
        result: object = None,
        hints: Sequence[Hint] = (),
    ) -> None:
        super().__init__(message, hints=hints)
        self.spent = spent
        self.budget = budget
        self.result = result


class SearchInterrupted(ParcelSearchError, KeyboardInterrupt):
    """A search stopped by an interrupt; everything fetched is cached and on ``.result``.

    It is also a :class:`KeyboardInterrupt`, so code that stops on Ctrl-C still stops.

    Attributes
    ----------
    signum
        The signal that stopped the run (``signal.SIGINT`` or ``signal.SIGTERM``).
    """

    def __init__(self, message: str, *, signum: int, result: object = None) -> None:
        super().__init__(message)
        self.signum = signum
        self.result = result
        self.exit_code = 128 + int(signum)


class CacheError(ParcelSearchError):
    """A cache file cannot be read or trusted. The message names the file."""


class TeamStoreError(ParcelSearchError):
    """The team's PostgreSQL store cannot be reached, was lost mid-run, or has no schema.

    The message names the store's URL without its password.
    """


class _RequestError(ParcelSearchError):
    """An error about one request; carries its redacted URL."""

    def __init__(self, message: str, *, url: str | None = None, hints: Sequence[Hint] = ()) -> None:
        super().__init__(message, hints=hints)
        self.url = url
        #: How many attempts were made, when the retries ran out on this error (else ``None``).
        self.attempts: int | None = None

    def _text(self) -> str:
        if self.attempts is None:
            return self.message
        plural = "s" if self.attempts != 1 else ""
        return (
            f"{self.message} (gave up after {self.attempts} attempt{plural}; "
            "each attempt costs a call)"
        )


class TransportError(_RequestError):
    """No usable HTTP response after the allowed retries (timeouts, resets, TLS)."""


class MalformedResponseError(_RequestError):
    """A response whose body is not the documented shape or whose counts disagree."""


class ServiceError(_RequestError):
    """The service answered with an error envelope.

    Attributes
    ----------
    status
        The HTTP status code.
    messages
        The service's ``messages`` list, verbatim.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int,
        messages: Sequence[str] = (),
        url: str | None = None,
        retry_after: float | None = None,
        hints: Sequence[Hint] = (),
    ) -> None:
        super().__init__(message, url=url, hints=hints)
        self.status = status
        self.messages = list(messages)
        self.retry_after = retry_after


class AuthenticationError(ServiceError):
    """401: the key is missing, unknown or not enabled for this service."""


class RateLimitError(ServiceError):
    """429 spike arrest that outlasted the client's retries."""


class QuotaExhaustedError(ServiceError):
    """429 quota violation: the key has no calls left this period."""

    exit_code = 3


class BadPolygonError(ServiceError):
    """400: the service refused the request's polygon or page."""


class RequestTooLargeError(ServiceError):
    """414: the request line was longer than the gateway allows."""


class ResultWindowError(ServiceError):
    """400: the vendor serves a search only so many pages deep ("Result window is too large
    … Narrow the searchPolygon"); the piece must be split.

    Attributes
    ----------
    window
        The pages a search is served (learnt: the page before the refused one).
    """

    def __init__(
        self,
        message: str,
        *,
        window: int,
        status: int = 400,
        messages: Sequence[str] = (),
        url: str | None = None,
        hints: Sequence[Hint] = (),
    ) -> None:
        super().__init__(message, status=status, messages=messages, url=url, hints=hints)
        self.window = window


class ServiceFailureError(ServiceError):
    """5xx: the service failed, and kept failing through the retries."""


class EndpointGoneError(ServiceError):
    """410 Gone: the vendor retired the endpoint. Final for every request, so the run stops
    at the first such answer; the message quotes the vendor and its ``Sunset`` date.

    Attributes
    ----------
    sunset
        The ``Sunset`` header as the vendor sent it (an HTTP-date), or ``None``.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int = 410,
        messages: Sequence[str] = (),
        url: str | None = None,
        sunset: str | None = None,
        hints: Sequence[Hint] = (),
    ) -> None:
        super().__init__(message, status=status, messages=messages, url=url, hints=hints)
        self.sunset = sunset


class CutBodyError(MalformedResponseError):
    """A body cut short or undecodable on the way (the connection, not the vendor's answer):
    retried like a failure to connect, and when it persists it stops the run."""


class PageGoneError(MalformedResponseError):
    """A page past the last one: refused or answered empty although page 1 promised it.

    The result changed (shrank) since its page 1 was read; the piece is read again from
    page 1, never kept with pages of two different answers.
    """


class UnstableOrderError(MalformedResponseError):
    """Pages of one piece overlap and page 1 read again differs: the vendor's order is not
    stable across pages, so no set of its pages can be trusted to be the whole answer."""


class AreasFailedError(ParcelSearchError):
    """Some areas failed (a piece the vendor refused or answered unreadably); the others are
    complete and on ``.result``, which is marked incomplete.

    Attributes
    ----------
    failures
        Area id → the failure of its piece, in the vendor's words.
    """

    exit_code = 3

    def __init__(
        self,
        message: str,
        *,
        failures: dict[object, str],
        result: object = None,
        hints: Sequence[Hint] = (),
    ) -> None:
        super().__init__(message, hints=hints)
        self.failures = dict(failures)
        self.result = result
