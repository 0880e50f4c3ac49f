"""Data-driven kernel bandwidths: ``gamma="median"`` and ``gamma="scale"``.

Both are estimated on a seeded sample of rows drawn by global row index
(:func:`kpca_dask.engine.sampling.sample_rows`), so the value depends on the seed
only, never on the chunking, and nothing n-sized is computed.

Median heuristic (docs/design.md §3). With h the median squared distance between
pairs of points, the bandwidth c is set by c^2 = h / 2 and the kernel is::

    k(x, x') = exp(-|x - x'|^2 / c^2) = exp(-gamma |x - x'|^2),  gamma = 2 / h,

so a pair at the median distance has k = e^{-2}. Beware that conventions
differ: some texts (and scikit-learn examples) use the median *distance* as
the length scale sigma in ``exp(-|x - x'|^2 / (2 sigma^2))``, which is
gamma = 1 / (2 h), four times smaller than here. The pairs are all distinct
pairs within a sample of ``MEDIAN_SAMPLE_ROWS`` rows.

``"scale"`` is scikit-learn's SVC rule, gamma = 1 / (p Var X) with Var X the
variance of all entries of X; scikit-learn takes it over the whole of X, here
it is estimated on ``SCALE_SAMPLE_ROWS`` sampled rows.
"""

from __future__ import annotations

from typing import Callable

import dask
import dask.array as da
import numpy as np
from scipy.spatial.distance import pdist

from .._compat import meta_of
from ..blocks.distance_kernels import squared_distances
from ..blocks.feature_sums import SQUARED, chunk_sums
from ..blocks.sparse_rows import is_sparse
from ..errors import InvalidParameterError
from .sampling import RowSampler, raise_if_rows_nonfinite, rows_by_runs, sample_indices

__all__ = ["BANDWIDTH_RULES", "resolve_gamma", "median_heuristic_gamma", "scale_gamma",
           "gamma_sample_size", "median_gamma_by_chunks", "median_heuristic_gamma_of",
           "scale_gamma_by_chunks"]

#: Rows whose pairwise distances give the median: ~500 000 distinct pairs.
MEDIAN_SAMPLE_ROWS = 1000
#: Rows whose entries give the variance for ``gamma="scale"``.
SCALE_SAMPLE_ROWS = 10_000

#: Names accepted for ``gamma`` besides a number or None.
BANDWIDTH_RULES = ("median", "scale")

#: Kernels whose exponent is gamma times a distance, and which distance.
_MEDIAN_DISTANCE = {"rbf": "sqeuclidean", "matern": "sqeuclidean", "laplacian": "cityblock"}
_GAMMA_KERNELS = ("rbf", "matern", "laplacian", "polynomial", "sigmoid")


def pair_distances(sample: np.ndarray, metric: str = "sqeuclidean") -> np.ndarray:
    """Distances of all distinct pairs (i < j) of rows of ``sample``.

    Examples
    --------
    >>> pair_distances(np.array([[0.0], [1.0], [3.0]]))
    array([1., 9., 4.])
    """
    if metric == "sqeuclidean":  # one GEMM, faster than pdist for wide rows
        upper = np.triu_indices(sample.shape[0], k=1)
        return squared_distances(sample, sample)[upper]
    if is_sparse(sample):
        from sklearn.metrics.pairwise import manhattan_distances  # sparse x sparse L1

        return manhattan_distances(sample, sample)[np.triu_indices(sample.shape[0], k=1)]
    return pdist(sample, metric)


def median_heuristic_gamma(sample: np.ndarray, metric: str = "sqeuclidean") -> float:
    """gamma = 2 / h with h the median distance of the distinct pairs in ``sample``.

    ``metric="sqeuclidean"`` is the rbf (and Matérn) rule; ``"cityblock"`` the
    laplacian one, whose exponent is gamma times the L1 distance. Either way a
    pair at the median distance has kernel value e^{-2}.

    Examples
    --------
    >>> median_heuristic_gamma(np.array([[0.0], [1.0], [3.0]]))  # h = median(1, 4, 9)
    0.5
    """
    if sample.shape[0] < 2:
        raise InvalidParameterError(
            "gamma='median' needs at least 2 rows of X to measure a distance; pass a number.")
    return median_heuristic_gamma_of(pair_distances(sample, metric), sample.shape[0])


def median_heuristic_gamma_of(distances: np.ndarray, n_rows: int) -> float:
    """gamma = 2 / h from the distinct pairs' distances of ``n_rows`` sampled rows.

    Examples
    --------
    >>> median_heuristic_gamma_of(np.array([1.0, 9.0, 4.0]), 3)
    0.5
    """
    if n_rows < 2:
        raise InvalidParameterError(
            "gamma='median' needs at least 2 rows of X to measure a distance; pass a number.")
    h = float(np.median(distances))
    if not h > 0:
        raise InvalidParameterError(
            "gamma='median' found a median pairwise distance of 0: more than half of the "
            "sampled pairs of rows are identical. Remove duplicate rows or pass a number "
            "(or gamma='scale').")
    return 2.0 / h


def scale_gamma(sample: np.ndarray) -> float:
    """gamma = 1 / (p Var X) on ``sample``; 1.0 for constant data, as in scikit-learn.

    Examples
    --------
    >>> scale_gamma(np.array([[0.0, 2.0], [2.0, 0.0]]))  # Var = 1, p = 2
    0.5
    """
    if is_sparse(sample):  # E[x^2] - E[x]^2 over every entry, zeros included
        size = sample.shape[0] * sample.shape[1]
        mean = float(sample.sum(dtype=np.float64)) / size
        variance = max(float(sample.multiply(sample).sum(dtype=np.float64)) / size - mean**2, 0.0)
    else:
        variance = float(sample.var(dtype=np.float64))
    return 1.0 / (sample.shape[1] * variance) if variance > 0 else 1.0


def resolve_gamma(
    gamma, X: da.Array, kernel: str | Callable, *, rng: np.random.Generator,
    sampler: RowSampler | None = None,
) -> float | None:
    """Turn ``gamma="median"`` or ``"scale"`` into a number; pass anything else through.

    Only a sample of rows is read. Kernels without gamma (linear, cosine, a
    callable) resolve to None without reading anything.

    Parameters
    ----------
    gamma : float, {"median", "scale"} or None
    X : dask array of shape (n_samples, n_features)
    kernel : str or callable
        The canonical kernel name (aliases resolved) or a callable.
    rng : numpy Generator
        Draws the sampled rows.
    sampler : RowSampler, optional
        Reads them (and may hold them already); by default one over ``X``.

    Examples
    --------
    >>> X = da.from_array(np.arange(8.0).reshape(4, 2), chunks=2)
    >>> resolve_gamma("median", X, "rbf", rng=np.random.default_rng(0))  # h = 20
    0.1
    >>> resolve_gamma(0.3, X, "rbf", rng=np.random.default_rng(0))
    0.3
    """
    if not isinstance(gamma, str):
        return gamma
    if gamma not in BANDWIDTH_RULES:
        raise InvalidParameterError(
            f"gamma={gamma!r} is not a rule; use a positive number, None (1 / n_features), "
            "'median' (median heuristic) or 'scale' (1 / (n_features * X.var())).")
    if callable(kernel) or kernel not in _GAMMA_KERNELS:
        return None
    sampler = sampler or RowSampler(X)
    if gamma == "median":
        if kernel not in _MEDIAN_DISTANCE:
            raise InvalidParameterError(
                f"gamma='median' sets the scale of a distance, which the {kernel!r} kernel "
                f"does not use; it applies to {', '.join(sorted(_MEDIAN_DISTANCE))}. Pass a "
                "number or gamma='scale' instead.")
        size = gamma_sample_size(gamma, kernel)
        if X.numblocks[1] > 1 and not is_sparse(meta_of(X)) and not sampler.holds(size, rng):
            # Wide rows: the sample's distances summed over feature chunks, never its rows.
            return median_gamma_by_chunks(X, sample_indices(X.shape[0], size, rng),
                                          _MEDIAN_DISTANCE[kernel])
        sample = _finite_sample(sampler, size, rng)
        return median_heuristic_gamma(sample, _MEDIAN_DISTANCE[kernel])
    size = gamma_sample_size(gamma, kernel)
    if X.numblocks[1] > 1 and not is_sparse(meta_of(X)) and not sampler.holds(size, rng):
        return scale_gamma_by_chunks(X, sample_indices(X.shape[0], size, rng))
    return scale_gamma(_finite_sample(sampler, size, rng))


def scale_gamma_by_chunks(X: da.Array, indices: np.ndarray) -> float:
    """:func:`scale_gamma` of the rows ``X[indices]``, by a dask reduction (wide rows are
    never held whole, docs/design.md §12).

    Examples
    --------
    >>> X = da.from_array(np.array([[0.0, 2.0], [2.0, 0.0]]), chunks=(1, 1))
    >>> scale_gamma_by_chunks(X, np.arange(2))
    0.5
    """
    indices = np.sort(np.asarray(indices, np.int64))
    rows = rows_by_runs(X, indices)
    variance, finite = dask.compute(rows.var(dtype=np.float64), da.isfinite(rows).all(axis=1))
    if not finite.all():
        raise_if_rows_nonfinite(np.where(finite, 0.0, np.nan)[:, None], indices,
                                "estimating gamma")
    return 1.0 / (X.shape[1] * float(variance)) if variance > 0 else 1.0


def _pair_terms(block, metric):
    """Terms of a sample's pairwise distances over one feature chunk: (s, 1, s + 2)."""
    block = np.asarray(block, dtype=np.float64)
    # Distances do not change with a shift: each chunk is centred on its own mean.
    centre = block.mean(axis=0) if metric == SQUARED else None
    return chunk_sums(block, block, centre, metric, np.float64)


def median_gamma_by_chunks(X: da.Array, indices: np.ndarray, metric: str = "sqeuclidean"
                           ) -> float:
    """:func:`median_heuristic_gamma` of the rows ``X[indices]``, summed over feature chunks.

    One task per feature chunk holds the sample's columns of that chunk and
    makes the s x s sums of their distances (docs/design.md §12); the rows
    themselves are never held whole.

    Examples
    --------
    >>> X = da.from_array(np.arange(8.0).reshape(4, 2), chunks=(2, 1))
    >>> median_gamma_by_chunks(X, np.arange(4))  # h = 20, as for whole rows
    0.1
    """
    indices = np.sort(np.asarray(indices, np.int64))
    rows = rows_by_runs(X, indices).rechunk({0: -1})
    s = indices.size
    terms = rows.map_blocks(_pair_terms, metric, new_axis=2, dtype=np.float64,
                            chunks=((s,), (1,) * rows.numblocks[1], (s + 2,)),
                            meta=np.empty((0, 0, 0), np.float64))
    total = terms.sum(axis=1).compute()
    bad = total[:, s + 1] > 0
    if bad.any():
        raise_if_rows_nonfinite(np.where(bad, np.nan, 0.0)[:, None], indices,
                                "estimating gamma")
    if metric == SQUARED:
        norms = total[:, s]
        distances = np.maximum(norms[:, None] + norms[None, :] - 2.0 * total[:, :s], 0.0)
    else:
        distances = total[:, :s]
    return median_heuristic_gamma_of(distances[np.triu_indices(s, k=1)], s)


def gamma_sample_size(gamma, kernel) -> int:
    """Rows :func:`resolve_gamma` samples for this ``gamma`` and kernel (0: none).

    :func:`resolve_gamma` draws exactly this many, so a fit can plan the draw.

    Examples
    --------
    >>> gamma_sample_size("median", "rbf"), gamma_sample_size(0.5, "rbf")
    (1000, 0)
    """
    if (not isinstance(gamma, str) or callable(kernel) or kernel not in _GAMMA_KERNELS
            or gamma not in BANDWIDTH_RULES):
        return 0
    if gamma == "median":
        return MEDIAN_SAMPLE_ROWS if kernel in _MEDIAN_DISTANCE else 0
    return SCALE_SAMPLE_ROWS


def _finite_sample(sampler: RowSampler, size: int, rng: np.random.Generator) -> np.ndarray:
    rows, _ = sampler.sample(size, rng, purpose="estimating gamma")
    return rows.astype(np.float64, copy=False)
