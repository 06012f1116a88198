"""Private: one request to the vendor, from its bytes to a checked page, under
:class:`parcelsearch.Client` (:mod:`parcelsearch.client`, the API: targets, judging answers,
errors with hints) and over :mod:`parcelsearch._wire` (a request's bytes and its cache key,
which planning sizes its pieces by too).

- :mod:`~parcelsearch._fetch.http` sends it (session, pacing, retries, back-off);
- :mod:`~parcelsearch._fetch.answers` reads every kind of response body;
- :mod:`~parcelsearch._fetch.vendor_profile` keeps what was learnt of a vendor per base URL;
- :mod:`~parcelsearch._fetch.page` is the :class:`~parcelsearch._fetch.page.Page` value and
  its checks.
"""
