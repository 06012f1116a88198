"""A system part that is missing makes its tests skip with a reason, never fail.

The README's test command must pass on a fresh machine without Chromium, its driver,
``certutil`` or PostgreSQL/PostGIS: those tests skip, saying what is missing and that
``bash .ci/run`` installs it. Each part is made to look missing through the variable the
fixtures read, and a few of its tests are run in a child pytest.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: (variable that names the part, tests that need it, the reason their skip must give)
PARTS = [
    (
        "PARCELSEARCH_CERTUTIL",
        "tests/browser/test_portal_browser.py::test_app_names_show_as_text",
        "certutil not found",
    ),
    (
        "PARCELSEARCH_CHROMIUM",
        "tests/browser/test_maps_offline_html.py::test_clicking_a_piece_shows_its_figures",
        "headless Chromium not found",
    ),
    (
        "PARCELSEARCH_PG_BIN",
        "tests/service/test_postgis.py::test_a_point_on_the_edge_matches_in_both",
        "PostgreSQL not found",
    ),
]


@pytest.mark.slow
def test_missing_system_parts_skip_their_tests_with_a_reason(tmp_path: Path) -> None:
    missing = str(tmp_path / "not-installed")
    env = {**os.environ, **{variable: missing for variable, _, _ in PARTS}}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            *(test for _, test, _ in PARTS),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "failed" not in done.stdout and "error" not in done.stdout, done.stdout
    for _, _, reason in PARTS:
        assert reason in done.stdout and "bash .ci/run" in done.stdout, done.stdout
