"""Landmark selection strategies: a registry of functions ``X -> Landmarks``.

A strategy takes the (lazy) data, the number of landmarks wanted and a seeded
``numpy.random.Generator`` and returns the landmark points, their global row
indices when they are rows of the data, and how many passes over the data it
made. Indices are drawn from global row numbers, never per chunk, so a seed
gives the same landmarks whatever the chunking or the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import dask.array as da
import numpy as np

from .errors import InvalidParameterError

__all__ = ["Landmarks", "select_landmarks", "register_landmark_strategy", "as_generator"]


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


def as_generator(random_state) -> np.random.Generator:
    """A numpy Generator from None, an int, a Generator or a legacy RandomState.

    Examples
    --------
    >>> as_generator(0).integers(10) == as_generator(0).integers(10)
    True
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(np.iinfo(np.int32).max))
    return np.random.default_rng(random_state)


def take_rows(X: da.Array, indices: np.ndarray) -> np.ndarray:
    """Rows ``X[indices]`` as numpy; reads only the chunks that hold them."""
    order = np.argsort(indices)
    rows = np.asarray(X[indices[order]].compute())
    out = np.empty_like(rows)
    out[order] = rows
    return out


def uniform(X: da.Array, n_landmarks: int, *, rng: np.random.Generator, kernel=None,
            params=None) -> Landmarks:
    """Rows drawn uniformly without replacement (all rows when m >= n)."""
    n = X.shape[0]
    if n_landmarks >= n:
        indices = np.arange(n)
    else:
        # Generator.choice draws m of n in O(m) memory, never an n-sized permutation.
        indices = np.sort(rng.choice(n, size=n_landmarks, replace=False))
    return Landmarks(points=take_rows(X, indices), indices=indices, n_passes=0)


_STRATEGIES: dict[str, LandmarkStrategy] = {"uniform": uniform}


def register_landmark_strategy(name: str, strategy: LandmarkStrategy) -> None:
    """Make ``landmarks=name`` select landmarks with ``strategy``."""
    _STRATEGIES[name] = strategy


def landmark_strategy_names() -> tuple[str, ...]:
    return tuple(sorted(_STRATEGIES))


def select_landmarks(
    X: da.Array,
    n_landmarks: int,
    strategy,
    *,
    rng: np.random.Generator,
    kernel,
    params: dict,
) -> Landmarks:
    """Choose landmarks with a registered strategy or take an explicit array.

    Examples
    --------
    >>> X = da.arange(20.0, chunks=5).reshape(10, 2)
    >>> lm = select_landmarks(X, 3, "uniform", rng=as_generator(0), kernel="rbf", params={})
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
        return chosen(X, n_landmarks, rng=rng, kernel=kernel, params=params)
    points = np.asarray(strategy, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != X.shape[1] or points.shape[0] == 0:
        raise InvalidParameterError(
            f"Explicit landmarks must have shape (n_landmarks, {X.shape[1]}) to match X; "
            f"got shape {points.shape}."
        )
    return Landmarks(points=points, indices=None, n_passes=0)
