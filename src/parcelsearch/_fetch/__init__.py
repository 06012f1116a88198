"""Private: one request to the vendor, from its bytes to a checked page, under
:class:`parcelsearch.Client` (:mod:`parcelsearch.client`, the API: its targets and requests)
and over :mod:`parcelsearch._wire` (a request's bytes and its cache key, which planning sizes
its pieces by too).

- :mod:`~parcelsearch._fetch.config` reads and checks the client's configuration (key, base
  URL, CA bundle, positive numbers);
- :mod:`~parcelsearch._fetch.http` sends it (the transport: gate, send, judge, back off);
  :mod:`~parcelsearch._fetch.pacing` paces it, :mod:`~parcelsearch._fetch.retries` says how
  often and how long to retry, :mod:`~parcelsearch._fetch.outages` holds every request while
  the vendor is down, :mod:`~parcelsearch._fetch.session` is the session and the response
  deadline, :mod:`~parcelsearch._fetch.network` the user's proxy and trust,
  :mod:`~parcelsearch._fetch.bodies` reads bodies within bounds,
  :mod:`~parcelsearch._fetch.failures` words a failure to send;
- :mod:`~parcelsearch._fetch.judging` judges each answer and makes the errors;
  :mod:`~parcelsearch._fetch.answers` reads every kind of response body;
- :mod:`~parcelsearch._fetch.learning` holds what is known of the vendor and learns more;
  :mod:`~parcelsearch._fetch.vendor_profile` keeps it per base URL;
- :mod:`~parcelsearch._fetch.page` is the :class:`~parcelsearch._fetch.page.Page` value and
  its checks.
"""
