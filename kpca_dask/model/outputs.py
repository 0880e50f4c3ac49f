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

import numpy as np

from .._parallel import computed
from ..engine.passes.nystrom import project
from ..engine.preimages.reconstruction import reconstruct, reconstruction_error
from ..errors import InvalidInputError, InvalidParameterError, NotInvertibleError
from ..io.labelled import frame_like, label_embedding, label_rows, series_like
from ..io.preprocessing.field_inputs import stacked_positions, unweighted
from ..io.preprocessing.field_sets import field_output
from ..io.preprocessing.fields import KEPT_ATTRS
from ..validation import check_n_features
from .fitted import FittedModel
from .inputs import Rows, method_input
from .precomputed import PRECOMPUTED, new_point_rows, refuse_scores

__all__ = ["embedding", "transformed", "check_invertible", "preimages",
           "reconstruction_errors", "one_sample_of"]


def one_sample_of(labelled, rows: Rows):
    """A labelled output over the samples without its sample dimension, for a field given
    without one (one time step); otherwise as it is.

    Examples
    --------
    >>> import xarray as xr
    >>> Y = xr.DataArray(np.ones((1, 2)), dims=("time", "mode"))
    >>> one_sample_of(Y, Rows(None, False, one_sample=True)).dims
    ('mode',)
    """
    if not rows.one_sample:
        return labelled
    return labelled.isel({labelled.dims[0]: 0}, drop=True)


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


def _example_rows(estimator, X) -> Rows:
    """``X`` as :func:`~kpca_dask.model.inputs.method_input` gives it (for the examples)."""
    return method_input(estimator, estimator.model_.layout, X)


def transformed(model: FittedModel, rows: Rows, *, columns, name: str = "KernelPCA"):
    """The embedding of ``rows`` in the container their input came in (the work of
    ``transform``).

    ``rows`` are as :func:`~kpca_dask.model.inputs.method_input` gives them;
    ``columns`` names the components of a lazy frame's output, ``name`` the
    estimator in error messages.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> kpca = KernelPCA(n_components=2, n_landmarks=10, random_state=0).fit(X)
    >>> transformed(kpca.model_, _example_rows(kpca, X), columns=["a", "b"]).shape
    (50, 2)
    """
    Y = embedding(model, rows.data, name=name)
    if not rows.is_lazy:
        Y = computed(Y)
    if rows.like is not None:
        attrs = {"kernel": model.kernel, **model.kernel_params,
                 "n_landmarks": model.n_landmarks}
        return one_sample_of(label_embedding(Y, rows.like, attrs), rows)
    if rows.is_lazy and rows.frame is not None:
        return frame_like(Y, rows.frame, columns)
    return Y


def embedding(model: FittedModel, X, *, name: str = "KernelPCA"):
    """The lazy embedding of the dask rows ``X`` (features as
    :func:`~kpca_dask.model.inputs.method_input` gives them): y(x) = P^T k_m(x) - c.

    Examples
    --------
    >>> import dask.array as da
    >>> from kpca_dask import KernelPCA
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> model = KernelPCA(n_components=2, n_landmarks=10, random_state=0).fit(X).model_
    >>> embedding(model, da.from_array(X)).shape
    (50, 2)
    """
    # Stored column chunks are kept: kernel rows (only the landmark columns are read)
    # and points (the kernels sum over them, docs/design.md §12).
    check_n_features(X, model.n_features, name)
    if model.kernel == PRECOMPUTED:
        X = new_point_rows(X, model.landmark_indices)
    Y = project(X, model.landmarks, model.solution.projection, model.solution.offset,
                model.kernel, model.kernel_params, np.dtype(model.settings.dtype))
    return Y.astype(_result_dtype(model, X.dtype), copy=False)


def check_invertible(model: FittedModel) -> None:
    """Refuse a model without a pre-image map (checked before its embeddings are read).

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> check_invertible(KernelPCA(n_components=2, n_landmarks=10, random_state=0,
    ...                            fit_inverse_transform=True).fit(X).model_)
    """
    if model.preimage is None:
        raise NotInvertibleError(
            # scikit-learn's sentence first, word for word: code written for it matches it.
            "The fit_inverse_transform parameter was not set to True when instantiating and "
            "hence the inverse transform is not available. (A model re-solved, updated or "
            "merged since its fit has no pre-image map either: the map is learnt by a pass "
            "over the training rows.) Fit it with KernelPCA(..., fit_inverse_transform=True) "
            "(one more pass over the data).")


def preimages(model: FittedModel, rows: Rows, n_components: int | None = None):
    """The pre-images of the embeddings ``rows`` (as
    :func:`~kpca_dask.model.inputs.embedding_input` gives them) in the container they came
    in (the work of ``inverse_transform``; docs/design.md §6). ``n_components``: from
    the leading components only, the others set to 0 (docs/design.md §15).

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> from kpca_dask.model.inputs import embedding_input
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> model = KernelPCA(n_components=2, n_landmarks=10, random_state=0,
    ...                   fit_inverse_transform=True).fit(X).model_
    >>> preimages(model, embedding_input(np.zeros((3, 2)))).shape
    (3, 2)
    """
    check_invertible(model)
    X_hat = _preimage_rows(model, _leading(rows.data, n_components))
    if rows.like is not None:
        return _inverse_data_array(model, X_hat, rows)
    if model.layout is not None and model.layout.dims:  # the field's stacked positions
        X_hat = stacked_positions(X_hat, model.layout)
    X_hat = X_hat if rows.is_lazy else computed(X_hat)
    if rows.frame is not None:
        names = model.feature_names
        names = list(names) if names is not None else [
            f"x{i}" for i in range(model.n_features)]
        return frame_like(X_hat, rows.frame, names)
    return X_hat


def _leading(Y, n_components: int | None):
    """The embedding rows ``Y`` with the components after the first ``n_components`` set to
    0 (lazily for dask ``Y``): their projection onto the leading subspace."""
    if n_components is None:
        return Y
    q = Y.shape[1]
    if not (isinstance(n_components, (int, np.integer)) and not isinstance(n_components, bool)
            and 1 <= n_components <= q):
        raise InvalidParameterError(
            f"n_components must be an int from 1 to {q} (the components of the embedding); "
            f"got {n_components!r}.")
    kept = (np.arange(q) < n_components).astype(Y.dtype if Y.dtype.kind == "f" else np.float64)
    return Y * kept


def _preimage_rows(model: FittedModel, Y):
    """Lazy pre-images of the embedding rows ``Y``, in the units of the input features and
    with their mean (the map's intercept), the weights divided out."""
    if Y.shape[1] != model.n_components:
        raise InvalidInputError(
            f"The embedding has {Y.shape[1]} column(s), but this model has "
            f"{model.n_components} components; pass the output of transform (shape "
            f"(n_samples, {model.n_components})).")
    X_hat = reconstruct(Y, model.preimage.centres, model.preimage.coefficients,
                        model.kernel, model.kernel_params, model.preimage.intercept)
    return unweighted(X_hat.astype(_result_dtype(model, Y.dtype), copy=False), model.layout)


def _inverse_data_array(model: FittedModel, X_hat, rows: Rows):
    """Pre-images of a DataArray embedding: the field itself for a field model, else rows
    labelled like the embedding with a ``feature`` dimension."""
    X_hat = X_hat if rows.is_lazy else computed(X_hat)
    Y, layout = rows.like, model.layout
    if layout is not None and layout.dims:
        sample_dim = Y.dims[0]
        coord = Y.indexes[sample_dim] if sample_dim in Y.indexes else None
        # The field itself, in its units: named and described as the input was.
        return field_output(X_hat, layout, {sample_dim: coord},
                            name=layout.variable or "reconstruction", keep=KEPT_ATTRS)
    return label_rows(X_hat, Y, name="reconstruction", column_dim="feature")


def reconstruction_errors(model: FittedModel, rows: Rows, *, name: str = "KernelPCA",
                          series_name: str = "reconstruction_error"):
    """The squared feature-space distance of each row to the principal subspace, in the
    container its input came in (the work of ``reconstruction_error``; docs/design.md §6).

    ``rows`` are as :func:`~kpca_dask.model.inputs.method_input` gives them;
    ``series_name`` names the Series of a frame's output.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> kpca = KernelPCA(n_components=2, n_landmarks=10, random_state=0).fit(X)
    >>> reconstruction_errors(kpca.model_, _example_rows(kpca, X)).shape
    (50,)
    """
    if model.novelty is None:
        raise NotInvertibleError(
            "This model was saved by an older kpca-dask without the mean feature that "
            "reconstruction_error needs; fit it again.")
    if model.kernel == PRECOMPUTED:
        refuse_scores("reconstruction_error and score_samples")
    X = rows.data
    check_n_features(X, model.n_features, name)
    errors = reconstruction_error(
        X, model.landmarks, model.solution.projection, model.solution.offset,
        model.novelty, model.kernel, model.kernel_params, np.dtype(model.settings.dtype))
    errors = errors.astype(_result_dtype(model, X.dtype), copy=False)
    errors = errors if rows.is_lazy else computed(errors)
    if rows.like is not None:
        return one_sample_of(label_rows(errors, rows.like, name="reconstruction_error"), rows)
    if rows.frame is not None:
        return series_like(errors, rows.frame, series_name)
    return errors
