"""The client's configuration, read and checked once (:mod:`parcelsearch._fetch.config`)."""

from __future__ import annotations

import pytest

from parcelsearch._fetch.config import Secret, positive, resolve_key
from parcelsearch.errors import ConfigurationError


def test_a_secret_never_shows_in_its_repr() -> None:
    held = Secret("sk-live-TOPSECRET")
    assert "TOPSECRET" not in f"{held!r} {[held]} {held.__slots__}"
    assert held.reveal() == "sk-live-TOPSECRET"


@pytest.mark.parametrize(
    ("key", "words"),
    [
        pytest.param("  ", "no API key", id="blank"),
        pytest.param("sk live", "whitespace or non-ASCII", id="space"),
        pytest.param("sk-clé", "whitespace or non-ASCII", id="non-ascii"),
    ],
)
def test_a_key_that_cannot_be_sent_is_refused_without_showing_it(key: str, words: str) -> None:
    with pytest.raises(ConfigurationError, match=words) as caught:
        resolve_key(key)
    assert key.strip() == "" or key not in str(caught.value)


@pytest.mark.parametrize("value", [0, -1, float("inf"), True, "10"])
def test_a_rate_that_is_not_a_positive_number_is_refused(value: object) -> None:
    with pytest.raises(ConfigurationError, match="rate must be a positive number"):
        positive(value, "rate", "calls per second", 10)  # type: ignore[arg-type]
