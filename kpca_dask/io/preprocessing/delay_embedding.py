"""Time-delay embedding: lagged copies of rows or of a field, stacked lazily along the features.

The embedded row of sample t is ``[x_t, x_{t+tau}, ..., x_{t+(L-1)tau}]`` (L the
embedding dimension), as xeofs' ``ExtendedEOF`` builds it: the last ``(L-1) tau``
samples have no complete row and are dropped, and the embedded samples keep the
labels of the first ``n - (L-1) tau`` samples. Nothing is copied: each lagged copy
is a dask slice of the input, cut to the first copy's row blocks, and the copies
are joined with ``concatenate`` (rows) or ``stack`` (a field's new ``embedding``
dimension), so an embedded block is made from at most two input blocks per lag
when a task needs it, and the L-times wider rows never exist whole
(docs/design.md §17).
"""

from __future__ import annotations

import numbers

import dask.array as da
import numpy as np
import xarray as xr

from ...errors import InvalidInputError, InvalidParameterError
from ...validation import DEFAULT_BLOCK_ROWS

__all__ = ["EMBEDDING_DIM", "check_delay", "lagged_field", "lagged_rows", "lags",
           "n_embedded"]

#: The dimension of a field's lagged copies, with coordinates 0, tau, ..., (L-1) tau.
EMBEDDING_DIM = "embedding"


def check_delay(tau, embedding) -> tuple[int, int]:
    """``tau`` and ``embedding`` as ints, or an error that says what they may be.

    Examples
    --------
    >>> check_delay(2, 3)
    (2, 3)
    >>> check_delay(0, 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kpca_dask.errors.InvalidParameterError: tau=0 must be an int >= 1 ...
    """
    for name, value in (("tau", tau), ("embedding", embedding)):
        if (isinstance(value, bool) or not isinstance(value, numbers.Integral)
                or value < 1):
            raise InvalidParameterError(
                f"{name}={value!r} must be an int >= 1 (tau: the delay between lagged copies, "
                "in samples; embedding: the number of copies, 1 for no embedding).")
    return int(tau), int(embedding)


def n_embedded(n_samples: int, tau: int, embedding: int) -> int:
    """The number of embedded samples, ``n - (embedding - 1) tau``, at least 2.

    Examples
    --------
    >>> n_embedded(100, tau=2, embedding=5)
    92
    >>> n_embedded(10, tau=3, embedding=4)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kpca_dask.errors.InvalidParameterError: embedding=4 copies 3 samples apart span ...
    """
    kept = n_samples - (embedding - 1) * tau
    if kept < 2:
        raise InvalidParameterError(
            f"embedding={embedding} copies {tau} samples apart span {(embedding - 1) * tau + 1} "
            f"samples, which leaves {max(kept, 0)} embedded sample(s) of the {n_samples} given; "
            "at least 2 are needed. Lower embedding or tau so that (embedding - 1) * tau <= "
            "n_samples - 2.")
    return kept


def lags(tau: int, embedding: int) -> np.ndarray:
    """The lag of each copy in samples, the ``embedding`` coordinate: 0, tau, ..., (L-1) tau.

    Examples
    --------
    >>> lags(3, 4).tolist()
    [0, 3, 6, 9]
    """
    return np.arange(embedding, dtype=np.int64) * tau


def _lagged_copies(data: da.Array, tau: int, embedding: int) -> list[da.Array]:
    """The L lagged slices of ``data`` along axis 0, each cut to the first one's row blocks.

    Cutting to common blocks (rather than letting ``concatenate`` unify them, which
    refines every lag's boundaries into ever smaller blocks) keeps the input's block
    size: a block of lag k is made of the tails and heads of at most two input blocks.
    """
    kept = n_embedded(data.shape[0], tau, embedding)
    copies = [data[k * tau:k * tau + kept] for k in range(embedding)]
    rows = copies[0].chunks[0]
    return [copy.rechunk({0: rows}) for copy in copies]


def lagged_rows(rows, tau: int, embedding: int) -> da.Array:
    """Rows (n, p) as lazy embedded rows (n - (L-1) tau, L p): lag-major features.

    Feature ``k p + j`` of embedded row t is feature j of row ``t + k tau``. A
    numpy array is wrapped, not copied; a dask array keeps its feature chunks
    (each lag's copy adds its own).

    Examples
    --------
    >>> X = np.arange(10.0).reshape(5, 2)
    >>> lagged_rows(X, tau=2, embedding=2).compute().tolist()
    [[0.0, 1.0, 4.0, 5.0], [2.0, 3.0, 6.0, 7.0], [4.0, 5.0, 8.0, 9.0]]
    """
    tau, embedding = check_delay(tau, embedding)
    # Wrapped, not copied: blocks of whole rows (a dask array is taken as it is).
    rows = da.asarray(rows, chunks=(DEFAULT_BLOCK_ROWS,) + (-1,) * (np.ndim(rows) - 1))
    if rows.ndim != 2:
        raise InvalidInputError(
            f"The rows have shape {rows.shape}; a 2-D array (n_samples, n_features) is "
            "needed. A field with several feature dimensions is taken as a DataArray.")
    return da.concatenate(_lagged_copies(rows, tau, embedding), axis=1)


def lagged_field(X: xr.DataArray, sample_dim: str, tau: int, embedding: int) -> xr.DataArray:
    """The field ``X`` with a new ``embedding`` dimension after ``sample_dim``, lazily.

    ``result.isel(embedding=k)`` at sample t is ``X`` at sample ``t + k tau``; the
    ``embedding`` coordinate is the lag ``k tau``; the samples are the first
    ``n - (L-1) tau`` of ``X``, with their coordinates. A field held in memory is
    wrapped in dask (blocks of rows), not copied; a dask-backed one keeps its chunks
    along every feature dimension.

    Examples
    --------
    >>> X = xr.DataArray(np.arange(12.0).reshape(6, 2), dims=("time", "x"),
    ...                  coords={"time": np.arange(6) * 10})
    >>> E = lagged_field(X, "time", tau=2, embedding=3)
    >>> E.dims, E["time"].values.tolist(), E["embedding"].values.tolist()
    (('time', 'embedding', 'x'), [0, 10], [0, 2, 4])
    >>> E.isel(time=1).values.tolist()
    [[2.0, 3.0], [6.0, 7.0], [10.0, 11.0]]
    """
    tau, embedding = check_delay(tau, embedding)
    if EMBEDDING_DIM in X.dims:
        raise InvalidInputError(
            f"The DataArray already has a dimension named {EMBEDDING_DIM!r}, the name of the "
            f"lagged copies; rename it first (X.rename({EMBEDDING_DIM}='...')).")
    X = X.transpose(sample_dim, ...)
    # Wrapped, not copied: blocks of whole rows (a dask array is taken as it is).
    data = da.asarray(X.data, chunks=(DEFAULT_BLOCK_ROWS,) + (-1,) * (X.ndim - 1))
    stacked = da.stack(_lagged_copies(data, tau, embedding), axis=1)
    first = X.isel({sample_dim: slice(0, stacked.shape[0])})
    coords = dict(first.coords.items())
    coords[EMBEDDING_DIM] = lags(tau, embedding)
    dims = (sample_dim, EMBEDDING_DIM) + tuple(X.dims[1:])
    return xr.DataArray(stacked, dims=dims, coords=coords, name=X.name, attrs=dict(X.attrs))
