"""Landmark strategies: a registry of functions ``X -> Landmarks``.

The strategies themselves are in :mod:`kpca_dask.landmarks.strategies`; the
algorithms behind them in :mod:`~kpca_dask.landmarks.kmeans_clustering`
(k-means++ and Lloyd) and :mod:`~kpca_dask.landmarks.pivoted_cholesky`
(randomly pivoted Cholesky); the automatic choice of m in
:mod:`~kpca_dask.landmarks.auto`. Tuned variants are plain partial functions,
e.g. ``functools.partial(kpca_dask.landmarks.rpcholesky, pool_factor=40)``.
"""

from .strategies import (
    SAMPLE_FACTOR,
    Landmarks,
    LandmarkStrategy,
    kmeans,
    landmark_strategy_names,
    register_landmark_strategy,
    rpcholesky,
    select_landmarks,
    uniform,
)

__all__ = [
    "SAMPLE_FACTOR",
    "Landmarks",
    "LandmarkStrategy",
    "kmeans",
    "landmark_strategy_names",
    "register_landmark_strategy",
    "rpcholesky",
    "select_landmarks",
    "uniform",
]
