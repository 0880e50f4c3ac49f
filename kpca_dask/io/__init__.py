"""Data in and out: opening arrays and tables, labelled and atomic outputs.

The functions live in the modules of :mod:`kpca_dask.io` (one concern each:
``locations``, ``atomic``, ``zarr_io``, ``zarr_out``, ``formats``, ``array_files``,
``sparse_files``, ``tables``, ``frames``, ``labelled``, ``parquet_out``, ``replacing``,
``checksums``, ``claims``). How a field becomes rows and back, and the steps a fitted
model applies to its rows (delay embedding, analytic signal), are the subpackage
:mod:`kpca_dask.io.preprocessing`. The common ones are imported here so that ``from
kpca_dask.io import open_array`` reads as the public entry point.
"""

from .atomic import WRITE_STATE_ATTR, check_can_write
from .labelled import label_embedding
from .locations import PathOrURL, StoreLocation, store_location
from .preprocessing import coslat_weights
from .zarr_io import open_array, open_group
from .zarr_out import write_array, write_embedding, write_group

__all__ = [
    "WRITE_STATE_ATTR",
    "PathOrURL",
    "StoreLocation",
    "check_can_write",
    "coslat_weights",
    "label_embedding",
    "open_array",
    "open_group",
    "store_location",
    "write_array",
    "write_embedding",
    "write_group",
]
