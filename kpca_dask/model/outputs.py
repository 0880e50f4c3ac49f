"""What a fitted model gives: embeddings, pre-images and novelty scores, lazily.

The work behind :class:`~kpca_dask.KernelPCA`'s ``transform``,
``inverse_transform`` and ``reconstruction_error``. Each function reads the
fitted model (:class:`~kpca_dask.model.fitted.FittedModel`) only: its settings,
not the estimator's parameters, which take effect at the next fit. Each
returns the container it was given: a lazy dask array for dask or Zarr input,
numpy for in-memory input, a DataArray for a DataArray, a DataFrame or Series
for a frame (built by :mod:`kpca_dask.io.labelled`). Outputs are float32 when
the model is (``dtype="float32"``) or the input is, as scikit-learn's
transformers keep float32; float64 otherwise.
"""

from __future__ import annotations

import dask
import numpy as np

from ..engine.passes import project
from ..engine.reconstruction import reconstruct, reconstruction_error
from ..errors import InvalidInputError, NotInvertibleError
from ..io.fields import as_field
from ..io.frames import (
    Partitions,
    frame_to_array,
    frame_to_numpy,
    is_dask_frame,
    is_frame,
    select_columns,
)
from ..io.labelled import frame_like, label_embedding, label_rows, series_like
from ..validation import check_n_features
from .field_inputs import model_rows, stacked_positions, unweighted
from .fitted import FittedModel
from .inputs import as_rows, computed, held_in_memory, is_xarray
from .precomputed import PRECOMPUTED, new_point_rows, refuse_scores

__all__ = ["embedding", "transformed", "preimages", "reconstruction_errors"]


def _result_dtype(model, input_dtype) -> np.dtype:
    """float32 when the model or the input is float32, float64 otherwise.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> model = SimpleNamespace(settings=SimpleNamespace(dtype="float64"))
    >>> _result_dtype(model, np.float32), _result_dtype(model, np.int64)
    (dtype('float32'), dtype('float64'))
    """
    single = model.settings.dtype == "float32" or np.dtype(input_dtype) == np.float32
    return np.dtype(np.float32 if single else np.float64)


def transformed(model: FittedModel, X, frame=None, *, columns, name: str = "KernelPCA"):
    """The embedding of ``X`` in the container it came in (the work of ``transform``).

    ``X`` and ``frame`` are as :func:`kpca_dask.io.frames.table_input` gives
    them; ``columns`` names the components of a lazy frame's output, ``name``
    the estimator in error messages.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> model = KernelPCA(n_components=2, n_landmarks=10, random_state=0).fit(X).model_
    >>> transformed(model, X, columns=["a", "b"]).shape
    (50, 2)
    """
    lazy = not held_in_memory(X)  # dask, Zarr, a path: a lazy result
    X, like = model_rows(model.layout, X, frame=frame)
    Y = embedding(model, X, frame, name=name)
    if not lazy:
        Y = computed(Y)
    if like is not None:
        attrs = {"kernel": model.kernel, **model.kernel_params,
                 "n_landmarks": model.n_landmarks}
        return label_embedding(Y, like, attrs)
    if lazy and frame is not None:
        return frame_like(Y, frame, columns)
    return Y


def embedding(model: FittedModel, X, frame=None, *, name: str = "KernelPCA"):
    """The lazy embedding of the rows ``X`` (features as
    :func:`~kpca_dask.model.field_inputs.model_rows` gives them): y(x) = P^T k_m(x) - c.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> model = KernelPCA(n_components=2, n_landmarks=10, random_state=0).fit(X).model_
    >>> embedding(model, X).shape
    (50, 2)
    """
    # Stored column chunks are kept: kernel rows (only the landmark columns are read)
    # and points (the kernels sum over them, docs/design.md §12).
    X, _ = as_rows(X, frame)
    check_n_features(X, model.n_features, name)
    if model.kernel == PRECOMPUTED:
        X = new_point_rows(X, model.landmark_indices)
    Y = project(X, model.landmarks, model.solution.projection, model.solution.offset,
                model.kernel, model.kernel_params, np.dtype(model.settings.dtype))
    return Y.astype(_result_dtype(model, X.dtype), copy=False)


def preimages(model: FittedModel, Y):
    """The pre-images of the embeddings ``Y`` in the container they came in (the work of
    ``inverse_transform``; docs/design.md §6).

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> model = KernelPCA(n_components=2, n_landmarks=10, random_state=0,
    ...                   fit_inverse_transform=True).fit(X).model_
    >>> preimages(model, np.zeros((3, 2))).shape
    (3, 2)
    """
    if model.preimage is None:
        raise NotInvertibleError(
            "This model has no pre-image map, so it cannot inverse_transform: it was fitted "
            "without fit_inverse_transform=True, or re-solved, updated or merged since (the "
            "map is learnt by a pass over the training rows). Fit it with "
            "KernelPCA(..., fit_inverse_transform=True) (one more pass over the data).")
    if is_xarray(Y):
        return _inverse_data_array(model, Y)
    frame = None
    if is_dask_frame(Y):
        frame = Partitions.of(select_columns(Y, what="The embedding"))
        Y = frame_to_array(frame, lengths=False, what="The embedding")
    elif is_frame(Y):
        frame, Y = Y, frame_to_numpy(Y, what="The embedding")
    Y, is_lazy = as_rows(Y, frame, what="The embedding")
    X_hat = _preimage_rows(model, Y)
    if model.layout is not None and model.layout.dims:  # the field's stacked positions
        X_hat = stacked_positions(X_hat, model.layout)
    if frame is not None:
        names = model.feature_names
        names = list(names) if names is not None else [
            f"x{i}" for i in range(model.n_features)]
        return frame_like(X_hat if is_lazy else computed(X_hat), frame, names)
    return X_hat if is_lazy else computed(X_hat)


def _preimage_rows(model: FittedModel, Y):
    """Lazy pre-images of the embedding rows ``Y``, in the units of the input features."""
    if Y.shape[1] != model.n_components:
        raise InvalidInputError(
            f"The embedding has {Y.shape[1]} column(s), but this model has "
            f"{model.n_components} components; pass the output of transform (shape "
            f"(n_samples, {model.n_components})).")
    X_hat = reconstruct(Y, model.preimage.centres, model.preimage.coefficients,
                        model.kernel, model.kernel_params)
    return unweighted(X_hat.astype(_result_dtype(model, Y.dtype), copy=False), model.layout)


def _inverse_data_array(model: FittedModel, Y):
    if "component" not in Y.dims or Y.ndim != 2:
        raise InvalidInputError(
            f"A DataArray embedding needs dims (sample, 'component'); got {Y.dims}. "
            "Pass the output of transform, or rename its component dimension.")
    Y = Y.transpose(..., "component")
    layout = model.layout
    if layout is not None and layout.dims:
        X_hat = _preimage_rows(model, as_rows(Y.data, None, what="The embedding")[0])
        if not dask.is_dask_collection(Y.data):
            X_hat = computed(X_hat)
        sample_dim = Y.dims[0]
        coord = Y.indexes[sample_dim] if sample_dim in Y.indexes else None
        return as_field(X_hat, layout, {sample_dim: coord}, name="reconstruction")
    return label_rows(preimages(model, Y.data), Y, name="reconstruction",
                      column_dim="feature")


def reconstruction_errors(model: FittedModel, X, frame=None, *, name: str = "KernelPCA"):
    """The squared feature-space distance of each row of ``X`` to the principal subspace, in
    the container it came in (the work of ``reconstruction_error``; docs/design.md §6).

    ``X`` and ``frame`` are as :func:`kpca_dask.io.frames.table_input` gives them.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> model = KernelPCA(n_components=2, n_landmarks=10, random_state=0).fit(X).model_
    >>> reconstruction_errors(model, X).shape
    (50,)
    """
    if model.novelty is None:
        raise NotInvertibleError(
            "This model was saved by an older kpca-dask without the mean feature that "
            "reconstruction_error needs; fit it again.")
    if model.kernel == PRECOMPUTED:
        refuse_scores("reconstruction_error and score_samples")
    is_lazy = not held_in_memory(X)
    X, like = model_rows(model.layout, X, frame=frame)
    X, _ = as_rows(X, frame)
    check_n_features(X, model.n_features, name)
    errors = reconstruction_error(
        X, model.landmarks, model.solution.projection, model.solution.offset,
        model.novelty, model.kernel, model.kernel_params, np.dtype(model.settings.dtype))
    errors = errors.astype(_result_dtype(model, X.dtype), copy=False)
    errors = errors if is_lazy else computed(errors)
    if like is not None:
        return label_rows(errors, like, name="reconstruction_error")
    if frame is not None:
        return series_like(errors, frame, "reconstruction_error")
    return errors
