"""The one exception tree: its drawing is true, and real answers map onto it."""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest

import parcelsearch
from parcelsearch import errors
from parcelsearch.client import Client

RING = "[[-99.74,32.44],[-99.73,32.44],[-99.73,32.45],[-99.74,32.44]]"


def _classes(module: Any = errors) -> dict[str, type[BaseException]]:
    return {
        name: cls
        for name, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, BaseException) and cls.__module__ == module.__name__
    }


def test_every_error_derives_from_the_base() -> None:
    classes = _classes()
    assert len(classes) >= 16
    assert all(issubclass(c, errors.ParcelSearchError) for c in classes.values())


def test_the_tree_drawn_in_the_docstring_is_the_tree_in_the_code() -> None:
    """Each name in the drawing sits under the class drawn above it, and none is missing."""
    assert errors.__doc__ is not None
    drawn: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in errors.__doc__.splitlines():
        match = re.match(r"^(\s*(?:[│ ]*[├└]── )?)([A-Z]\w+Error|\w+Interrupted)\b", line)
        if not match or ("──" not in line and not line.strip().startswith("ParcelSearchError")):
            continue
        depth, name = len(match[1]), match[2]
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            drawn[name] = stack[-1][1]
        stack.append((depth, name))
    from parcelsearch_service import errors as service_errors

    classes = {**_classes(), **_classes(service_errors)}  # the service's are drawn too
    public = {n for n in classes if not n.startswith("_")}
    assert set(drawn) | {"ParcelSearchError"} == public
    for name, parent in drawn.items():
        assert classes[parent] in classes[name].__mro__, f"{name} under {parent}"


def test_the_service_has_its_own_errors() -> None:
    from parcelsearch_service import errors as service_errors

    assert all(issubclass(c, errors.ParcelSearchError) for c in _classes(service_errors).values())
    assert not set(_classes(service_errors)) & set(_classes())


def test_every_exported_error_is_reachable_from_the_package() -> None:
    for name in errors.__all__:
        assert getattr(parcelsearch, name) is getattr(errors, name)


def test_hints_speak_both_dialects_from_one_message() -> None:
    exc = errors.QuotaWouldExceedError(
        "needs 12 calls; the budget allows 5.",
        needed=12,
        allowed=5,
        hints=[errors.Hint("budget", 12, "raise {knob}"), errors.Hint("allow_partial")],
    )
    assert str(exc) == (
        "needs 12 calls; the budget allows 5. Raise budget=12. Set allow_partial=True."
    )
    assert exc.render("cli") == (
        "needs 12 calls; the budget allows 5. Raise --budget 12. Set --allow-partial."
    )
    key = errors.ConfigurationError("no API key.", hints=[errors.Hint("api_key")])
    assert "--" not in key.render("cli") and "PARCELSEARCH_API_KEY" in key.render("cli")
    assert "api_key=" not in key.render("cli") and "api_key=" in str(key)


def test_an_interrupt_is_both_a_parcelsearch_error_and_a_keyboard_interrupt() -> None:
    exc = errors.SearchInterrupted("stopped", signum=2, result="partial")
    assert isinstance(exc, KeyboardInterrupt) and isinstance(exc, errors.ParcelSearchError)
    assert (exc.signum, exc.result) == (2, "partial")


@pytest.mark.parametrize(
    ("key", "target", "error", "status", "message"),
    [
        pytest.param(
            "not-a-key", "search", errors.AuthenticationError, 401, "Invalid ApiKey", id="401"
        ),
        pytest.param(None, "bad-ring", errors.BadPolygonError, 400, "", id="400"),
        pytest.param(None, "huge", errors.RequestTooLargeError, 414, "", id="414"),
    ],
)
def test_service_answers_carry_status_and_messages_verbatim(
    key: str | None,
    target: str,
    error: type[errors.ServiceError],
    status: int,
    message: str,
    service: Any,
    api_key: str,
    ca_bundle: str,
) -> None:
    """Real answers of the reference service become the right class, status and messages."""
    with Client(key or api_key, service.base_url, ca_bundle, retries=0) as client:
        ring = {
            "search": RING,
            "bad-ring": "[[1,2],[3,4]]",
            "huge": "[" + ",".join("[-99.7,32.4]" for _ in range(1200)) + "]",
        }[target]
        with pytest.raises(error) as caught:
            client.search_page(ring, 1)
    exc = caught.value
    assert exc.status == status and exc.messages and message in exc.messages[0]
    assert exc.url is not None and "?" not in exc.url and api_key not in str(exc)
    assert all(text in str(exc) for text in exc.messages)


def test_a_refusal_renders_in_ipython_as_a_short_card_with_its_price() -> None:
    from parcelsearch._run.pricing import Price

    price = Price(first=7, later=0, known="lower", pieces=7)
    error = errors.QuotaWouldExceedError(
        "this search needs at least 7 calls, but the budget allows 5 more; nothing was spent.",
        needed=7,
        allowed=5,
        price=price,
        hints=[
            errors.Hint("budget", 7, "raise {knob}"),
            errors.Hint("allow_partial", None, "pass {knob} to finish the areas that fit"),
        ],
    )
    card = error._render_traceback_()
    assert card == [
        "QuotaWouldExceedError:",
        "  this search needs at least 7 calls, but the budget allows 5 more; nothing was spent.",
        "  price: at least 7 calls",
        "  exact: 7 for page 1 of 7 pieces",
        "  estimated: the later pages, counted once page 1 says how many",
        "next:",
        "  raise budget=7",
        "  pass allow_partial=True to finish the areas that fit",
    ]
    assert str(error).startswith("this search needs")  # elsewhere: the plain message
    wrapped = errors.ConfigurationError("x" * 250).card()[1:]  # lines of at most 100
    assert wrapped == ["  " + "x" * 98] * 2 + ["  " + "x" * 54]
