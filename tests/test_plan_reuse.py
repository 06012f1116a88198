"""Plans kept in the cache folder and reused for the same areas in any CRS."""

from __future__ import annotations

import json
from pathlib import Path

import geopandas as gpd
import pytest
import shapely

import parcelsearch
from parcelsearch import _wire
from parcelsearch.notices import KeptFileWarning
from parcelsearch.planning import reuse as plan_reuse

TRACTS = Path(__file__).resolve().parent / "data" / "sf_tracts_2020.geojson"


def _tracts() -> gpd.GeoDataFrame:
    return gpd.read_file(TRACTS).set_index("tract").iloc[:6]


def test_the_same_areas_in_another_crs_get_the_kept_pieces(tmp_path: Path) -> None:
    first = parcelsearch.plan(_tracts())
    assert plan_reuse.reuse(first, tmp_path) is first  # kept for next time
    assert len(list((tmp_path / plan_reuse.PLANS_FOLDER).iterdir())) == 6  # one per area
    utm = parcelsearch.plan(_tracts().to_crs("EPSG:26910"))
    reused = plan_reuse.reuse(utm, tmp_path)
    assert [p.polygon_json for p in reused.pieces] == [p.polygon_json for p in first.pieces]
    assert reused.areas is utm.areas and reused.pieces[0].area_id == first.pieces[0].area_id


def test_other_areas_or_settings_are_planned_afresh(tmp_path: Path) -> None:
    plan_reuse.keep_plan(parcelsearch.plan(_tracts()), tmp_path)
    moved = _tracts()
    moved.geometry = moved.geometry.translate(xoff=3e-6)  # three grid steps: another area
    assert plan_reuse.stored_plan(parcelsearch.plan(moved), tmp_path) is None
    assert plan_reuse.stored_plan(parcelsearch.plan(_tracts(), 5), tmp_path) is None
    nudged = _tracts()
    nudged.geometry = nudged.geometry.translate(xoff=4e-7)  # within the grid's rounding
    assert plan_reuse.stored_plan(parcelsearch.plan(nudged), tmp_path) is not None
    assert shapely.equals_exact(nudged.geometry.iloc[0], _tracts().geometry.iloc[0], 1e-6)


def test_an_unreadable_kept_plan_is_ignored(tmp_path: Path) -> None:
    made = parcelsearch.plan(_tracts())
    paths = plan_reuse.keep_plan(made, tmp_path)
    for path in paths:
        path.write_text("{not json")
    assert plan_reuse.stored_plan(made, tmp_path) is None
    assert plan_reuse.reuse(made, None) is made


def test_a_ring_whose_least_vertex_flips_in_a_round_trip_is_the_same_area(tmp_path: Path) -> None:
    """Found on Albuquerque's census tracts (libpysal 10740) arriving in NM state plane feet:
    two vertices a billionth of a degree apart in x, and the round trip made the other one
    the least, so the normal forms started their rings at different vertices and the kept
    plan was not found (a search in a fourth CRS then paid 22 calls again)."""
    ring = [(-106.6, 35.08), (-106.6 + 1e-9, 35.07), (-106.58, 35.07), (-106.58, 35.09)]
    before = gpd.GeoDataFrame(geometry=[shapely.Polygon(ring)], crs="EPSG:4326")
    ring[0] = (-106.6 + 2e-9, 35.08)  # now the second vertex has the least x
    after = gpd.GeoDataFrame(geometry=[shapely.Polygon(ring)], crs="EPSG:4326")
    plan_reuse.keep_plan(parcelsearch.plan(before), tmp_path)
    assert not shapely.equals_exact(
        shapely.normalize(before.geometry[0]), shapely.normalize(after.geometry[0]), 1.5e-6
    )
    assert plan_reuse.stored_plan(parcelsearch.plan(after), tmp_path) is not None


def test_areas_are_reused_one_by_one_within_more_areas(tmp_path: Path) -> None:
    """Last week's 3 tracts in lon/lat, this week's 6 (those 3 among them) in UTM: the 3 get
    last week's pieces, the other 3 their own, and those are kept for next time."""
    three = parcelsearch.plan(_tracts().iloc[:3])
    plan_reuse.reuse(three, tmp_path)
    utm = parcelsearch.plan(_tracts().to_crs("EPSG:26910"))
    reused = plan_reuse.reuse(utm, tmp_path)
    old = set(three.areas.index)
    assert [p.polygon_json for p in reused.pieces if p.area_id in old] == [
        p.polygon_json for p in three.pieces
    ]
    assert [p.polygon_json for p in reused.pieces if p.area_id not in old] == [
        p.polygon_json for p in utm.pieces if p.area_id not in old
    ]
    assert list(dict.fromkeys(p.area_id for p in reused.pieces)) == list(utm.areas.index)
    assert len(list((tmp_path / plan_reuse.PLANS_FOLDER).iterdir())) == 6
    again = plan_reuse.reuse(parcelsearch.plan(_tracts()), tmp_path, keep=False)
    assert [p.polygon_json for p in again.pieces] == [p.polygon_json for p in reused.pieces]


def test_a_kept_area_without_pieces_is_planned_afresh(tmp_path: Path) -> None:
    """A damaged file must never leave an area unsearched."""
    made = parcelsearch.plan(_tracts())
    first = plan_reuse.keep_plan(made, tmp_path)[0]
    document = json.loads(first.read_text())
    document["pieces"] = []
    first.write_text(json.dumps(document))
    with pytest.warns(KeptFileWarning, match=r"is ignored \(no piece\)"):
        reused = plan_reuse.reuse(made, tmp_path, keep=False)
    assert {p.area_id for p in reused.pieces} == set(made.areas.index)


def _tampered(made: parcelsearch.Plan, tmp_path: Path, change) -> Path:
    """The kept plan of the first area, its pieces changed by ``change`` (same boundary)."""
    first = plan_reuse.keep_plan(made, tmp_path)[0]
    document = json.loads(first.read_text())
    document["pieces"] = change(document["pieces"])
    first.write_text(json.dumps(document))
    return first


def test_a_kept_plan_whose_pieces_no_longer_cover_the_area_is_planned_afresh(
    tmp_path: Path,
) -> None:
    """Issue 46, point 6: a kept plan edited to give one area a tiny piece (same boundary)
    made a later search report that area complete from a corner of it."""
    made = parcelsearch.plan(_tracts())
    area = made.areas.index[0]
    tiny = _wire.ring_json(
        [(-122.5, 37.7), (-122.4999, 37.7), (-122.4999, 37.7001), (-122.5, 37.7)]
    )
    path = _tampered(made, tmp_path, lambda pieces: [[0, tiny, pieces[0][2], pieces[0][3]]])
    with pytest.warns(KeptFileWarning, match=f"{path.name}.*do not cover the area"):
        reused = plan_reuse.reuse(made, tmp_path, keep=False)
    assert [p.polygon_json for p in reused.pieces] == [p.polygon_json for p in made.pieces]
    assert tiny not in {p.polygon_json for p in reused.pieces if p.area_id == area}


def test_a_kept_plan_is_read_from_the_rings_sent_not_what_the_file_says_of_them(
    tmp_path: Path,
) -> None:
    """The file's geometry and request size of a piece are not believed: an honest geometry
    beside a tiny ring to send is still a tiny piece."""
    made = parcelsearch.plan(_tracts())
    tiny = _wire.ring_json(
        [(-122.5, 37.7), (-122.4999, 37.7), (-122.4999, 37.7001), (-122.5, 37.7)]
    )
    _tampered(made, tmp_path, lambda pieces: [[i, tiny, wkb, 1] for i, _, wkb, _ in pieces])
    with pytest.warns(KeptFileWarning, match="do not cover the area"):
        stored = plan_reuse.stored_plan(made, tmp_path)
    assert stored is not None and tiny not in {p.polygon_json for p in stored.pieces}
    odd = _tampered(made, tmp_path, lambda pieces: [[7, *piece[1:]] for piece in pieces])
    with pytest.warns(KeptFileWarning, match=f"{odd.name}.*piece ids not 0..n-1"):
        reused = plan_reuse.reuse(made, tmp_path, keep=False)
    assert [p.polygon_json for p in reused.pieces] == [p.polygon_json for p in made.pieces]


def test_a_kept_plan_is_written_whole_leaving_no_temporary_file(
    tmp_path: Path, monkeypatch
) -> None:
    made = parcelsearch.plan(_tracts().iloc[:1])
    folder = tmp_path / plan_reuse.PLANS_FOLDER
    folder.mkdir()

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.replace", full)
    with pytest.raises(OSError, match="No space"):
        plan_reuse.keep_plan(made, tmp_path)
    assert list(folder.iterdir()) == []  # the temporary file is gone too


def test_a_kept_plan_whose_pieces_reach_far_beyond_the_area_is_planned_afresh(
    tmp_path: Path,
) -> None:
    """A piece made to cover a whole county would match parcels outside the area (and pay for
    their pages): the kept plan is ignored, as one that covers too little is."""
    made = parcelsearch.plan(_tracts())
    west, south, east, north = made.areas.geometry.iloc[0].bounds
    huge = _wire.ring_json(
        [
            (west - 0.1, south - 0.1),
            (east + 0.1, south - 0.1),
            (east + 0.1, north + 0.1),
            (west - 0.1, north + 0.1),
            (west - 0.1, south - 0.1),
        ]
    )
    path = _tampered(made, tmp_path, lambda pieces: [[0, huge, *pieces[0][2:]]])
    with pytest.warns(KeptFileWarning, match=f"{path.name}.*reach beyond the area"):
        reused = plan_reuse.reuse(made, tmp_path, keep=False)
    assert [p.polygon_json for p in reused.pieces] == [p.polygon_json for p in made.pieces]


@pytest.mark.parametrize("tolerance", [0, 50])
@pytest.mark.parametrize("match", ["intersects", "representative-point"])
def test_honest_kept_plans_pass_the_checks_in_any_crs(
    tmp_path: Path, tolerance: float, match: str
) -> None:
    """The checks refuse no plan the planner made (connectors and tolerance included)."""
    plan_reuse.keep_plan(parcelsearch.plan(_tracts(), tolerance, match=match), tmp_path)
    utm = parcelsearch.plan(_tracts().to_crs("EPSG:26910"), tolerance, match=match)
    stored = plan_reuse.stored_plan(utm, tmp_path)  # a warning would fail the test
    assert stored is not None and len({p.area_id for p in stored.pieces}) == 6
