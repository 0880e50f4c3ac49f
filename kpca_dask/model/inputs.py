"""The one place that looks at what kind of input it was given, and converts it.

Arrays, lists, scipy.sparse rows, dask arrays, xarray DataArrays (fields, with
``sample_dim`` and ``weights``), Zarr paths and URLs, pandas and dask
DataFrames and kernel matrices all arrive here; every other module of the
model and the estimators sees float dask arrays, chunked along the features as
they were given (docs/design.md §12), and a :class:`Rows` that says what the
outputs are labelled like and whether the input was lazy. The entries:
:func:`fit_input` (a fit), :func:`method_input` (transform, scores, patterns),
:func:`embedding_input` (inverse_transform), :func:`first_batch` and
:func:`batch_input` (partial_fit), :func:`table_rows` (a table's columns), and
for :class:`~kpca_dask.ExactKernelPCA`, which holds small inputs in memory,
:func:`in_memory_fit_input`, :func:`in_memory_input` and :func:`labels_of`.
"""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np
import zarr
from scipy import sparse

from .._parallel import computed
from ..errors import InvalidInputError, InvalidParameterError
from ..io.frames import (
    Partitions,
    check_feature_names,
    frame_feature_names,
    frame_to_array,
    frame_to_numpy,
    is_dask_frame,
    is_frame,
    select_columns,
)
from ..io.preprocessing.field_inputs import stacked_rows, weighted_rows, with_sample_dim
from ..io.preprocessing.field_rows import CANDIDATE_ROWS, candidate_mask, field_rows, with_mask
from ..io.preprocessing.field_sets import fields_rows, fit_fields, is_fields
from ..io.preprocessing.fields import (
    FeatureLayout,
    check_same_field,
    check_weights,
    layout_of,
    stacked,
)
from ..io.preprocessing.latitude import is_coslat
from ..validation import DEFAULT_BLOCK_ROWS, as_dask_array, as_numpy_array
from .provenance import source_of, with_rows

__all__ = ["Rows", "FitInput", "is_xarray", "weights_allowed", "fit_input",
           "fit_rows", "method_input", "model_rows", "embedding_input", "first_batch",
           "batch_input", "table_rows", "require_table", "in_memory_fit_input", "in_memory_input",
           "labels_of", "row_range", "lazy_rows", "lazy_or_none", "holds_sparse_rows",
           "check_same_samples", "relabelled"]


@dataclass(frozen=True)
class Rows:
    """Input as rows of features, and what the outputs are put back on.

    ``data`` is a float dask array (numpy for the methods of ExactKernelPCA, which holds
    small inputs in memory, and for a pandas table handed back to a public method);
    ``is_lazy`` whether the input was (dask, Zarr, a path: a lazy result);
    ``like`` the DataArray outputs are labelled like; ``frame`` the pandas
    frame or dask frame's :class:`~kpca_dask.io.frames.Partitions` outputs
    take the index from; ``one_sample`` whether a field came without its
    sample dimension (one sample: outputs over the samples drop it).
    """

    data: Any
    is_lazy: bool
    like: Any = None
    frame: Any = None
    one_sample: bool = False


@dataclass(frozen=True)
class FitInput:
    """The rows a fit reads, their feature layout (None for plain arrays) and the
    feature names of a table (None otherwise); ``is_lazy`` as in :class:`Rows`;
    ``is_table``: the rows came from a table (pandas or dask DataFrame)."""

    data: Any
    layout: FeatureLayout | None
    feature_names: Any = None
    is_lazy: bool = True
    is_table: bool = False


def is_xarray(X: Any) -> bool:
    """Whether ``X`` is an xarray object (without importing xarray).

    Examples
    --------
    >>> is_xarray([[1.0]])
    False
    """
    return type(X).__module__.split(".")[0] == "xarray"


def weights_allowed(value) -> bool:
    """Whether ``value`` may be the ``weights`` parameter (checked against X at fit).

    Examples
    --------
    >>> weights_allowed(None), weights_allowed(np.ones(3)), weights_allowed("cos")
    (True, True, False)
    >>> weights_allowed("coslat"), weights_allowed(["coslat", None])
    (True, True)
    """
    if value is None or is_xarray(value) or is_coslat(value):
        return True
    if isinstance(value, dict) or isinstance(value, (list, tuple)) and any(
            is_xarray(each) or is_coslat(each) for each in value):  # several fields' weights
        values = value.values() if isinstance(value, dict) else value
        return all(each is None or is_xarray(each) or is_coslat(each) for each in values)
    if not (hasattr(value, "shape") and hasattr(value, "dtype")):
        if not isinstance(value, (list, tuple)):
            return False
        try:  # a list, as a model file's parameters hold an array
            value = np.asarray(value)
        except (TypeError, ValueError):
            return False
    return len(value.shape) == 1 and np.dtype(value.dtype).kind in "biuf"


# -- fit ----------------------------------------------------------------------------


def fit_input(X: Any, *, sample_dim: str | None, weights: Any, precomputed: bool = False,
              what: str = "X") -> FitInput:
    """What :meth:`KernelPCA.fit <kpca_dask.KernelPCA.fit>` reads: validated rows with the
    chunks they were stored in, their layout and a table's feature names.

    Examples
    --------
    >>> fitted = fit_input([[1.0, 2.0], [3.0, 4.0]], sample_dim=None, weights=None)
    >>> fitted.data.shape, fitted.layout, fitted.feature_names
    ((2, 2), None, None)
    """
    names = frame_feature_names(X)  # before the pass: mixed-type names raise now
    table = is_frame(X)
    X, layout = fit_rows(X, sample_dim, weights, precomputed=precomputed)
    return FitInput(_as_fit_array(X, what=what), layout, names, is_table=table)


def relabelled(like: Any, values: np.ndarray) -> Any:
    """``values`` laid out as ``like``: a DataArray keeps its dimensions, coordinates, name
    and attributes; an array is ``values`` itself.

    Examples
    --------
    >>> import xarray as xr
    >>> relabelled(xr.DataArray([1.0, 2.0], dims="mode"), np.array([3.0, 4.0])).dims
    ('mode',)
    >>> relabelled(np.ones(2), np.zeros(2))
    array([0., 0.])
    """
    return like.copy(data=values) if is_xarray(like) else values


def check_same_samples(X: Any, Y: Any, given: tuple[FitInput, FitInput] | list) -> None:
    """Refuse two fields of a coupled fit whose samples differ: in number, or for two
    DataArrays in their sample coordinates (``given``: each field's :func:`fit_input`).

    Examples
    --------
    >>> rows = fit_input(np.ones((3, 2)), sample_dim=None, weights=None)
    >>> check_same_samples(np.ones((3, 2)), np.ones((3, 1)), [rows, rows])
    """
    n_x, n_y = given[0].data.shape[0], given[1].data.shape[0]
    if n_x != n_y:
        raise InvalidInputError(
            f"X has {n_x} samples and Y has {n_y}: a coupled fit needs the same samples of "
            "both fields, in the same order; select the common ones first, e.g. "
            "X, Y = xr.align(X, Y, join='inner').")
    if not (is_xarray(X) and is_xarray(Y)):
        return
    dims = [g.layout.sample_dim if g.layout is not None else None for g in given]
    if None in dims or dims[0] not in X.coords or dims[1] not in Y.coords:
        return
    if not np.array_equal(X[dims[0]].values, Y[dims[1]].values):
        raise InvalidInputError(
            f"X's {dims[0]!r} and Y's {dims[1]!r} coordinates differ: a coupled fit pairs "
            "sample i of X with sample i of Y; align the fields first, e.g. "
            "X, Y = xr.align(X, Y, join='inner').")


def _as_fit_array(X: Any, min_samples: int = 2, whole_rows: bool = False, what: str = "X"
                  ) -> da.Array:
    """Training rows as a validated dask array, with the chunks they were stored in."""
    if is_dask_frame(X):
        X = frame_to_array(X, lengths=True)  # row counts from metadata where kept
    elif is_frame(X):
        X = frame_to_numpy(X)
    X = _opened(X, whole_rows)
    X, _ = as_dask_array(X.data if is_xarray(X) else X, min_samples=min_samples,
                         whole_rows=whole_rows, what=what)
    return X


def _opened(X: Any, whole_rows: bool = False, sample_dim: str | None = None) -> Any:
    """Zarr paths and xarray objects through :mod:`kpca_dask.io` (a DataArray with
    ``sample_dim`` first, or a dask array); anything else unchanged."""
    if isinstance(X, (str, os.PathLike)) or is_xarray(X):
        from ..io import open_array

        return open_array(X, whole_rows=whole_rows, sample_dim=sample_dim)
    return X


def fit_rows(X: Any, sample_dim: str | None, weights: Any, *, precomputed: bool = False
             ) -> tuple[Any, FeatureLayout | None]:
    """The data of a fit and their layout (None for unweighted arrays, which stay as given).

    A field's mask is taken from its first rows (read once, before the pass)
    and verified by every block the fit reads.

    Examples
    --------
    >>> import xarray as xr
    >>> X = xr.DataArray(np.arange(6.0).reshape(3, 2), dims=("time", "x"))
    >>> rows, layout = fit_rows(X, None, None)
    >>> rows.shape, layout.sample_dim
    ((3, 2), 'time')
    """
    if precomputed:
        if weights is not None:
            raise InvalidParameterError(
                'weights multiply features, which kernel="precomputed" does not have; weight '
                "the data before computing the kernel matrix instead.")
        return X, None  # a kernel matrix keeps its stored column chunks
    if is_fields(X):
        return fit_fields(X, sample_dim, weights)
    X = _opened(X, sample_dim=sample_dim)
    if is_xarray(X):
        layout = layout_of(X, sample_dim, weights)
        X = X.transpose(layout.sample_dim, *layout.dims)
        candidates = computed(candidate_mask(stacked(X)[:CANDIDATE_ROWS]))
        first_label = f"{layout.sample_dim}={X[layout.sample_dim].values[0]}" if (
            layout.sample_dim in X.coords) else None
        layout = with_mask(layout, np.flatnonzero(candidates).astype(np.int64), first_label)
        return field_rows(X, layout, fitting=True), layout
    _refuse_many_dims(X, None)
    if sample_dim is not None:
        raise InvalidParameterError(
            f"sample_dim={sample_dim!r} names a dimension of labelled input, but X is "
            f"{type(X).__name__}, which has none; pass an xarray DataArray or leave "
            "sample_dim=None.")
    if weights is None:
        return X, None
    if is_coslat(weights):
        raise InvalidParameterError(
            'weights="coslat" takes √cos(latitude) from the latitude coordinate of a '
            f"labelled field, but X is {type(X).__name__}, which has none; pass X as an "
            "xarray DataArray with a latitude coordinate, or the weights as a 1-D array of "
            "one weight per feature.")
    if is_xarray(weights):
        raise InvalidParameterError(
            "weights is a DataArray but X is not labelled: pass X as a DataArray whose "
            "feature dimensions the weights are over, or weights as a 1-D array of one "
            "weight per feature.")
    flat = np.asarray(weights, dtype=np.float64)
    rows, _ = _as_rows(X, None)
    if flat.shape != (rows.shape[1],):
        raise InvalidParameterError(
            f"weights has shape {flat.shape}, but X has {rows.shape[1]} features: give one "
            "weight per feature, shape (n_features,).")
    check_weights(flat)
    layout = FeatureLayout(None, (), (rows.shape[1],), weights=flat)
    return weighted_rows(rows, layout), layout


# -- the methods of a fitted model ---------------------------------------------------


def _as_rows(X: Any, frame: Any, what: str = "X") -> tuple[da.Array, bool]:
    """``X`` as a lazy float array and whether the input was lazy; row blocks may have
    unknown lengths (a dask frame's): a lazy projection does not need them."""
    if isinstance(frame, Partitions):
        return X, True
    return as_dask_array(X, what=what, min_samples=1, unknown_rows=True)


def lazy_rows(data: Any) -> da.Array:
    """A :class:`Rows`' ``data`` (or rows an estimator holds) as a dask array: numpy
    wrapped, named by its values, without a copy.

    Examples
    --------
    >>> lazy_rows(np.eye(2)).chunks
    ((2,), (2,))
    """
    return data if isinstance(data, da.Array) else da.from_array(np.asarray(data))


def lazy_or_none(data: Any) -> da.Array | None:
    """``data`` if it is a dask array (whose scheduler a memory budget asks), else None
    (data in this process: the default scheduler's)."""
    return data if isinstance(data, da.Array) else None


def holds_sparse_rows(data: Any) -> bool:
    """Whether ``data`` is scipy.sparse, or a dask array of scipy.sparse blocks.

    Examples
    --------
    >>> holds_sparse_rows(sparse.eye(3, format="csr")), holds_sparse_rows(np.eye(3))
    (True, False)
    """
    return sparse.issparse(data) or sparse.issparse(getattr(data, "_meta", None))


def _held_in_memory(X: Any) -> bool:
    """Whether ``X`` is data in this process (numpy, pandas, scipy.sparse, lists, an
    xarray object without dask), not a dask collection, a store or a path."""
    if isinstance(X, (str, os.PathLike)) or dask.is_dask_collection(X):
        return False
    if is_fields(X):
        return all(X[name].chunks is None for name in X.data_vars) if is_xarray(X) else all(
            each.chunks is None for each in X)
    if is_xarray(X):
        return X.chunks is None
    return not isinstance(X, (zarr.Array, zarr.Group))


def _table(estimator: Any, X: Any) -> tuple[Any, Any]:
    """``X``'s feature names checked against ``estimator``'s; a frame's values (numpy for
    pandas, a lazy dask array without row counts for dask) and what outputs take the index
    from (the pandas frame, or a dask frame's Partitions); anything else unchanged, None."""
    check_feature_names(estimator, X, reset=False)
    if is_dask_frame(X):
        parts = Partitions.of(select_columns(X))
        return frame_to_array(parts, lengths=False), parts
    if is_frame(X):
        return frame_to_numpy(X), X
    return X, None


def method_input(estimator: Any, layout: FeatureLayout | None, X: Any, *,
                 weighted: bool = True) -> Rows:
    """``X`` for a method of a fitted model (transform, scores, patterns): its feature names
    checked against ``estimator``'s, as rows of the model's features (``layout``).

    Examples
    --------
    >>> from sklearn.base import BaseEstimator
    >>> rows = method_input(BaseEstimator(), None, np.ones((2, 3)))
    >>> rows.data.shape, rows.is_lazy, rows.like, rows.frame
    ((2, 3), False, None, None)
    """
    X, frame = _table(estimator, X)
    is_lazy = not _held_in_memory(X)  # dask, Zarr, a path: a lazy result
    X, one_sample = with_sample_dim(X, layout)
    X, like = model_rows(layout, X, weighted=weighted, frame=frame)
    X, _ = _as_rows(X, frame)
    return Rows(X, is_lazy, like, frame, one_sample)


def model_rows(layout: FeatureLayout | None, X: Any, *, weighted: bool = True,
               whole_rows: bool = False, frame: Any = None) -> tuple[Any, Any]:
    """``X`` as rows of the model's features, and the DataArray the outputs are labelled like.

    For a field model, a DataArray must have the fit's feature dimensions (in
    the same order) and coordinates; a plain array is taken as the stacked
    field (every position, C order). ``weighted=False`` gives the features as
    they are (the input ``patterns`` compares scores with). Unweighted
    arrays come back opened but otherwise as given.

    Examples
    --------
    >>> rows, like = model_rows(None, np.ones((2, 3)))
    >>> rows.shape, like is None
    ((2, 3), True)
    """
    if layout is not None and layout.parts and (is_fields(X) or is_xarray(X)):
        return fields_rows(layout, X, weighted=weighted)
    if is_fields(X):
        raise InvalidInputError(
            "X is several fields, but the model was fitted on one: pass the one field "
            "(a DataArray), or fit the fields together.")
    sample_dim = None if layout is None else layout.sample_dim
    X = _opened(X, whole_rows, sample_dim=sample_dim)
    if not is_xarray(X):
        X = _refuse_many_dims(X, layout)
    if layout is None or layout.weights is None and not layout.dims:
        if is_xarray(X):
            return X.data, X
        return X, None
    if not layout.dims:  # weights of an array fit
        like = X if is_xarray(X) else None
        rows, _ = _as_rows(X.data if like is not None else X, frame)
        if rows.shape[1] != layout.n_features:
            raise InvalidInputError(
                f"X has {rows.shape[1]} features, but the model was fitted on "
                f"{layout.n_features}.")
        return (weighted_rows(rows, layout) if weighted else rows), like
    if is_xarray(X):
        X = check_same_field(X, layout)
        return field_rows(X, layout, weighted=weighted), X
    rows = _positions(X, frame)
    if rows.shape[1] != layout.n_positions:
        raise InvalidInputError(
            f"X has {rows.shape[1]} columns, but the model was fitted on a field of "
            f"{layout.n_positions} positions ({' x '.join(map(str, layout.shape))} over "
            f"{layout.dims}): pass the field as a DataArray, or its stacked positions.")
    return stacked_rows(rows, layout, weighted), None


def _refuse_many_dims(X: Any, layout: FeatureLayout | None) -> Any:
    """An array of more than two dimensions: for a field model, with the field's shape
    after the samples, its stacked positions (C order, as the fit stacked them); any other
    refused with what to pass instead, not the hint for one feature or one sample."""
    ndim = getattr(X, "ndim", 2)
    if not isinstance(ndim, numbers.Integral) or ndim <= 2:
        return X
    shape = tuple(X.shape)
    if layout is not None and layout.dims and not layout.parts:
        if shape[1:] == tuple(layout.shape):
            return X.reshape(shape[0], -1)
        raise InvalidInputError(
            f"X is a {ndim}-d array of shape {shape}, but the model was fitted on a field "
            f"over {layout.dims} of shape {layout.shape} (sample dimension "
            f"{layout.sample_dim!r}): pass the field as a DataArray, an array of shape "
            f"(n_samples, {', '.join(map(str, layout.shape))}) in that order, or its "
            f"stacked positions, shape (n_samples, {layout.n_positions}).")
    if layout is not None and layout.parts:
        raise InvalidInputError(
            f"X is a {ndim}-d array of shape {shape}, but the model was fitted on "
            f"{len(layout.parts)} fields: pass them as they were fitted (a list of "
            "DataArrays or a Dataset), or their stacked positions side by side, shape "
            f"(n_samples, {layout.n_positions}).")
    raise InvalidInputError(
        f"X is a {ndim}-d array of shape {shape}; kernel PCA takes rows, shape "
        "(n_samples, n_features). For a field, pass an xarray DataArray (with "
        "sample_dim=, its other dimensions become features, NaN at every sample masked), "
        "or stack the features yourself: X.reshape(len(X), -1).")


def _positions(X, frame) -> da.Array:
    """An array of a field's stacked positions, NaN on its mask allowed (checked block by
    block as it is read, by :func:`~kpca_dask.io.preprocessing.field_inputs.stacked_rows`)."""
    if isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype.kind in "biuf":
        return da.from_array(X, chunks=(min(DEFAULT_BLOCK_ROWS, max(len(X), 1)), -1))
    return _as_rows(X, frame)[0]


def embedding_input(Y: Any) -> Rows:
    """Embeddings given to ``inverse_transform``, as rows of components; a DataArray needs
    a ``mode`` dimension (as :meth:`~kpca_dask.KernelPCA.transform` gives it; ``component``,
    the name before, is still taken), and comes back (modes last) as what outputs are
    labelled like.

    Examples
    --------
    >>> rows = embedding_input(np.zeros((3, 2)))
    >>> rows.data.shape, rows.is_lazy
    ((3, 2), False)
    """
    what = "The embedding"
    if is_xarray(Y):
        modes = next((dim for dim in ("mode", "component") if dim in Y.dims), None)
        if modes is None or Y.ndim != 2:
            raise InvalidInputError(
                f"A DataArray embedding needs dims (sample, 'mode'); got {Y.dims}. "
                "Pass the output of transform, or rename its dimension of modes to 'mode'.")
        Y = Y.transpose(..., modes)
        data, is_lazy = _as_rows(Y.data, None, what=what)
        return Rows(data, is_lazy, like=Y)
    frame = None
    if is_dask_frame(Y):
        frame = Partitions.of(select_columns(Y, what=what))
        Y = frame_to_array(frame, lengths=False, what=what)
    elif is_frame(Y):
        frame, Y = Y, frame_to_numpy(Y, what=what)
    data, is_lazy = _as_rows(Y, frame, what=what)
    return Rows(data, is_lazy, frame=frame)


def require_table(frame: Any, what: str = "transform_table") -> None:
    """Refuse anything but a pandas or dask DataFrame.

    Examples
    --------
    >>> require_table([[1.0]])
    Traceback (most recent call last):
    ...
    kpca_dask.errors.InvalidInputError: transform_table takes a pandas or dask DataFrame; got list.
    """
    if not is_frame(frame):
        raise InvalidInputError(
            f"{what} takes a pandas or dask DataFrame; got {type(frame).__name__}.")


def table_rows(frame: Any, chosen: Any, features: list, keep: list, *, what: str = "X"
               ) -> Rows:
    """The feature columns ``chosen`` of a table as rows, and what the outputs take the
    index and the ``keep`` columns from: lazy (no row counts, which a block-by-block map
    does not need) for a dask frame, numpy for pandas.

    Examples
    --------
    >>> import pandas as pd
    >>> table = pd.DataFrame({"id": [1, 2], "a": [0.5, 1.5]})
    >>> rows = table_rows(table, table[["a"]], ["a"], ["id"])
    >>> rows.data.tolist(), rows.is_lazy
    ([[0.5], [1.5]], False)
    """
    if is_dask_frame(frame):
        parts = Partitions.of(frame[features + [k for k in keep if k not in features]])
        return Rows(frame_to_array(parts, what=what, features=features, lengths=False),
                    True, frame=parts)
    return Rows(frame_to_numpy(chosen, what=what), False, frame=frame)


# -- partial_fit ----------------------------------------------------------------------


def first_batch(X: Any, rows: tuple[int, int] | None) -> tuple[Any, dict | None]:
    """What the first ``partial_fit`` of an unfitted model fits, and the provenance of its
    rows (None for a field, whose samples are selected with ``X.isel``).

    Examples
    --------
    >>> X, provenance = first_batch(np.ones((10, 2)), (2, 5))
    >>> X.shape, provenance["sources"][0]["rows"]
    ((3, 2), [[2, 5]])
    """
    if is_xarray(X) or is_fields(X):
        if rows is not None:
            raise InvalidParameterError(
                "rows=(start, stop) of a first batch selects rows of an array; select the "
                "samples of a DataArray with X.isel(...) instead.")
        return X, None
    table, X = X, _as_fit_array(X, min_samples=1)
    source = source_of(X)  # of the whole input, before the rows are selected
    start, stop = row_range(rows, X.shape[0])
    whole = (start, stop) == (0, X.shape[0])
    # A whole table keeps its feature names.
    return (table if whole else X[start:stop]), with_rows(None, source, start, stop)


def batch_input(layout: FeatureLayout | None, X: Any) -> Rows:
    """The rows of a later ``partial_fit`` batch as a validated dask array (a field's
    checked rows of features), and whether the input was lazy.

    Examples
    --------
    >>> batch = batch_input(None, np.eye(3))
    >>> batch.data.shape, batch.is_lazy
    ((3, 3), False)
    """
    is_lazy = not _held_in_memory(X)
    if layout is not None and layout.dims:  # the field's checked rows
        X = model_rows(layout, X)[0]
    return Rows(_as_fit_array(X, min_samples=1), is_lazy)


def row_range(rows: Any, n: int) -> tuple[int, int]:
    """``rows`` as a checked (start, stop) of an input of ``n`` rows; None means every row.

    Examples
    --------
    >>> row_range(None, 10), row_range((2, 5), 10)
    ((0, 10), (2, 5))
    """
    if rows is None:
        return 0, n
    valid = (isinstance(rows, (tuple, list)) and len(rows) == 2
             and all(isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in rows))
    if not valid or not 0 <= rows[0] < rows[1] <= n:
        raise InvalidParameterError(
            f"rows must be (start, stop) with 0 <= start < stop <= {n} (the rows of X); "
            f"got {rows!r}.")
    return int(rows[0]), int(rows[1])


# -- ExactKernelPCA: small inputs held in memory, lazy ones read by feature panels -----


def in_memory_fit_input(X: Any, *, sample_dim: str | None, weights: Any,
                        precomputed: bool = False) -> FitInput:
    """What :meth:`ExactKernelPCA.fit <kpca_dask.ExactKernelPCA.fit>` reads.

    Lazy input (dask, Zarr, a path, xarray, weighted rows) as a validated dask
    array chunked as stored (the Gram matrix is summed over its feature chunks,
    docs/design.md §12); in-memory input as float64 numpy (CSR for sparse).
    With ``precomputed``, the square kernel matrix: lazy, or dense numpy.

    Examples
    --------
    >>> fitted = in_memory_fit_input([[1.0, 2.0], [3.0, 4.0]], sample_dim=None, weights=None)
    >>> type(fitted.data).__name__, fitted.data.dtype, fitted.is_lazy
    ('ndarray', dtype('float64'), False)
    """
    X, layout = fit_rows(X, sample_dim, weights, precomputed=precomputed)
    if precomputed:
        if isinstance(X, (str, os.PathLike, zarr.Array, da.Array)):
            from ..io import open_array

            return FitInput(open_array(X, whole_rows=False), None, is_lazy=True)
        K = as_numpy_array(X, min_samples=2)
        return FitInput(K.toarray() if sparse.issparse(K) else K, None, is_lazy=False)
    data = _in_memory(X, keep_lazy=True, min_samples=2)
    return FitInput(data, layout, is_lazy=isinstance(data, da.Array))


def in_memory_input(layout: FeatureLayout | None, X: Any, *, keep_lazy: bool,
                    precomputed: bool = False) -> Rows:
    """``X`` for a method of a fitted ExactKernelPCA: rows of its features (``layout``) as
    float64 numpy (CSR for sparse), or, with ``keep_lazy`` (a model whose training rows are
    lazy), a dask array for lazy input. With ``precomputed``, dense kernel rows.

    Examples
    --------
    >>> rows = in_memory_input(None, [[1.0, 2.0]], keep_lazy=False)
    >>> rows.data.dtype, rows.is_lazy, rows.like
    (dtype('float64'), False, None)
    """
    if precomputed:
        K = as_numpy_array(X, min_samples=1).astype(np.float64, copy=False)
        return Rows(K.toarray() if sparse.issparse(K) else K, False)
    X, one_sample = with_sample_dim(X, layout)
    X, like = model_rows(layout, X)
    data = _in_memory(X, keep_lazy=keep_lazy, min_samples=1)
    return Rows(data, isinstance(data, da.Array), like, one_sample=one_sample)


def labels_of(layout: FeatureLayout | None, X: Any, *, precomputed: bool = False) -> Any:
    """The DataArray outputs of ``fit_transform`` are labelled like (a DataArray or a stored
    field given by path), or None.

    Examples
    --------
    >>> labels_of(None, np.ones((2, 2))) is None
    True
    """
    if precomputed or not (is_xarray(X) or is_fields(X) or isinstance(X, (str, os.PathLike))):
        return None
    return model_rows(layout, X)[1]


def _is_lazy(X) -> bool:
    """Dask, Zarr, a path or an xarray object: data read by feature panels (T-mode)."""
    return isinstance(X, (str, os.PathLike, zarr.Array, da.Array)) or is_xarray(X)


def _in_memory(X: Any, *, keep_lazy: bool, min_samples: int):
    """Lazy input as a validated dask array chunked as stored (if ``keep_lazy``); anything
    else as float64 numpy (CSR for sparse), a dask array computed."""
    if keep_lazy and _is_lazy(X):
        from ..io import open_array

        opened = open_array(X)
        X, _ = as_dask_array(opened.data if is_xarray(opened) else opened,
                             min_samples=min_samples)
        return X
    if isinstance(X, da.Array):
        X = computed(X)
    return as_numpy_array(X, min_samples=min_samples).astype(np.float64, copy=False)
