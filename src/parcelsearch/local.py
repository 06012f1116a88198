"""``local_service()``: the reference service on 127.0.0.1 and a ready client, for notebooks.

The toolkit never imports the service except here (and in ``demo``).
"""

from __future__ import annotations

import atexit
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

from parcelsearch.client import Client
from parcelsearch.settings import KEY_TYPES

__all__ = ["LocalService", "local_service"]

#: The local client paces a little under its key's rate: the service runs in this same
#: process, so its clock sees requests with more jitter than a remote gateway would, and
#: the figures notebooks show must not include a spike-arrest retry.
LOCAL_PACING = 0.95


class LocalService:
    """A running reference service with a fresh key, and a :class:`Client` configured for it.

    Start it with :func:`local_service`. Use it as a context manager (``with local_service()
    as client:``), or keep it and call :meth:`stop` (it also stops when Python exits).

    Attributes
    ----------
    client
        A ready :class:`~parcelsearch.Client`: key, base URL and CA set.
    base_url, ca_path
        Where the service listens and the CA that signed its certificate.
    directory
        Where its key store, certificates and the client's response cache live.
    """

    def __init__(
        self,
        *,
        parcels: Any = None,
        markets: Any = None,
        key_type: str = "production",
        per_second: float | None = None,
        quota: int | None = None,
        directory: str | Path | None = None,
        match: str = "representative-point",
    ) -> None:
        from parcelsearch_service.server import start_service

        self._tmp = None if directory else tempfile.TemporaryDirectory(prefix="parcelsearch-")
        self.directory = Path(directory or self._tmp.name)  # type: ignore[union-attr]
        self.directory.mkdir(parents=True, exist_ok=True)
        self.service = start_service(
            parcels=parcels,
            markets=markets,
            keys=self.directory / "keys.sqlite",
            cert_dir=self.directory / "certs",
            host="127.0.0.1",
            port=0,
            match=match,
        )
        self.key_name = f"local-{key_type}"
        existing = {row["name"] for row in self.service.keys.list()}
        suffix = len(existing)
        while f"{self.key_name}-{suffix}" in existing:
            suffix += 1
        self.key_name = f"{self.key_name}-{suffix}"
        key = self.service.keys.create(
            self.key_name, key_type=key_type, per_second=per_second, quota=quota
        )
        self.base_url: str = self.service.base_url
        self.ca_path: Path = Path(self.service.ca_path)
        self.cache_dir = self.directory / "cache"
        key_rate = per_second if per_second is not None else KEY_TYPES[key_type][0]
        self.client = Client(
            api_key=key,
            base_url=self.base_url,
            ca_bundle=str(self.ca_path),
            rate=key_rate * LOCAL_PACING,
            cache_dir=self.cache_dir,
        )
        del key
        atexit.register(self.stop)

    def usage(self) -> dict[str, Any]:
        """The service's own counters for this key (lifetime and this month)."""
        return next(r for r in self.service.keys.list() if r["name"] == self.key_name)

    def stop(self) -> None:
        """Stop the service and remove its temporary folder, if it made one (idempotent)."""
        if self.service is not None:
            self.service.stop()
            self.service = None  # type: ignore[assignment]
        self.client.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        atexit.unregister(self.stop)

    def __enter__(self) -> Client:
        return self.client

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.service is not None else "stopped"
        return f"<LocalService {state} {self.base_url} key={self.key_name!r}>"


def local_service(**kwargs: Any) -> LocalService:
    """Start the reference service on 127.0.0.1 with the bundled demo data and a fresh key.

    Parameters
    ----------
    **kwargs
        See :class:`LocalService` (``parcels``, ``markets``, ``key_type``, ``per_second``,
        ``quota``, ``directory``, ``match``).

    Raises
    ------
    ConfigurationError
        The ``service`` extra is not installed (the message says
        ``pip install "parcelsearch[service]"``).

    Examples
    --------
    >>> import parcelsearch
    >>> with parcelsearch.local_service() as client:  # doctest: +SKIP
    ...     result = parcelsearch.search(areas, client=client)
    """
    return LocalService(**kwargs)
