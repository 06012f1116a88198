"""The command line without a service: usage errors (exit 2), file errors, help, start-up.

Every message a user can get here is checked for its exit code, its words, and for the
absence of Python: no traceback, no ``argument=``, no ``Client(...)`` or ``set_crs(...)``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import geopandas as gpd
import pytest
from _cli import PYTHON, run

import parcelsearch
from parcelsearch import errors
from parcelsearch.cli import EXIT_CODES, build_parser, registry
from parcelsearch.cli.printing import plural
from parcelsearch.cli.registry import walk


@pytest.fixture
def files(tmp_path: Path) -> Path:
    areas = parcelsearch.demo_areas()
    areas.to_file(tmp_path / "areas.gpkg")
    areas.to_file(tmp_path / "two.gpkg", layer="districts")
    areas.head(2).to_file(tmp_path / "two.gpkg", layer="sites")
    areas.to_file(tmp_path / "areas.shp")
    with zipfile.ZipFile(tmp_path / "areas.zip", "w") as archive:
        for ext in ("shp", "shx", "dbf", "prj", "cpg"):
            archive.write(tmp_path / f"areas.{ext}", f"areas.{ext}")
    (tmp_path / "areas.prj").unlink()  # the Shapefile alone now has no CRS
    return tmp_path


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["search", "A", "--out", "o.parquet", "--budget", "-1"],
            "argument --budget: must be a whole number >= 0, got -1",
            id="budget-negative",
        ),
        pytest.param(
            ["search", "A", "--out", "o.parquet", "--budget", "ten"],
            "argument --budget: must be a whole number >= 0, got 'ten'",
            id="budget-text",
        ),
        pytest.param(
            ["search", "A", "--out", "o.parquet", "--workers", "0"],
            "argument --workers: must be a whole number >= 1, got 0",
            id="workers-zero",
        ),
        pytest.param(
            ["search", "A", "--out", "o.parquet", "--max-age", "-5"],
            "argument --max-age: must be at least 0",
            id="max-age-negative",
        ),
        pytest.param(
            ["search", "A", "--out", "o.parquet", "--max-age", "nan"],
            "argument --max-age: must be at least 0 (an age: seconds, or a number with "
            "a unit (30d days, 12h hours, 90m minutes, 45s seconds, 2w weeks)), got nan",
            id="max-age-nan",
        ),
        pytest.param(
            ["search", "A", "--out", "o.parquet", "--max-age", "30x"],
            "argument --max-age: takes an age: seconds, or a number with a unit (30d "
            "days, 12h hours, 90m minutes, 45s seconds, 2w weeks), got '30x'",
            id="max-age-unit",
        ),
        pytest.param(
            ["plan", "A", "--tolerance", "0.1"],
            "argument --tolerance: must be 0 for exact pieces or at least 0.5",
            id="tolerance-too-small",
        ),
        pytest.param(
            ["plan", "A", "--tolerance", "-3"],
            "argument --tolerance: must be at least 0",
            id="tolerance-negative",
        ),
        pytest.param(
            ["plan", "A", "--tolerance", "inf"],
            "argument --tolerance: must be at least 0, got inf",
            id="tolerance-inf",
        ),
        pytest.param(
            ["search", "A", "--out", "o.parquet", "--quota", "lots"],
            "argument --quota: 'lots' is not a quota",
            id="quota",
        ),
        pytest.param(
            ["plan", "A", "--crs", "EPSG:99999"],
            "argument --crs: 'EPSG:99999' is not a CRS",
            id="crs",
        ),
        pytest.param(
            ["search", "A", "--out", "b.txt"],
            "argument --out: cannot write 'b.txt': .txt is not one of the formats "
            "written (.parquet, .csv, .gpkg, .geojson). Name a file such as --out",
            id="out-extension",
        ),
        pytest.param(
            ["search", "A", "--out", "ids"],
            "argument --out: cannot write 'ids': no extension",
            id="out-no-extension",
        ),
        pytest.param(
            ["plan", "A", "--out-tiles", "tiles.csv"],
            "argument --out-tiles: cannot write 'tiles.csv': .csv is not one of the "
            "formats written (.gpkg, .geojson, .parquet, .shp)",
            id="tiles-extension",
        ),
        pytest.param(
            ["plan", "A", "--out-map", "map.png"],
            "argument --out-map: cannot write 'map.png': .png is not one of the "
            "formats written (.html)",
            id="map-extension",
        ),
        pytest.param(
            ["search", "A", "--out", "o.csv", "--base-url", "http://127.0.0.1:1"],
            "argument --base-url: refusing http:// base URL",
            id="http-url",
        ),
        pytest.param(
            ["search", "A", "--out", "o.csv", "--base-url", "https://127.0.0.1:1/#top"],
            "argument --base-url: base URL must not carry a query",
            id="url-query",
        ),
        pytest.param(
            ["search", "A", "--out", "o.csv", "--ca-bundle", "missing.pem"],
            "argument --ca-bundle: no such file 'missing.pem'",
            id="ca-bundle",
        ),
        pytest.param(
            ["search", "A"], "the following arguments are required: --out", id="out-missing"
        ),
        pytest.param(
            ["cache", "wipe"], "argument action: invalid choice: 'wipe'", id="cache-action"
        ),
        pytest.param(["frobnicate"], "invalid choice: 'frobnicate'", id="command"),
    ],
)
def test_usage_errors_exit_2_and_name_the_option(
    argv, message, capsys, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(argv, capsys)
    assert code == 2
    assert message in err
    assert not PYTHON.search(err)
    assert not list(tmp_path.iterdir())  # refused before anything was written or spent


@pytest.mark.parametrize(
    ("areas", "extra", "message"),
    [
        pytest.param(
            "two.gpkg",
            [],
            "holds 2 layers (districts, sites) and reading the first "
            "silently could search the wrong areas. Choose one with --layer districts.",
            id="two-layers",
        ),
        pytest.param(
            "two.gpkg",
            ["--layer", "parks"],
            "has no layer 'parks'; its layers are districts, sites",
            id="no-such-layer",
        ),
        pytest.param(
            "missing.gpkg", [], "study areas file 'missing.gpkg' does not exist", id="missing-file"
        ),
        pytest.param(
            "zip://nothing.zip!a.shp",
            [],
            "cannot read study areas file 'zip://nothing.zip!a.shp'",
            id="missing-zip",
        ),
        pytest.param(
            "areas.shp",
            [],
            "has no CRS, so its coordinates cannot be placed on "
            "Earth. Declare it with --crs EPSG:4326",
            id="no-crs",
        ),
        pytest.param(
            "areas.gpkg",
            ["--id-column", "nope"],
            "id column 'nope' is not in the areas",
            id="id-column",
        ),
        pytest.param("areas.gpkg", ["--layer", "x"], "has no layer 'x'", id="layer-gpkg"),
    ],
)
def test_area_file_errors_exit_2_in_cli_words(
    files, areas, extra, message, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(files)
    code, out, err = run(["plan", areas, *extra], capsys)
    assert code == 2
    assert message in err
    assert not PYTHON.search(err)


@pytest.mark.parametrize(
    "areas", ["two.gpkg", "zip://areas.zip!areas.shp", "/vsizip/areas.zip/areas.shp", "areas.shp"]
)
def test_layers_virtual_paths_and_declared_crs_are_read(files, areas, capsys, monkeypatch) -> None:
    monkeypatch.chdir(files)
    extra = {"two.gpkg": ["--layer", "sites"], "areas.shp": ["--crs", "EPSG:4326"]}
    code, out, err = run(["plan", areas, "--id-column", "area_id", *extra.get(areas, [])], capsys)
    assert code == 0, err
    assert ("pine-street" in out) and (("park-ring" in out) == (areas != "two.gpkg"))


@pytest.mark.parametrize("suffix", [".gpkg", ".geojson", ".parquet", ".shp"])
def test_plan_writes_tiles_in_each_format(files, suffix, capsys) -> None:
    out = files / f"tiles{suffix}"
    code, printed, err = run(
        ["plan", str(files / "areas.gpkg"), "--id-column", "area_id", "--out-tiles", str(out)],
        capsys,
    )
    assert code == 0, err
    tiles = gpd.read_parquet(out) if suffix == ".parquet" else gpd.read_file(out)
    # twin-sites' two parts keep a piece each: the vendor's matching rule is not known
    assert len(tiles) == 7 and tiles.crs == "EPSG:4326"
    assert "7 pieces, at least 7 calls" in printed
    assert (
        "connectors could save up to 1 call if the vendor matches by a point "
        "(--match representative-point)" in printed
    )


def test_match_representative_point_lets_parts_share_a_piece(files, capsys, monkeypatch) -> None:
    """--match (or $PARCELSEARCH_MATCH) names the vendor's rule; a bad name is a usage
    error naming the choices."""
    monkeypatch.delenv("PARCELSEARCH_MATCH", raising=False)
    areas = str(files / "areas.gpkg")
    code, printed, err = run(
        ["plan", areas, "--id-column", "area_id", "--match", "representative-point"], capsys
    )
    assert code == 0, err
    assert "6 pieces, at least 6 calls" in printed and "could save" not in printed
    monkeypatch.setenv("PARCELSEARCH_MATCH", "representative-point")
    code, printed, err = run(["plan", areas, "--id-column", "area_id"], capsys)
    assert code == 0 and "6 pieces, at least 6 calls" in printed
    code, printed, err = run(
        ["plan", areas, "--id-column", "area_id", "--match", "intersects"], capsys
    )
    assert code == 0 and "7 pieces, at least 7 calls" in printed
    code, _, err = run(["plan", areas, "--match", "centroid"], capsys)
    assert code == 2 and "argument --match: invalid choice: 'centroid'" in err


@pytest.mark.parametrize("command", ["plan", "search"])
def test_no_connectors_is_offered_as_help_says(command, capsys) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    assert "--no-connectors" in capsys.readouterr().out
    given = ["A", "--out", "o.csv"] if command == "search" else ["A"]
    assert build_parser().parse_args([command, *given]).connectors is True
    assert build_parser().parse_args([command, *given, "--no-connectors"]).connectors is False


def test_no_connectors_keeps_every_piece_within_two_grid_steps(files, capsys) -> None:
    """--help: 'never let parts of an area (islands) share a piece through a connector ...
    no piece reaches beyond the tolerance anywhere'."""
    out = files / "strict.geojson"
    code, printed, err = run(
        [
            "plan",
            str(files / "areas.gpkg"),
            "--id-column",
            "area_id",
            "--no-connectors",
            "--out-tiles",
            str(out),
        ],
        capsys,
    )
    assert code == 0, err
    assert "7 pieces, at least 7 calls" in printed
    areas = parcelsearch.demo_areas().set_index("area_id").geometry
    tiles = gpd.read_file(out)
    twins = tiles[tiles["area_id"] == "twin-sites"]
    assert len(twins) == 2  # each part its own piece
    for area_id, piece in zip(tiles["area_id"], tiles.geometry, strict=True):
        assert areas[area_id].buffer(2.01e-6, quad_segs=32).covers(piece)


def test_one_piece_is_singular(files, capsys) -> None:
    one = parcelsearch.demo_areas().query("area_id == 'pine-street'")
    one.to_file(files / "one.geojson")
    code, out, _ = run(["plan", str(files / "one.geojson")], capsys)
    assert (
        code == 0
        and ("\n1 piece, at least 1 call; page 1 of every piece (1 call) would price it exactly\n")
        in out
    )


def test_plan_prints_the_price_facts_of_the_plans_repr(files, capsys) -> None:
    """Issue 59, point 5: 144 cells of a neighbourhood, as the command line and Python see
    them: the survey that would price the rest, after the minimum, word for word."""
    import geopandas as gpd
    import shapely

    cells = gpd.GeoDataFrame(
        {"cell": [f"c{k:03d}" for k in range(144)]},
        geometry=[
            shapely.box(
                261_000 + 150 * i, 6_250_000 + 150 * j, 261_150 + 150 * i, 6_250_150 + 150 * j
            )
            for j in range(12)
            for i in range(12)
        ],
        crs="EPSG:3857",
    )
    cells.to_file(files / "cells.gpkg")
    code, out, err = run(["plan", str(files / "cells.gpkg"), "--id-column", "cell"], capsys)
    planned = parcelsearch.plan(cells, id_column="cell")
    facts = planned.price_facts()
    assert code == 0, err
    assert facts.startswith("a survey of about ") and facts in repr(planned)
    assert f"\n144 pieces, at least 144 calls; {facts}\n" in out


def test_plural() -> None:
    assert [plural(n, "piece") for n in (0, 1, 2)] == ["0 pieces", "1 piece", "2 pieces"]
    assert plural(1_234, "call") == "1,234 calls"


def test_nothing_listening_names_the_url_and_serve(files, capsys, monkeypatch) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"https://127.0.0.1:{port}"
    monkeypatch.setenv("PARCELSEARCH_API_KEY", "k" * 20)
    monkeypatch.setenv("PARCELSEARCH_CACHE_DIR", str(files / "cache"))
    for argv in (
        ["search", str(files / "areas.gpkg"), "--out", str(files / "o.parquet"), "--base-url", url],
        ["markets", "--base-url", url],
    ):
        code, out, err = run(argv, capsys)
        assert code == 1
        assert f"nothing is listening at {url} (connection refused)" in err
        assert "Start the reference service with `parcelsearch serve`" in err
        assert "--base-url https://... or the environment variable PARCELSEARCH_BASE_URL" in err
        assert not PYTHON.search(err)
    assert not (files / "o.parquet").exists()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        pytest.param(
            {"PARCELSEARCH_BASE_URL": "https://127.0.0.1:1"},
            "no API key. Set the environment variable PARCELSEARCH_API_KEY.",
            id="no-key",
        ),
        pytest.param(
            {"PARCELSEARCH_API_KEY": "k" * 20},
            "no base URL of the services. Set --base-url https://... or the "
            "environment variable PARCELSEARCH_BASE_URL.",
            id="no-url",
        ),
        pytest.param(
            {
                "PARCELSEARCH_API_KEY": "k" * 20,
                "PARCELSEARCH_BASE_URL": "https://127.0.0.1:1",
                "PARCELSEARCH_CA_BUNDLE": "/nowhere/ca.pem",
            },
            "CA bundle '/nowhere/ca.pem' is not a file (a local service writes ca.pem "
            "in its certificate folder). Point --ca-bundle FILE or the environment "
            "variable PARCELSEARCH_CA_BUNDLE at a PEM file.",
            id="no-ca",
        ),
        pytest.param(
            {
                "PARCELSEARCH_API_KEY": "k" * 20,
                "PARCELSEARCH_BASE_URL": "https://127.0.0.1:1",
                "PARCELSEARCH_QUOTA": "plenty",
            },
            "'plenty' (from PARCELSEARCH_QUOTA) is not a quota",
            id="env-quota",
        ),
    ],
)
def test_configuration_errors_are_usage_errors_in_flags_and_variables(
    files, env, message, capsys, monkeypatch
) -> None:
    for name in (
        "PARCELSEARCH_API_KEY",
        "PARCELSEARCH_BASE_URL",
        "PARCELSEARCH_CA_BUNDLE",
        "PARCELSEARCH_QUOTA",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PARCELSEARCH_CACHE_DIR", str(files / "cache"))
    code, out, err = run(
        ["search", str(files / "areas.gpkg"), "--out", str(files / "o.parquet")], capsys
    )
    assert code == 2
    assert message in err
    assert not PYTHON.search(err.replace("(from PARCELSEARCH_QUOTA)", ""))


def test_search_help_lists_the_environment_and_exit_codes(capsys) -> None:
    code, out, _ = run(["search", "--help"], capsys)
    assert code == 0
    for name in (
        "PARCELSEARCH_API_KEY",
        "PARCELSEARCH_BASE_URL",
        "PARCELSEARCH_CA_BUNDLE",
        "PARCELSEARCH_QUOTA",
        "PARCELSEARCH_CACHE_DIR",
        "~/.cache/parcelsearch",
    ):
        assert name in out
    for code_number, meaning in EXIT_CODES.items():
        assert re.search(rf"^  {code_number}\s+{re.escape(meaning)}$", out, flags=re.M)


@pytest.mark.parametrize("command", ["search", "serve", "keys"])
def test_every_option_and_action_has_help(command) -> None:
    """Every option, positional and sub-command of every command says what it does."""
    missing: list[str] = []
    for path, summary, parser in walk(build_parser([command]), ("parcelsearch",)):
        if len(path) > 1 and not summary:
            missing.append(" ".join(path))
        missing += [
            f"{' '.join(path)} {'/'.join(action.option_strings) or action.dest}"
            for action in parser.arguments
            if not action.help
        ]
    # With another command given, serve/keys are placeholders (the service is not imported).
    others = {"search": ("serve", "keys"), "serve": ("keys",), "keys": ("serve",)}[command]
    assert [m for m in missing if m.split(" ")[1] not in others] == []


def test_help_does_not_import_the_heavy_parts() -> None:
    """``parcelsearch --help`` loads neither geopandas nor the service (start-up stays quick)."""
    code = (
        "import sys\nfrom parcelsearch.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('geopandas', 'pandas', 'shapely', 'requests', 'starlette',"
        " 'parcelsearch_service', 'parcelsearch.accessor') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stdout


def test_an_unexpected_error_is_one_line_not_a_traceback(files, capsys, monkeypatch) -> None:
    """A bug (any exception that is not a ParcelSearchError) still exits 1 with one line."""

    def broken(*args, **kwargs):
        raise ValueError("Unknown column geometry")

    monkeypatch.setattr("parcelsearch.planning.plans.plan", broken)
    code, out, err = run(["plan", str(files / "areas.gpkg")], capsys)
    assert code == 1
    assert err.startswith("parcelsearch: error: unexpected ValueError: Unknown column geometry")
    assert "PARCELSEARCH_DEBUG=1" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "refresh"),
    [
        ([], None),
        (["--refresh"], "all"),
        (["--refresh", "all"], "all"),
        (["--refresh", "changed"], "changed"),
    ],
)
def test_refresh_alone_keeps_its_meaning_all(argv: list[str], refresh: str | None) -> None:
    args = build_parser().parse_args(["search", "a.gpkg", "--out", "o.csv", *argv])
    assert args.refresh == refresh


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--refresh", "changed", "--verify-sample", "1.5"],
            "argument --verify-sample: must be a fraction between 0 and 1, got 1.5",
        ),
        (["--refresh", "some"], "argument --refresh: invalid choice: 'some'"),
    ],
)
def test_refresh_usage_errors_exit_2(
    files: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from parcelsearch.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["search", str(files / "areas.gpkg"), "--out", str(files / "o.csv"), *argv])
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_verify_sample_without_refresh_changed_says_so(
    files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from parcelsearch.cli import main

    with pytest.raises(SystemExit) as exited:
        main(
            [
                "search",
                str(files / "areas.gpkg"),
                "--out",
                str(files / "o.csv"),
                "--verify-sample",
                "0.1",
            ]
        )
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "add --refresh changed" in err


def test_runs_on_an_empty_history_and_diff_of_missing_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from parcelsearch.cli import main

    assert main(["runs", "--cache-dir", str(tmp_path)]) == 0
    assert "no runs recorded yet" in capsys.readouterr().out
    assert main(["diff", str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_plan_max_calls_prints_the_smallest_tolerance_that_fits(files, capsys, monkeypatch) -> None:
    monkeypatch.delenv("PARCELSEARCH_MATCH", raising=False)
    areas = str(files / "areas.gpkg")
    code, printed, err = run(["plan", areas, "--id-column", "area_id", "--max-calls", "6"], capsys)
    assert code == 0, err
    assert "the smallest tolerance whose plan fits 6 calls: --tolerance 100" in printed
    code, printed, err = run(["plan", areas, "--id-column", "area_id", "--max-calls", "4"], capsys)
    assert (
        code == 0
        and "no tolerance fits 4 calls: each area needs at least one, so 5 "
        "areas need at least 5 calls"
        in printed
    )  # never a figure that cannot work


def test_plan_writes_an_offline_map_of_its_pieces(files: Path, capsys) -> None:
    """Issue 41: ``plan --out-map`` (and ``search``'s) writes the demo's offline HTML map."""
    out = files / "plan.html"
    code, printed, err = run(
        ["plan", str(files / "areas.gpkg"), "--id-column", "area_id", "--out-map", str(out)], capsys
    )
    assert code == 0, err
    page = out.read_text(encoding="utf-8")
    assert f"map written to {out}" in printed and "<script" in page and "leaflet" in page.lower()
    assert "https://unpkg" not in page and 'src="http' not in page  # nothing fetched but tiles
    data = page.split('<script id="ps-spec" type="application/json">')[1].split("</script>")[0]
    layers = {x["name"]: x["geojson"] for x in json.loads(data)["layers"]}
    assert len(layers["Pieces"]["features"]) == 7


@pytest.mark.parametrize(
    ("error", "code", "word"),
    [
        pytest.param(errors.ConfigurationError("no key"), 2, "error", id="configuration"),
        pytest.param(errors.InputError("bad row"), 2, "error", id="input"),
        pytest.param(errors.NotComparableError("other areas"), 2, "error", id="not-comparable"),
        pytest.param(
            errors.QuotaWouldExceedError("too many", needed=9, allowed=3),
            3,
            "stopped",
            id="quota-would-exceed",
        ),
        pytest.param(
            errors.BudgetExhaustedError("spent", spent=3, budget=3),
            3,
            "stopped",
            id="budget-exhausted",
        ),
        pytest.param(
            errors.QuotaExhaustedError("no calls left", status=429),
            3,
            "stopped",
            id="quota-exhausted",
        ),
        pytest.param(
            errors.AreasFailedError("2 areas failed", failures={"a": "400"}),
            3,
            "stopped",
            id="areas-failed",
        ),
        pytest.param(
            errors.SearchInterrupted("stopped", signum=signal.SIGTERM),
            143,
            "interrupted",
            id="interrupted",
        ),
        pytest.param(errors.AuthenticationError("bad key", status=401), 1, "error", id="key"),
        pytest.param(errors.CacheError("unreadable"), 1, "error", id="cache"),
    ],
)
def test_an_error_exits_with_its_class_s_exit_code(
    files, error, code, word, capsys, monkeypatch
) -> None:
    """The command line maps what a command raises to the exit status its class carries."""

    def fails(*args, **kwargs):
        raise error

    monkeypatch.setattr("parcelsearch.planning.plans.plan", fails)
    status, out, err = run(["plan", str(files / "areas.gpkg")], capsys)
    assert (status, err) == (code, f"parcelsearch: {word}: {error.render('cli')}\n")
    assert code in EXIT_CODES or code == 1


def test_the_service_plugs_the_commands_the_help_lists() -> None:
    """pyproject.toml's entry point group names the service's commands, and ``parcelsearch
    --help`` lists exactly those (without importing the service); named, each is loaded."""
    declared = tomllib.loads(
        (Path(__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    )["project"]["entry-points"][registry.GROUP]
    assert list(declared) == list(registry.plugged()) == list(registry.LISTED)
    assert all(value.startswith("parcelsearch_service.") for value in declared.values())
    listed = build_parser(["--help"]).subcommands
    assert (
        listed is not None
        and {name: listed.summaries[name] for name in declared} == registry.LISTED
    )
    loaded = build_parser(["keys"]).subcommands
    assert loaded is not None
    keys = loaded.parsers["keys"].subcommands
    assert keys is not None and list(keys.parsers) == ["create", "list", "revoke"]


def test_a_command_plugged_through_installed_metadata_runs(tmp_path: Path) -> None:
    """Any installed distribution's entry point in the group adds a command; it is imported
    only when named (``--help`` lists it by name alone, without importing it)."""
    dist = tmp_path / "hello_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: hello-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{registry.GROUP}]\nhello = hello_plugin:HELLO\n")
    (tmp_path / "hello_plugin.py").write_text(
        "import sys\nfrom parcelsearch.cli.registry import Command\n"
        "print('hello_plugin imported', file=sys.stderr)\n"
        "def declare(parser):\n    parser.add_argument('--name', help='who')\n"
        "def run(args):\n    print(f'hello {args.name}')\n    return 4\n"
        "HELLO = Command('hello', 'say hello', declare, run)\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(parcelsearch.__file__).parents[1])]),
    }

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "parcelsearch.cli", *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )

    done = cli("hello", "--name", "Ada")
    assert (done.returncode, done.stdout) == (4, "hello Ada\n"), done.stderr
    listing = cli("--help")
    assert listing.returncode == 0 and re.search(r"^    hello$", listing.stdout, flags=re.M)
    for done in (listing, cli("runs", "--help")):
        assert "hello_plugin imported" not in done.stderr


def test_no_argparse_private_attributes() -> None:
    """The parsers are read through :class:`parcelsearch.cli.registry.Parser`'s public
    attributes, never argparse's private ones."""
    private = re.compile(
        r"\._(actions|option_string_actions|subparsers|name_parser_map|"
        r"choices_actions|SubParsersAction)\b"
    )
    root = Path(__file__).parents[1]
    found = [
        f"{path.relative_to(root)}:{number}"
        for path in [
            *(root / "src").rglob("*.py"),
            *(root / "docs" / "_ext").glob("*.py"),
            *(root / "tests").rglob("*.py"),
        ]
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if private.search(line) and path != Path(__file__)
    ]
    assert found == []


@pytest.mark.parametrize("argv", [["plan"], ["parcels", "synth", "--out", "p.parquet"]])
@pytest.mark.parametrize("name", ["areas.gpkg", "areas.geojson", "areas.parquet"])
def test_an_empty_areas_file_is_named_empty(tmp_path, capsys, monkeypatch, argv, name) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).touch()  # 0 bytes: an export that failed
    code, _, err = run([*argv[:2], name, *argv[2:]] if len(argv) > 1 else [*argv, name], capsys)
    assert code == 2 and f"study areas file '{name}' is empty (0 bytes)" in err, err
    assert "CSV:" not in err and not PYTHON.search(err)


def test_the_decision_point_offers_to_survey_more_three_times_at_most(monkeypatch) -> None:
    """`s` at the decision point searches again with the share the price names, each time
    with the newest; after three, the question offers it no more and the stop stands."""
    from parcelsearch._run.pricing import Price
    from parcelsearch.cli.searching import PriceQuestion, _search_asking

    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    asked: list[str] = []
    monkeypatch.setattr("builtins.input", lambda q: asked.append(q) or "s")
    shares: list[float | None] = []

    def search(
        areas: object, *, client: object, confirm: PriceQuestion, survey_share: float | None = None
    ) -> None:
        shares.append(survey_share)
        price = Price(
            first=10,
            later=90,
            known="surveyed",
            low=60,
            high=140,
            capped=True,
            wider_share=(20 + len(shares)) / 100,
        )
        assert not confirm(price)
        raise errors.PriceNotConfirmedError("stopped", needed=100, threshold=20)

    with pytest.raises(errors.PriceNotConfirmedError):
        _search_asking(search, None, None, {"confirm": PriceQuestion()})
    assert shares == [None, 0.21, 0.22, 0.23]
    assert [q.endswith("[y/N] ") for q in asked] == [False, False, False, True]
