"""Landmark selection strategies: a registry of functions ``X -> Landmarks``.

A strategy takes the (lazy) data, the number of landmarks wanted and a seeded
``numpy.random.Generator`` and returns the landmark points, their global row
indices when they are rows of the data, and how many passes over the data it
made. Indices are drawn from global row numbers, never per chunk, so a seed
gives the same landmarks whatever the chunking or the cluster; samples are
seeded runs of contiguous rows (:func:`kpca_dask.engine.sampling.sample_indices`),
every row about equally likely, so a sample reads a few stored chunks.

Registered strategies:

- ``"uniform"``: m rows, each about equally likely, without replacement;
- ``"kmeans"``: k-means++ seeds refined by a few Lloyd iterations on a
  uniform sample of rows held in memory; the landmarks are the centroids
  (Zhang, Tsang & Kwok 2008);
- ``"rpcholesky"``: randomly pivoted Cholesky with block pivoting on a
  uniform candidate pool held in memory; the landmarks are the pivot rows
  (Chen, Epperly, Tropp & Webber 2023; Epperly, Tropp & Webber 2024).

Tuned variants are plain partial functions, e.g.
``landmarks=functools.partial(kpca_dask.landmarks.rpcholesky, pool_factor=40)``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable, Protocol

import dask.array as da
import numpy as np

from ..blocks.sparse_rows import dense
from ..engine.sampling import RowSampler, refuse_sample_beyond_memory, sample_indices
from ..errors import InvalidParameterError
from .kmeans_clustering import kmeans_centroids
from .pivoted_cholesky import PIVOT_BLOCK
from .pivoted_cholesky import rpcholesky as rpcholesky_factor

__all__ = [
    "Landmarks",
    "select_landmarks",
    "register_landmark_strategy",
    "landmark_strategy_names",
    "uniform",
    "kmeans",
    "rpcholesky",
    "planned_sample",
]

#: Rows sampled per landmark by the in-memory strategies (kmeans, rpcholesky).
SAMPLE_FACTOR = 20


@dataclass(frozen=True)
class Landmarks:
    """Chosen landmark points Z (m x p) and where they came from."""

    points: np.ndarray
    indices: np.ndarray | None  # global rows of X, or None for synthetic points
    n_passes: int  # full passes over the data the strategy made


class LandmarkStrategy(Protocol):
    def __call__(
        self, X: da.Array, n_landmarks: int, *, rng: np.random.Generator, kernel, params: dict
    ) -> Landmarks: ...


def uniform(X: da.Array, n_landmarks: int, *, rng: np.random.Generator, kernel=None,
            params=None, sampler: RowSampler | None = None) -> Landmarks:
    """m rows, each about equally likely, without replacement (all rows when m >= n).

    Examples
    --------
    >>> X = da.arange(20.0, chunks=6).reshape(10, 2)
    >>> uniform(X, 4, rng=np.random.default_rng(0)).indices.size
    4
    """
    points, indices = (sampler or RowSampler(X)).sample(n_landmarks, rng)
    return Landmarks(points=dense(points), indices=indices, n_passes=0)


def kmeans(X: da.Array, n_landmarks: int, *, rng: np.random.Generator, kernel=None,
           params=None, sample_factor: int = SAMPLE_FACTOR, n_iter: int = 5,
           sampler: RowSampler | None = None) -> Landmarks:
    """k-means centroids of a uniform sample of ``sample_factor * m`` rows.

    k-means++ seeding (exact, drawn in blocks) and up to ``n_iter`` Lloyd
    iterations in the input space, on min(n, sample_factor * m) rows held in
    memory. The landmarks are centroids, not data rows (``indices`` is None),
    except when m >= the sample size, where the sampled rows themselves are
    returned. The kernel is not used: Zhang, Tsang & Kwok (2008) bound the
    Nyström error of a stationary kernel by the k-means quantisation error.

    Examples
    --------
    >>> X = da.from_array(np.random.default_rng(0).normal(size=(500, 2)), chunks=100)
    >>> landmarks = kmeans(X, 10, rng=np.random.default_rng(0))
    >>> landmarks.points.shape, landmarks.indices is None
    ((10, 2), True)
    """
    refuse_sample_beyond_memory(
        X, sample_factor * n_landmarks, f'landmarks="kmeans" (its sample of {sample_factor} m)',
        _WIDE_ADVICE)
    sample, indices = (sampler or RowSampler(X)).sample(sample_factor * n_landmarks, rng)
    if n_landmarks >= sample.shape[0]:
        return Landmarks(points=dense(sample), indices=indices, n_passes=0)
    centroids = kmeans_centroids(sample, n_landmarks, rng=rng, n_iter=n_iter)
    return Landmarks(points=centroids, indices=None, n_passes=0)


def rpcholesky(X: da.Array, n_landmarks: int, *, rng: np.random.Generator, kernel="rbf",
               params=None, pool_factor: int = SAMPLE_FACTOR,
               block_size: int = PIVOT_BLOCK, sampler: RowSampler | None = None) -> Landmarks:
    """Pivot rows of randomly pivoted Cholesky on a pool of ``pool_factor * m`` rows.

    The pool, min(n, pool_factor * m) rows drawn uniformly, is held in memory
    with the Cholesky factor (pool x m floats: 20 m^2 x 8 bytes by default,
    160 MB at m = 1000). Fewer than m landmarks come back when the kernel
    matrix of the pool is exhausted first (its numerical rank is below m).

    Examples
    --------
    >>> X = da.from_array(np.random.default_rng(0).normal(size=(500, 2)), chunks=100)
    >>> rng = np.random.default_rng(0)
    >>> landmarks = rpcholesky(X, 10, rng=rng, kernel="rbf", params={"gamma": 1.0})
    >>> landmarks.points.shape, bool(np.all(np.diff(landmarks.indices) > 0))
    ((10, 2), True)
    """
    refuse_sample_beyond_memory(
        X, pool_factor * n_landmarks, f'landmarks="rpcholesky" (its pool of {pool_factor} m)',
        _WIDE_ADVICE)
    pool, pool_indices = (sampler or RowSampler(X)).sample(pool_factor * n_landmarks, rng)
    factorisation = rpcholesky_factor(pool, n_landmarks, rng=rng, kernel=kernel,
                                      params=params or {}, block_size=block_size)
    chosen = np.sort(factorisation.pivots)
    return Landmarks(points=dense(pool[chosen]), indices=pool_indices[chosen], n_passes=0)


#: What to do when a strategy's sample of wide rows does not fit (docs/design.md §12).
_WIDE_ADVICE = ('Use landmarks="uniform" (it holds the m landmarks only), fewer landmarks, '
                "or fewer features.")


_STRATEGIES: dict[str, LandmarkStrategy] = {
    "uniform": uniform,
    "kmeans": kmeans,
    "rpcholesky": rpcholesky,
}
_BUILT_IN = dict(_STRATEGIES)  # a re-registered name no longer samples as planned


#: Rows each registered strategy samples for m landmarks, with its first draw.
_SAMPLE_SIZES: dict[str, Callable[[int], int]] = {
    "uniform": lambda m: m,
    "kmeans": lambda m: SAMPLE_FACTOR * m,
    "rpcholesky": lambda m: SAMPLE_FACTOR * m,
}


def planned_sample(n_samples: int, n_landmarks: int, strategy, rng: np.random.Generator
                   ) -> np.ndarray:
    """The rows ``strategy`` will sample from ``rng`` for m landmarks, drawn from a copy.

    Empty for strategies whose sampling is not known (callables, other
    registered names, explicit points): they read as they go.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = da.arange(200.0, chunks=50).reshape(100, 2)
    >>> planned = planned_sample(100, 3, "uniform", rng)
    >>> bool((planned == uniform(X, 3, rng=rng).indices).all())
    True
    """
    size = _SAMPLE_SIZES.get(strategy) if isinstance(strategy, str) else None
    if size is None or _STRATEGIES.get(strategy) is not _BUILT_IN.get(strategy):
        return np.empty(0, np.int64)
    return sample_indices(n_samples, size(n_landmarks), copy.deepcopy(rng))


def register_landmark_strategy(name: str, strategy: LandmarkStrategy) -> None:
    """Make ``landmarks=name`` select landmarks with ``strategy``."""
    _STRATEGIES[name] = strategy


def landmark_strategy_names() -> tuple[str, ...]:
    return tuple(sorted(_STRATEGIES))


def select_landmarks(
    X: da.Array, n_landmarks: int, strategy, *, rng: np.random.Generator, kernel,
    params: dict, sampler: RowSampler | None = None,
) -> Landmarks:
    """Choose landmarks with a registered strategy, a strategy function, or an explicit array.

    A string names a registered strategy; a callable is called as a strategy;
    anything else is taken as the landmark points themselves (``n_landmarks``
    is then ignored). The built-in strategies draw their rows through
    ``sampler`` (a fit's :class:`~kpca_dask.engine.sampling.RowSampler`, which
    may hold them already); other strategies get ``X`` only.

    Examples
    --------
    >>> X = da.arange(20.0, chunks=5).reshape(10, 2)
    >>> rng = np.random.default_rng(0)
    >>> lm = select_landmarks(X, 3, "uniform", rng=rng, kernel="rbf", params={})
    >>> lm.points.shape, lm.indices.tolist() == sorted(lm.indices.tolist())
    ((3, 2), True)
    """
    if isinstance(strategy, str):
        try:
            chosen: Callable = _STRATEGIES[strategy]
        except KeyError:
            raise InvalidParameterError(
                f"Unknown landmarks strategy {strategy!r}. Use one of "
                f"{', '.join(landmark_strategy_names())}, or pass an array of landmark points "
                "of shape (n_landmarks, n_features)."
            ) from None
        if chosen is _BUILT_IN.get(strategy):
            return chosen(X, n_landmarks, rng=rng, kernel=kernel, params=params,
                          sampler=sampler)
        return chosen(X, n_landmarks, rng=rng, kernel=kernel, params=params)
    if callable(strategy):
        chosen_landmarks = strategy(X, n_landmarks, rng=rng, kernel=kernel, params=params)
        if not isinstance(chosen_landmarks, Landmarks):
            name = getattr(strategy, "__name__", repr(strategy))
            raise InvalidParameterError(
                f"The landmark strategy {name} returned {type(chosen_landmarks).__name__}; a "
                "strategy must return a kpca_dask.landmarks.Landmarks(points, indices, "
                "n_passes). To pass the points themselves, use landmarks=<array>.")
        return chosen_landmarks
    try:
        points = np.asarray(dense(strategy), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            "landmarks must be a strategy name, a strategy function, or numeric landmark "
            f"points of shape (n_landmarks, {X.shape[1]}); got {type(strategy).__name__} that "
            f"is not an array of numbers ({exc}).") from None
    if points.ndim != 2 or points.shape[1] != X.shape[1] or points.shape[0] == 0:
        raise InvalidParameterError(
            f"Explicit landmarks must have shape (n_landmarks, {X.shape[1]}) to match X; "
            f"got shape {points.shape}."
        )
    return Landmarks(points=points, indices=None, n_passes=0)
