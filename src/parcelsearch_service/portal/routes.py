"""The portal's routes (mounted at ``/portal``): sign-in, sign-out, the Apps section (an
overview, one page per app, the new key with snippets), the Account and All apps (admin)
pages, Getting started, the service's CA certificate, and the stylesheet and script.

Security properties, in one place:

- sessions: a random cookie ``__Host-parcelsearch-portal`` (``Secure; HttpOnly;
  SameSite=Strict; Path=/``), stored as its sha256; a new one at every sign-in (the
  pre-sign-in one is ended), idle and absolute expiry, ended by sign-out;
- every POST carries the session's CSRF token (``csrf_token``) and, when the browser says
  where it came from (``Sec-Fetch-Site``, ``Origin``), comes from this origin; otherwise 403;
- sign-in throttled per account (a growing delay, never a lock-out; a browser that signed
  in to the account before — its device cookie ``__Host-parcelsearch-device`` — is not
  slowed down) and per client address (429 with a message saying when); each attempt is
  recorded before its password is checked, in one transaction with the checks, so
  concurrent attempts cannot exceed the limits;
- another user's app answers 404; limits and the All apps page are for admins only (403);
  regenerating a key is for its owner only (403: the new key would be shown to whoever
  asks); what an admin does to another user's app is shown on the app's page;
- every response carries CSP (scripts and styles from this origin only, nothing inline), HSTS,
  ``X-Frame-Options: DENY``, ``Referrer-Policy: no-referrer``, ``nosniff`` and ``no-store``;
- a key's plaintext appears only in the response to the create/regenerate POST;
- changing a password needs the current one (its guesses throttled and logged like
  sign-ins) and a new one that differs from it, and ends the account's other sessions.
"""

from __future__ import annotations

import hmac
import logging
import math
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from parcelsearch.errors import ConfigurationError
from parcelsearch_service.envelopes import printable
from parcelsearch_service.errors import StoreBusyError
from parcelsearch_service.keys.rules import MAX_QUOTA, MAX_RATE, MIN_RATE
from parcelsearch_service.portal import pages
from parcelsearch_service.portal.accounts import User
from parcelsearch_service.portal.pages import BASE, CHART_SPANS, STATIC, Snippets
from parcelsearch_service.portal.sessions import Session
from parcelsearch_service.portal.signin import DEVICE_AGE
from parcelsearch_service.portal.storage import PortalStore
from parcelsearch_service.portal.web_guards import (
    SECURITY_HEADERS,
    SecurityHeaders,
    _form,
    _same_origin,
)

__all__ = ["create_portal", "SecurityHeaders", "SECURITY_HEADERS", "COOKIE", "DEVICE_COOKIE"]

#: Sign-ins and changes to apps (names and e-mail addresses; never keys or passwords).
log = logging.getLogger("parcelsearch.service.portal")

COOKIE = "__Host-parcelsearch-portal"
#: The device cookie: set at each sign-in, it exempts this browser from the account's
#: throttle (:class:`~parcelsearch_service.portal.signin.Throttle`).
DEVICE_COOKIE = "__Host-parcelsearch-device"

CSRF_REFUSED = (
    "This form is out of date or did not come from this portal (its CSRF token is missing or "
    "wrong), so nothing was changed. Reload the page and try again."
)


def _minutes(seconds: float) -> str:
    if seconds < 60:
        n = max(1, math.ceil(seconds))
        return f"{n} second{'s' if n != 1 else ''}"
    n = max(1, math.ceil(seconds / 60))
    return f"{n} minute{'s' if n != 1 else ''}"


Handler = Callable[[Request], Awaitable[Response]]


def _limit_number(text: str, field: str) -> float:
    """The number typed in the limits form's ``field`` (ASCII decimal), or the error naming
    it and its range."""
    try:
        value = float(text) if text.isascii() and len(text) <= 40 else math.nan
    except ValueError:
        value = math.nan
    if not MIN_RATE <= value <= MAX_RATE:
        raise ConfigurationError(
            f"{field} must be a number from {MIN_RATE:g} to {MAX_RATE:,.0f} (calls a second), "
            f"got {text[:40]!r}"
        )
    return value


def _endpoint(handler: Callable[[Request, FormData | None], Response]) -> Handler:
    """An endpoint that reads the form, then runs ``handler`` in the threadpool (the store
    and scrypt block; the event loop must not)."""

    async def endpoint(request: Request) -> Response:
        form = await _form(request)
        return await run_in_threadpool(handler, request, form)

    return endpoint


class _Portal:
    """The handlers, bound to one :class:`PortalStore`."""

    def __init__(self, store: PortalStore, ca: Path | None = None) -> None:
        self.store = store
        self.ca = None if ca is None else ca.resolve()

    # ------------------------------------------------------------------ helpers

    def _session(self, request: Request) -> Session | None:
        return self.store.session(request.cookies.get(COOKIE))

    @staticmethod
    def _set_cookie(response: Response, token: str) -> None:
        response.set_cookie(COOKIE, token, path="/", secure=True, httponly=True, samesite="strict")

    @staticmethod
    def _text(form: FormData, name: str) -> str:
        value = form.get(name)
        return value if isinstance(value, str) else ""

    def _csrf_refusal(
        self, request: Request, session: Session | None, form: FormData | None
    ) -> Response | None:
        """A 403 page unless the POST carries this session's CSRF token from this origin."""
        token = "" if form is None else self._text(form, "csrf_token")
        ok = (
            session is not None
            and bool(token)
            and hmac.compare_digest(token.encode(), session.csrf.encode())
            and _same_origin(request)
        )
        if ok:
            return None
        user = None if session is None else session.user
        csrf = "" if session is None else session.csrf
        return HTMLResponse(pages.message_page("Refused", CSRF_REFUSED, user, csrf), 403)

    def _signed_in_post(
        self, request: Request, form: FormData | None
    ) -> tuple[Session, User, FormData] | Response:
        """The session, user and form of a state-changing request, or the refusal."""
        session = self._session(request)
        refusal = self._csrf_refusal(request, session, form)
        if refusal is not None:
            return refusal
        assert session is not None and form is not None
        if session.user is None:
            return RedirectResponse(f"{BASE}/signin", 303)
        return session, session.user, form

    def _app_post(
        self, request: Request, form: FormData | None
    ) -> tuple[Session, User, FormData, str] | Response:
        """A state-changing request about one app the user may see: its session, user, form
        and the app's name, or the refusal (another user's app answers 404)."""
        checked = self._signed_in_post(request, form)
        if isinstance(checked, Response):
            return checked
        session, user, posted = checked
        name = self.store.owned(user, request.path_params["app_id"])
        if name is None:
            return self._not_found(session, user)
        return session, user, posted, name

    def _apps(self, session: Session, user: User, status: int = 200, **kw: Any) -> Response:
        apps = self.store.apps(user)
        return HTMLResponse(pages.apps_page(user, session.csrf, apps, **kw), status)

    def _app_page(
        self,
        session: Session,
        user: User,
        app_id: int,
        status: int = 200,
        days: int = 30,
        **kw: Any,
    ) -> Response:
        app = self.store.app(user, app_id)
        if app is None:
            return self._not_found(session, user)
        return HTMLResponse(pages.app_page(user, session.csrf, app, days, **kw), status)

    def _key(
        self, request: Request, session: Session, user: User, app_id: int, name: str, api_key: str
    ) -> Response:
        """The page showing a new key once, with snippets for this service."""
        base_url = f"{request.url.scheme}://{request.url.netloc}"
        ca = None if self.ca is None else str(self.ca)
        snippets = Snippets.build(api_key, base_url, ca)
        return HTMLResponse(
            pages.key_page(user, session.csrf, app_id, name, api_key, snippets, self.ca is not None)
        )

    @staticmethod
    def _back(request: Request, form: FormData) -> Response:
        """After a change to an app: back to the All apps page if it came from there, else
        to the app's page."""
        if form.get("back") == "admin":
            return RedirectResponse(f"{BASE}/admin", 303)
        return RedirectResponse(f"{BASE}/apps/{request.path_params['app_id']}", 303)

    def _not_found(self, session: Session, user: User) -> Response:
        return HTMLResponse(
            pages.message_page("Not found", "No such app.", user, session.csrf), 404
        )

    # ------------------------------------------------------------------ pages

    def home(self, request: Request, form: FormData | None) -> Response:
        session = self._session(request)
        if session is None or session.user is None:
            return RedirectResponse(f"{BASE}/signin", 303)
        return self._apps(session, session.user)

    def signin_form(self, request: Request, form: FormData | None) -> Response:
        session = self._session(request)
        if session is not None and session.user is not None:
            return RedirectResponse(f"{BASE}/", 303)
        if session is None:
            token, session = self.store.new_session(None)
            response = HTMLResponse(pages.signin_page(session.csrf))
            self._set_cookie(response, token)
            return response
        return HTMLResponse(pages.signin_page(session.csrf))

    def signin(self, request: Request, form: FormData | None) -> Response:
        session = self._session(request)
        refusal = self._csrf_refusal(request, session, form)
        if refusal is not None:
            return refusal
        assert session is not None and form is not None
        email, password = self._text(form, "email"), self._text(form, "password")
        address = request.client.host if request.client else "-"
        device = request.cookies.get(DEVICE_COOKIE)
        attempt = self.store.begin_signin(email, address, device)  # recorded before checked
        if isinstance(attempt, tuple):
            log.warning("portal sign-in throttled (%s) from %s", attempt[0], printable(address))
            what = "this account" if attempt[0] == "account" else "your address"
            message = (
                f"Too many failed sign-in attempts for {what}. Sign-in is paused for it; try "
                f"again in {_minutes(attempt[1])}."
            )
            return HTMLResponse(
                pages.signin_page(session.csrf, message, email),
                429,
                headers={"Retry-After": str(math.ceil(attempt[1]))},
            )
        user = self.store.authenticate(email, password)
        if user is None:
            log.info("portal sign-in failed from %s", printable(address))
            self.store.signin_failed(attempt, device)
            return HTMLResponse(
                pages.signin_page(session.csrf, "Wrong e-mail address or password.", email), 401
            )
        log.info("portal sign-in: %s from %s", printable(user.email), printable(address))
        self.store.record_signin(user, address, request.headers.get("user-agent", ""))
        device_token = self.store.signin_succeeded(attempt, user, address, device)
        self.store.end_session(request.cookies.get(COOKIE, ""))
        token, _ = self.store.new_session(user)
        response = RedirectResponse(f"{BASE}/", 303)
        self._set_cookie(response, token)
        response.set_cookie(
            DEVICE_COOKIE,
            device_token,
            max_age=int(DEVICE_AGE),
            path="/",
            secure=True,
            httponly=True,
            samesite="strict",
        )
        return response

    def signout(self, request: Request, form: FormData | None) -> Response:
        session = self._session(request)
        refusal = self._csrf_refusal(request, session, form)
        if refusal is not None:
            return refusal
        self.store.end_session(request.cookies.get(COOKIE, ""))
        response = RedirectResponse(f"{BASE}/signin", 303)
        response.delete_cookie(COOKIE, path="/", secure=True, httponly=True, samesite="strict")
        return response

    def create(self, request: Request, form: FormData | None) -> Response:
        checked = self._signed_in_post(request, form)
        if isinstance(checked, Response):
            return checked
        session, user, form = checked
        name = self._text(form, "name").strip()
        key_type = self._text(form, "key_type")
        services = [s for s in form.getlist("services") if isinstance(s, str)]
        try:
            app_id, api_key = self.store.create_app(user, name, key_type, services)
        except ConfigurationError as exc:
            return self._apps(
                session,
                user,
                400,
                error=f"App not created: {exc}.",
                values={"name": name, "key_type": key_type},
            )
        log.info("portal: %s created app %r", printable(user.email), name)
        return self._key(request, session, user, app_id, name, api_key)

    def regenerate(self, request: Request, form: FormData | None) -> Response:
        checked = self._app_post(request, form)
        if isinstance(checked, Response):
            return checked
        session, user, _, name = checked
        app_id = request.path_params["app_id"]
        if self.store.owner_of(app_id) != user.email:  # the new key is shown to whoever asks
            log.warning(
                "portal: %s was refused regenerating the key of app %r (not its owner)",
                printable(user.email),
                name,
            )
            return HTMLResponse(
                pages.message_page(
                    "Refused",
                    "Only the app's owner can regenerate its key, and see the new one; "
                    "an admin can revoke it or change its limits.",
                    user,
                    session.csrf,
                ),
                403,
            )
        api_key = self.store.regenerate(app_id)
        if api_key is None:
            return self._app_page(
                session,
                user,
                app_id,
                409,
                error=f"{name} is revoked: its key cannot be regenerated.",
            )
        log.info("portal: %s regenerated the key of app %r", printable(user.email), name)
        return self._key(request, session, user, app_id, name, api_key)

    def revoke(self, request: Request, form: FormData | None) -> Response:
        checked = self._app_post(request, form)
        if isinstance(checked, Response):
            return checked
        session, user, form, name = checked
        self.store.revoke(request.path_params["app_id"])
        log.info("portal: %s revoked app %r", printable(user.email), name)
        self._admin_action(request.path_params["app_id"], user, "revoked the app")
        return self._back(request, form)

    def _admin_action(self, app_id: int, user: User, action: str) -> None:
        """Record what an admin did to another user's app: its owner sees it on its page."""
        if self.store.owner_of(app_id) != user.email:
            self.store.record_admin_action(app_id, user, action)

    def limits(self, request: Request, form: FormData | None) -> Response:
        checked = self._app_post(request, form)
        if isinstance(checked, Response):
            return checked
        session, user, form, name = checked
        if not user.is_admin:
            return HTMLResponse(
                pages.message_page(
                    "Refused",
                    "Only an admin can change a key's limits; ask one.",
                    user,
                    session.csrf,
                ),
                403,
            )
        app_id = request.path_params["app_id"]
        rate_text = self._text(form, "per_second").strip()
        quota_text = self._text(form, "quota").strip().replace(",", "").replace("_", "")
        try:
            rate = _limit_number(rate_text, "per_second")
            if quota_text and not (
                quota_text.isascii() and quota_text.isdigit() and len(quota_text) <= 20
            ):
                raise ConfigurationError(
                    f"quota must be a whole number from 0 to {MAX_QUOTA:,} (or empty for no "
                    f"quota), got {quota_text[:40]!r}"
                )
            quota = int(quota_text) if quota_text else None
            self.store.set_limits(app_id, rate, quota)
        except ConfigurationError as exc:
            return self._app_page(session, user, app_id, 400, error=f"Limits not changed: {exc}.")
        log.info(
            "portal: %s set the limits of app %r to %s/s, quota %s",
            printable(user.email),
            name,
            rate,
            quota_text or "none",
        )
        self._admin_action(
            app_id,
            user,
            f"set the limits to {rate:g} calls a second, quota "
            f"{quota if quota is not None else 'none'}",
        )
        return self._back(request, form)

    # ------------------------------------------------------------------ app, account, admin,
    # getting started

    def _signed_in(self, request: Request) -> tuple[Session, User] | Response:
        session = self._session(request)
        if session is None or session.user is None:
            return RedirectResponse(f"{BASE}/signin", 303)
        return session, session.user

    def app(self, request: Request, form: FormData | None) -> Response:
        checked = self._signed_in(request)
        if isinstance(checked, Response):
            return checked
        session, user = checked
        days_text = request.query_params.get("days", "30")
        if not days_text.isdigit() or int(days_text) not in CHART_SPANS:
            spans = " or ".join(map(str, CHART_SPANS))
            return HTMLResponse(
                pages.message_page(
                    "Bad request",
                    f"days must be {spans}, got {days_text[:20]!r}.",
                    user,
                    session.csrf,
                ),
                400,
            )
        return self._app_page(session, user, request.path_params["app_id"], days=int(days_text))

    def _account(self, session: Session, user: User, status: int = 200, **kw: Any) -> Response:
        body = pages.account_page(
            user,
            session.csrf,
            self.store.signins(user),
            self.store.active_sessions(user, session),
            **kw,
        )
        return HTMLResponse(body, status)

    def account(self, request: Request, form: FormData | None) -> Response:
        checked = self._signed_in(request)
        if isinstance(checked, Response):
            return checked
        return self._account(*checked)

    def change_password(self, request: Request, form: FormData | None) -> Response:
        checked = self._signed_in_post(request, form)
        if isinstance(checked, Response):
            return checked
        session, user, form = checked
        new = self._text(form, "new_password")
        if new != self._text(form, "new_password_again"):
            return self._account(
                session,
                user,
                400,
                error=(
                    "Password not changed: the two new passwords differ; type the same one twice."
                ),
            )
        # The current password is guessed like a sign-in: the same throttles and log.
        address = request.client.host if request.client else "-"
        device = request.cookies.get(DEVICE_COOKIE)
        attempt = self.store.begin_signin(user.email, address, device)  # recorded first
        if isinstance(attempt, tuple):
            log.warning(
                "portal password change throttled (%s) for %s from %s",
                attempt[0],
                printable(user.email),
                printable(address),
            )
            response = self._account(
                session,
                user,
                429,
                error=(
                    "Password not changed: too many wrong passwords; try again in "
                    f"{_minutes(attempt[1])}."
                ),
            )
            response.headers["Retry-After"] = str(math.ceil(attempt[1]))
            return response
        current = self._text(form, "current_password")
        if self.store.authenticate(user.email, current) is None:
            log.info(
                "portal password change failed (wrong current password) for %s from %s",
                printable(user.email),
                printable(address),
            )
            self.store.signin_failed(attempt, device)
            return self._account(
                session,
                user,
                400,
                error=(
                    "Password not changed: the current password is wrong; type the password you "
                    "signed in with."
                ),
            )
        try:
            ended = self.store.change_password(user, current, new, session)
        except ConfigurationError as exc:
            return self._account(session, user, 400, error=f"Password not changed: {exc}.")
        device_token = self.store.signin_succeeded(attempt, user, address, device)
        log.info("portal: %s changed their password (%d other sessions ended)", user.email, ended)
        response = self._account(
            session, user, notice=(f"Password changed; {_sessions(ended)} signed out.")
        )
        response.set_cookie(
            DEVICE_COOKIE,
            device_token,
            max_age=int(DEVICE_AGE),
            path="/",
            secure=True,
            httponly=True,
            samesite="strict",
        )
        return response

    def signout_others(self, request: Request, form: FormData | None) -> Response:
        checked = self._signed_in_post(request, form)
        if isinstance(checked, Response):
            return checked
        session, user, _ = checked
        ended = self.store.end_other_sessions(user, session)
        log.info("portal: %s signed out %d other sessions", user.email, ended)
        return self._account(session, user, notice=f"{_sessions(ended)} signed out.")

    def admin(self, request: Request, form: FormData | None) -> Response:
        checked = self._signed_in(request)
        if isinstance(checked, Response):
            return checked
        session, user = checked
        if not user.is_admin:
            return HTMLResponse(
                pages.message_page(
                    "Refused", "Only an admin can see every app; ask one.", user, session.csrf
                ),
                403,
            )
        return HTMLResponse(pages.admin_page(user, session.csrf, self.store.apps(user)))

    def start(self, request: Request, form: FormData | None) -> Response:
        session = self._session(request)
        user = None if session is None else session.user
        base_url = f"{request.url.scheme}://{request.url.netloc}"
        return HTMLResponse(
            pages.start_page(
                user, "" if session is None else session.csrf, base_url, self.ca is not None
            )
        )

    def ca_certificate(self, request: Request, form: FormData | None) -> Response:
        if self.ca is None:
            return HTMLResponse(
                pages.message_page(
                    "Not found",
                    "This service uses a certificate your system already trusts: "
                    "there is no CA certificate to download.",
                ),
                404,
            )
        return Response(
            self.ca.read_bytes(),
            media_type="application/x-pem-file",
            headers={"Content-Disposition": 'attachment; filename="ca.pem"'},
        )


def _sessions(n: int) -> str:
    """``"No other session"``, ``"1 other session"``, ``"2 other sessions"``."""
    return "No other session" if n == 0 else f"{n} other session{'s' if n != 1 else ''}"


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}."
    else:
        message = f"There is no page {request.url.path} in the portal."
    return HTMLResponse(
        pages.message_page("Not found" if exc.status_code == 404 else "Refused", message),
        exc.status_code,
    )


async def _busy(request: Request, exc: Exception) -> Response:
    message = "The key store is busy; nothing was changed. Try again in a moment."
    return HTMLResponse(pages.message_page("Busy", message), 503, headers={"Retry-After": "1"})


def create_portal(store: PortalStore, ca: Path | None = None) -> ASGIApp:
    """The portal as an ASGI application, to mount at ``/portal``.

    Parameters
    ----------
    store
        The portal's tables, beside the gateway's keys.
    ca
        The service's CA certificate (PEM), offered at ``/portal/ca.pem`` and named in the
        snippets shown with a new key; ``None`` when clients trust the service through their
        system store.
    """
    portal = more = _Portal(store, ca)
    app_path = "/apps/{app_id:int}"
    routes = [
        Route("/", _endpoint(portal.home), methods=["GET"]),
        Route("/signin", _endpoint(portal.signin_form), methods=["GET"]),
        Route("/signin", _endpoint(portal.signin), methods=["POST"]),
        Route("/signout", _endpoint(portal.signout), methods=["POST"]),
        Route("/apps", _endpoint(portal.create), methods=["POST"]),
        Route(app_path + "/regenerate", _endpoint(portal.regenerate), methods=["POST"]),
        Route(app_path + "/revoke", _endpoint(portal.revoke), methods=["POST"]),
        Route(app_path + "/limits", _endpoint(portal.limits), methods=["POST"]),
        Route(app_path, _endpoint(more.app), methods=["GET"]),
        Route("/account", _endpoint(more.account), methods=["GET"]),
        Route("/account/password", _endpoint(more.change_password), methods=["POST"]),
        Route("/account/signout-others", _endpoint(more.signout_others), methods=["POST"]),
        Route("/admin", _endpoint(more.admin), methods=["GET"]),
        Route("/start", _endpoint(more.start), methods=["GET"]),
        Route("/ca.pem", _endpoint(more.ca_certificate), methods=["GET"]),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={
            HTTPException: _http_error,
            StoreBusyError: _busy,
        },
    )
    app.router.redirect_slashes = False
    return SecurityHeaders(app)
