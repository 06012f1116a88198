"""``parcelsearch diff`` reads every output we write (issue 59): the files of ``search --out``
in each format, :meth:`SearchResult.to_parquet`, :meth:`SearchResult.to_file` in each format,
and run ids, compared with each other in every pair, after one real search of the demo areas
on the reference service."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

import parcelsearch
from parcelsearch import outputs
from parcelsearch.cli import main
from parcelsearch.cli.records import _side
from parcelsearch.comparison import compare


def _out(suffix: str) -> Callable[[parcelsearch.SearchResult, Path], str]:
    return lambda result, folder: str(outputs.write_ids(result, folder / f"out{suffix}"))


def _to_file(suffix: str) -> Callable[[parcelsearch.SearchResult, Path], str]:
    return lambda result, folder: str(result.to_file(folder / f"to_file{suffix}"))


#: How each kind of output is made from a result, named as the test ids name them.
WRITERS: dict[str, Callable[[parcelsearch.SearchResult, Path], str]] = {
    **{f"out{s}": _out(s) for s in outputs.IDS_FORMATS},
    "to_parquet": lambda result, folder: str(result.to_parquet(folder / "py.parquet")),
    **{f"to_file{s}": _to_file(s) for s in outputs.IDS_FORMATS},
    "run id": lambda result, folder: str(result.run_id)[:12],
}
PAIRS = list(itertools.product(WRITERS, repeat=2))


@pytest.fixture(scope="module")
def written(
    tmp_path_factory: pytest.TempPathFactory,
    service: object,
    ca_bundle: str,
) -> tuple[dict[str, str], str, int]:
    """One real search of the demo areas: every output of it, its cache folder, GroupIDs."""
    from parcelsearch_service.server import RunningService

    assert isinstance(service, RunningService)
    folder = tmp_path_factory.mktemp("diff-outputs")
    key = service.keys.create("diff-outputs", key_type="production", quota=1_000, per_second=50)
    client = parcelsearch.Client(
        api_key=key,
        base_url=service.base_url,
        ca_bundle=ca_bundle,
        cache_dir=folder / "cache",
        rate=40,
    )
    areas = parcelsearch.demo_areas().iloc[:4]  # the four in markets
    result = parcelsearch.search(areas, client=client, id_column="area_id", progress=False)
    assert result.complete and len(result.ids) > 0
    return (
        {name: write(result, folder) for name, write in WRITERS.items()},
        str(folder / "cache"),
        len(result.ids),
    )


@pytest.mark.parametrize(("old", "new"), PAIRS, ids=[f"{a}-vs-{b}" for a, b in PAIRS])
def test_every_pair_of_outputs_compares_as_the_same_search(
    written: tuple[dict[str, str], str, int], old: str, new: str
) -> None:
    paths, cache, _ = written
    diff = compare(_side(paths[old], cache, None), _side(paths[new], cache, None))
    assert (diff.added, diff.removed) == (0, 0)
    assert bool(diff.summary["comparable"].all()) and len(diff.summary) == 4


@pytest.mark.parametrize("name", list(WRITERS))
def test_the_command_reads_each_output(
    written: tuple[dict[str, str], str, int], name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``parcelsearch diff OLD NEW`` on the command line, the output against a run id."""
    paths, cache, _ = written
    assert main(["diff", paths[name], paths["run id"], "--cache-dir", cache]) == 0
    printed = capsys.readouterr()
    assert "0 GroupIDs added, 0 GroupIDs removed" in printed.out, printed.err
