"""A field's rows of features: the fixed mask found, every block checked as it is read.

The mask is found without a pass of its own: the positions that are NaN in
the first rows are its candidates (:func:`candidate_mask`), and every block
the fit reads is checked by :func:`checked_features` as it is read: a
candidate that holds a value in some row, or a NaN (or an infinity) at a
position that is not masked, is a NaN that is not fixed, and an error names
it by its coordinates. A position NaN at every sample is NaN in the first
rows, so the candidates are the mask exactly whenever the check passes
(docs/design.md §12).
"""

from __future__ import annotations

from dataclasses import replace

import dask
import dask.array as da
import numpy as np
import xarray as xr

from ..errors import NonFiniteInputError
from .fields import FeatureLayout, shown_value, stacked

__all__ = ["CANDIDATE_ROWS", "candidate_mask", "with_mask", "sample_labels", "field_rows",
           "checked_features"]

#: Rows read before the pass for the mask's candidates (all in the first row block).
CANDIDATE_ROWS = 4


def candidate_mask(rows: np.ndarray) -> np.ndarray:
    """Flat positions NaN in every one of ``rows`` (k, positions): the mask's candidates.

    Examples
    --------
    >>> candidate_mask(np.array([[np.nan, 1.0, np.nan], [np.nan, np.nan, 2.0]])).tolist()
    [0]
    """
    return np.flatnonzero(np.isnan(rows).all(axis=0)).astype(np.int64)


def with_mask(layout: FeatureLayout, masked: np.ndarray, first_label=None) -> FeatureLayout:
    """``layout`` with the ``masked`` positions dropped (their weights with them).

    Examples
    --------
    >>> layout = FeatureLayout("time", ("x",), (3,), weights=np.array([1.0, 2.0, 3.0]))
    >>> masked = with_mask(layout, np.array([1]))
    >>> masked.kept.tolist(), masked.weights.tolist()
    ([0, 2], [1.0, 3.0])
    """
    if masked.size == 0:
        return layout
    kept = np.setdiff1d(np.arange(layout.n_positions), masked).astype(np.int64)
    if kept.size == 0:
        at = "" if first_label is None else f" (the first rows, from {first_label})"
        raise NonFiniteInputError(
            f"Every position of the field is NaN in the first samples{at}: an all-NaN sample "
            "has no features to embed. Drop the all-NaN samples first, e.g. "
            f"X.dropna({layout.sample_dim!r}, how='all').")
    weights = None if layout.weights is None else layout.weights[kept]
    return replace(layout, kept=kept, weights=weights)


def sample_labels(X: xr.DataArray, chunks) -> da.Array:
    """The sample coordinate of the sample-first ``X`` (or positions) as (n, 1), in ``chunks``.

    Examples
    --------
    >>> X = xr.DataArray(np.zeros((3, 1)), dims=("t", "x"), coords={"t": [7, 8, 9]})
    >>> sample_labels(X, ((2, 1),)).compute().ravel().tolist()
    [7, 8, 9]
    """
    dim = X.dims[0]
    values = np.asarray(X.indexes[dim]) if dim in X.indexes else np.arange(X.shape[0])
    if values.dtype.kind == "O":
        values = values.astype(str)
    return da.from_array(values[:, None], chunks=(chunks[0], 1))


def field_rows(X: xr.DataArray, layout: FeatureLayout, *, weighted: bool = True,
               fitting: bool = False) -> da.Array:
    """The features of the sample-first field ``X``: masked positions dropped, checked, weighted.

    Lazy rows (n, ``layout.n_features``) in the row chunks of ``X``; each block
    is checked as it is read (:func:`checked_features`; ``fitting``: the
    blocks of the fit that found the mask, which its errors then speak of).

    Examples
    --------
    >>> X = xr.DataArray([[1.0, np.nan, 2.0], [3.0, np.nan, 4.0]], dims=("t", "x"))
    >>> from kpca_dask.io.fields import layout_of
    >>> layout = with_mask(layout_of(X, None), np.array([1]))
    >>> field_rows(X, layout).compute().tolist()
    [[1.0, 2.0], [3.0, 4.0]]
    """
    rows = stacked(X)
    labels = sample_labels(X, rows.chunks)
    dtype = rows.dtype if not (weighted and layout.weights is not None) else (
        rows.dtype if rows.dtype == np.float32 else np.dtype(np.float64))
    # One key for the layout (its kept positions and weights are p-sized), not one per task.
    shared = dask.delayed(replace(layout, weights=layout.weights if weighted else None),
                          pure=True)
    return da.map_blocks(checked_features, rows, labels, layout=shared, fitting=fitting,
                         chunks=(rows.chunks[0], (layout.n_features,)), dtype=dtype,
                         meta=np.empty((0, 0), dtype), name="kpca-field-rows-"
                         + dask.base.tokenize(rows.name, labels.name, layout, weighted))


def checked_features(block: np.ndarray, labels: np.ndarray, layout: FeatureLayout,
                     fitting: bool = False) -> np.ndarray:
    """One row block of a stacked field as features; a NaN that is not fixed raises.

    Raises :class:`~kpca_dask.errors.NonFiniteInputError` naming the sample
    and the position by their coordinates when a masked position holds a
    value, a kept position holds NaN or an infinity, or a sample is NaN at
    every kept position.
    """
    block = np.asarray(block)
    masked = layout.masked
    if masked.size:
        held = ~np.isnan(block[:, masked])
        if held.any():
            i, j = np.argwhere(held)[0]
            where, sample = layout.describe(masked[j]), _sample(layout, labels[i, 0])
            if not fitting:
                raise NonFiniteInputError(
                    f"X holds a value at {sample}, {where}, a position the model masks (NaN at "
                    "every sample it was fitted on), so it has no feature there. Set the mask "
                    "to NaN first: X.where(~model.feature_layout_.mask()).")
            raise NonFiniteInputError(
                f"The field is NaN at {where} in its first samples but holds a value at "
                f"{sample}: only positions NaN at every sample (a fixed mask, such as land) are "
                "dropped. Fill or drop the NaN there (e.g. X.fillna(...) or X.where(mask)).")
    x = block if layout.kept is None else block[:, layout.kept]
    bad = ~np.isfinite(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool)
    if bad.any():
        empty = bad.all(axis=1) & np.isnan(x).all(axis=1)
        if empty.any():
            raise NonFiniteInputError(
                f"The sample {_sample(layout, labels[np.flatnonzero(empty)[0], 0])} is NaN at "
                "every position: it has no features to embed. Drop the all-NaN samples first, "
                f"e.g. X.dropna({layout.sample_dim!r}, how='all').")
        i, j = np.argwhere(bad)[0]
        position = j if layout.kept is None else layout.kept[j]
        what = "NaN" if np.isnan(x[i, j]) else "infinite"
        raise NonFiniteInputError(
            f"The field is {what} at {_sample(layout, labels[i, 0])}, {layout.describe(position)}"
            + (", a position that holds values at other samples: only positions NaN at every "
               "sample (a fixed mask, such as land) are dropped. Fill or drop it first."
               if fitting else ", a position the model has a feature for. Fill it first."))
    if layout.weights is not None:
        x = x * layout.weights.astype(x.dtype if x.dtype == np.float32 else np.float64)
    return x


def _sample(layout: FeatureLayout, label) -> str:
    return f"{layout.sample_dim}={shown_value(label)}"
