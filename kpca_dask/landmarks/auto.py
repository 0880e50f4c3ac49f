"""``n_landmarks="auto"``: grow the landmark set until the trace error is small.

The relative trace error of the Nyström approximation (docs/design.md §2)::

    e(Z) = (sum_i k(x_i, x_i) - sum_i |f(x_i)|^2) / sum_i k(x_i, x_i),
    f(x) = W^T k_m(x),

is an average over the rows of the residual ``k(x, x) - |f(x)|^2``. Measuring it
exactly costs a pass over the data, so while m grows it is *estimated* on a
held-out sample of rows: ``VALIDATION_ROWS`` rows of X, each about equally
likely (in seeded runs, :func:`kpca_dask.engine.sampling.sample_indices`),
drawn with a generator independent of the one that picks the landmarks.
Because the sample does not depend on the landmarks, the estimate is
unbiased for the full-data trace error of each landmark set; its relative
standard error is roughly (spread of the residuals) / sqrt(VALIDATION_ROWS),
a few percent when rows within a run are no more alike than rows far apart,
more when they are (rows stored sorted).

The growth: m = START_LANDMARKS, 2 m, 4 m, ... up to the cap; at each m the
strategy chooses m landmarks afresh from the same generator state (so the
model at the final m is the one ``n_landmarks=m`` gives with the same seed)
and the estimate is taken on the sample, held in memory. The fit reads the
held-out rows and every sample the strategy may draw up to the cap in one go
(:func:`planned_samples`, :meth:`kpca_dask.engine.sampling.RowSampler.reading_ahead`),
so growing m costs one read of the sampled chunks, not one per m; the
samples of successive m lie in the same slots of rows, so the union is
barely larger than the last one. The
growth stops at the first m whose estimate is below ``tol``. The fit then
makes its single full pass with the final landmarks, which gives the exact
``trace_error_``; it can differ from the last estimate by the sampling error.
"""

from __future__ import annotations

import copy
import warnings

import dask.array as da
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..blocks.kernels import kernel_diagonal, pairwise_kernel
from ..blocks.sparse_rows import is_sparse
from ..engine.sampling import RowSampler, refuse_sample_beyond_memory, sample_indices
from ..engine.solve.landmark_factor import factor_landmarks
from ..errors import InvalidParameterError
from .strategies import Landmarks, planned_sample, select_landmarks

__all__ = ["grow_landmarks", "estimated_trace_error", "planned_samples"]

#: First m tried.
START_LANDMARKS = 128
#: Held-out rows on which the trace error is estimated.
VALIDATION_ROWS = 2000


def estimated_trace_error(sample: np.ndarray, points: np.ndarray, kernel, params: dict,
                          rcond: float) -> float:
    """Relative trace error of the Nyström approximation with landmarks ``points`` on ``sample``.

    The same quantity as the fitted ``trace_error_``, with the sum over the
    rows of X replaced by the sum over the rows of ``sample``.

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> estimated_trace_error(X, X, "rbf", {"gamma": 0.5}, 1e-10) < 1e-8  # every row a landmark
    True
    """
    sample = (sample.astype(np.float64) if is_sparse(sample)
              else np.asarray(sample, dtype=np.float64))
    points = np.asarray(points, dtype=np.float64)
    factor = factor_landmarks(points, kernel, params, rcond)
    features = factor.whiten(pairwise_kernel(sample, points, kernel, **params).T)  # f(x) columns
    total = float(kernel_diagonal(sample, kernel, **params).sum(dtype=np.float64))
    if not total > 0:
        return 0.0
    return (total - float(np.einsum("ij,ij->", features, features))) / total


def planned_samples(n_samples: int, strategy, *, rng: np.random.Generator,
                    validation_rng: np.random.Generator, max_landmarks: int,
                    start: int = START_LANDMARKS, validation_rows: int = VALIDATION_ROWS
                    ) -> list[np.ndarray]:
    """The rows :func:`grow_landmarks` may sample: the held-out rows and each m's sample.

    Drawn from copies of the generators, up to the cap (the growth may stop
    sooner); empty for a strategy whose sampling is not known.

    Examples
    --------
    >>> samples = planned_samples(10_000, "uniform", rng=np.random.default_rng(0),
    ...     validation_rng=np.random.default_rng(1), max_landmarks=512)
    >>> [s.size for s in samples]
    [2000, 128, 256, 512]
    """
    samples = [sample_indices(n_samples, validation_rows, copy.deepcopy(validation_rng))]
    for m in _doubling(start, min(max_landmarks, n_samples)):
        planned = planned_sample(n_samples, m, strategy, rng)
        if not planned.size:
            return []
        samples.append(planned)
    return samples


def grow_landmarks(
    X: da.Array, strategy, *, rng: np.random.Generator, validation_rng: np.random.Generator,
    kernel, params: dict, tol: float, max_landmarks: int, rcond: float,
    start: int = START_LANDMARKS, validation_rows: int = VALIDATION_ROWS,
    sampler: RowSampler | None = None, cap_reason: str | None = None,
) -> tuple[Landmarks, list[tuple[int, float]]]:
    """Double m from ``start`` until the estimated trace error is below ``tol``.

    Parameters
    ----------
    X : dask array of shape (n_samples, n_features)
    strategy : str or callable
        A landmark strategy (see :func:`kpca_dask.landmarks.select_landmarks`);
        explicit landmark points are not allowed here.
    rng, validation_rng : numpy Generator
        ``rng`` seeds the strategy (each m starts from a copy of its current
        state); ``validation_rng``, independent of it, draws the held-out rows.
    kernel, params
        The kernel and its resolved parameters.
    tol : float
        Stop at the first m whose estimated trace error is below ``tol``.
    max_landmarks : int
        The cap on m (or n if smaller); ending there above ``tol`` warns (ConvergenceWarning).
    rcond : float
        The landmark cut-off, as in the fit (docs/design.md §11).
    sampler : RowSampler, optional
        Draws the rows (and may hold them already); by default one over ``X``.
    cap_reason : str, optional
        What set ``max_landmarks`` (e.g. the memory), for the warning at the cap.

    Returns
    -------
    landmarks : Landmarks
        The landmarks at the final m.
    path : list of (int, float)
        Every (m, estimated trace error) tried, in order.

    Examples
    --------
    >>> X = da.from_array(np.random.default_rng(0).normal(size=(2000, 2)), chunks=500)
    >>> rng, validation = np.random.default_rng([0, 1]), np.random.default_rng([0, 2])
    >>> landmarks, path = grow_landmarks(X, "rpcholesky", rng=rng, validation_rng=validation,
    ...     kernel="rbf", params={"gamma": 0.5}, tol=1e-3, max_landmarks=1024, rcond=1e-10,
    ...     start=16)
    >>> [m for m, _ in path], bool(path[-1][1] < 1e-3)
    ([16, 32, 64], True)
    """
    _check_strategy(strategy)
    cap = min(max_landmarks, X.shape[0])
    sampler = sampler or RowSampler(X)
    refuse_sample_beyond_memory(
        X, validation_rows + cap, 'n_landmarks="auto" (its held-out rows and landmarks)',
        "Give n_landmarks as a number, or set max_landmarks lower.")
    sample, _ = sampler.sample(validation_rows, validation_rng, purpose=_VALIDATION_PURPOSE)
    path: list[tuple[int, float]] = []
    for m in _doubling(start, cap):
        chosen = select_landmarks(X, m, strategy, rng=copy.deepcopy(rng), kernel=kernel,
                                  params=params, sampler=sampler)
        error = estimated_trace_error(sample, chosen.points, kernel, params, rcond)
        path.append((int(chosen.points.shape[0]), error))
        # A strategy returning fewer than m has exhausted the kernel's rank.
        if error < tol or chosen.points.shape[0] < m:
            break
    reason = ("n, the number of rows" if cap == X.shape[0] and cap < max_landmarks
              else cap_reason or f"max_landmarks={max_landmarks}")
    _warn_if_above_tol(path, tol, cap, reason)
    return chosen, path


_VALIDATION_PURPOSE = "drawing rows to estimate the trace error"


def _doubling(start: int, cap: int):
    """start, 2 start, 4 start, ... and finally cap (start itself capped)."""
    m = min(start, cap)
    while True:
        yield m
        if m >= cap:
            return
        m = min(2 * m, cap)


def _check_strategy(strategy) -> None:
    if not (isinstance(strategy, str) or callable(strategy)):
        raise InvalidParameterError(
            "n_landmarks='auto' needs a landmark strategy (a name such as 'rpcholesky'), "
            "not explicit landmark points; pass n_landmarks=len(points) with the points.")


def _warn_if_above_tol(path: list[tuple[int, float]], tol: float, cap: int,
                      reason: str) -> None:
    error = path[-1][1]
    if error < tol:
        return
    warnings.warn(
        f"n_landmarks='auto' stopped at the cap of {cap} landmarks ({reason}) with an "
        f"estimated trace error of {error:.3g}, above tol={tol:g}. Raise max_landmarks or "
        "the memory available, raise tol, or choose a smoother kernel (smaller gamma).",
        ConvergenceWarning,
        stacklevel=4,
    )
