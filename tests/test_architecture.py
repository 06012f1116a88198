"""ARCHITECTURE.md's rules between the folders, read from the code: each "never imports" is a
test of the imports ``ast`` finds in ``src/``.

Every ``import`` and ``from … import`` counts, wherever it stands: at module level, inside a
function (imported when called) and under ``if TYPE_CHECKING:`` (a type named is a module
known). Relative imports are resolved; ``from package import name`` counts as importing the
module ``package.name`` when there is one, else ``package``. A room is a top-level module or
folder of ``parcelsearch`` (``client``, ``planning``, ``_run``, …); ``parcelsearch`` itself is
the package's root (its lazily loaded public names).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

#: The base: every room may import these; they import only each other.
BASE = {"errors", "knobs", "settings", "notices", "formats", "kept_files", "_shared", "_wire"}
#: The public faces the search's run may import (they never import the run).
FACES = {"result", "market_list", "rule_probe", "comparison", "outputs", "service_check"}
#: The top: what users and the command line enter by; nothing below imports them.
TOP = {"cli", "accessor", "demo", "local", "parcelsearch"}
#: The toolkit's modules the reference service may import (the rest it meets over HTTP).
SERVICE_MAY_IMPORT = {
    "parcelsearch.errors",
    "parcelsearch.settings",
    "parcelsearch._shared",
    "parcelsearch.planning.vector_files",
    "parcelsearch.planning.land",
}


@dataclass(frozen=True)
class Import:
    """One import statement's module: where it stands and what it names."""

    file: Path
    line: int
    importer: str
    target: str

    def __str__(self) -> str:
        return f"{self.file.relative_to(SRC.parent)}:{self.line} imports {self.target}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(SRC.rglob("*.py"))}


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, *([node.module] if node.module else [])])
    modules = _modules()
    return [
        f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
        for alias in node.names
    ]


@functools.cache
def imports() -> tuple[Import, ...]:
    """Every import of every module in ``src/`` (module level, in functions, typing only)."""
    found = []
    for module, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                found += [
                    Import(path, node.lineno, module, t) for t in _targets(module, path, node)
                ]
    return tuple(found)


def room(module: str) -> str | None:
    """The toolkit's room of ``module`` (``None`` outside ``parcelsearch``)."""
    parts = module.split(".")
    if parts[0] != "parcelsearch":
        return None
    return parts[1] if len(parts) > 1 else "parcelsearch"


def _leaving(rooms: set[str]) -> Iterable[Import]:
    """The imports from ``rooms`` into another room of the toolkit."""
    for found in imports():
        mine, theirs = room(found.importer), room(found.target)
        if mine in rooms and theirs is not None and theirs != mine:
            yield found


def _broken(rooms: set[str], allowed: set[str]) -> list[str]:
    return [str(i) for i in _leaving(rooms) if room(i.target) not in allowed]


def test_the_reader_sees_imports_in_functions_and_for_typing_only() -> None:
    """The rules below see every kind of import: ``local`` imports the service inside
    ``local_service()``, and ``if TYPE_CHECKING:`` blocks are read too."""
    found = {(i.importer, i.target) for i in imports()}
    assert ("parcelsearch.local", "parcelsearch_service.server") in found
    typing_only = set()
    for module, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Import | ast.ImportFrom):
                        typing_only |= {(module, t) for t in _targets(module, path, inner)}
    assert typing_only and typing_only <= found


def test_the_base_imports_only_the_base() -> None:
    assert not _broken(BASE, BASE)


def test_maps_import_only_the_base() -> None:
    assert not _broken({"maps"}, BASE)


def test_planning_imports_only_the_base_and_maps_and_nothing_that_calls() -> None:
    """Zero-call planning: no room that fetches, keeps or runs, no HTTP or database client."""
    assert not _broken({"planning"}, BASE | {"maps"})
    calling = ("requests", "urllib3", "psycopg", "psycopg_pool", "http", "socket")
    assert not [
        str(i)
        for i in imports()
        if room(i.importer) == "planning" and i.target.split(".")[0] in calling
    ]


def test_fetch_imports_only_the_base() -> None:
    assert not _broken({"_fetch"}, BASE)


def test_stores_import_only_the_base_and_fetch_never_the_client() -> None:
    assert not _broken({"stores"}, BASE | {"_fetch"})


def test_stores_import_nothing_above_the_client() -> None:
    """The stores never import planning, the run, a face or
    the top."""
    assert not _broken({"stores"}, BASE | {"_fetch", "client"})


def test_the_client_imports_only_the_base_fetch_and_profiles() -> None:
    assert not _broken({"client"}, BASE | {"_fetch", "profiles"})


def test_profiles_import_only_the_base_fetch_and_stores() -> None:
    assert not _broken({"profiles"}, BASE | {"_fetch", "stores"})


def test_the_faces_never_import_the_run_nor_the_top() -> None:
    """``_run`` may import the public faces (a search makes a result, reads the market list,
    probes the rule); the faces never import ``_run``, nor ``cli``, ``accessor``, ``demo``."""
    assert not [str(i) for i in _leaving(FACES) if room(i.target) in {"_run"} | TOP]


def test_the_run_never_imports_the_top() -> None:
    assert not [str(i) for i in _leaving({"_run"}) if room(i.target) in TOP | {"service_check"}]


def test_nothing_below_imports_the_top() -> None:
    """``cli`` is imported by nothing outside it; the package's root, ``accessor`` and
    ``demo`` only by ``cli`` and the root (``local`` by ``demo`` too)."""
    may = {"cli": set(), "parcelsearch": {"cli"}, "accessor": {"cli", "parcelsearch"}}
    may |= {"demo": {"cli", "parcelsearch"}, "local": {"cli", "parcelsearch", "demo"}}
    assert not [
        str(i)
        for i in imports()
        if room(i.target) in may
        and room(i.importer) not in may[str(room(i.target))] | {room(i.target)}
        and room(i.importer) is not None
    ]


def test_the_toolkit_imports_the_service_only_in_local() -> None:
    assert not [
        str(i)
        for i in imports()
        if i.target.split(".")[0] == "parcelsearch_service"
        and room(i.importer) is not None
        and i.importer != "parcelsearch.local"
    ]


def test_the_service_imports_only_the_toolkits_base_modules() -> None:
    """The two halves meet at HTTP; the service shares only the toolkit's errors, settings,
    counts and the readers of vector files and land."""
    assert not [
        str(i)
        for i in imports()
        if i.importer.split(".")[0] == "parcelsearch_service"
        and room(i.target) is not None
        and i.target not in SERVICE_MAY_IMPORT
    ]


def test_no_module_imports_itself_back_through_others() -> None:
    """No circle: the modules' imports (every kind) make no cycle."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for i in imports():
        if i.target in modules and i.target != i.importer:
            graph[i.importer].add(i.target)
    state: dict[str, int] = {}
    circles: list[str] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for nxt in sorted(graph[module]):
            if state.get(nxt) == 1:
                circles.append(" → ".join([*path[path.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[module] = 2

    for module in sorted(modules):
        if module not in state:
            visit(module, [module])
    assert not circles


#: The most lines a module of ``parcelsearch`` has (as ``ruff format`` lays it out), and a class.
MOST_MODULE_LINES, MOST_CLASS_LINES = 700, 300


def test_no_module_over_700_lines_nor_class_over_300() -> None:
    """Issue 60's done means: every module of ``parcelsearch`` at most 700 lines, every
    class at most 300 (the ``class`` line to its last)."""
    over = []
    for module, path in _modules().items():
        if room(module) is None:
            continue
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MOST_MODULE_LINES:
            over.append(f"{path.relative_to(SRC.parent)}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > MOST_CLASS_LINES:
                    over.append(f"{path.relative_to(SRC.parent)}: class {node.name} {lines} lines")
    assert not over, "; ".join(over)
