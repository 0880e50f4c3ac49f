"""k-means on an in-memory sample: k-means++ seeding and Lloyd iterations.

Used by the ``"kmeans"`` landmark strategy (Zhang, Tsang & Kwok 2008: the
Nyström error is bounded by the k-means quantisation error of the
landmarks). Plain numpy, vectorised: every distance computation is one GEMM
(the nearest-centre search below); a sparse sample stays sparse.

Seeding is exact k-means++ (Arthur & Vassilvitskii 2007) drawn in blocks: a
block of candidates is drawn i.i.d. in proportion to the squared distance
D^2 to the centres chosen so far, and candidate j is accepted with
probability D_j'^2 / D_j^2, where D_j' also counts the centres accepted
earlier in the same block. By rejection sampling every accepted centre has
the k-means++ distribution, while the O(n k p) distance updates run as one
GEMM per block instead of one matrix-vector product per centre. It is the
same device as accelerated randomly pivoted Cholesky (Epperly, Tropp &
Webber 2024), of which k-means++ is the squared-distance analogue.

Cost: the nearest centre of x is ``argmax_j (x.c_j - |c_j|^2 / 2)``, one GEMM
and one elementwise pass over a block that stays in cache, in float32 after
moving the origin to the sample mean (distances, hence the clustering, do not
change; their rounding is ~1e-7 of the spread of the sample, not of its
distance to the origin). Centroids are means taken in float64.
"""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import Executor, ThreadPoolExecutor

import numpy as np
from scipy import sparse

from .._parallel import single_blas_thread
from ..blocks.sparse_rows import dense, row_norms_squared
from ..errors import InvalidParameterError

__all__ = ["kmeans_plusplus", "lloyd", "kmeans_centroids"]

#: Candidates drawn per seeding block.
SEED_BLOCK = 64
#: Bytes of one block of scores in the nearest-centre search: it stays in cache.
ASSIGN_BLOCK_BYTES = 2**20


class _Points:
    """The sample as the distance searches use it: centred, scaled, float32, with row norms.

    The scale is a power of two near the largest centred coordinate, so float32
    cannot overflow and no digit is lost to it; every distance is in units of
    it squared, which changes neither a nearest centre nor a k-means++ weight.
    """

    def __init__(self, sample):
        self.original = sample  # the rows as given, for the centroid means
        if sparse.issparse(sample):
            # Centring would densify a sparse sample: its distances come from the
            # products and norms of the rows as they are, in float64.
            self.values = sample.tocsr().astype(np.float64)
            self.centre, self.scale = np.zeros(sample.shape[1]), 1.0
            self.norms = row_norms_squared(self.values)
            _raise_if_overflowed(self.norms, self.values.data)
            return
        sample = np.asarray(sample, dtype=np.float64)
        self.centre = sample.mean(axis=0) if sample.shape[0] else np.zeros(sample.shape[1])
        centred = sample - self.centre
        norms = np.einsum("ij,ij->i", centred, centred)
        _raise_if_overflowed(norms, sample)
        largest = float(np.abs(centred).max()) if centred.size else 0.0
        self.scale = 2.0 ** np.ceil(np.log2(largest)) if largest > 0 else 1.0
        self.values = (centred / self.scale).astype(np.float32)
        self.norms = norms / self.scale**2

    def centred(self, points: np.ndarray) -> np.ndarray:
        """Points of the original space in the coordinates of ``values``."""
        return (dense(points).astype(np.float64) - self.centre) / self.scale

    def rows(self, indices) -> np.ndarray:
        """Rows of ``values`` as a dense array (few rows: seeds, candidates)."""
        return dense(self.values[indices])


def _raise_if_overflowed(norms: np.ndarray, values) -> None:
    if not np.isfinite(norms).all():
        raise InvalidParameterError(
            "Squared distances between data rows overflowed float64 (the data reach "
            f"{np.abs(values).max():.3g}); rescale the data, e.g. standardise each feature.")


@contextlib.contextmanager
def _search_threads():
    """A pool of threads, one BLAS thread each, for every nearest-centre search of one
    clustering: a pool started for each of its 20-odd searches cost 20-30 ms of a 0.18 s
    k-means (m = 1000 from 20 000 rows, 2 cores)."""
    with single_blas_thread(), ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        yield pool


def _nearest(points: _Points, centres: np.ndarray,
             pool: Executor) -> tuple[np.ndarray, np.ndarray]:
    """Index of the nearest of ``centres`` (centred coordinates) and the squared distance to it.

    ``argmin_j |x - c_j|^2 = argmax_j (x.c_j - |c_j|^2 / 2)``, ties to the lowest j.
    """
    centres = np.asarray(centres, dtype=points.values.dtype)
    half_norms = 0.5 * np.einsum("ij,ij->i", centres, centres)
    n = points.values.shape[0]
    labels = np.empty(n, dtype=np.intp)
    distances = np.empty(n)
    step = max(16, ASSIGN_BLOCK_BYTES // (4 * max(centres.shape[0], 1)))

    def nearest_in(start):
        scores = points.values[start : start + step] @ centres.T
        scores -= half_norms
        block_labels = np.argmax(scores, axis=1)
        labels[start : start + step] = block_labels
        distances[start : start + step] = (
            points.norms[start : start + step]
            - 2.0 * scores[np.arange(scores.shape[0]), block_labels])

    # Each row's result is its own, so threads over row blocks change nothing.
    list(pool.map(nearest_in, range(0, n, step)))
    np.maximum(distances, 0.0, out=distances)
    return labels, distances


def kmeans_plusplus(sample: np.ndarray, n_clusters: int, *, rng: np.random.Generator,
                    block_size: int = SEED_BLOCK) -> np.ndarray:
    """Row indices of ``n_clusters`` k-means++ seeds in ``sample``.

    When fewer than ``n_clusters`` distinct rows exist, the missing seeds are
    drawn uniformly among the rows not yet chosen (they duplicate a centre).

    Examples
    --------
    >>> sample = np.array([[0.0], [0.1], [10.0], [10.1]])
    >>> seeds = kmeans_plusplus(sample, 2, rng=np.random.default_rng(0))
    >>> np.sort(sample[seeds, 0].round())  # one seed in each group
    array([ 0., 10.])
    """
    points = sample if isinstance(sample, _Points) else _Points(sample)
    with _search_threads() as pool:
        return _seeds(points, n_clusters, rng, block_size, pool)


def _seeds(points: _Points, n_clusters: int, rng: np.random.Generator, block_size: int,
           pool: Executor) -> np.ndarray:
    """:func:`kmeans_plusplus` on the prepared sample, its searches on ``pool``."""
    n = points.values.shape[0]
    if n_clusters >= n:
        return np.arange(n)
    chosen = [int(rng.integers(n))]
    closest = _nearest(points, points.rows(chosen), pool)[1]
    closest[chosen] = 0.0
    while len(chosen) < n_clusters:
        cumulative = np.cumsum(closest)
        total = cumulative[-1]
        if not total > 0:  # every row coincides with a centre
            rest = np.setdiff1d(np.arange(n), chosen)
            chosen.extend(rng.choice(rest, n_clusters - len(chosen), replace=False).tolist())
            break
        want = min(block_size, n_clusters - len(chosen))
        candidates = np.searchsorted(cumulative, rng.random(want) * total, side="right")
        candidates = np.minimum(candidates, n - 1)
        accepted = _accept_candidates(points.rows(candidates), closest[candidates],
                                      rng.random(want))
        new = candidates[accepted]
        chosen.extend(new.tolist())
        np.minimum(closest, _nearest(points, points.rows(new), pool)[1], out=closest)
        closest[new] = 0.0
    return np.asarray(chosen[:n_clusters])


def _accept_candidates(points, stale, uniforms):
    """Sequential rejection step of blocked k-means++ (see the module docstring)."""
    points = points.astype(np.float64)
    norms = np.einsum("ij,ij->i", points, points)
    within = np.maximum(norms[:, None] + norms[None, :] - 2.0 * (points @ points.T), 0.0)
    current = stale.copy()
    accepted = []
    for j in range(points.shape[0]):
        if current[j] > 0 and uniforms[j] * stale[j] < current[j]:
            accepted.append(j)
            np.minimum(current, within[j], out=current)
    return np.asarray(accepted, dtype=np.intp)


def _cluster_means(sample, labels, n_clusters):
    """Mean of the rows of each cluster (NaN rows for empty clusters) and the counts."""
    counts = np.bincount(labels, minlength=n_clusters)
    # Sums by cluster as one (clusters x rows) indicator product, dense or sparse
    # sample alike: 0.6 ms for 20 000 x 32 rows in 1000 clusters, against 6 ms
    # for sorting the rows by label and adding up runs.
    members = sparse.csr_matrix((np.ones(labels.size), (labels, np.arange(labels.size))),
                                shape=(n_clusters, labels.size))
    occupied = counts > 0
    means = np.full((n_clusters, sample.shape[1]), np.nan)
    means[occupied] = dense(members @ sample)[occupied] / counts[occupied, None]
    return means, counts


def lloyd(sample: np.ndarray, centroids: np.ndarray, n_iter: int) -> np.ndarray:
    """Up to ``n_iter`` Lloyd iterations from ``centroids``; stops early once converged.

    ``sample`` may also be the centred sample that :func:`kmeans_centroids`
    prepared for the seeding, so it is not centred twice.

    An empty cluster is re-seeded at the row farthest from its centroid (the
    largest current squared distance, lowest index on ties), as scikit-learn
    does: deterministic and it lowers the quantisation error.

    Examples
    --------
    >>> sample = np.array([[0.0], [1.0], [10.0], [12.0]])
    >>> lloyd(sample, np.array([[0.0], [10.0]]), n_iter=5)
    array([[ 0.5],
           [11. ]])
    """
    points = sample if isinstance(sample, _Points) else _Points(_as_float64(sample))
    with _search_threads() as pool:
        return _lloyd(points, centroids, n_iter, pool)


def _lloyd(points: _Points, centroids: np.ndarray, n_iter: int, pool: Executor) -> np.ndarray:
    """:func:`lloyd` on the prepared sample, its searches on ``pool``."""
    sample = points.original
    centroids = np.array(centroids, dtype=np.float64)
    previous = None
    for _ in range(n_iter):
        labels, distances = _nearest(points, points.centred(centroids), pool)
        if previous is not None and np.array_equal(labels, previous):
            break
        means, counts = _cluster_means(sample, labels, centroids.shape[0])
        empty = np.flatnonzero(counts == 0)
        if empty.size:
            farthest = np.argsort(-distances, kind="stable")[: empty.size]
            means[empty] = dense(sample[farthest])
            labels[farthest] = empty
        centroids = means
        previous = labels
    return centroids


def kmeans_centroids(sample: np.ndarray, n_clusters: int, *, rng: np.random.Generator,
                     n_iter: int = 5) -> np.ndarray:
    """k-means++ seeds on ``sample`` refined by ``n_iter`` Lloyd iterations.

    Examples
    --------
    >>> sample = np.array([[0.0], [1.0], [10.0], [12.0]])
    >>> np.sort(kmeans_centroids(sample, 2, rng=np.random.default_rng(0)), axis=0)
    array([[ 0.5],
           [11. ]])
    """
    # A sparse sample stays sparse (distances from products and norms); the
    # centroids are dense, n_clusters x p.
    points = _Points(_as_float64(sample))  # centred once, for the seeding and Lloyd
    with _search_threads() as pool:
        seeds = _seeds(points, n_clusters, rng, SEED_BLOCK, pool)
        return _lloyd(points, dense(points.original[seeds]), n_iter, pool)


def _as_float64(sample):
    return (sample.tocsr().astype(np.float64) if sparse.issparse(sample)
            else np.asarray(sample, dtype=np.float64))
