"""Checking user input: arrays (a float dask array, chunked as it comes), the
number of features, and the predicates (:func:`is_integer`, :func:`is_count`,
:func:`is_real`, :func:`is_finite_real`) that parameter checks are written with,
each rule a :class:`Constraint` (a predicate and its words).

The table of what each estimator parameter may be is
:mod:`kpca_dask.model.parameters`."""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import dask
import dask.array as da
import numpy as np
from dask.array.core import PerformanceWarning
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph
from scipy import sparse

from .errors import (
    InvalidInputError,
    InvalidParameterError,
    NonFiniteInputError,
    NonNumericInputError,
)

#: Rows per block when numpy input is wrapped in a dask array. Blocks of
#: 10-50 k rows keep BLAS efficient at O(block x m) memory (docs/design.md §2).
DEFAULT_BLOCK_ROWS = 20_000


def as_numpy_array(X, *, what: str = "X", min_samples: int = 1) -> np.ndarray:
    """Validate in-memory ``X`` and return it as a 2-D float numpy array.

    scipy.sparse input (any format) comes back as a float CSR matrix of the
    same class, not densified.
    """
    X = _checked(_as_numpy(X, what), what, min_samples)
    _raise_if_nonfinite(X, what)
    return X


def as_dask_array(X, *, what: str = "X", min_samples: int = 1,
                  block_rows: int = DEFAULT_BLOCK_ROWS,
                  unknown_rows: bool = False, whole_rows: bool = False
                  ) -> tuple[da.Array, bool]:
    """Validate ``X`` and return it as a lazy 2-D float array, plus ``is_lazy``.

    numpy input is checked eagerly (it is in memory anyway); dask input is
    checked from metadata only, and its values by the fitting pass itself.
    scipy.sparse input becomes a dask array of CSR blocks (with a sparse meta).

    numpy input is wrapped without a copy, so a caller given ``is_lazy=False``
    must compute before it returns (every estimator method does), while the
    values it was named after are still those in memory.

    ``unknown_rows=True`` accepts a dask array whose row blocks have unknown
    lengths (e.g. from a DataFrame without row counts): a block-by-block map
    such as a transform does not need them, a fit does.

    A dask array's chunks along the features are kept (the kernels sum over
    them, docs/design.md §12), except for scipy.sparse blocks, whose rows are
    made whole, and with ``whole_rows=True``.
    """
    if not isinstance(X, da.Array):
        X = as_numpy_array(X, what=what, min_samples=min_samples)
        rows = min(block_rows, X.shape[0])
        if sparse.issparse(X):
            return da.from_array(X, chunks=(rows, X.shape[1]), asarray=False), False
        return _wrapped(X, rows), False
    X = _checked(X, what, min_samples, unknown_rows)
    if whole_rows or sparse.issparse(X._meta):
        X = one_feature_chunk(X, what, stacklevel=4)
    return X, True


def _wrapped(X: np.ndarray, rows: int) -> da.Array:
    """A dask array over the row blocks of ``X``, as views: ``da.from_array`` copies X.

    The name is a hash of the values, as ``from_array``'s (xxhash: 8 ms for
    51 MB, against 56 ms for its sha1 fallback).
    """
    name = "array-" + tokenize(X, rows)
    starts = range(0, X.shape[0], rows)
    graph = {(name, i, 0): X[start : start + rows] for i, start in enumerate(starts)}
    chunks = (tuple(min(rows, X.shape[0] - start) for start in starts), (X.shape[1],))
    return da.Array(HighLevelGraph.from_collections(name, graph, dependencies=()), name,
                    chunks=chunks, dtype=X.dtype, meta=X[:0, :0])


def one_feature_chunk(X: da.Array, what: str = "X", stacklevel: int = 3) -> da.Array:
    """``X`` with a single chunk along the feature axis, warning when it rechunks.

    What needs whole rows in one task (a callable kernel, scipy.sparse
    blocks) reads a store chunked along the features whole-row, and the
    warning says how to store it; the named kernels do not (docs/design.md §12).
    """
    if X.ndim == 2 and X.numblocks[1] != 1:
        warnings.warn(
            f"{what} has {X.numblocks[1]} chunks along the feature axis; rechunking it to one "
            f"(a callable kernel and sparse rows need whole rows in each task). Store it with "
            "one chunk of features (e.g. X.rechunk({1: -1})) to avoid this.",
            PerformanceWarning,
            stacklevel=stacklevel,
        )
        X = X.rechunk({1: -1})
    return X


def _checked(X, what, min_samples, unknown_rows=False):
    if X.ndim != 2:
        raise InvalidInputError(
            f"{what} must be a 2-D array of shape (n_samples, n_features); got {X.ndim}-D "
            f"with shape {X.shape}. Reshape your data, e.g. x.reshape(-1, 1) for a single feature "
            "or x.reshape(1, -1) for a single sample."
        )
    X = _as_float(X, what)
    n, p = X.shape
    if isinstance(X, da.Array) and not unknown_rows and any(np.isnan(c) for c in X.chunks[0]):
        raise InvalidInputError(
            f"{what} has unknown chunk sizes; call {what}.compute_chunk_sizes() first."
        )
    if n < min_samples:
        raise InvalidInputError(
            f"Found array with {n} sample(s) (shape={X.shape}) while a minimum of "
            f"{min_samples} is required: kernel PCA needs at least {min_samples} rows."
        )
    if p == 0:
        raise InvalidInputError(
            f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of 1 is required."
        )
    return X


def _as_numpy(X, what):
    if sparse.issparse(X):
        if X.ndim != 2:
            raise InvalidInputError(f"{what} must be a 2-D sparse matrix; got shape {X.shape}.")
        return X.tocsr()  # COO, CSC, ... : rows are what the blocks slice
    try:
        return np.asarray(X)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{what} could not be read as a numeric array: {exc}") from exc


def _as_float(X, what):
    kind = X.dtype.kind
    if kind == "c":
        raise InvalidInputError(
            f"Complex data not supported: {what} has dtype {X.dtype}. Use real features, "
            "e.g. stack the real and imaginary parts as separate columns."
        )
    if kind in "fiub":
        if X.dtype in (np.float32, np.float64):
            return X
        return X.astype(np.float64)
    if kind == "O" and not isinstance(X, da.Array):
        try:
            return X.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise NonNumericInputError(
                f"{what} has dtype object with non-numeric entries ({exc}); "
                "convert it to a numeric array first."
            ) from exc
    raise NonNumericInputError(
        f"{what} has dtype {X.dtype}, which is not numeric; convert it to float64 "
        "(or float32) first."
    )


def _raise_if_nonfinite(X: np.ndarray, what: str) -> None:
    if sparse.issparse(X):  # only the stored values can be NaN or inf
        X = X.tocsr()
        bad = ~np.isfinite(X.data)
        if bad.any():
            rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
            raise NonFiniteInputError(
                f"{what} contains {int(bad.sum())} NaN or infinite value(s), the first in row "
                f"{int(rows[bad].min())}. Remove or impute them first.")
        return
    finite = np.isfinite(X)
    if not finite.all():
        bad = ~finite
        raise NonFiniteInputError(
            f"{what} contains {int(bad.sum())} NaN or infinite value(s), the first in row "
            f"{int(np.flatnonzero(bad.any(axis=1))[0])}. Remove or impute them first."
        )


def is_integer(value: object) -> bool:
    """Whether ``value`` is an integer: a Python or numpy int, not a bool.

    Examples
    --------
    >>> is_integer(3), is_integer(np.int64(3)), is_integer(3.0), is_integer(True)
    (True, True, False, False)
    """
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def is_count(value: object, least: int = 1) -> bool:
    """Whether ``value`` is an integer (not a bool) of at least ``least``.

    Examples
    --------
    >>> is_count(3), is_count(3.0), is_count(True), is_count(0), is_count(0, least=0)
    (True, False, False, False, True)
    """
    return is_integer(value) and value >= least


def is_real(value: object) -> bool:
    """Whether ``value`` is a real number (int or float, Python or numpy), not a bool.

    NaN and infinities are real numbers here; see :func:`is_finite_real`.

    Examples
    --------
    >>> is_real(0.5), is_real(np.float32(2)), is_real(float("nan")), is_real("1"), is_real(False)
    (True, True, True, False, False)
    """
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def is_finite_real(value: object) -> bool:
    """Whether ``value`` is a real number that is neither NaN nor infinite.

    Examples
    --------
    >>> is_finite_real(1e300), is_finite_real(float("inf")), is_finite_real(None)
    (True, False, False)
    """
    return is_real(value) and bool(np.isfinite(value))


def check_n_features(X, expected: int, estimator_name: str) -> None:
    """Refuse data whose number of columns differs from the training data's.

    Examples
    --------
    >>> import numpy as np
    >>> check_n_features(np.ones((2, 3)), 3, "KernelPCA")
    >>> check_n_features(np.ones((2, 4)), 3, "KernelPCA")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kpca_dask.errors.InvalidInputError: X has 4 features, but KernelPCA is expecting 3 ...
    """
    if X.shape[1] != expected:
        raise InvalidInputError(
            f"X has {X.shape[1]} features, but {estimator_name} is expecting "
            f"{expected} features as input. Pass data with the columns the model was "
            "fitted on.")


@dataclass(frozen=True)
class Constraint:
    """What one parameter may be: a test, and the words that finish "NAME must be ...".

    Parameters
    ----------
    allows : callable
        ``allows(value)`` is True for a valid value. It never raises.
    must_be : str
        The rule in words, for the error: "tol must be {must_be}; got 5.".
    explain : callable, optional
        ``explain(value)`` gives the whole message for a refused value that
        deserves more than the rule (a name that is close to a valid one, a
        known value with a better alternative), or None for the rule's words.

    Examples
    --------
    >>> odd = Constraint(lambda v: v % 2 == 1, "an odd number")
    >>> odd.allows(3), odd.message("k", 4)
    (True, 'k must be an odd number; got 4.')
    """

    allows: Callable[[Any], bool]
    must_be: str
    explain: Callable[[Any], str | None] | None = None

    def message(self, name: str, value: Any) -> str:
        """The error message for ``name=value``, which ``allows`` refused."""
        special = self.explain(value) if self.explain is not None else None
        return special or f"{name} must be {self.must_be}; got {short_repr(value)}."


def short_repr(value: Any) -> str:
    """``value`` for a message: an array by its shape, anything else by a short repr."""
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def configured_choice(key: str, choices: tuple[str, ...]) -> str:
    """The value of dask's configuration ``key`` (default: the first of ``choices``),
    refused with the choices and how to set it when it is not one of them.

    Examples
    --------
    >>> configured_choice("kpca-dask.example", ("auto", "by-hand"))
    'auto'
    >>> with dask.config.set({"kpca-dask.example": "never"}):
    ...     configured_choice("kpca-dask.example", ("auto", "by-hand"))
    Traceback (most recent call last):
    ...
    kpca_dask.errors.InvalidParameterError: dask's configuration key 'kpca-dask.example' ...
    """
    chosen = dask.config.get(key, choices[0])
    if chosen not in choices:
        variable = "DASK_" + key.upper().replace(".", "__").replace("-", "_")
        raise InvalidParameterError(
            f"dask's configuration key {key!r} must be one of "
            f"{', '.join(map(repr, choices))}; got {chosen!r}. Set it with "
            f"dask.config.set({{{key!r}: {choices[0]!r}}}) or the environment variable "
            f"{variable}.")
    return chosen
