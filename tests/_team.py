"""Team store set-ups shared by the team tests: a member role logging in as itself, and a
witness of the team's pacer on the store's own clock.

The ``team`` fixture (a fresh, initialised team store) is in ``tests/conftest.py``.
"""

from __future__ import annotations

import uuid

import psycopg

from parcelsearch.stores.team import init_team
from parcelsearch.stores.team.store import SCHEMA


def member_url(team: str) -> str:
    """A new member role of ``team`` (``team init --member-role``); the store's URL logging
    in as it."""
    role = f"member_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(team, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
    init_team(team, role)
    return team.replace("postgres@", f"{role}@")


#: Every move of a key's next slot by ``pace_turn``, in the order the store made them (under
#: the pacer row's lock): the slot the turn found and the one it left, as epoch seconds on
#: the store's clock (``'-infinity'`` before the first). Test-only, in ``public``:
#: ``pace_turn`` runs with ``search_path = pg_catalog``, so the trigger names its table in
#: full.
_TURNS_SEEN = f"""
CREATE TABLE public.turns_seen (id bigserial PRIMARY KEY, fingerprint text NOT NULL,
                                was double precision NOT NULL, next double precision NOT NULL);
CREATE FUNCTION public.turn_seen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.turns_seen (fingerprint, was, next) VALUES (NEW.fingerprint,
        EXTRACT(EPOCH FROM OLD.next_slot), EXTRACT(EPOCH FROM NEW.next_slot));
    RETURN NULL;
END $$;
CREATE TRIGGER turn_seen AFTER UPDATE OF next_slot ON {SCHEMA}.pacers
    FOR EACH ROW EXECUTE FUNCTION public.turn_seen();
"""


def watch_turns(team: str) -> None:
    """From now on, keep every turn ``team``'s pacer gives (read with :func:`turns_seen`)."""
    with psycopg.connect(team, autocommit=True) as conn:
        conn.execute(_TURNS_SEEN)


def turns_seen(team: str) -> list[tuple[str, float, float]]:
    """The turns given since :func:`watch_turns`, oldest first: (key fingerprint, the slot
    the turn found, the slot it left). A turn is no sooner than the slot it found (nor
    sooner than :data:`~parcelsearch.stores.spending.RESERVE_LEAD` from the moment it was
    asked for, nor than a pause's end); the slot it leaves is the key's step after it, plus
    :data:`~parcelsearch._fetch.pacing.FIRST_CALL_ALLOWANCE` after a member's first call."""
    with psycopg.connect(team) as conn:
        return [
            (fp, float(was), float(nxt))
            for fp, was, nxt in conn.execute(
                "SELECT fingerprint, was, next FROM public.turns_seen ORDER BY id"
            )
        ]


def short_steps(seen: list[tuple[str, float, float]], step: float) -> dict[int, float]:
    """The turns in ``seen`` (:func:`turns_seen`) after which the pacer's slot moved less
    than ``step`` seconds (``{k: how far it moved}``): none, while each turn finds the slot
    the one before it left and leaves the next one a step (or more) later. The first turn,
    finding no slot, is not judged."""
    return {
        k: round(nxt - was, 4)
        for k, (_, was, nxt) in enumerate(seen)
        if k and nxt - was < step - 1e-6
    }
