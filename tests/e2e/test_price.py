"""A price line before the first call, and refusals that name the whole price (issue 41,
point 3), on the command line and in Python; calls witnessed by the service's request log."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cli import run, served

import parcelsearch


def test_the_command_line_prices_before_spending(env, service, key, tmp_path: Path,
                                                 capsys) -> None:
    areas = tmp_path / "areas.gpkg"
    parcelsearch.demo_areas().to_file(areas)
    base = ["search", str(areas), "--id-column", "area_id", "--out", str(tmp_path / "a.csv")]
    code, _, err = run(base, capsys)
    assert code == 0, err
    full = served(service, key)
    assert "price: at least 7 calls (exactly 7 for page 1 of 7 pieces" in err
    assert f"price: exactly {full} calls (7 already spent; exactly {full - 7} for the later" in err

    # The same areas again, every page re-read: the whole price is known before the first
    # call, and the refusal names it with the same word.
    code, _, err = run([*base, "--refresh", "--budget", "7"], capsys)
    assert code == 3 and served(service, key) == full  # nothing spent
    assert f"price: about {full} calls (exactly 7 for page 1 of 7 pieces; about {full - 7}" in err
    assert f"this search needs about {full} calls (" in err and f"--budget {full}." in err
    assert "at least" not in err

    code, _, err = run([*base, "--refresh", "--budget", str(full)], capsys)
    assert code == 0, err
    assert served(service, key) == 2 * full  # following the advice was enough, and exact


def test_python_progress_prices_before_spending(make_client, demo_areas, service,
                                                capsys) -> None:
    client = make_client()
    first = parcelsearch.search(demo_areas, client=client)
    assert "price: at least 7 calls" in capsys.readouterr().err
    with pytest.raises(parcelsearch.QuotaWouldExceedError) as refused:
        parcelsearch.search(demo_areas, client=client, refresh="all", budget=7)
    err = capsys.readouterr().err
    assert f"price: about {first.calls} calls" in err
    assert f"needs about {first.calls} calls" in str(refused.value)
    assert f"budget={first.calls}." in str(refused.value)
    assert len(service.keys.requests(client.key_name)) == first.calls
