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

from ._version import __version__
from .errors import (
    CheckpointMismatchError,
    ConcurrentWriteError,
    InsufficientMemoryError,
    InvalidInputError,
    InvalidParameterError,
    KPCAError,
    ModelFormatError,
    ModelMismatchError,
    NonFiniteInputError,
    NonNumericInputError,
    NonSymmetricKernelWarning,
    NoStatisticsError,
    NotInvertibleError,
    OutputExistsError,
    OverlappingRowsError,
    ParametersChangedWarning,
    RepeatedRowsWarning,
    SlowKernelWarning,
    TooFewComponentsError,
    ZeroEigenvalueWarning,
)
from .estimators.exact import ExactKernelPCA
from .estimators.kernel_pca import KernelPCA
from .io.parquet_out import write_table
from .model.growing import merge
from .model.table_outputs import transform_table
from .storage.exact_files import ESTIMATOR as _EXACT
from .storage.exact_files import load_exact
from .storage.model_files import load_model, stored_estimator


def load(path, *, storage_options: dict | None = None) -> KernelPCA | ExactKernelPCA:
    """Load a model saved by ``KernelPCA.save`` or ``ExactKernelPCA.save`` (a Zarr group; no
    pickle, no code run).

    See :func:`kpca_dask.storage.model_files.load_model` and
    :func:`kpca_dask.storage.exact_files.load_exact`.
    """
    if stored_estimator(path, storage_options=storage_options) == _EXACT:
        return load_exact(path, ExactKernelPCA, storage_options=storage_options)
    return load_model(path, KernelPCA, storage_options=storage_options)


__all__ = [
    "KernelPCA",
    "ExactKernelPCA",
    "load",
    "merge",
    "transform_table",
    "write_table",
    "KPCAError",
    "InvalidInputError",
    "InvalidParameterError",
    "NonFiniteInputError",
    "NonNumericInputError",
    "TooFewComponentsError",
    "InsufficientMemoryError",
    "ModelFormatError",
    "OutputExistsError",
    "CheckpointMismatchError",
    "ConcurrentWriteError",
    "NoStatisticsError",
    "ModelMismatchError",
    "OverlappingRowsError",
    "NotInvertibleError",
    "ZeroEigenvalueWarning",
    "SlowKernelWarning",
    "ParametersChangedWarning",
    "RepeatedRowsWarning",
    "NonSymmetricKernelWarning",
    "__version__",
]
