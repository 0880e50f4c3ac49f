"""A kernel CCA's ridge chosen on held-out samples, from sums of one pass (docs/design.md §20).

The fit's pass adds each of K contiguous folds' sums apart
(:class:`~kpca_dask.blocks.replicate_counts.FoldCounts`): their total is the fit's sums, and
a fold's complement is its training set. For each fold and each ridge epsilon of
:data:`EPSILON_GRID`, the leading pair of canonical directions is found on the training
folds (each field's PCs of the training covariance, as the fit keeps them, whitened with the
ridge) and its correlation measured on the held-out fold,

    r_f(eps) = a^T C_xy,f b / sqrt(a^T C_xx,f a  b^T C_yy,f b);

the ridge of the largest mean over the folds is the fit's. Every step is on the m-sized sums:
no sample is read again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy import linalg

from ...blocks.cross_sums import CoupledStatistics
from ...blocks.statistics import PassStatistics
from .coupled import cross_covariance, feature_covariance, leading_pcs, relative_cutoff, whitening
from .landmark_factor import LandmarkFactor

__all__ = ["EPSILON_GRID", "N_FOLDS", "HeldOutRidge", "choose_epsilon", "summed"]

#: The ridges tried, relative to each field's mean variance of its kept PCs.
EPSILON_GRID = (0.0, 0.001, 0.01, 0.1, 1.0, 10.0)

#: The folds of the held-out choice.
N_FOLDS = 5


@dataclass(frozen=True)
class HeldOutRidge:
    """The ridge chosen and each ridge's mean held-out leading correlation."""

    epsilon: float
    grid: tuple
    correlations: np.ndarray  # (len(grid),)


def _added(a: PassStatistics, b: PassStatistics, sign: float) -> PassStatistics:
    return replace(a, n_samples=int(a.n_samples + sign * b.n_samples),
                   column_sums=a.column_sums + sign * b.column_sums,
                   gram=a.gram + sign * b.gram)


def summed(folds: list[CoupledStatistics]) -> CoupledStatistics:
    """The sums of every fold: the fit's."""
    total = folds[0]
    for fold in folds[1:]:
        total = CoupledStatistics(_added(total.x, fold.x, 1), _added(total.y, fold.y, 1),
                                  total.cross + fold.cross)
    return total


def _without(total: CoupledStatistics, fold: CoupledStatistics) -> CoupledStatistics:
    return CoupledStatistics(_added(total.x, fold.x, -1), _added(total.y, fold.y, -1),
                             total.cross - fold.cross)


def _held_out(train: CoupledStatistics, fold: CoupledStatistics, factors, n_pca_modes,
              cutoff: float, grid) -> np.ndarray:
    """The held-out fold's correlation of the training folds' leading pair, per ridge."""
    fx, fy = factors
    pcs = (leading_pcs(feature_covariance(train.x, fx), n_pca_modes[0], cutoff, "X"),
           leading_pcs(feature_covariance(train.y, fy), n_pca_modes[1], cutoff, "Y"))
    C_train = cross_covariance(train, fx, fy)
    C_xx, C_yy = feature_covariance(fold.x, fx), feature_covariance(fold.y, fy)
    C_xy = cross_covariance(fold, fx, fy)
    out = np.zeros(len(grid))
    for i, epsilon in enumerate(grid):
        T_x, T_y = whitening(pcs[0], epsilon), whitening(pcs[1], epsilon)
        U, _, Vt = linalg.svd(T_x.T @ C_train @ T_y, full_matrices=False)
        a, b = T_x @ U[:, 0], T_y @ Vt[0]
        scale = np.sqrt(max(a @ C_xx @ a, 0.0) * max(b @ C_yy @ b, 0.0))
        out[i] = abs(a @ C_xy @ b) / scale if scale > 0 else 0.0
    return out


def choose_epsilon(folds: list[CoupledStatistics], factor_x: LandmarkFactor,
                   factor_y: LandmarkFactor, *, n_pca_modes=(None, None), dtype=np.float64,
                   grid=EPSILON_GRID) -> HeldOutRidge:
    """The ridge of :data:`EPSILON_GRID` whose leading pair, found on the other folds,
    correlates best on each held-out fold, on average (see the module docstring).

    Examples
    --------
    >>> import dask.array as da
    >>> from kpca_dask.blocks.replicate_counts import FoldCounts
    >>> from kpca_dask.engine.passes.coupled import compute_coupled_replicates, field_kernel
    >>> from kpca_dask.engine.solve.landmark_factor import factor_landmarks, reference_row
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); Y = X[:, :2] + rng.normal(size=(200, 2))
    >>> sides = [field_kernel(da.from_array(A), A, "linear", {},
    ...                       reference_row(A, "linear", {}), np.float64) for A in (X, Y)]
    >>> sums = compute_coupled_replicates(da.from_array(X), da.from_array(Y), *sides,
    ...                                   FoldCounts(5, 200))
    >>> folds = [sums.replicate(f) for f in range(5)]
    >>> factors = [factor_landmarks(A, "linear", {}, 1e-10) for A in (X, Y)]
    >>> choice = choose_epsilon(folds, *factors)
    >>> choice.epsilon in EPSILON_GRID, choice.correlations.shape
    (True, (6,))
    """
    total = summed(folds)
    cutoff = relative_cutoff(dtype)
    scores = np.mean([_held_out(_without(total, fold), fold, (factor_x, factor_y),
                                n_pca_modes, cutoff, grid) for fold in folds], axis=0)
    return HeldOutRidge(float(grid[int(np.argmax(scores))]), tuple(grid), scores)
