"""The example notebooks as the browser tests see them: which cells show a map."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
#: The last code line of a cell that shows a map (its value is the widget).
SHOWS_MAP = re.compile(r"^[\w\[\].\"'-]*(\.map|plan_map|result_map|areas_map)\(.*\)\s*(#.*)?$")


def _code_lines(cell: Any) -> list[str]:
    return [
        line
        for line in cell.source.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def map_cells(notebook: Any) -> list[Any]:
    """The code cells whose value is a map, in order."""
    return [
        c
        for c in notebook.cells
        if c.cell_type == "code" and _code_lines(c) and SHOWS_MAP.match(_code_lines(c)[-1])
    ]
