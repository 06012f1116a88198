"""JupyterLab 4 for the browser tests: a server on 127.0.0.1 over a temp copy of the notebooks.

:func:`jupyter_lab` copies the example notebooks into a temporary folder and starts
``jupyter lab`` there (127.0.0.1, a free port, a random token, no browser, ``--allow-root``
when run as root); its settings, workspaces, runtime and user data files and the kernels'
IPython folder go to that folder too, so nothing outside it changes. The notebook setting
``windowingMode`` is ``none``: every cell stays rendered, so every map can be read from the
page. The app is exposed in the page (``window.jupyterapp``) for the tests to run its
commands ("Run All", shut the kernels down). The server is stopped by its process id.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

START_TIMEOUT = 90.0
_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


@dataclass(frozen=True)
class Lab:
    """A running JupyterLab: its base URL, token and the folder it serves."""

    url: str
    token: str
    root: Path

    def notebook_url(self, name: str) -> str:
        """The page that opens notebook ``name`` (fresh workspace)."""
        return f"{self.url}/lab/tree/{name}?reset&token={self.token}"


def require_jupyterlab() -> None:
    """Skip the calling test, saying how to install it, when JupyterLab 4 is missing."""
    if importlib.util.find_spec("jupyterlab") is None:
        pytest.skip(
            "JupyterLab not installed: pip install 'jupyterlab>=4' "
            "(in the test extra: pip install -e '.[test]')"
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _ready(url: str, token: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def _write_settings(folder: Path) -> None:
    for name, values in _SETTINGS.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")


@contextmanager
def jupyter_lab(notebooks: list[Path], folder: Path) -> Iterator[Lab]:
    """JupyterLab serving copies of ``notebooks`` in ``folder``; stopped on exit."""
    root = folder / "notebooks"
    root.mkdir()
    for path in notebooks:
        shutil.copy(path, root / path.name)
    settings = folder / "settings"
    _write_settings(settings)
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(folder / "workspaces"),
        "JUPYTER_RUNTIME_DIR": str(folder / "runtime"),
        "JUPYTER_CONFIG_DIR": str(folder / "config"),
        "JUPYTER_DATA_DIR": str(folder / "data"),
        "IPYTHONDIR": str(folder / "ipython"),
    }
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.news_url=",
        "--ServerApp.open_browser=False",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    log = folder / "lab.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(command, cwd=root, env=env, stdout=sink, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _ready(url, token):
            assert proc.poll() is None, log.read_text(encoding="utf-8", errors="replace")
            assert time.monotonic() < deadline, "JupyterLab did not start within 90 s"
            time.sleep(0.5)
        yield Lab(url, token, root)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
