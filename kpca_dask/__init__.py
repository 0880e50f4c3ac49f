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

import importlib

from ._version import __version__

#: Where each public name is defined. Imported when first used (PEP 562), so that a Dask
#: worker that unpickles a block function loads that function's module and what it needs,
#: not the estimators, scikit-learn and pandas: a worker's own memory is part of its
#: budget (docs/design.md §14).
_PUBLIC = {
    "KernelPCA": ".estimators.kernel_pca",
    "ExactKernelPCA": ".estimators.exact",
    "HilbertKernelEOF": ".estimators.hilbert",
    "ExtendedKernelEOF": ".estimators.extended",
    "KernelMCA": ".estimators.coupled",
    "KernelCCA": ".estimators.coupled",
    "merge": ".model.growing",
    "rotate": ".eof.rotation",
    "RotatedEOF": ".eof.rotation",
    "RotatedHilbertEOF": ".eof.hilbert_rotation",
    "RotatedExtendedEOF": ".eof.extended_rotation",
    "RotatedMCA": ".eof.coupled_rotation",
    "bootstrap": ".eof.bootstrap",
    "transform_table": ".model.table_outputs",
    "write_table": ".io.parquet_out",
    **{name: ".errors" for name in (
        "KPCAError", "InvalidInputError", "InvalidParameterError", "NonFiniteInputError",
        "NonNumericInputError", "TooFewComponentsError", "InsufficientMemoryError",
        "ModelFormatError", "OutputExistsError", "CheckpointMismatchError",
        "ConcurrentWriteError", "NoStatisticsError", "ModelMismatchError",
        "OverlappingRowsError", "NotInvertibleError", "ZeroEigenvalueWarning",
        "NotPositiveSemidefiniteError", "NegativeEigenvalueWarning",
        "SlowKernelWarning", "CanonicalOverfitWarning", "ParametersChangedWarning",
        "RepeatedRowsWarning",
        "NonSymmetricKernelWarning", "ShortRecordWarning")},
}


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'kpca_dask' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))


#: Which estimator and loader read a model file, by the ``estimator`` its attributes name
#: (module, loader; the estimator's class is the public name). Files naming none are read
#: as KernelPCA models, whose first format had no such attribute.
_LOADERS = {
    "KernelPCA": (".storage.model_files", "load_model"),
    "ExactKernelPCA": (".storage.exact_files", "load_exact"),
    "HilbertKernelEOF": (".storage.hilbert_files", "load_hilbert"),
    "ExtendedKernelEOF": (".storage.extended_files", "load_extended"),
    "KernelMCA": (".storage.coupled_files", "load_coupled"),
    "KernelCCA": (".storage.coupled_files", "load_coupled"),
}


def load(path, *, storage_options: dict | None = None):
    """Load a model saved by any estimator's ``save`` (a Zarr group; no pickle, no code run):
    the file says which estimator it holds.

    See :func:`kpca_dask.storage.model_files.load_model`,
    :func:`kpca_dask.storage.exact_files.load_exact`,
    :func:`kpca_dask.storage.hilbert_files.load_hilbert`,
    :func:`kpca_dask.storage.extended_files.load_extended` and
    :func:`kpca_dask.storage.coupled_files.load_coupled`.
    """
    from .storage.model_files import stored_estimator

    name = stored_estimator(path, storage_options=storage_options)
    module, loader = _LOADERS.get(name, _LOADERS["KernelPCA"])
    read = getattr(importlib.import_module(module, __name__), loader)
    # A model of stages (the extended EOF) reads each stage's file by this function.
    stages = {"load_stage": load} if name == "ExtendedKernelEOF" else {}
    return read(path, __getattr__(name if name in _LOADERS else "KernelPCA"),
                storage_options=storage_options, **stages)


__all__ = [
    "KernelPCA",
    "ExactKernelPCA",
    "HilbertKernelEOF",
    "ExtendedKernelEOF",
    "KernelMCA",
    "KernelCCA",
    "load",
    "merge",
    "rotate",
    "RotatedEOF",
    "RotatedHilbertEOF",
    "RotatedExtendedEOF",
    "RotatedMCA",
    "bootstrap",
    "transform_table",
    "write_table",
    "KPCAError",
    "InvalidInputError",
    "InvalidParameterError",
    "NonFiniteInputError",
    "NonNumericInputError",
    "TooFewComponentsError",
    "NotPositiveSemidefiniteError",
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
    "NegativeEigenvalueWarning",
    "SlowKernelWarning",
    "CanonicalOverfitWarning",
    "ParametersChangedWarning",
    "RepeatedRowsWarning",
    "NonSymmetricKernelWarning",
    "ShortRecordWarning",
    "__version__",
]
