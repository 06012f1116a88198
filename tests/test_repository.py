"""Guards on what is committed: small data, small notebooks, no secrets."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def tracked(*patterns: str) -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / line for line in out.splitlines() if line]


def test_committed_data_is_small() -> None:
    sizes = {p.name: p.stat().st_size for p in tracked("data/") if p.is_file()}
    assert sizes, "the bundled demo data should be committed"
    assert max(sizes.values()) < 2_000_000, sizes
    assert sum(sizes.values()) < 4_000_000, sizes


def test_notebooks_are_committed_small_without_widget_state_or_stray_images() -> None:
    for path in tracked("notebooks/*.ipynb"):
        assert path.stat().st_size < 300_000, path.name
        notebook = json.loads(path.read_text())
        assert "widgets" not in notebook.get("metadata", {}), path.name
        for cell in notebook["cells"]:
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                # the only images are the maps' pictures (refresh_outputs.py), which say so
                is_map_picture = "parcelsearch" in output.get("metadata", {})
                assert is_map_picture or not any(k.startswith("image/") for k in data), path.name
                assert "application/vnd.jupyter.widget-view+json" not in data, path.name
