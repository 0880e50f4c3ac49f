"""Checks of arrays and records read from a model file or a checkpoint (docs/design.md §10).

What is read back from a file is held to the shapes, dtypes and ranges a fit
would have written before anything is computed with it: :func:`check_array`
(one array), :func:`check_statistics` (pass statistics against their
landmarks: of a model, a checkpoint or the inputs of :func:`kpca_dask.merge`)
and :func:`check_landmark_path`. Every failure is the
:class:`~kpca_dask.errors.ModelFormatError` that :func:`damaged` makes: what is
wrong and what to do, for a model or a checkpoint. A whole fitted model is
checked by :mod:`kpca_dask.model.checks`, which uses these.
"""

from __future__ import annotations

import dask.array as da
import numpy as np

from ..blocks.statistics import PassStatistics
from ..errors import ModelFormatError
from ..validation import is_count, is_real

__all__ = ["ROUNDING", "check_array", "check_landmark_path", "check_statistics", "damaged"]

#: Relative slack for sums that were rounded when written (ratios, symmetry).
ROUNDING = 1e-8


def check_array(value, name: str, shape: tuple, *, kind: str = "f",
                found_in: str = "model") -> np.ndarray:
    """``value`` if it is a finite array of ``shape`` in float64 (``kind="f"``) or int64 ("i").

    ``kind="x"`` allows float32 as well, for points in input space: landmarks
    that are rows of float32 data keep their dtype.

    Examples
    --------
    >>> check_array(np.zeros((2, 3)), "landmarks", (2, 3)).shape
    (2, 3)
    >>> check_array(np.zeros(2), "offset", (3,))
    Traceback (most recent call last):
    ...
    kpca_dask.errors.ModelFormatError: the model is damaged: the array 'offset' has shape \
(2,), but the other arrays and attributes need (3,). Fit and save it again.

    ``found_in`` ("model" or "checkpoint") says where it was found, for the message.
    """
    expected = np.dtype(np.int64 if kind == "i" else np.float64)
    allowed = (expected, np.dtype(np.float32)) if kind == "x" else (expected,)
    if not isinstance(value, np.ndarray) or value.dtype not in allowed:
        dtype = getattr(value, "dtype", type(value).__name__)
        raise damaged(f"the array {name!r} has dtype {dtype}, not {expected}", found_in)
    if value.shape != tuple(shape):
        raise damaged(f"the array {name!r} has shape {value.shape}, but the other "
                      f"arrays and attributes need {tuple(shape)}", found_in)
    if kind != "i" and not np.isfinite(value).all():
        raise damaged(f"the array {name!r} holds {int((~np.isfinite(value)).sum())} "
                      "NaN or infinite value(s)", found_in)
    return value


def check_statistics(stats: PassStatistics, m: int, *, least_rows: int = 1,
                     found_in: str = "model") -> None:
    """Refuse pass statistics that do not fit ``m`` landmarks, or hold impossible values.

    ``least_rows`` is 1 for a model and 0 for a checkpoint that has counted
    nothing yet.

    Examples
    --------
    >>> stats = PassStatistics(3, np.zeros(2), np.eye(2), 6.0, 0, -1, np.ones(2))
    >>> check_statistics(stats, 2)
    >>> check_statistics(stats, 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kpca_dask.errors.ModelFormatError: ... 'statistics_gram' has shape (2, 2), ...
    """
    if not is_count(stats.n_samples, least_rows):
        raise damaged(f"statistics.n_samples is {stats.n_samples!r}, not an integer "
                      f">= {least_rows}", found_in)
    if not is_count(stats.n_nonfinite, 0) or not is_count(stats.first_nonfinite_row, -1):
        raise damaged("statistics.n_nonfinite and statistics.first_nonfinite_row must "
                      "be integers >= 0 and >= -1", found_in)
    if not np.isfinite(stats.diagonal_sum):  # t = sum k(x, x) may be < 0 (sigmoid kernel)
        raise damaged(f"statistics.diagonal_sum is {stats.diagonal_sum!r}", found_in)
    if isinstance(stats.gram, da.Array):
        # Held on a cluster, or read lazily from a file whose chunks carry checksums:
        # read only when solved, so only its form is checked here.
        if stats.gram.shape != (m, m) or stats.gram.dtype != np.float64:
            raise damaged(f"the array 'statistics_gram' is {stats.gram.dtype} of shape "
                          f"{stats.gram.shape}, not float64 of shape {(m, m)}", found_in)
        gram = None
    else:
        gram = check_array(stats.gram, "statistics_gram", (m, m), found_in=found_in)
    check_array(stats.column_sums, "statistics_column_sums", (m,), found_in=found_in)
    check_array(stats.reference, "statistics_reference", (m,), found_in=found_in)
    if gram is None:
        return
    # G = sum_b D_b^T D_b: symmetric with a non-negative diagonal (sums of squares).
    scale = float(np.abs(gram).max(initial=0.0))
    if (np.diag(gram) < 0).any() or not np.allclose(gram, gram.T, rtol=0,
                                                     atol=ROUNDING * scale):
        raise damaged("the array 'statistics_gram' is not a Gram matrix (it must be "
                      "symmetric with a non-negative diagonal)", found_in)


def check_landmark_path(path, found_in: str = "model") -> None:
    """Refuse a growth path of ``n_landmarks="auto"`` that is not a list of [m, error] pairs.

    Examples
    --------
    >>> check_landmark_path([[128, 0.02], [256, 0.008]])
    """
    if path is not None and not (isinstance(path, list) and all(
            isinstance(step, (list, tuple)) and len(step) == 2 and is_count(step[0])
            and is_real(step[1])
            for step in path)):
        raise damaged("the landmark path must be a list of [m, trace error] pairs; "
                      f"got {path!r}", found_in)


def damaged(what: str, found_in: str = "model") -> ModelFormatError:
    """The error for a damaged model or checkpoint (``found_in``): what is wrong, what to do.

    It names no file: raised inside :func:`~kpca_dask.errors.about`, it begins with
    the one that boundary names.

    Examples
    --------
    >>> from kpca_dask.errors import about
    >>> try:
    ...     with about("'fit.ckpt'"):
    ...         raise damaged("n_segments is 0", "checkpoint")
    ... except ModelFormatError as exc:
    ...     print(exc)  # doctest: +ELLIPSIS
    'fit.ckpt': the checkpoint is damaged: n_segments is 0. Delete it and fit again...
    """
    fix = ("Fit and save it again." if found_in == "model" else
           "Delete it and fit again: a fit with a new checkpoint path starts afresh.")
    return ModelFormatError(f"the {found_in} is damaged: {what.rstrip('.')}. {fix}")
