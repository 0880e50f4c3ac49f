"""kpca-dask: out-of-core kernel PCA with Nyström landmarks on Dask.

Examples
--------
>>> import numpy as np
>>> from kpca_dask import KernelPCA
>>> X = np.random.default_rng(0).normal(size=(200, 4))
>>> KernelPCA(n_components=3, n_landmarks=50, random_state=0).fit(X).eigenvalues_.shape
(3,)
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .errors import (
    CheckpointMismatchError,
    InvalidInputError,
    InvalidParameterError,
    KPCAError,
    ModelFormatError,
    NonFiniteInputError,
    NonNumericInputError,
    OutputExistsError,
    TooFewComponentsError,
)
from .estimator import KernelPCA
from .exact import ExactKernelPCA

try:
    __version__ = version("kpca-dask")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0+unknown"


def load(path, *, storage_options: dict | None = None) -> KernelPCA:
    """Load a model saved by ``KernelPCA.save`` (a Zarr group; no pickle, no code run).

    See :func:`kpca_dask.model_store.load_model`.
    """
    # Imported here so that ``import kpca_dask`` does not pull in zarr and xarray.
    from .model_store import load_model

    return load_model(path, storage_options=storage_options)


__all__ = [
    "KernelPCA",
    "ExactKernelPCA",
    "load",
    "KPCAError",
    "InvalidInputError",
    "InvalidParameterError",
    "NonFiniteInputError",
    "NonNumericInputError",
    "TooFewComponentsError",
    "ModelFormatError",
    "OutputExistsError",
    "CheckpointMismatchError",
    "__version__",
]
