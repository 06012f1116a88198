"""What a search shows (issue 48/49): whole price lines, and each bar made with its total."""

from __future__ import annotations

import pytest

from parcelsearch._run.progress import Progress, in_kernel, stream


def test_each_bar_is_made_with_its_total_and_lines_come_between_bars(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shown = Progress(True)
    shown.start("survey", 5)
    assert shown.total == 5  # known when made: a notebook's widget sizes itself from it
    shown.update(5)
    shown.say("price: about 287 calls, 95% interval 259–315 (…)")
    assert shown.total == 0  # the bar before the line was closed
    shown.start("search", 12, 5)
    shown.total += 2  # a piece fetched again
    assert shown.total == 14
    shown.close()
    err = capsys.readouterr().err
    line = next(part for part in err.split("\n") if "price:" in part)
    assert line == "price: about 287 calls, 95% interval 259–315 (…)"  # whole, no bar in it
    assert "search:" in err and "5/12" in err


def test_nothing_is_shown_when_quiet(capsys: pytest.CaptureFixture[str]) -> None:
    quiet = Progress(False)
    quiet.start("search", 3)
    quiet.update()
    quiet.say("price: exactly 3 calls")
    quiet.close()
    assert capsys.readouterr() == ("", "")


def test_lines_go_to_stderr_outside_a_kernel() -> None:
    import sys

    assert not in_kernel() and stream() is sys.stderr
