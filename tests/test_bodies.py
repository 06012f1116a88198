"""A hostile stand-in vendor's answers (issue 58, points 8 and 11): a body that inflates
without end, JSON nested past the parser, counts past what a store keeps — each a clear
:class:`~parcelsearch.MalformedResponseError`, read within bounds, never a crash."""

from __future__ import annotations

import json
import tracemalloc
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_client import KEY, RING, FaultServer, ok

from parcelsearch._fetch.bodies import MOST_BODY
from parcelsearch._fetch.retries import RetryPolicy
from parcelsearch.client import Client
from parcelsearch.errors import MalformedResponseError


@pytest.fixture(scope="module")
def vendor(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultServer]:
    made = FaultServer(tmp_path_factory.mktemp("hostile"))
    yield made
    made.close()


def _client(vendor: FaultServer, tmp_path: Path, **kw: object) -> Client:
    return Client(
        KEY,
        vendor.base_url,
        str(vendor.ca_path),
        rate=1000,
        timeout=10,
        retries=RetryPolicy(total=2, backoff_factor=0.01),
        cache_dir=tmp_path,
        **kw,
    )  # type: ignore[arg-type]


def _bomb(megabytes: int) -> bytes:
    """gzip of a valid page followed by ``megabytes`` MB of whitespace (~1,000 to 1)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [packer.compress(json.dumps(ok(5)).encode())]
    spaces = b" " * 2**20
    parts.extend(packer.compress(spaces) for _ in range(megabytes))
    parts.append(packer.flush())
    return b"".join(parts)


@pytest.mark.parametrize("deadline", [None, 30.0], ids=["plain", "response-deadline"])
def test_a_body_that_inflates_without_end_is_refused_within_bounds(
    vendor: FaultServer, tmp_path: Path, deadline: float | None
) -> None:
    """A 200 page, gzip, then 200 MB of whitespace (the issue's 1 GB: 6.0 GB peak and a run
    "complete"): refused once past 16 MB decompressed, its memory bounded."""
    body = _bomb(200)
    vendor.reset().default = (200, body, {"Content-Encoding": "gzip"})
    tracemalloc.start()
    with (
        _client(vendor, tmp_path, response_deadline=deadline) as client,
        pytest.raises(MalformedResponseError, match="larger than 16 MB once decompressed"),
    ):
        client.search_page(RING, 1)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert len(body) < 1_000_000 and peak < 4 * MOST_BODY, peak
    print(f"inflating body of {len(body):,} bytes: peak {peak / 1e6:.0f} MB traced")


def test_json_nested_past_the_parser_is_not_json(vendor: FaultServer, tmp_path: Path) -> None:
    """100,000 levels deep was "unexpected RecursionError … a bug in parcelsearch"."""
    vendor.reset().default = (200, b"[" * 100_000 + b"]" * 100_000, {})
    with (
        _client(vendor, tmp_path) as client,
        pytest.raises(MalformedResponseError, match="not JSON"),
    ):
        client.search_page(RING, 1)


def test_counts_past_what_a_store_keeps_are_malformed(vendor: FaultServer, tmp_path: Path) -> None:
    """``pages: 1e10`` (rows to match) was "unexpected ArrowInvalid" when cached."""
    vendor.reset().default = (200, ok(10**12, pages=1e10), {})
    with (
        _client(vendor, tmp_path) as client,
        pytest.raises(MalformedResponseError, match="pages is 10,000,000,000"),
    ):
        client.search_page(RING, 1)
