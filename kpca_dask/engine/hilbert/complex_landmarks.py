"""The Hilbert EOF's landmarks and its kernel's scale, on complex rows (docs/design.md §16).

Landmarks are samples of the record, drawn independently (not in the runs of contiguous
rows a real fit samples by, :func:`kpca_dask.engine.sampling.sample_indices`): the samples
are a time series, and neighbouring time steps carry little besides each other
(``bench/bench_landmark_runs.py``: runs of a red-noise record approximate at m = 400 worse
than independent rows at m = 200). The analytic signal is computed over the whole record
anyway, so where the landmarks lie costs no read.

gamma's rules take the squared distances of pairs of at most :data:`SPREAD` landmarks
spread evenly over the record, ‖z − w‖² of the rows' real and imaginary parts, and their
mean squared norm: ``"median"`` is the family's rule, 2 / h
(:func:`kpca_dask.engine.bandwidth.median_heuristic_gamma_of`), ``"scale"`` 1 / the mean
squared norm (scikit-learn's 1 / (p Var X), the rows being anomalies), and None 1 / h for
rbf (a pair at the median distance has kernel e^{-1}) and the scale rule for poly.
"""

from __future__ import annotations

import numpy as np

from ...errors import InvalidParameterError
from ..bandwidth import median_heuristic_gamma_of, pair_distances

__all__ = ["SPREAD", "landmark_indices", "landmark_pair_figures", "gram_pair_figures",
           "complex_kernel_params"]

#: At most this many samples, spread over the record, give the kernel's scale.
SPREAD = 1000


def landmark_indices(n: int, n_landmarks: int, landmarks, n_components: int,
                     random_state) -> np.ndarray:
    """The samples that are landmarks: ``n_landmarks`` drawn independently and sorted for
    ``landmarks="uniform"`` (every sample when there are no more), or the indices given,
    checked.

    Examples
    --------
    >>> landmark_indices(10, 4, "uniform", 2, 0).tolist()
    [2, 4, 5, 7]
    >>> landmark_indices(10, 4, [7, 2, 2], 2, None).tolist()
    [2, 7]
    """
    if isinstance(landmarks, str):  # "uniform", as its constraint holds
        m = min(int(n_landmarks), n)
        if m == n:
            return np.arange(n)
        rng = np.random.default_rng(random_state)
        return np.sort(rng.choice(n, size=m, replace=False))
    indices = np.unique(np.asarray(landmarks))
    if indices.dtype.kind not in "iu" or indices.size < n_components or (
            indices.min() < 0 or indices.max() >= n):
        raise InvalidParameterError(
            f"landmarks as indices must be at least n_components distinct ints in "
            f"[0, {n}); got {landmarks!r}.")
    return indices.astype(np.int64)


def _spread(n: int) -> np.ndarray:
    """At most :data:`SPREAD` of n rows in time order, spread evenly over the record."""
    return np.linspace(0, n - 1, min(n, SPREAD)).astype(int)


def landmark_pair_figures(W: np.ndarray) -> tuple[np.ndarray, int, float]:
    """The squared distances of the pairs of the spread landmarks of ``W`` (complex rows),
    their number, and the landmarks' mean squared norm: the gamma rules' figures."""
    spread = W[_spread(len(W))]
    return (pair_distances(np.hstack([spread.real, spread.imag])), len(spread),
            float(np.mean(np.sum(np.abs(W) ** 2, axis=1))))


def gram_pair_figures(H: np.ndarray, norms: np.ndarray) -> tuple[np.ndarray, int, float]:
    """:func:`landmark_pair_figures` with every sample a landmark, from the inner products
    ``H`` and the squared norms: ‖z_i − z_j‖² = ‖z_i‖² + ‖z_j‖² − 2 Re⟨z_i, z_j⟩."""
    spread = _spread(H.shape[0])
    distances = (norms[spread][:, None] + norms[spread][None, :]
                 - 2.0 * H[np.ix_(spread, spread)].real)
    return distances[np.triu_indices(spread.size, k=1)], spread.size, float(norms.mean())


def complex_kernel_params(kernel: str, gamma, degree, coef0, distances: np.ndarray,
                          n_rows: int, mean_norm: float) -> dict:
    """The kernel's parameters, gamma resolved by its rule (module docstring) from the pair
    figures where it is not a number.

    Examples
    --------
    >>> complex_kernel_params("rbf", None, 3, 1.0, np.array([1.0, 4.0, 9.0]), 3, 2.0)["gamma"]
    0.25
    """
    if kernel == "linear":
        return {"kernel": "linear"}
    if gamma == "median":  # the family's rule (engine/bandwidth.py): 2 / median
        gamma = median_heuristic_gamma_of(distances, n_rows)
    elif gamma == "scale" or (gamma is None and kernel == "poly"):
        gamma = 1.0 / mean_norm if mean_norm > 0 else 1.0
    elif gamma is None:
        typical = float(np.median(distances)) if distances.size else 0.0
        gamma = 1.0 / typical if typical > 0 else 1.0
    return {"kernel": kernel, "gamma": float(gamma), "degree": degree, "coef0": float(coef0)}
