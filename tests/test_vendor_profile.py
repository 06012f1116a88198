"""The vendor's profile per base URL, kept in the cache folder."""

from __future__ import annotations

from parcelsearch._fetch.vendor_profile import PROFILES_FILE, load_profile, save_profile


def test_profiles_are_kept_per_base_url_and_survive_garbage(tmp_path) -> None:
    assert load_profile(tmp_path, "https://a").page_base is None  # nothing known yet
    first = load_profile(tmp_path, "https://a")
    first.page_base = 0
    save_profile(tmp_path, first)
    other = load_profile(tmp_path, "https://b")
    other.moved = {"https://b/v1/search": "https://b/v1/search/"}
    save_profile(tmp_path, other)
    assert load_profile(tmp_path, "https://a").page_base == 0
    assert load_profile(tmp_path, "https://b").moved == other.moved
    assert load_profile(tmp_path, "https://b").page_base is None
    (tmp_path / PROFILES_FILE).write_text("{not json")
    assert load_profile(tmp_path, "https://a").page_base is None  # learned again
    (tmp_path / PROFILES_FILE).write_text('{"https://a": {"page_base": 7, "odd": 1}}')
    assert load_profile(tmp_path, "https://a").page_base is None
    (tmp_path / PROFILES_FILE).write_text('{"https://a": {"match_rule": "sometimes"}}')
    assert load_profile(tmp_path, "https://a").match_rule is None  # only a rule parcelsearch knows
    (tmp_path / PROFILES_FILE).write_text('{"https://a": {"match_rule": "intersects"}}')
    assert load_profile(tmp_path, "https://a").match_rule == "intersects"


def _kept_and_checked(folder, field: str, value: int, odd: tuple[str, ...]) -> None:
    """``field`` is unknown until learnt, kept once learnt as ``value``, and dropped (learnt
    again) when the kept file holds any of the ``odd`` JSON values instead."""
    profile = load_profile(folder, "https://a")
    assert getattr(profile, field) is None
    setattr(profile, field, value)
    save_profile(folder, profile)
    assert getattr(load_profile(folder, "https://a"), field) == value
    for text in odd:
        (folder / PROFILES_FILE).write_text(f'{{"https://a": {{"{field}": {text}}}}}')
        assert getattr(load_profile(folder, "https://a"), field) is None, text


def test_a_learnt_page_size_is_kept_and_checked_when_read(tmp_path) -> None:
    # 100 assumed until an answer says otherwise
    _kept_and_checked(tmp_path, "page_size", 50, ('"50"', "0", "-5", "true", "2.5", "1000000"))


def test_a_learnt_request_line_limit_is_kept_and_checked_when_read(tmp_path) -> None:
    # 7,168 assumed until a refusal
    _kept_and_checked(
        tmp_path, "max_request_bytes", 4096, ('"4096"', "100", "true", "4096.5", "10000000")
    )


def test_a_learnt_result_window_is_kept_and_checked_when_read(tmp_path) -> None:
    # no limit assumed until a refusal
    _kept_and_checked(tmp_path, "result_window", 5, ('"5"', "0", "-3", "true", "5.5"))
