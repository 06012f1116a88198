"""The parquet response cache: round trips, atomic durable writes, loud corruption."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from parcelsearch import _wire, demo_areas, search
from parcelsearch._fetch.page import Page
from parcelsearch.client import Client
from parcelsearch.errors import CacheError, MalformedResponseError
from parcelsearch.stores.local.cache import CacheFolder, ResponseCache

BASE = "https://127.0.0.1:8443"
PATH = "/v1/search"


def ring(i: int) -> str:
    return _wire.ring_json([(i, 0), (i + 1, 0), (i + 1, 1), (i, 0)])


def make_page(i: int = 0, page: int = 1, rows: int = 250, **changes: object) -> Page:
    count = max(0, min(100, rows - 100 * (page - 1)))
    data = tuple(f"{i:07x}{page:03x}{k:07x}" for k in range(count))
    made = Page(
        request_key=_wire.request_key(BASE, PATH, ring(i), page),
        polygon_json=ring(i),
        page=page,
        rows=rows,
        pages=-(-rows // 100),
        data_rows=count,
        data=data,
        base_url=BASE,
        path=PATH,
    )
    return replace(made, **changes)  # type: ignore[arg-type]


def test_put_then_get_round_trips(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    page = make_page(3, page=2)
    cache.put(page)
    got = cache.get(page.request_key)
    assert got == replace(page, from_cache=True)


@pytest.mark.parametrize("missing", ["base_url", "path"])
def test_a_page_that_does_not_say_where_it_came_from_is_refused(
    tmp_path: Path, missing: str
) -> None:
    """A cache error of the one tree (issue 50), and nothing is written."""
    cache = ResponseCache(tmp_path)
    with pytest.raises(CacheError, match="base_url and path"):
        cache.put(make_page(1, **{missing: ""}))
    assert cache.get(make_page(1).request_key) is None


def test_a_new_instance_reads_what_another_wrote(tmp_path: Path) -> None:
    pages = [make_page(i, page=k) for i in range(5) for k in (1, 2, 3)]
    writer = ResponseCache(tmp_path)
    for page in pages:
        writer.put(page)
    reader = ResponseCache(tmp_path)
    expected = [replace(p, from_cache=True) for p in pages]
    assert [reader.get(p.request_key) for p in pages] == expected


def test_unknown_key_is_a_miss(tmp_path: Path) -> None:
    assert ResponseCache(tmp_path).get("0" * 64) is None


def test_empty_result_page_is_cached(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    empty = make_page(1, rows=0)
    cache.put(empty)
    assert cache.get(empty.request_key).data == ()


@pytest.mark.parametrize(
    ("age", "max_age", "hit"),
    [
        pytest.param(timedelta(hours=1), None, True, id="no-limit"),
        pytest.param(timedelta(hours=1), 7200, True, id="young-enough"),
        pytest.param(timedelta(hours=3), 7200, False, id="too-old-seconds"),
        pytest.param(timedelta(hours=3), timedelta(hours=2), False, id="too-old-timedelta"),
    ],
)
def test_max_age(tmp_path: Path, age: timedelta, max_age: object, hit: bool) -> None:
    cache = ResponseCache(tmp_path)
    page = make_page(fetched_at=datetime.now(UTC) - age)
    cache.put(page)
    assert (cache.get(page.request_key, max_age=max_age) is not None) is hit  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"data_rows": 99}, id="data-rows-disagree"),
        pytest.param({"pages": 2}, id="pages-not-ceil"),
        pytest.param({"page": 4}, id="page-beyond-pages"),
        pytest.param({"data": ("<b>XYZ</b>",) * 100}, id="bad-group-ids"),
        pytest.param({"request_key": "0" * 64}, id="key-names-another-request"),
    ],
)
def test_only_valid_pages_are_stored(tmp_path: Path, changes: dict[str, object]) -> None:
    cache = ResponseCache(tmp_path)
    with pytest.raises(MalformedResponseError, match="does not add up"):
        cache.put(make_page(**changes))  # type: ignore[arg-type]
    assert cache.info()["entries"] == 0 and not list(tmp_path.glob("*.parquet"))


def test_the_api_key_is_never_stored(
    tmp_path: Path, service: Any, api_key: str, ca_bundle: str
) -> None:
    """A real search with a real key fills the cache folder: the key is in no file of it."""
    with Client(api_key, service.base_url, ca_bundle, cache_dir=tmp_path) as client:
        result = search(demo_areas(), client=client, active_markets_only=True, progress=False)
    assert result.calls > 0
    CacheFolder(tmp_path).pages().compact()
    files = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert {p.suffix for p in files} >= {".parquet", ".json", ".sqlite"}  # pages, markets, ledger
    for path in files:
        assert api_key.encode() not in path.read_bytes(), path.name
    columns = pq.read_schema(next(tmp_path.glob("pages-*.parquet"))).names
    assert columns == [
        "request_key",
        "base_url",
        "path",
        "polygon_json",
        "page",
        "rows",
        "pages",
        "data_rows",
        "data",
        "fetched_at",
    ]


def test_unreadable_file_is_a_loud_error_naming_it(tmp_path: Path) -> None:
    ResponseCache(tmp_path).put(make_page())
    broken = next(tmp_path.glob("seg-*.parquet"))
    broken.write_bytes(broken.read_bytes()[:40])
    with pytest.raises(CacheError, match=broken.name):
        ResponseCache(tmp_path)


def test_tampered_page_is_a_loud_error(tmp_path: Path) -> None:
    ResponseCache(tmp_path).put(make_page())
    path = next(tmp_path.glob("seg-*.parquet"))
    table = pq.read_table(path)
    pq.write_table(table.set_column(7, "data_rows", [[7]]).cast(table.schema), path)
    with pytest.raises(CacheError, match="does not add up"):
        ResponseCache(tmp_path)


def test_verify_lists_every_problem(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path, merge_every=1000)
    for i in range(3):
        cache.put(make_page(i))
    first, second, _ = sorted(tmp_path.glob("seg-*.parquet"))
    first.write_bytes(b"not parquet")
    second.write_bytes(b"PAR1")
    problems = cache.verify()
    assert len(problems) == 2
    assert first.name in problems[0] and second.name in problems[1]


def test_verify_of_a_sound_cache_is_empty(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    cache.put(make_page())
    assert cache.verify() == []


def test_puts_are_merged_and_compaction_keeps_every_page(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path, merge_every=10)
    pages = [make_page(i) for i in range(25)]
    for page in pages:
        cache.put(page)
    assert len(list(tmp_path.glob("*.parquet"))) == 2 + 5  # two merged files, five singles
    assert cache.compact() == 7
    assert len(list(tmp_path.glob("*.parquet"))) == 1
    reopened = ResponseCache(tmp_path)
    assert all(reopened.get(p.request_key) is not None for p in pages)


def test_open_compacts_many_files(tmp_path: Path) -> None:
    writer = ResponseCache(tmp_path, merge_every=1000)
    for i in range(12):
        writer.put(make_page(i))
    ResponseCache(tmp_path, compact_at=10)
    assert len(list(tmp_path.glob("*.parquet"))) == 1


def test_a_refetched_page_replaces_the_older_one(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    old = make_page(fetched_at=datetime.now(UTC) - timedelta(days=2))
    new = replace(old, fetched_at=datetime.now(UTC))
    cache.put(new)
    cache.put(old)
    assert ResponseCache(tmp_path).get(old.request_key).fetched_at == new.fetched_at


def test_info_and_clear(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    for i in range(4):
        cache.put(make_page(i))
    info = cache.info()
    assert (info["entries"], info["files"]) == (4, 4)
    assert info["bytes"] > 0 and info["oldest"] <= info["newest"]
    (tmp_path / "ledger.sqlite").write_bytes(b"kept")
    assert cache.clear() == 4
    assert cache.info()["entries"] == 0
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == ["ledger.sqlite"]


def test_directory_defaults_to_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARCELSEARCH_CACHE_DIR", str(tmp_path / "here"))
    assert ResponseCache().directory == tmp_path / "here"


def test_threads_put_and_get_concurrently(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path, merge_every=16)
    pages = [make_page(i) for i in range(64)]

    def work(chunk: list[Page]) -> None:
        for page in chunk:
            cache.put(page)
            assert cache.get(page.request_key) is not None

    threads = [threading.Thread(target=work, args=(pages[k::8],)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    reopened = ResponseCache(tmp_path)
    assert sum(reopened.get(p.request_key) is not None for p in pages) == 64
    assert reopened.verify() == []


@pytest.mark.slow
def test_a_page_survives_sigkill_right_after_put(tmp_path: Path) -> None:
    """A child puts pages and prints each key; it is SIGKILLed mid-stream."""
    script = (
        "import sys, os\n"
        "sys.path.insert(0, os.path.dirname(sys.argv[2]))\n"
        "from test_cache import make_page\n"
        "from parcelsearch.stores.local.cache import ResponseCache\n"
        "cache = ResponseCache(sys.argv[1], merge_every=7)\n"
        "for i in range(100000):\n"
        "    page = make_page(i)\n"
        "    cache.put(page)\n"
        "    print(page.request_key, flush=True)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path), __file__],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    done = [child.stdout.readline().strip() for _ in range(30)]
    child.kill()
    child.wait(timeout=10)
    child.stdout.close()
    reopened = ResponseCache(tmp_path)
    assert all(reopened.get(key) is not None for key in done)
    assert reopened.verify() == []


@pytest.mark.slow
def test_a_thousand_pages_reopen_from_a_few_files(tmp_path: Path) -> None:
    """Speed is measured in bench/bench_search.py; here: every page back, few files."""
    cache = ResponseCache(tmp_path)
    pages = [make_page(i, page=k, rows=1000) for i in range(100) for k in range(1, 11)]
    for page in pages:
        cache.put(page)
    reopened = ResponseCache(tmp_path)
    assert all(reopened.get(p.request_key) == replace(p, from_cache=True) for p in pages)
    assert len(list(tmp_path.glob("*.parquet"))) <= 10


def test_leftover_temp_files_are_ignored(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    cache.put(make_page())
    (tmp_path / ".tmp-deadbeef.parquet").write_bytes(b"half a file")
    assert ResponseCache(tmp_path).verify() == []
    os.remove(tmp_path / ".tmp-deadbeef.parquet")
