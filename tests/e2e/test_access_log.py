"""``parcelsearch serve --access-log``: a line per request on stderr, without secrets.

Off by default (every call is in the key store's request log either way); when asked for,
each request gets method, path, status and milliseconds — never the query (the polygon) or
any header (the key).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import requests

from parcelsearch_service.polygon import EXAMPLE

LINE = re.compile(r'"GET /v1/search" 200 [\d.]+ms')


@pytest.mark.parametrize("flag", [True, False], ids=["--access-log", "default"])
def test_access_log_lines_name_path_and_status_but_never_the_key_or_polygon(
    flag: bool, spawn_service: Callable[..., Any], https: requests.Session
) -> None:
    svc = spawn_service("sqlite", workers=1, extra=["--access-log"] if flag else [])
    key = svc.keys.create("logged", per_second=100, quota=10)
    for _ in range(3):
        answer = https.get(
            svc.base_url + "/v1/search",
            params={"searchPolygon": EXAMPLE},
            headers={"x-api-key": key},
            timeout=30,
        )
        assert answer.status_code == 200
    svc.stop()
    log = svc.log_path.read_text()
    assert len(LINE.findall(log)) == (3 if flag else 0)
    assert key not in log
    assert "searchPolygon" not in log and "-97.5" not in log
