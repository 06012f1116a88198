"""``.. parcelsearch-options::``: the table of ``parcelsearch.settings.options``, from the code.

One row per option: its name, its environment variable and what it is for, read from the
options' own specification (declared in ``parcelsearch.knobs``), so the page cannot drift
from what ``options`` accepts.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

from parcelsearch import settings


def option_rows() -> list[tuple[str, str, str]]:
    """(name, environment variable, doc) for every option, in the order ``options`` lists."""
    specs = settings._OPTIONS  # the one specification the Options object is built from
    return [(o.name, o.env or "", o.doc) for o in specs]


class OptionsTable(SphinxDirective):
    """The options table (no arguments, no content)."""

    def run(self) -> list[nodes.Node]:
        lines = [".. list-table::", "   :header-rows: 1", "",
                 "   * - option", "     - environment variable", "     - what it is"]
        for name, env, doc in option_rows():
            lines += [f"   * - ``{name}``", f"     - ``{env}``" if env else "     -",
                      f"     - {doc}"]
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source="parcelsearch.settings"),
                                self.content_offset, container)
        return list(container.children)


def setup(app: Any) -> dict[str, Any]:
    """Register the directive."""
    app.add_directive("parcelsearch-options", OptionsTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
