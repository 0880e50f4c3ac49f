"""The installed package version, readable from any layer without importing the package."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kpca-dask")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0+unknown"
