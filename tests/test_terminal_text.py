"""Terminal control characters in what we print from a store or a vendor (issue 58, point
10): shown as their escapes, never acted on — in tables (``team usage``, ``runs``) and in the
one line an error is printed as."""

from __future__ import annotations

import pandas as pd
import pytest

from parcelsearch._shared import terminal_text
from parcelsearch.cli import _say
from parcelsearch.outputs import terminal_table

EVIL = "\x1b[2J\x1b[Hok\r\x1b]0;owned\x07\u202egnp.exe\x9b31m"


def test_control_characters_are_shown_as_their_escapes() -> None:
    shown = terminal_text(EVIL)
    assert shown == "\\x1b[2J\\x1b[Hok\\r\\x1b]0;owned\\x07\\u202egnp.exe\\x9b31m"
    assert terminal_text("two\nlines\tand tab", keep="\n") == "two\nlines\\tand tab"
    assert terminal_text("Zürich 東京 ok") == "Zürich 東京 ok"


def test_a_table_shows_cells_and_column_names_as_text() -> None:
    table = terminal_table(pd.DataFrame({EVIL: [EVIL, "plain"], "n": [1, 2]}))
    assert not any(ch in table for ch in "\x1b\r\x07\x9b\u202e")
    assert table.count("\\x1b[2J") == 2 and "plain" in table


def test_an_error_line_shows_a_store_s_or_a_vendor_s_words_as_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An error's message may quote what a store or a vendor said (a PostgreSQL error
    naming a member, a gateway's words): printed as text, its lines kept."""
    assert _say(f"the store said: {EVIL}\nsecond line", 1) == 1
    err = capsys.readouterr().err
    assert not any(ch in err for ch in "\x1b\r\x07\x9b\u202e")
    assert err.startswith("parcelsearch: error: the store said: \\x1b[2J")
    assert "\nsecond line" in err
