"""The reference Search service and developer portal: the ``service`` extra.

``pip install "parcelsearch[service]"`` installs what they need (starlette, jinja2, uvicorn,
trustme, cryptography, psycopg, psycopg-pool); the toolkit needs none of it. Importing this package
without them raises a :class:`~parcelsearch.errors.ConfigurationError` that says which extra
to install, so ``parcelsearch serve``, ``demo`` and :func:`parcelsearch.local_service` all
say it the same way.
"""

from __future__ import annotations

import importlib.util

from parcelsearch.errors import ConfigurationError

#: Import names of the ``service`` extra's packages (pyproject.toml) that the toolkit does not
#: bring anyway (jinja2, the portal's templates, comes with ipyleaflet's branca).
EXTRA_MODULES = ("starlette", "uvicorn", "trustme", "cryptography", "psycopg", "psycopg_pool")


def _missing(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except ImportError:  # an import hook that refuses the name
        return True


def require_extra() -> None:
    """Raise unless every package of the ``service`` extra can be imported.

    Raises
    ------
    ConfigurationError
        Naming the missing packages and the command that installs them.
    """
    missing = [name for name in EXTRA_MODULES if _missing(name)]
    if missing:
        raise ConfigurationError(
            "the reference service and portal need the 'service' extra, which is not "
            f"installed here (missing: {', '.join(missing)}): "
            'pip install "parcelsearch[service]"'
        )


require_extra()
