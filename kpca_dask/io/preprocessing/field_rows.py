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

from ...errors import NonFiniteInputError
from .fields import FeatureLayout, shown_value, stacked

__all__ = ["CANDIDATE_ROWS", "candidate_mask", "with_mask", "sample_labels", "field_rows",
           "layout_rows", "kept_chunks", "checked_features"]

#: Rows read before the pass for the mask's candidates (all in the first row block).
CANDIDATE_ROWS = 4


def candidate_mask(rows: da.Array) -> da.Array:
    """Whether each position is NaN in every one of ``rows`` (k, positions), lazily.

    The positions where it is True are the mask's candidates. A dask
    reduction over the rows, chunk by chunk of positions: no task holds more
    than one chunk of the first rows.

    Examples
    --------
    >>> rows = da.from_array(np.array([[np.nan, 1.0, np.nan], [np.nan, np.nan, 2.0]]),
    ...                      chunks=(2, 2))
    >>> np.flatnonzero(candidate_mask(rows).compute()).tolist()
    [0]
    """
    return da.isnan(rows).all(axis=0)


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

    Lazy rows (n, ``layout.n_features``) in the row chunks of ``X`` and its
    chunks of positions (:func:`~kpca_dask.io.preprocessing.fields.stacked`), as
    :func:`layout_rows` makes them.

    Examples
    --------
    >>> X = xr.DataArray([[1.0, np.nan, 2.0], [3.0, np.nan, 4.0]], dims=("t", "x"))
    >>> from kpca_dask.io.preprocessing.fields import layout_of
    >>> layout = with_mask(layout_of(X, None), np.array([1]))
    >>> field_rows(X, layout).compute().tolist()
    [[1.0, 2.0], [3.0, 4.0]]
    """
    rows = stacked(X)
    return layout_rows(rows, sample_labels(X, rows.chunks), layout, weighted=weighted,
                       fitting=fitting)


def layout_rows(rows: da.Array, labels: da.Array, layout: FeatureLayout, *,
                weighted: bool = True, fitting: bool = False) -> da.Array:
    """Rows of stacked positions (n, positions) as features, one task per chunk.

    Each (row block, chunk of positions) is masked, checked and weighted by
    :func:`checked_features` on its own, with the slice of the mask and of the
    weights of its positions (``fitting``: the blocks of the fit that found
    the mask, which its errors then speak of); ``labels`` (n, 1) name the
    samples. The chunks of features are the kept positions of each chunk; a
    chunk with none is joined to a neighbour first (:func:`kept_chunks`).

    Examples
    --------
    >>> layout = FeatureLayout("t", ("x",), (4,), kept=np.array([0, 3]))
    >>> rows = da.from_array(np.array([[1.0, np.nan, np.nan, 2.0]]), chunks=(1, 2))
    >>> out = layout_rows(rows, da.zeros((1, 1), chunks=1), layout)
    >>> out.chunks, out.compute().tolist()
    (((1,), (1, 1)), [[1.0, 2.0]])
    """
    widths, counts = kept_chunks(rows.chunks[1], layout.kept)
    if widths != rows.chunks[1]:
        rows = rows.rechunk({1: widths})
    dtype = rows.dtype if not (weighted and layout.weights is not None) else (
        rows.dtype if rows.dtype == np.float32 else np.dtype(np.float64))
    # One key for the layout (its kept positions and weights are p-sized), not one per task.
    shared = dask.delayed(replace(layout, weights=layout.weights if weighted else None),
                          pure=True)
    return da.map_blocks(checked_features, rows, labels, layout=shared, fitting=fitting,
                         chunks=(rows.chunks[0], counts), dtype=dtype,
                         meta=np.empty((0, 0), dtype), name="kpca-field-rows-"
                         + dask.base.tokenize(rows.name, labels.name, layout, weighted, fitting))


def kept_chunks(widths: tuple, kept: np.ndarray | None) -> tuple[tuple, tuple]:
    """Chunks of positions that each keep a position, and how many each keeps.

    A chunk that keeps none (wholly masked) is joined to the chunk before it
    (the first ones to the first that keeps one): a chunk of no features would
    be a panel of no columns to every step after.

    Examples
    --------
    >>> kept_chunks((2, 2, 2, 2), np.array([2, 3, 7]))
    ((6, 2), (2, 1))
    >>> kept_chunks((2, 3), None)
    ((2, 3), (2, 3))
    """
    edges = np.cumsum((0,) + tuple(widths))
    counts = np.diff(edges if kept is None else np.searchsorted(kept, edges))
    joined: list[list[int]] = []
    waiting = 0  # positions of the first chunks, until one keeps a position
    for width, count in zip(widths, counts.tolist()):
        if count:
            joined.append([width + waiting, count])
            waiting = 0
        elif joined:
            joined[-1][0] += width
        else:
            waiting += width
    return tuple(int(w) for w, _ in joined), tuple(int(c) for _, c in joined)


def checked_features(block: np.ndarray, labels: np.ndarray, layout: FeatureLayout,
                     fitting: bool = False, block_info=None) -> np.ndarray:
    """One chunk of a stacked field as features; a NaN that is not fixed raises.

    ``block`` holds the positions of ``block_info``'s location (every position
    without it). Raises :class:`~kpca_dask.errors.NonFiniteInputError` naming
    the sample and the position by their coordinates when a masked position
    holds a value, a kept position holds NaN or an infinity, or a sample is NaN
    at every kept position.
    """
    block = np.asarray(block)
    start, stop = (block_info[0]["array-location"][1] if block_info
                   else (0, layout.n_positions))
    if layout.kept is None:
        kept, where = None, slice(start, stop)
    else:
        first, last = np.searchsorted(layout.kept, (start, stop))
        kept, where = layout.kept[first:last] - start, slice(first, last)
        _refuse_masked_values(block, kept, labels, layout, start, fitting)
    x = block if kept is None else block[:, kept]
    bad = ~np.isfinite(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool)
    if bad.any():
        _refuse_nonfinite(x, bad, labels, layout, start if kept is None else kept + start,
                          x.shape[1] == layout.n_features, fitting)
    if layout.weights is not None:
        x = x * layout.weights[where].astype(x.dtype if x.dtype == np.float32 else np.float64)
    return x


def _refuse_masked_values(block, kept, labels, layout, start, fitting) -> None:
    """Refuse a value at a masked position of the chunk (its positions ``start`` on)."""
    masked = np.ones(block.shape[1], bool)
    masked[kept] = False
    masked = np.flatnonzero(masked)
    if not masked.size:
        return
    held = ~np.isnan(block[:, masked])
    if not held.any():
        return
    i, j = np.argwhere(held)[0]
    where, sample = layout.describe(start + masked[j]), _sample(layout, labels[i, 0])
    if not fitting:
        # An array of stacked positions is labelled by its rows (io/preprocessing/field_inputs.py).
        fix = ("X[:, model.feature_layout_.masked] = np.nan (the array's NaN must be the "
               "fit's mask)" if layout.sample_dim == "row"
               else "X.where(~model.feature_layout_.mask())")
        raise NonFiniteInputError(
            f"X holds a value at {sample}, {where}, a position the model masks (NaN at "
            "every sample it was fitted on), so it has no feature there. Set the mask "
            f"to NaN first: {fix}.")
    raise NonFiniteInputError(
        f"The field is NaN at {where} in its first samples but holds a value at "
        f"{sample}: only positions NaN at every sample (a fixed mask, such as land) are "
        "dropped. Fill or drop the NaN there (e.g. X.fillna(...) or X.where(mask)).")


def _refuse_nonfinite(x, bad, labels, layout, positions, every_feature, fitting) -> None:
    """Name the first NaN or infinity of the kept features ``x`` (at flat ``positions``:
    an array, or the first position of a run). ``every_feature``: ``x`` holds all of them,
    so a sample NaN throughout is an all-NaN sample."""
    empty = bad.all(axis=1) & np.isnan(x).all(axis=1)
    drop = (f"Drop the all-NaN samples first, e.g. X.dropna({layout.sample_dim!r}, "
            "how='all').")
    if empty.any() and every_feature:
        raise NonFiniteInputError(
            f"The sample {_sample(layout, labels[np.flatnonzero(empty)[0], 0])} is NaN at "
            f"every position: it has no features to embed. {drop}")
    i, j = np.argwhere(bad)[0]
    position = positions + j if np.isscalar(positions) else positions[j]
    what = "NaN" if np.isnan(x[i, j]) else "infinite"
    hint = (f" If the sample is NaN at every position, it has no features to embed: {drop}"
            if empty[i] else "")
    raise NonFiniteInputError(
        f"The field is {what} at {_sample(layout, labels[i, 0])}, {layout.describe(position)}"
        + (", a position that holds values at other samples: only positions NaN at every "
           "sample (a fixed mask, such as land) are dropped. Fill or drop it first."
           if fitting else ", a position the model has a feature for. Fill it first.")
        + hint)


def _sample(layout: FeatureLayout, label) -> str:
    return f"{layout.sample_dim}={shown_value(label)}"
