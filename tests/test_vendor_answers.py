"""The one reader of response bodies: our envelope, gateway faults, HTML pages, counts."""

from __future__ import annotations

import json

import pytest

from parcelsearch._fetch.answers import count_field, read_refusal

QUOTA = {
    "fault": {
        "faultstring": "Rate limit quota violation. Quota limit  exceeded. Identifier : _default",
        "detail": {"errorcode": "policies.ratelimit.QuotaViolation"},
    }
}


def body(payload: object) -> bytes:
    return json.dumps(payload).encode()


@pytest.mark.parametrize(
    "status, payload, kind, shape",
    [
        (429, QUOTA, "quota", "fault"),
        (403, QUOTA, "quota", "fault"),
        (
            403,
            {
                "fault": {
                    "faultstring": "x",
                    "detail": {"errorcode": "policies.ratelimit.QuotaViolation"},
                }
            },
            "quota",
            "fault",
        ),  # by its code alone
        (
            429,
            {"status": "ERROR", "messages": ["Rate limit quota violation. Quota limit exceeded."]},
            "quota",
            "envelope",
        ),
        (
            429,
            {
                "fault": {
                    "faultstring": "Spike arrest violation. Allowed rate : 10ps",
                    "detail": {"errorcode": "policies.ratelimit.SpikeArrestViolation"},
                }
            },
            "spike",
            "fault",
        ),
        (
            429,
            {"status": "ERROR", "messages": ["Spike arrest violation. Allowed rate : 10ps"]},
            "spike",
            "envelope",
        ),
        (
            401,
            {
                "fault": {
                    "faultstring": "Invalid ApiKey",
                    "detail": {"errorcode": "oauth.v2.InvalidApiKey"},
                }
            },
            "key",
            "fault",
        ),
        (404, {"status": "ERROR", "messages": ["No parcels found"]}, "empty", "envelope"),
        (200, {"status": "ERROR", "messages": ["No parcels found"]}, "empty", "envelope"),
        (
            404,
            {
                "fault": {
                    "faultstring": "Unable to identify proxy for host: default and url: /v1",
                    "detail": {"errorcode": "messaging.adaptors.http.flow.ApplicationNotFound"},
                }
            },
            "other",
            "fault",
        ),
        (
            400,
            {"status": "ERROR", "messages": ["page 3 is beyond the last page"]},
            "other",
            "envelope",
        ),
    ],
)
def test_refusals_are_read_by_words_and_code(status, payload, kind, shape) -> None:
    refusal = read_refusal(status, body(payload))
    assert (refusal.kind, refusal.shape) == (kind, shape)
    assert refusal.messages and "{" not in refusal.text


def test_html_pages_are_their_title_never_markup() -> None:
    page = (
        b"<!DOCTYPE html><html><head><title>502 Bad &amp; Gateway</title><script>x()"
        b"</script></head><body><h1>Bad</h1></body></html>"
    )
    refusal = read_refusal(502, page, "text/html")
    assert refusal.text == "an HTML page titled '502 Bad & Gateway'"
    untitled = read_refusal(504, b"<html><body><h1>504 <b>Gateway</b> Timeout</h1></body></html>")
    assert untitled.text == "an HTML page titled '504 Gateway Timeout'"


def test_unreadable_and_empty_bodies_show_no_bytes() -> None:
    assert read_refusal(500, b"\x00\xff garbage").text == "unreadable, no message"
    assert read_refusal(503, b"").text == "empty body, no message"


@pytest.mark.parametrize(
    "value, expected",
    [
        (276, 276),
        ("276", 276),
        (" 7 ", 7),
        (3.0, 3),
        (True, None),
        ("2.5", None),
        ("a", None),
        (None, None),
        ("٣", None),
        (-1, -1),
    ],
)
def test_counts_are_integers_or_numeric_strings(value, expected) -> None:
    assert count_field({"rows": value}, "rows") == expected
