"""``python -m parcelsearch.cli``: the ``parcelsearch`` command."""

from parcelsearch.cli import run

run()
