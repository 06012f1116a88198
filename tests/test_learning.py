"""What the client knows of the vendor (:class:`parcelsearch._fetch.learning.VendorFacts`):
set by the user, else learnt and kept in the cache folder, else assumed."""

from __future__ import annotations

from pathlib import Path

import pytest

from parcelsearch._fetch.answers import Refusal
from parcelsearch._fetch.learning import VendorFacts
from parcelsearch._fetch.vendor_profile import load_profile

BASE = "https://vendor.test"


def _facts(folder: Path, **set_: int | None) -> VendorFacts:
    given = {"page_size_set": None, "line_limit_set": None, "window_set": None, **set_}
    return VendorFacts(BASE, folder, **given)


def test_a_refused_line_teaches_the_next_usual_limit_below_it_and_keeps_it(
    tmp_path: Path,
) -> None:
    facts = _facts(tmp_path)
    assert (facts.max_request_bytes, facts.max_request_bytes_source) == (7168, "assumed")
    assert facts.learn_line_limit(BASE + "/v1/search?" + "x" * 5000) == 4096
    assert (facts.max_request_bytes, facts.max_request_bytes_source) == (4096, "learnt")
    assert load_profile(tmp_path, BASE).max_request_bytes == 4096  # kept for the next client
    assert _facts(tmp_path).max_request_bytes == 4096


@pytest.mark.parametrize(
    ("set_", "learnt"),
    [
        pytest.param({}, 4, id="learnt"),
        pytest.param({"window_set": 9}, None, id="set-by-the-user-never-learnt-over"),
    ],
)
def test_a_refused_page_teaches_the_window_unless_one_was_set(
    tmp_path: Path, set_: dict[str, int], learnt: int | None
) -> None:
    facts = _facts(tmp_path, **set_)
    assert facts.learn_window(5) == learnt
    assert facts.result_window == (learnt or set_.get("window_set"))
    assert load_profile(tmp_path, BASE).result_window == learnt


def test_a_moved_path_is_followed_then_forgotten_when_it_answers_404(tmp_path: Path) -> None:
    facts = _facts(tmp_path)
    facts.remember_move(BASE + "/v1/search?page=1", BASE + "/v1/search/?page=1")
    assert facts.moved_url(BASE + "/v1/search?page=2") == BASE + "/v1/search/?page=2"
    assert load_profile(tmp_path, BASE).moved == {BASE + "/v1/search": BASE + "/v1/search/"}
    gone = Refusal((), None, "other", "envelope")
    back = facts.unlearn(404, gone, BASE + "/v1/search/?page=2")
    assert back is not None and back.url == BASE + "/v1/search?page=2"
    assert facts.moved == {} and load_profile(tmp_path, BASE).moved == {}
