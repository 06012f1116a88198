"""The portal's HTML: every page built from escaped text, no script, one same-origin stylesheet.

Every value that comes from a user or the store goes through :func:`html.escape` (see
:func:`e`); the calls-per-day chart is inline SVG drawn with presentation attributes (no
``style`` attributes, which the Content-Security-Policy forbids).

Examples
--------
>>> e('<script>alert("x")</script>')
'&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;'
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import date, datetime

from parcelsearch.service.keys import SERVICES
from parcelsearch.service.portal.storage import App, User
from parcelsearch.settings import KEY_TYPES

__all__ = ["e", "page", "signin_page", "apps_page", "message_page", "STYLESHEET", "BASE"]

#: Where the portal is mounted.
BASE = "/portal"

STYLESHEET = """
body { font: 15px/1.4 system-ui, sans-serif; margin: 0; color: #1b1f24; background: #f6f7f9; }
header { background: #1f3b57; color: #fff; padding: .6em 1.2em; display: flex;
         justify-content: space-between; align-items: center; }
header a { color: #fff; }
main { padding: 1em 1.2em; }
h1 { font-size: 1.3em; margin: 0; }
h2 { font-size: 1.1em; }
table { border-collapse: collapse; background: #fff; }
th, td { border: 1px solid #d0d5dc; padding: .3em .5em; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.scroll { overflow-x: auto; }
.error { background: #fde8e8; border: 1px solid #d33; padding: .6em; }
.notice { background: #e8f4fd; border: 1px solid #38c; padding: .6em; }
.newkey { background: #fff8d6; border: 2px solid #c90; padding: .8em; }
#new-key { font: 1.1em monospace; user-select: all; word-break: break-all; }
form.inline { display: inline; }
fieldset { border: 1px solid #d0d5dc; background: #fff; max-width: 34em; }
label { display: block; margin: .3em 0; }
.revoked { color: #888; }
svg.chart rect.bar { fill: #38c; }
svg.chart rect.bg { fill: #eef1f4; }
"""


def e(value: object) -> str:
    """``value`` as HTML text (quotes escaped too, so it is safe inside attributes)."""
    return html.escape(str(value), quote=True)


def _csrf(token: str) -> str:
    return f'<input type="hidden" name="csrf_token" value="{e(token)}">'


def page(title: str, body: str, user: User | None = None, csrf: str = "") -> str:
    """A whole HTML page: header (with sign-out when signed in) and ``body``."""
    who = ""
    if user is not None:
        role = " (admin)" if user.is_admin else ""
        who = (
            f'<span>{e(user.email)}{role}</span> '
            f'<form class="inline" method="post" action="{BASE}/signout">{_csrf(csrf)}'
            '<button type="submit" id="sign-out">Sign out</button></form>'
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)} · parcelsearch developer portal</title>"
        f'<link rel="stylesheet" href="{BASE}/static/portal.css"></head><body>'
        f"<header><h1>parcelsearch developer portal</h1><div>{who}</div></header>"
        f"<main>{body}</main></body></html>"
    )


def message_page(title: str, message: str, user: User | None = None, csrf: str = "") -> str:
    """A page with one message and a link back to the portal."""
    body = (
        f'<h2>{e(title)}</h2><p class="error" id="message">{e(message)}</p>'
        f'<p><a href="{BASE}/">Back to the portal</a></p>'
    )
    return page(title, body, user, csrf)


def signin_page(csrf: str, error: str = "", email: str = "") -> str:
    """The sign-in form (fields ``email`` and ``password``)."""
    shown = f'<p class="error" id="message">{e(error)}</p>' if error else ""
    body = (
        f"<h2>Sign in</h2>{shown}"
        f'<form method="post" action="{BASE}/signin"><fieldset>{_csrf(csrf)}'
        f'<label>E-mail <input type="email" name="email" value="{e(email)}" required '
        'autocomplete="username"></label>'
        '<label>Password <input type="password" name="password" required '
        'autocomplete="current-password"></label>'
        '<button type="submit" id="sign-in">Sign in</button></fieldset></form>'
        "<p>Accounts are made by the service's operator: "
        "<code>parcelsearch portal add-user</code>.</p>"
    )
    return page("Sign in", body)


def _when(moment: datetime | None, none: str) -> str:
    return none if moment is None else moment.strftime("%Y-%m-%d %H:%M UTC")


def _rate(per_second: float) -> str:
    return f"{per_second:g}/s"


def chart(daily: Sequence[tuple[date, int]], width: int = 180, height: int = 40) -> str:
    """Calls per day as an inline SVG bar chart (one ``<title>`` per bar for hovering)."""
    top = max([count for _, count in daily] + [1])
    step = width / max(len(daily), 1)
    bars = []
    for i, (day, count) in enumerate(daily):
        h = round(height * count / top, 2)
        x = round(i * step, 2)
        bars.append(
            f'<rect class="bar" x="{x}" y="{round(height - h, 2)}" width="{round(step * 0.8, 2)}"'
            f' height="{h}" data-day="{day.isoformat()}" data-calls="{count}">'
            f"<title>{day.isoformat()}: {count} call{'s' if count != 1 else ''}</title></rect>"
        )
    first, last = (daily[0][0], daily[-1][0]) if daily else ("", "")
    return (
        f'<svg class="chart" data-chart="calls-per-day" xmlns="http://www.w3.org/2000/svg"'
        f' width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img"'
        f' aria-label="calls per day, {first} to {last}">'
        f'<rect class="bg" x="0" y="0" width="{width}" height="{height}"></rect>'
        + "".join(bars) + "</svg>"
    )


def _actions(app: App, user: User, csrf: str) -> str:
    if app.revoked:
        return "revoked"
    base = f"{BASE}/apps/{app.id}"
    parts = [
        f'<form class="inline" method="post" action="{base}/regenerate">{_csrf(csrf)}'
        '<button type="submit" data-action="regenerate">Regenerate key</button></form>',
        f'<form class="inline" method="post" action="{base}/revoke">{_csrf(csrf)}'
        '<button type="submit" data-action="revoke">Revoke</button></form>',
    ]
    if user.is_admin:
        quota = "" if app.quota is None else str(app.quota)
        parts.append(
            f'<form method="post" action="{base}/limits">{_csrf(csrf)}'
            f'<label>Rate/s <input name="per_second" size="5" value="{app.per_second:g}">'
            f'</label><label>Quota <input name="quota" size="7" value="{quota}"></label>'
            '<button type="submit" data-action="limits">Set limits</button></form>'
        )
    return "".join(parts)


def _row(app: App, user: User, csrf: str) -> str:
    quota = "no quota" if app.quota is None else f"{app.quota:,} per {app.quota_period}"
    if app.quota_period == "lifetime" and app.quota is not None:
        quota = f"{app.quota:,} for life"
    remaining = "unlimited" if app.remaining is None else f"{app.remaining:,}"
    owner = f'<td data-field="owner">{e(app.owner or "(keys command)")}</td>' \
        if user.is_admin else ""
    status = ' class="revoked"' if app.revoked else ""
    return (
        f'<tr data-app="{e(app.name)}" data-app-id="{app.id}"{status}>'
        f'<td data-field="name">{e(app.name)}</td>{owner}'
        f'<td data-field="type">{e(app.key_type)}</td>'
        f'<td data-field="services">{e(", ".join(app.services))}</td>'
        f'<td class="n" data-field="per-second">{e(_rate(app.per_second))}</td>'
        f'<td data-field="quota">{e(quota)}</td>'
        f'<td class="n" data-usage="month">{app.used_month}</td>'
        f'<td class="n" data-usage="lifetime">{app.used_lifetime}</td>'
        f'<td class="n" data-usage="remaining">{remaining}</td>'
        f'<td data-usage="resets">{e(_when(app.resets, "never"))}</td>'
        f'<td class="n" data-usage="spike-refusals">{app.spike_refusals}</td>'
        f'<td data-usage="last-used">{e(_when(app.last_used, "never"))}</td>'
        f"<td>{chart(app.daily)}</td>"
        f"<td>{_actions(app, user, csrf)}</td></tr>"
    )


def _create_form(csrf: str, values: dict[str, str] | None = None) -> str:
    values = values or {}
    types = "".join(
        f'<option value="{e(t)}"{" selected" if values.get("key_type") == t else ""}>'
        f"{e(t)} ({rate:g}/s, {quota:,} calls {'for life' if period == 'lifetime' else 'a month'})"
        "</option>"
        for t, (rate, quota, period) in KEY_TYPES.items()
    )
    services = "".join(
        f'<label><input type="checkbox" name="services" value="{e(s)}" checked> {e(s)}</label>'
        for s in SERVICES
    )
    return (
        f'<h2>Create an app</h2><form method="post" action="{BASE}/apps" id="create-app">'
        f"<fieldset>{_csrf(csrf)}"
        f'<label>Name <input name="name" required maxlength="100" value="'
        f'{e(values.get("name", ""))}"></label>'
        f'<label>Key type <select name="key_type">{types}</select></label>'
        f"<div>Services {services}</div>"
        '<button type="submit" id="create">Create app</button></fieldset></form>'
    )


def apps_page(
    user: User,
    csrf: str,
    apps: Sequence[App],
    new_key: tuple[str, str] | None = None,
    error: str = "",
    notice: str = "",
    values: dict[str, str] | None = None,
) -> str:
    """The Apps section: the new key (once), a message, the table of apps, the create form.

    Parameters
    ----------
    new_key
        ``(app name, plaintext key)`` right after creating or regenerating; shown in
        ``id="new-key"`` on this response only.
    """
    parts = []
    if new_key is not None:
        parts.append(
            f'<div class="newkey"><p>The key of <strong>{e(new_key[0])}</strong> (copy it now: '
            "it is shown only this once and cannot be recovered; send it in the "
            "<code>x-api-key</code> header):</p>"
            f'<p><code id="new-key">{e(new_key[1])}</code></p></div>'
        )
    if error:
        parts.append(f'<p class="error" id="message">{e(error)}</p>')
    if notice:
        parts.append(f'<p class="notice" id="message">{e(notice)}</p>')
    owner = "<th>Owner</th>" if user.is_admin else ""
    heads = (
        f"<tr><th>App</th>{owner}<th>Type</th><th>Services</th><th>Rate</th><th>Quota</th>"
        "<th>Calls this month</th><th>Calls in total</th><th>Remaining</th><th>Quota resets</th>"
        "<th>Spike-arrest refusals</th><th>Last used</th><th>Calls per day (30 days)</th>"
        "<th></th></tr>"
    )
    rows = "".join(_row(app, user, csrf) for app in apps)
    table = (
        f'<div class="scroll"><table id="apps"><thead>{heads}</thead><tbody>{rows}</tbody>'
        "</table></div>" if apps else '<p id="no-apps">No apps yet.</p>'
    )
    parts.append(f"<h2>Apps</h2>{table}")
    parts.append(_create_form(csrf, values))
    return page("Apps", "".join(parts), user, csrf)
