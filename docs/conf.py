"""Sphinx configuration of the parcelsearch documentation site.

Build it offline (nothing is fetched: no intersphinx, no CDN scripts, no version switcher)::

    pip install -e ".[docs]" && python -m sphinx -W --keep-going -b html docs docs/_build/html

The notebooks are rendered from their saved outputs (``nb_execution_mode = "off"``); the
pictures of pieces in the guide are drawn at build time from the demo data (``_ext``).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent / "src"))

import parcelsearch  # noqa: E402

project = "parcelsearch"
author = "the parcelsearch authors"
copyright = "2026, the parcelsearch authors (MIT licence)"  # noqa: A001
release = version = parcelsearch.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_nb",
    "cli_reference",
    "pieces_pictures",
    "options_table",
]

# Sources: guide and changelog in MyST markdown, the reference in reStructuredText, the
# notebooks (docs/examples/*.ipynb are links to notebooks/) through myst-nb.
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**/.ipynb_checkpoints"]
templates_path = ["_templates"]
root_doc = "index"

# --- API reference: autosummary + numpydoc -------------------------------------------------
# Pages of names no longer listed must not linger (autosummary never deletes them).
shutil.rmtree(HERE / "reference" / "generated", ignore_errors=True)
autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"  # numpydoc's Parameters sections carry the types
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# --- Notebooks: saved outputs only, nothing executed, no widget JavaScript from a CDN ------
nb_execution_mode = "off"
nb_ipywidgets_js: dict[str, dict[str, str]] = {}
nb_merge_streams = True
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# --- HTML: pydata-sphinx-theme with everything that would fetch from the network off --------
html_theme = "pydata_sphinx_theme"
html_title = f"parcelsearch {release}"
html_static_path: list[str] = []
html_theme_options = {
    "navbar_end": ["theme-switcher"],  # no icon links to external sites
    "check_switcher": False,  # no version switcher JSON fetched
    "analytics": {},
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_sidebars = {"changelog": [], "index": []}
html_show_sourcelink = False
html_copy_source = False
# No page has math, so MathJax (a CDN script) is never linked: Sphinx adds it only to pages
# with equations, and tests/test_docs.py checks that no built page loads anything remote.

# numpydoc checks while building (with -W a finding fails the build): a public name without a
# docstring, a section numpydoc does not know (it would be dropped from the page), sections
# out of order. tests/test_docs.py runs the same checks without building.
numpydoc_validation_checks = {"GL08", "GL06", "GL07"}
# A dataclass field whose default is None has its doc in a ``#:`` comment (rendered by
# autodoc), which numpydoc's validation does not read: it inspects the value None.
numpydoc_validation_exclude = {r"^parcelsearch\.Price\.(low|high)$"}
