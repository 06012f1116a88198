"""Where the files written here keep what, for their writers and their readers alike.

The run's metadata is JSON under one key (:data:`METADATA_KEY`) in each format's natural place
(see :mod:`parcelsearch.outputs`). A GeoPackage of GroupIDs is one layer
(:data:`AREAS_LAYER`) with the run's metadata as the GeoPackage's own (its
``gpkg_metadata`` table); one written by an earlier build had two more layers
(:data:`OLD_IDS_LAYER`, :data:`OLD_RUN_LAYER`), still read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyogrio

__all__ = ["METADATA_KEY", "AREAS_LAYER", "OLD_IDS_LAYER", "OLD_RUN_LAYER", "gpkg_metadata"]

#: Key of the run's metadata in parquet schema metadata, GeoJSON and GeoPackage metadata.
METADATA_KEY = "parcelsearch"
#: The one layer of a GeoPackage of GroupIDs.
AREAS_LAYER = "areas"
#: Layers of GeoPackages written by earlier builds (still read, no longer written): the
#: GroupIDs as a table, and the run's metadata as a one-row table.
OLD_IDS_LAYER, OLD_RUN_LAYER = "group_ids", "parcelsearch_run"


def gpkg_metadata(path: Path) -> dict[str, Any] | None:
    """The run's metadata in a GeoPackage written here: its dataset metadata, or (a file
    written by an earlier build) its ``parcelsearch_run`` layer; None when it holds neither."""
    stored = (pyogrio.read_info(path, layer=0).get("dataset_metadata") or {}).get(METADATA_KEY)
    if stored is not None:
        return dict(json.loads(stored))
    if OLD_RUN_LAYER not in {str(name) for name, _ in pyogrio.list_layers(path)}:
        return None
    run = pyogrio.read_dataframe(path, layer=OLD_RUN_LAYER, read_geometry=False)
    return dict(json.loads(run["metadata"].iloc[0])) if len(run) else None
