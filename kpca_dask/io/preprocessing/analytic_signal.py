"""The analytic signal of each feature along the sample axis, lazily on Dask.

A propagating signal appears in real EOFs as two modes in quadrature; the
complex rows z = x + i H(x), where H is the Hilbert transform taken along the
samples of each feature, turn it into one complex mode (docs/design.md §16).
The transform is xeofs' ``HilbertEOF``'s: anomalies from the mean of each
feature, optionally padded at both ends with an exponential decay towards a
straight-line fit of the record (``padding="exp"``, ``decay_factor``) against
the transform's edge effects, ``scipy.signal.hilbert``, the padding cut off
again, and the imaginary part put back to zero mean (the padding shifts it).

The Hilbert transform of a feature needs its whole record, so the rows are
rechunked to whole samples per feature chunk first (:func:`analytic_rows`):
an all-to-all shuffle of the data, and feature chunks of width
:func:`feature_chunk_width`, each holding n x width complex values (three
times that while padded), then back to the row blocks of the input for the
landmark pass. Dask keeps both rechunks lazy; the data is read once per pass.
"""

from __future__ import annotations

import math

import dask.array as da
import numpy as np
from scipy.signal import hilbert

from ...errors import InvalidInputError, NonFiniteInputError

__all__ = ["PADDINGS", "analytic_signal", "analytic_rows",
           "feature_chunk_width"]

#: The paddings :func:`analytic_signal` applies before the Hilbert transform.
PADDINGS = ("exp", "none")

#: Bytes of one feature chunk of the analytic signal (complex128, padded): its width
#: is chosen so that a chunk of n samples stays near this.
CHUNK_BYTES = 64 * 2**20

#: The fewest samples a record may have: the Hilbert transform and a line fit need a few.
MIN_SAMPLES = 4


def _padded(y: np.ndarray, decay_factor: float) -> np.ndarray:
    """``y`` (n x p) with n samples before and after, decaying exponentially from its end
    values towards the extension of its least-squares line (xeofs' ``exp`` padding)."""
    n = y.shape[0]
    x = np.arange(n, dtype=np.float64)
    extended = np.arange(-n, 2 * n, dtype=np.float64)
    slope, intercept = np.polynomial.polynomial.polyfit(x, y, 1)[::-1]
    anomaly = y - (intercept + np.outer(x, slope))
    decay = np.exp(-x / n / decay_factor)
    body = np.concatenate([anomaly[:1] * decay[::-1, None], anomaly,
                           anomaly[-1:] * decay[:, None]])
    return body + intercept + np.outer(extended, slope)


def analytic_signal(values: np.ndarray, padding: str = "exp", decay_factor: float = 0.2,
                    mean: np.ndarray | None = None) -> np.ndarray:
    """The analytic signal (n x p complex128) of each column of ``values`` (n x p).

    Anomalies from ``mean`` (default: each column's own mean) are transformed;
    the imaginary part is put back to zero mean, as xeofs does after padding.

    Examples
    --------
    >>> t = np.arange(64) * 2 * np.pi / 16
    >>> z = analytic_signal(np.cos(t)[:, None], padding="none")
    >>> bool(np.allclose(z[:, 0], np.exp(1j * t)))
    True
    """
    y = np.asarray(values, dtype=np.float64)
    if not np.isfinite(y).all():
        raise NonFiniteInputError(
            "X contains NaN or infinite values; the Hilbert transform needs every sample "
            "of a feature: fill the gaps or drop the feature (a field's fixed mask, NaN "
            "at every sample, is dropped for you).")
    n = y.shape[0]
    y = y - (y.mean(axis=0) if mean is None else mean)
    if padding == "exp":
        z = hilbert(_padded(y, decay_factor), axis=0)[n:2 * n]
    else:
        z = hilbert(y, axis=0)
    return z.real + 1j * (z.imag - z.imag.mean(axis=0))


def feature_chunk_width(n_samples: int, n_features: int, padding: str) -> int:
    """Features per chunk so that a chunk of whole samples holds about 64 MiB of padded
    complex values.

    Examples
    --------
    >>> feature_chunk_width(1000, 50, "exp")
    50
    """
    per_feature = n_samples * 16 * (3 if padding == "exp" else 1)
    return int(max(1, min(n_features, CHUNK_BYTES // per_feature)))


def _analytic_block(block: np.ndarray, mean: np.ndarray | None, padding: str,
                    decay_factor: float) -> np.ndarray:
    return analytic_signal(block, padding, decay_factor, mean)


def analytic_rows(X: da.Array, padding: str = "exp", decay_factor: float = 0.2,
                  mean: np.ndarray | None = None) -> da.Array:
    """The analytic signal of the columns of ``X``, lazily, in the row blocks of ``X``.

    ``X`` is rechunked to whole samples per chunk of features (the transform
    needs each feature's whole record), transformed chunk by chunk, and
    rechunked back to the row blocks of ``X`` with one feature chunk.

    Examples
    --------
    >>> X = da.from_array(np.random.default_rng(0).normal(size=(40, 6)), chunks=(10, 3))
    >>> Z = analytic_rows(X, "exp", 0.2)
    >>> Z.dtype, Z.chunks[0]
    (dtype('complex128'), (10, 10, 10, 10))
    """
    n, p = X.shape
    if math.isnan(n) or n < MIN_SAMPLES:
        raise InvalidInputError(
            f"The Hilbert transform needs at least {MIN_SAMPLES} samples of known number; "
            f"X has {n}.")
    width = feature_chunk_width(n, p, padding)
    whole = X.astype(np.float64).rechunk({0: -1, 1: width})
    if mean is None:
        Z = whole.map_blocks(_analytic_block, None, padding, decay_factor,
                             dtype=np.complex128, name="kpca-analytic-signal")
    else:
        means = da.from_array(np.asarray(mean, dtype=np.float64)[None, :],
                              chunks=(1, whole.chunks[1]))
        Z = da.map_blocks(_analytic_block, whole, means, padding, decay_factor,
                          dtype=np.complex128, name="kpca-analytic-signal")
    return Z.rechunk({0: X.chunks[0], 1: -1})
