"""Team store set-ups shared by the team tests: a member role logging in as itself.

The ``team`` fixture (a fresh, initialised team store) is in ``tests/conftest.py``.
"""

from __future__ import annotations

import uuid

import psycopg

from parcelsearch.stores.team import init_team


def member_url(team: str) -> str:
    """A new member role of ``team`` (``team init --member-role``); the store's URL logging
    in as it."""
    role = f"member_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(team, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
    init_team(team, role)
    return team.replace("postgres@", f"{role}@")
