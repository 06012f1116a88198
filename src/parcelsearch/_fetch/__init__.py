"""Private: one request to the vendor, from its bytes to a checked page.

- :mod:`~parcelsearch._fetch.wire` decides a request's bytes and its cache key;
- :mod:`~parcelsearch._fetch.http` sends it (session, pacing, retries, back-off);
- :mod:`~parcelsearch._fetch.client` is the API (:class:`~parcelsearch.Client`): targets,
  judging answers, errors with hints;
- :mod:`~parcelsearch._fetch.answers` reads every kind of response body;
- :mod:`~parcelsearch._fetch.vendor_profile` keeps what was learnt of a vendor per base URL;
- :mod:`~parcelsearch._fetch.page` is the :class:`~parcelsearch._fetch.page.Page` value and
  its checks.
"""
