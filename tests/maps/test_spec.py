"""The map description and the web-Mercator arithmetic of first views."""

from __future__ import annotations

import pytest

from parcelsearch.maps import LayerSpec, MapSpec, View
from parcelsearch.maps.spec import pixels, union, view_of


def test_view_of_fits_the_bounds() -> None:
    (lat, lon), zoom = view_of((0.0, 0.0, 1.0, 1.0), (800, 360))
    assert (lat, lon) == pytest.approx((0.5, 0.5), abs=1e-3)
    assert pixels((0.0, 0.0, 1.0, 1.0), zoom) <= 360 < pixels((0.0, 0.0, 1.0, 1.0), zoom + 1)


def test_pixels_double_per_zoom_level() -> None:
    assert pixels((0.0, 0.0, 0.1, 0.05), 11) == pytest.approx(2 * pixels((0.0, 0.0, 0.1, 0.05), 10))


def test_union() -> None:
    assert union((0.0, 1.0, 2.0, 3.0), (-1.0, 2.0, 1.0, 5.0)) == (-1.0, 1.0, 2.0, 5.0)


def test_first_views_default_to_the_whole_map_and_layers_are_named() -> None:
    layer = LayerSpec("x", {"type": "FeatureCollection", "features": []})
    spec = MapSpec("t", (layer,), None, (0.0, 0.0, 1.0, 1.0))
    assert spec.first_views() == (View("t", (0.0, 0.0, 1.0, 1.0)),)
    assert MapSpec("t", (), None, None).first_views() == ()
    assert spec.layer("x") is layer
    with pytest.raises(KeyError, match="no layer 'y'"):
        spec.layer("y")


def test_feature_counts_list_the_context_first() -> None:
    def layer(name: str, n: int) -> LayerSpec:
        feature = {"type": "Feature", "geometry": None, "properties": {}}
        return LayerSpec(name, {"type": "FeatureCollection", "features": [feature] * n})

    spec = MapSpec(
        "t",
        (layer("Pieces", 3), layer("Study areas", 2)),
        None,
        None,
        context=layer("Context (offline)", 7),
    )
    assert spec.feature_counts() == {"Context (offline)": 7, "Pieces": 3, "Study areas": 2}
    assert list(spec.feature_counts()) == ["Context (offline)", "Pieces", "Study areas"]
