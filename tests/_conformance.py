"""Point a test module's ``service`` fixtures at ``parcelsearch serve --workers 2`` on each
backend (SQLite + memory, PostgreSQL + PostGIS): see ``conformance_service`` in
tests/conftest.py. Import both names into the module::

    from _conformance import service, service_276  # noqa: F401 (fixtures)
"""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def service(conformance_service: Any) -> Any:
    return conformance_service


@pytest.fixture(scope="session")
def service_276(conformance_276: Any) -> Any:
    return conformance_276
