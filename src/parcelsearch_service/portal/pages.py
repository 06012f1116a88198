"""The portal's HTML: Jinja2 templates (autoescaped) and the geometry of the usage charts.

Every page is rendered from ``templates/`` with autoescaping on, so a value from a user or
the store is text, never markup. Pages use one stylesheet and one small script of our own,
both served from this origin (``static/``); the script only adds copy buttons, and every
page works without it. The usage chart is server-rendered SVG drawn with presentation
attributes (the Content-Security-Policy forbids ``style`` attributes), with a text table of
the same numbers beside it.

Examples
--------
>>> e('<script>alert("x")</script>')
'&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;'
>>> axis_step(7), axis_step(0), axis_step(480)
(2, 1, 150)
"""

from __future__ import annotations

import html
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import jinja2

from parcelsearch.settings import KEY_TYPES
from parcelsearch_service.keys.rules import SERVICES
from parcelsearch_service.portal.accounts import SignIn, User
from parcelsearch_service.portal.apps import App
from parcelsearch_service.portal.sessions import ActiveSession
from parcelsearch_service.portal.usage import DayUsage

__all__ = [
    "e",
    "signin_page",
    "apps_page",
    "app_page",
    "key_page",
    "account_page",
    "admin_page",
    "start_page",
    "message_page",
    "usage_chart",
    "axis_step",
    "Snippets",
    "BASE",
    "STATIC",
    "CHART_SPANS",
]

#: Where the portal is mounted.
BASE = "/portal"
#: The stylesheet and script, served at ``/portal/static/``.
STATIC = Path(__file__).with_name("static")
#: The usage chart's spans (days) and how each is drawn: one bar a day, or a week.
CHART_SPANS: dict[int, int] = {30: 1, 90: 7}

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("parcelsearch_service.portal", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def e(value: object) -> str:
    """``value`` as HTML text (quotes escaped too, so it is safe inside attributes)."""
    return html.escape(str(value), quote=True)


def _when(moment: datetime | None, none: str = "never") -> str:
    return none if moment is None else moment.strftime("%Y-%m-%d %H:%M UTC")


def _count(n: int, what: str) -> str:
    return f"{n:,} {what}{'' if n == 1 else 's'}"


def quota_words(quota: int | None, period: str) -> str:
    """A quota in words: ``"500 calls a calendar month (UTC)"``, ``"50 calls for life"``."""
    if quota is None:
        return "no quota"
    return _count(quota, "call") + (
        " for life" if period == "lifetime" else " a calendar month (UTC)"
    )


def rate_words(per_second: float) -> str:
    """A spike-arrest rate in words: ``"at most 10 calls a second"``."""
    return f"at most {per_second:g} call{'' if per_second == 1 else 's'} a second"


_ENV.filters["when"] = _when
_ENV.filters["n"] = "{:,}".format
_ENV.globals.update(BASE=BASE, SERVICES=SERVICES, quota_words=quota_words, rate_words=rate_words)


def _render(template: str, **context: Any) -> str:
    context.setdefault("user", None)
    context.setdefault("csrf", "")
    context.setdefault("error", "")
    context.setdefault("notice", "")
    context.setdefault("nav", "")
    return _ENV.get_template(template).render(**context)


# ---------------------------------------------------------------------------- the chart


def axis_step(value: int) -> int:
    """The whole-number step between the y axis's 5 ticks (0 to 4 steps) so that the top
    tick reaches ``value``: 1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten."""
    power = 1
    while True:
        for m in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8):
            step = m * power
            if step == int(step) and 4 * step >= value:
                return int(step)
        power *= 10


@dataclass(frozen=True)
class Bar:
    """One bar of the chart: a day or a week, its calls and refusals, and where to draw it."""

    first: date
    last: date
    calls: int
    refused: int
    x: float
    width: float
    calls_y: float
    calls_h: float
    refused_y: float
    refused_h: float

    @property
    def label(self) -> str:
        """The bar's dates as text (``2026-11-24`` or ``2026-11-18 to 2026-11-24``)."""
        if self.first == self.last:
            return self.first.isoformat()
        return f"{self.first.isoformat()} to {self.last.isoformat()}"

    @property
    def centre(self) -> float:
        return round(self.x + self.width / 2, 1)


@dataclass(frozen=True)
class Chart:
    """A usage chart's geometry (viewBox units) and numbers."""

    days: int
    per: str  # "day" or "week"
    bars: tuple[Bar, ...]
    ticks: tuple[tuple[float, int], ...]
    dates: tuple[tuple[float, str], ...]
    width: int
    height: int
    left: int
    right: int
    bottom: float
    rotate_values: bool
    name: str  # "wide" or "narrow": which screens it is drawn for

    @property
    def calls(self) -> int:
        return sum(b.calls for b in self.bars)

    @property
    def refused(self) -> int:
        return sum(b.refused for b in self.bars)


def _buckets(daily: Sequence[DayUsage], per: int) -> list[tuple[date, date, int, int]]:
    """``daily`` in runs of ``per`` days ending on the last day (the first run may be
    shorter): (first day, last day, calls, refusals)."""
    out = []
    end = len(daily)
    while end > 0:
        run = daily[max(0, end - per) : end]
        out.append(
            (run[0].day, run[-1].day, sum(d.calls for d in run), sum(d.refused for d in run))
        )
        end -= per
    return out[::-1]


def usage_chart(daily: Sequence[DayUsage], days: int = 30, narrow: bool = False) -> Chart:
    """The chart of the last ``days`` days of ``daily`` (a key of :data:`CHART_SPANS`):
    stacked bars (calls, then refusals), a y axis with ticks, dates under the bars.
    ``narrow``: drawn for a phone's width (fewer dates, values turned upright sooner)."""
    per = CHART_SPANS[days]
    buckets = _buckets(daily[-days:], per)
    width, height = (360, 300) if narrow else (640, 260)
    left, right, bottom = 40, 22, height - 32.0
    pitch = (width - left - right) / max(len(buckets), 1)
    # values wider than a bar are written upright, so the top leaves room for the longest
    longest = max([len(f"{c:,} +{r}✕" if r else f"{c:,}") for _, _, c, r in buckets] + [0])
    rotate = max([len(f"{c:,}") for _, _, c, _ in buckets] + [0]) * 7 > pitch
    top = 12 + longest * 7 if rotate else 28
    step = axis_step(max([c + r for _, _, c, r in buckets] + [0]))
    scale = (bottom - top) / (4 * step)
    bars = []
    for i, (first, last, calls, refused) in enumerate(buckets):
        calls_h = round(calls * scale, 1)
        refused_h = round(refused * scale, 1)
        bars.append(
            Bar(
                first,
                last,
                calls,
                refused,
                x=round(left + i * pitch + pitch * 0.12, 1),
                width=round(pitch * 0.76, 1),
                calls_y=round(bottom - calls_h, 1),
                calls_h=calls_h,
                refused_y=round(bottom - calls_h - refused_h, 1),
                refused_h=refused_h,
            )
        )
    ticks = tuple((round(bottom - k * step * scale, 1), k * step) for k in range(5))
    # a date under every 5th day or 2nd week (10th, 4th when narrow), the last included
    every = (5 if per == 1 else 2) * (2 if narrow else 1)
    dates = tuple(
        (b.centre, b.last.strftime("%b %-d") if per == 1 else b.first.strftime("%b %-d"))
        for i, b in enumerate(bars)
        if (len(bars) - 1 - i) % every == 0
    )
    return Chart(
        days,
        "day" if per == 1 else "week",
        tuple(bars),
        ticks,
        dates,
        width,
        height,
        left,
        right,
        bottom,
        rotate_values=rotate,
        name="narrow" if narrow else "wide",
    )


# ---------------------------------------------------------------------------- snippets


@dataclass(frozen=True)
class Snippets:
    """Ready-to-paste uses of a new key with this portal's service.

    Attributes
    ----------
    shell
        ``export PARCELSEARCH_API_KEY=… PARCELSEARCH_BASE_URL=… PARCELSEARCH_CA_BUNDLE=…``
        then a ``parcelsearch`` command.
    python
        The same with :class:`parcelsearch.Client`.
    curl
        One call of the Markets service with curl.
    """

    shell: str
    python: str
    curl: str

    @classmethod
    def build(cls, api_key: str, base_url: str, ca: str | None) -> Snippets:
        """The snippets for ``api_key`` on ``base_url``, trusting the CA file ``ca`` (the
        system's trust store when ``None``)."""
        env = [
            f"PARCELSEARCH_API_KEY={shlex.quote(api_key)}",
            f"PARCELSEARCH_BASE_URL={shlex.quote(base_url)}",
        ]
        if ca is not None:
            env.append(f"PARCELSEARCH_CA_BUNDLE={shlex.quote(ca)}")
        shell = (
            "export " + " \\\n       ".join(env) + "\n"
            "parcelsearch markets\n"
            "parcelsearch search areas.gpkg --id-column area_id --out group_ids.parquet"
        )
        ca_arg = "" if ca is None else f",\n    ca_bundle={ca!r}"
        python = (
            "import geopandas as gpd\nimport parcelsearch\n\n"
            f"client = parcelsearch.Client(\n    api_key={api_key!r},\n"
            f"    base_url={base_url!r}{ca_arg},\n)\n"
            'areas = gpd.read_file("areas.gpkg")\n'
            'result = parcelsearch.search(areas, id_column="area_id", client=client)\n'
            'result.ids.to_parquet("group_ids.parquet")'
        )
        cacert = "" if ca is None else f"--cacert {shlex.quote(ca)} "
        curl = (
            f"curl {cacert}-H {shlex.quote('x-api-key: ' + api_key)} "
            f"{shlex.quote(base_url + '/v1/markets')}"
        )
        return cls(shell, python, curl)


# ---------------------------------------------------------------------------- pages


def message_page(title: str, message: str, user: User | None = None, csrf: str = "") -> str:
    """A page with one message and a link back to the portal."""
    return _render("message.html", title=title, message=message, user=user, csrf=csrf)


def signin_page(csrf: str, error: str = "", email: str = "") -> str:
    """The sign-in form (fields ``email`` and ``password``)."""
    return _render("signin.html", title="Sign in", csrf=csrf, error=error, email=email)


def _key_types() -> list[tuple[str, str, str]]:
    return [
        (name, rate_words(rate), quota_words(quota, period))
        for name, (rate, quota, period) in KEY_TYPES.items()
    ]


def apps_page(
    user: User,
    csrf: str,
    apps: Sequence[App],
    error: str = "",
    notice: str = "",
    values: dict[str, str] | None = None,
) -> str:
    """The Apps overview: one card per app (usage at a glance) and the create form."""
    return _render(
        "apps.html",
        title="Apps",
        nav="apps",
        user=user,
        csrf=csrf,
        apps=apps,
        error=error,
        notice=notice,
        values=values or {},
        key_types=_key_types(),
    )


def app_page(
    user: User, csrf: str, app: App, days: int = 30, error: str = "", notice: str = ""
) -> str:
    """One app: its key type and limits in words, usage, the chart of ``days`` days (30 or
    90) with its table, and its actions (limits for admins)."""
    return _render(
        "app.html",
        title=app.name,
        nav="apps",
        user=user,
        csrf=csrf,
        app=app,
        chart=usage_chart(app.daily, days),
        narrow=usage_chart(app.daily, days, narrow=True),
        spans=list(CHART_SPANS),
        error=error,
        notice=notice,
    )


def key_page(
    user: User, csrf: str, app_id: int, name: str, api_key: str, snippets: Snippets, ca_known: bool
) -> str:
    """The new key of app ``name`` (shown on this response only), a copy button and the
    snippets that use it."""
    return _render(
        "key.html",
        title=f"Key of {name}",
        nav="apps",
        user=user,
        csrf=csrf,
        app_id=app_id,
        name=name,
        api_key=api_key,
        snippets=snippets,
        ca_known=ca_known,
    )


def account_page(
    user: User,
    csrf: str,
    signins: Sequence[SignIn],
    sessions: Sequence[ActiveSession],
    error: str = "",
    notice: str = "",
) -> str:
    """The account: change password, sign out other sessions, recent sign-ins."""
    return _render(
        "account.html",
        title="Account",
        nav="account",
        user=user,
        csrf=csrf,
        signins=signins,
        sessions=sessions,
        error=error,
        notice=notice,
    )


def admin_page(
    user: User, csrf: str, apps: Sequence[App], error: str = "", notice: str = ""
) -> str:
    """Every app with its owner and usage; limits and revocation."""
    return _render(
        "admin.html",
        title="All apps",
        nav="admin",
        user=user,
        csrf=csrf,
        apps=apps,
        error=error,
        notice=notice,
    )


def start_page(user: User | None, csrf: str, base_url: str, ca_known: bool) -> str:
    """Getting started: the services, each key type's limits, a curl and a parcelsearch
    example."""
    snippets = Snippets.build("YOUR-KEY", base_url, "ca.pem" if ca_known else None)
    return _render(
        "start.html",
        title="Getting started",
        nav="start",
        user=user,
        csrf=csrf,
        key_types=_key_types(),
        snippets=snippets,
        base_url=base_url,
        ca_known=ca_known,
    )
