"""The one exception tree."""

from __future__ import annotations

import inspect

import pytest

from parcelsearch import errors


def test_every_error_derives_from_the_base() -> None:
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass)
               if issubclass(c, Exception) and c.__module__ == errors.__name__]
    assert len(classes) >= 15
    assert all(issubclass(c, errors.ParcelSearchError) for c in classes)


def test_service_errors_carry_status_and_messages() -> None:
    exc = errors.AuthenticationError("401", status=401, messages=["Invalid ApiKey"], url="u")
    assert (exc.status, exc.messages, exc.url) == (401, ["Invalid ApiKey"], "u")
    assert isinstance(exc, errors.ServiceError)


@pytest.mark.parametrize("name", errors.__all__)
def test_all_names_exist(name: str) -> None:
    assert hasattr(errors, name)
