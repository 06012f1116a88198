"""Zero-call planning: study areas in, request pieces out (no I/O but reading files).

- :mod:`~parcelsearch.planning.vector_files` reads vector files (layers, zips, CRS);
- :mod:`~parcelsearch.planning.areas` checks and normalises areas (ids, EPSG:4326, repairs);
- :mod:`~parcelsearch.planning.tiling` cuts each area into the fewest pieces that fit one
  request (exact, or within a tolerance);
- :mod:`~parcelsearch.planning.plans` makes the :class:`~parcelsearch.planning.plans.Plan`
  (``parcelsearch.plan``) and suggests tolerances;
- :mod:`~parcelsearch.planning.reuse` gives areas searched before, in any CRS, their pieces.
"""
