"""Where calls are counted and pages and runs are kept.

:mod:`~parcelsearch.stores.spending` holds the one
:class:`~parcelsearch.stores.spending.Spending` protocol a run spends through; its two
twins keep the same facts in two places: :mod:`~parcelsearch.stores.local` on this machine
(SQLite ledger and run history, parquet response cache) and :mod:`~parcelsearch.stores.team`
in a team's PostgreSQL store.
"""
