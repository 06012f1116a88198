"""The checks every page passes, under the vendor's page size (set, learnt or 100)."""

from __future__ import annotations

import pytest

from parcelsearch import settings
from parcelsearch._fetch.page import Page, check_page, implied_page_size, learnt_page_size
from parcelsearch.errors import ConfigurationError, MalformedResponseError


def page(number: int, rows: int, pages: int, held: int) -> Page:
    data = tuple(f"id{number}-{n}" for n in range(held))
    return Page(
        request_key="k",
        polygon_json="[]",
        page=number,
        rows=rows,
        pages=pages,
        data_rows=held,
        data=data,
    )


def test_a_page_1_that_agrees_with_itself_teaches_its_size() -> None:
    assert learnt_page_size(page(1, 250, 5, 50), 100) == 50
    assert learnt_page_size(page(1, 450, 3, 200), 100) == 200  # larger is learnt too
    assert learnt_page_size(page(1, 250, 3, 100), 100) is None  # as assumed
    assert learnt_page_size(page(1, 250, 3, 50), 100) is None  # pages agree with no size
    assert learnt_page_size(page(1, 30, 1, 30), 100) is None  # one page: nothing to learn
    assert learnt_page_size(page(2, 250, 5, 50), 100) is None  # only page 1 teaches
    assert learnt_page_size(page(1, 0, 0, 0), 100) is None


def test_the_size_a_stored_page_implies() -> None:
    assert implied_page_size(page(2, 250, 5, 50)) == 50
    assert implied_page_size(page(5, 250, 5, 50)) == 50  # the last: (250 - 50) / 4
    assert implied_page_size(page(3, 230, 3, 30)) == 100
    assert implied_page_size(page(3, 231, 3, 30)) is None  # agrees with no size
    assert implied_page_size(page(1, 30, 1, 30)) is None


def test_pages_are_checked_against_the_size_given() -> None:
    check_page(page(2, 250, 5, 50), page_size=50)
    with pytest.raises(MalformedResponseError, match=r"ceil\(rows=250 / 100\) is 3"):
        check_page(page(2, 250, 5, 50), page_size=100)
    with pytest.raises(MalformedResponseError, match="must hold 50 ids, not 40"):
        check_page(page(2, 250, 5, 40), page_size=50)
    check_page(page(5, 250, 5, 50))  # a stored page: the size its counts imply
    check_page(page(1, 150, 1, 150))  # one page holding the whole answer
    with pytest.raises(MalformedResponseError, match="does not add up"):
        check_page(page(3, 231, 3, 30))


def test_a_page_size_set_by_the_user_is_checked(monkeypatch) -> None:
    monkeypatch.setenv(settings.ENV_PAGE_SIZE, "50")
    assert settings.page_size_setting() == 50
    with pytest.raises(MalformedResponseError):
        check_page(page(2, 300, 3, 100))  # a stored page checked against the size set
    for bad in ("0", "2.5", "fifty"):
        monkeypatch.setenv(settings.ENV_PAGE_SIZE, bad)
        with pytest.raises(ConfigurationError, match="page size must be a whole number"):
            settings.page_size_setting()
    monkeypatch.delenv(settings.ENV_PAGE_SIZE)
    assert settings.page_size_setting() is None
