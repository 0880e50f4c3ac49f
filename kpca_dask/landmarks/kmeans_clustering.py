"""k-means on an in-memory sample: k-means++ seeding and Lloyd iterations.

Used by the ``"kmeans"`` landmark strategy (Zhang, Tsang & Kwok 2008: the
Nyström error is bounded by the k-means quantisation error of the
landmarks). Plain numpy, vectorised: every distance computation is one GEMM
through :func:`kpca_dask.kernels.squared_distances`.

Seeding is exact k-means++ (Arthur & Vassilvitskii 2007) drawn in blocks: a
block of candidates is drawn i.i.d. in proportion to the squared distance
D^2 to the centres chosen so far, and candidate j is accepted with
probability D_j'^2 / D_j^2, where D_j' also counts the centres accepted
earlier in the same block. By rejection sampling every accepted centre has
the k-means++ distribution, while the O(n k p) distance updates run as one
GEMM per block instead of one matrix-vector product per centre. It is the
same device as accelerated randomly pivoted Cholesky (Epperly, Tropp &
Webber 2024), of which k-means++ is the squared-distance analogue.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from ..blocks.kernels import squared_distances
from ..blocks.sparse_rows import dense
from ..errors import InvalidParameterError

__all__ = ["kmeans_plusplus", "lloyd", "kmeans_centroids"]

#: Candidates drawn per seeding block.
SEED_BLOCK = 64
#: Rows per distance block in the Lloyd assignment (bounds memory at block x k).
ASSIGN_BLOCK = 4096


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
    n = sample.shape[0]
    if n_clusters >= n:
        return np.arange(n)
    chosen = [int(rng.integers(n))]
    closest = squared_distances(sample, sample[chosen]).ravel()
    if not np.isfinite(closest).all():
        raise InvalidParameterError(
            "Squared distances between data rows overflowed float64 (the data reach "
            f"{np.abs(sample).max():.3g}); rescale the data, e.g. standardise each feature.")
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
        accepted = _accept_candidates(sample[candidates], closest[candidates],
                                      rng.random(want))
        new = candidates[accepted]
        chosen.extend(new.tolist())
        np.minimum(closest, squared_distances(sample, sample[new]).min(axis=1), out=closest)
        closest[new] = 0.0
    return np.asarray(chosen[:n_clusters])


def _accept_candidates(points, stale, uniforms):
    """Sequential rejection step of blocked k-means++ (see the module docstring)."""
    within = squared_distances(points, points)
    current = stale.copy()
    accepted = []
    for j in range(points.shape[0]):
        if current[j] > 0 and uniforms[j] * stale[j] < current[j]:
            accepted.append(j)
            np.minimum(current, within[j], out=current)
    return np.asarray(accepted, dtype=np.intp)


def _assign(sample, centroids):
    """Nearest centroid of every row and the squared distance to it."""
    labels = np.empty(sample.shape[0], dtype=np.intp)
    distances = np.empty(sample.shape[0])
    for start in range(0, sample.shape[0], ASSIGN_BLOCK):
        d2 = squared_distances(sample[start : start + ASSIGN_BLOCK], centroids)
        block_labels = np.argmin(d2, axis=1)
        labels[start : start + ASSIGN_BLOCK] = block_labels
        distances[start : start + ASSIGN_BLOCK] = d2[np.arange(d2.shape[0]), block_labels]
    return labels, distances


def _cluster_means(sample, labels, n_clusters):
    """Mean of the rows of each cluster (NaN rows for empty clusters) and the counts."""
    order = np.argsort(labels, kind="stable")
    sorted_labels = labels[order]
    counts = np.bincount(labels, minlength=n_clusters)
    starts = np.searchsorted(sorted_labels, np.arange(n_clusters))
    means = np.full((n_clusters, sample.shape[1]), np.nan)
    occupied = counts > 0
    if sparse.issparse(sample):
        # Sums of sparse rows by cluster: one (clusters x rows) indicator product.
        members = sparse.csr_matrix((np.ones(labels.size), (labels, np.arange(labels.size))),
                                    shape=(n_clusters, labels.size))
        sums = dense(members @ sample)[occupied]
    else:
        sums = np.add.reduceat(sample[order], starts[occupied], axis=0)
    means[occupied] = sums / counts[occupied, None]
    return means, counts


def lloyd(sample: np.ndarray, centroids: np.ndarray, n_iter: int) -> np.ndarray:
    """Up to ``n_iter`` Lloyd iterations from ``centroids``; stops early once converged.

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
    centroids = np.array(centroids, dtype=np.float64)
    previous = None
    for _ in range(n_iter):
        labels, distances = _assign(sample, centroids)
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
    sample = (sample.tocsr().astype(np.float64) if sparse.issparse(sample)
              else np.asarray(sample, dtype=np.float64))
    seeds = kmeans_plusplus(sample, n_clusters, rng=rng)
    return lloyd(sample, dense(sample[seeds]), n_iter)
