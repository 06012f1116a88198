"""Private: one search run, from its options to its result.

- :mod:`~parcelsearch._run.options`: a search's options, checked once;
- :mod:`~parcelsearch._run.pricing`: the price before spending, then exact;
- :mod:`~parcelsearch._run.search_run`: the two phases (``parcelsearch.search``);
- :mod:`~parcelsearch._run.fetching`: the run's threads, spending and stop;
- :mod:`~parcelsearch._run.refreshing`: what ``refresh="changed"`` re-reads and infers;
- :mod:`~parcelsearch._run.recorded_runs`: the runs recorded (``parcelsearch.runs``).
"""
