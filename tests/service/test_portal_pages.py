"""The portal's page helpers: the usage chart's geometry and the snippets shown with a key."""

from __future__ import annotations

import shlex
from datetime import date, timedelta

import pytest

from parcelsearch_service.portal.pages import Snippets, axis_step, usage_chart
from parcelsearch_service.portal.usage import DayUsage

TODAY = date(2026, 11, 24)


def history(calls: dict[int, int], refused: dict[int, int] | None = None) -> list[DayUsage]:
    """90 days ending today; ``calls``/``refused`` by days ago."""
    refused = refused or {}
    return [
        DayUsage(TODAY - timedelta(days=ago), calls.get(ago, 0), refused.get(ago, 0))
        for ago in range(89, -1, -1)
    ]


@pytest.mark.parametrize(
    ("top", "step"), [(0, 1), (4, 1), (5, 2), (7, 2), (480, 150), (1000, 250), (1001, 300)]
)
def test_axis_reaches_the_highest_bar_in_whole_steps(top: int, step: int) -> None:
    assert axis_step(top) == step


def test_daily_chart_bars_are_as_tall_as_their_counts() -> None:
    chart = usage_chart(history({0: 6, 1: 3}, {0: 2}), 30)
    assert chart.per == "day" and len(chart.bars) == 30
    today, yesterday = chart.bars[-1], chart.bars[-2]
    assert (today.first, today.calls, today.refused) == (TODAY, 6, 2)
    assert today.calls_h == pytest.approx(2 * yesterday.calls_h, abs=0.2)
    assert today.refused_y + today.refused_h == pytest.approx(today.calls_y)  # stacked
    assert chart.ticks[-1][1] == 8 and chart.ticks[-1][0] == pytest.approx(28, abs=0.2)
    assert chart.dates[-1][1] == "Nov 24" and len(chart.dates) == 6
    assert (chart.calls, chart.refused) == (9, 2)


def test_ninety_days_are_drawn_as_weeks_ending_today() -> None:
    chart = usage_chart(history({0: 1, 6: 1, 7: 5, 89: 4}), 90)
    assert chart.per == "week" and len(chart.bars) == 13
    assert [b.calls for b in chart.bars][-2:] == [5, 2]
    assert chart.bars[-1].first == TODAY - timedelta(days=6) and chart.bars[-1].last == TODAY
    assert chart.bars[0].first == TODAY - timedelta(days=89)  # the oldest: 6 days
    assert chart.bars[0].calls == 4 and chart.calls == 11


def test_narrow_chart_turns_long_values_upright_below_the_top() -> None:
    assert not usage_chart(history({0: 9}), 30, narrow=True).rotate_values
    chart = usage_chart(history({0: 1234, 1: 1100}, {0: 56}), 30, narrow=True)
    assert chart.rotate_values
    tallest = chart.bars[-1]
    label = len("1,234 +56✕") * 7  # upright: it runs up from 4 units above the bar
    assert tallest.refused_y - 4 - label >= 0
    assert not usage_chart(history({0: 1234}), 90).rotate_values


def test_snippets_quote_what_the_shell_would_split() -> None:
    odd = "ab'c d$e"
    snippets = Snippets.build(odd, "https://127.0.0.1:8443", "/certs dir/ca.pem")
    export = snippets.shell.split("\nparcelsearch ")[0].replace("\\\n", " ")
    assert shlex.split(export) == [
        "export",
        f"PARCELSEARCH_API_KEY={odd}",
        "PARCELSEARCH_BASE_URL=https://127.0.0.1:8443",
        "PARCELSEARCH_CA_BUNDLE=/certs dir/ca.pem",
    ]
    assert f"api_key={odd!r}" in snippets.python
    assert shlex.split(snippets.curl)[1:4] == ["--cacert", "/certs dir/ca.pem", "-H"]
    system = Snippets.build("k", "https://vendor.example/prod", None)
    assert "CA_BUNDLE" not in system.shell and "ca_bundle" not in system.python
    assert "--cacert" not in system.curl
