"""Running the command line in-process, as the CLI tests (unit and end-to-end) do."""

from __future__ import annotations

import re
from typing import Any

import pytest

from parcelsearch.cli import main

#: Python spellings that must never reach the command line.
PYTHON = re.compile(r"\b[a-z_]+=|Client\(|set_crs\(|read_file\(|Traceback|allow_partial")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``main(argv)`` as the command runs it: argparse's exits become exit codes."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def served(service: Any, key: Any) -> int:
    """Requests the service logged for ``key`` (the witness of calls spent)."""
    return len(service.keys.requests(key.name))
