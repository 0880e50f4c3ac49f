"""Data in and out: Zarr and xarray inputs, atomic Zarr outputs.

The functions live in :mod:`kpca_dask.io.zarr_io`; they are imported here so
that ``from kpca_dask.io import open_array`` reads as the public entry point.
"""

from .zarr_io import (
    WRITE_STATE_ATTR,
    PathOrURL,
    check_can_write,
    label_embedding,
    open_array,
    open_group,
    store_location,
    write_array,
    write_embedding,
    write_group,
)

__all__ = [
    "WRITE_STATE_ATTR",
    "PathOrURL",
    "check_can_write",
    "label_embedding",
    "open_array",
    "open_group",
    "store_location",
    "write_array",
    "write_embedding",
    "write_group",
]
