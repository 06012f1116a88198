"""Portal passwords: scrypt (standard library) with a per-user random salt.

The stored form is ``scrypt$N$r$p$SALT$HASH`` (hex), so the cost can be raised later
without breaking existing users.

Examples
--------
>>> stored = hash_password("correct horse battery")
>>> stored.startswith("scrypt$16384$8$1$")
True
>>> verify_password("correct horse battery", stored), verify_password("wrong", stored)
(True, False)
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets

from parcelsearch.errors import ConfigurationError

__all__ = [
    "hash_password",
    "verify_password",
    "check_new_password",
    "dummy_hash",
    "MIN_PASSWORD_LENGTH",
    "MIN_DISTINCT",
]

#: scrypt cost: N=2**14, r=8, p=1 (16 MiB, tens of milliseconds a check).
_N, _R, _P = 2**14, 8, 1
_DKLEN = 32
MIN_PASSWORD_LENGTH = 12
MAX_PASSWORD_LENGTH = 1024


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(
        password.encode("utf-8", "surrogateescape"),
        salt=salt,
        n=n,
        r=r,
        p=p,
        maxmem=256 * 1024 * 1024,
        dklen=_DKLEN,
    )


#: Fewest different characters a password may have.
MIN_DISTINCT = 6
#: Runs a password may not be made of (forwards or backwards): the alphabet, the digits and
#: the keyboard's rows.
_RUNS = (
    "abcdefghijklmnopqrstuvwxyz",
    "01234567890",
    "qwertyuiop",
    "asdfghjkl",
    "zxcvbnm",
    "1qaz2wsx3edc4rfv5tgb6yhn7ujm8ik9ol0p",
)


def _weakness(password: str) -> str | None:
    """Why ``password`` is easy to guess whatever its length, or ``None``: few different
    characters, one character for half of it, or a run of neighbours (``abcdef…``,
    ``987654…``, ``qwerty…``) with little else."""
    text = password.lower()
    distinct = len(set(text))
    if distinct < MIN_DISTINCT:
        return (
            f"it has only {distinct} different character{'s' if distinct != 1 else ''} "
            f"(at least {MIN_DISTINCT} are needed)"
        )
    most = max(text.count(c) for c in set(text))
    if most * 2 > len(text):
        return "one character makes up more than half of it"
    in_runs = sum(
        1
        for a, b in zip(text, text[1:], strict=False)
        if any(a + b in run or b + a in run for run in _RUNS)
    )
    if in_runs * 4 >= 3 * (len(text) - 1):
        return "it is mostly a run of neighbouring characters (like abcdef, 654321 or qwerty)"
    return None


def check_new_password(password: str) -> None:
    """Refuse a password that is too short, too long or easy to guess whatever its length
    (the message never shows it).

    Raises
    ------
    ConfigurationError
        Fewer than :data:`MIN_PASSWORD_LENGTH` or more than 1,024 characters, fewer than
        :data:`MIN_DISTINCT` different characters, one character for more than half, or
        mostly a run such as ``abcdef``/``qwerty``.
    """
    if len(password) < MIN_PASSWORD_LENGTH:
        raise ConfigurationError(
            f"the password must have at least {MIN_PASSWORD_LENGTH} characters "
            f"(it has {len(password)}); choose a longer one"
        )
    if len(password) > MAX_PASSWORD_LENGTH:
        raise ConfigurationError(f"the password must have at most {MAX_PASSWORD_LENGTH} characters")
    weakness = _weakness(password)
    if weakness is not None:
        raise ConfigurationError(
            f"the password is too easy to guess: {weakness}; choose a passphrase of several "
            "unrelated words"
        )


def hash_password(password: str) -> str:
    """The stored form of ``password``: scrypt with a fresh 16-byte salt."""
    salt = secrets.token_bytes(16)
    digest = _scrypt(password, salt, _N, _R, _P)
    return f"scrypt${_N}${_R}${_P}${salt.hex()}${digest.hex()}"


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches ``stored`` (constant-time comparison)."""
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt" or len(password) > MAX_PASSWORD_LENGTH:
            return False
        computed = _scrypt(password, bytes.fromhex(salt), int(n), int(r), int(p))
    except ValueError:
        return False
    return hmac.compare_digest(computed, bytes.fromhex(digest))


@functools.cache
def dummy_hash() -> str:
    """A hash of nothing anyone knows, checked for unknown e-mail addresses so that "wrong
    e-mail or password" takes as long for an unknown address as for a known one."""
    return hash_password(secrets.token_urlsafe(16))
