"""This machine's store: the cache folder (:mod:`~parcelsearch.stores.local.cache`), the
ledger of calls per key (:mod:`~parcelsearch.stores.local.ledger`) and the run history in
the ledger's file (:mod:`~parcelsearch.stores.local.history`)."""
