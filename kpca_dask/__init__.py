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
    InvalidInputError,
    InvalidParameterError,
    KPCAError,
    ModelFormatError,
    NonFiniteInputError,
    OutputExistsError,
    TooFewComponentsError,
)
from .estimator import KernelPCA
from .exact import ExactKernelPCA
from .model_store import load_model as load

try:
    __version__ = version("kpca-dask")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0+unknown"

__all__ = [
    "KernelPCA",
    "ExactKernelPCA",
    "load",
    "KPCAError",
    "InvalidInputError",
    "InvalidParameterError",
    "NonFiniteInputError",
    "TooFewComponentsError",
    "ModelFormatError",
    "OutputExistsError",
    "__version__",
]
