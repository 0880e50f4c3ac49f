"""How often each row is drawn in each bootstrap replicate, for any range of rows.

A replicate draws n rows of n with replacement: its counts are one
Multinomial(n; 1/n, ..., 1/n) vector (docs/design.md §18). They are drawn
down a fixed binary tree over the global row indices [0, n): a node of rows
[lo, hi) holding N draws gives Binomial(N, (mid - lo) / (hi - lo)) of them to
its left half [lo, mid) and the rest to its right; a leaf of at most
:data:`LEAF_ROWS` rows spreads its N draws uniformly over its rows. Every
node's draws come from its own generator, keyed by (seed, replicate, lo, hi)
through numpy's ``SeedSequence`` (its documented way to independent streams),
so a block of rows walks only the nodes over its own rows and gets the same
counts however the rows are chunked and wherever its task runs. The result is
exact: splitting a multinomial by binomials and a uniform leaf is the
multinomial itself, and each replicate's counts sum to n.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LEAF_ROWS", "DrawnCounts", "FoldCounts", "replicate_counts", "counts_of_indices"]

#: Rows of a leaf of the tree: its draws are spread over them in one call. Small
#: enough that a block reads few rows outside its own, large enough that a
#: replicate of 10^6 rows costs ~500 generators (25 us each) in all.
LEAF_ROWS = 4096


def replicate_counts(seed: int, replicate: int, n_samples: int, start: int, stop: int,
                     leaf_rows: int = LEAF_ROWS) -> np.ndarray:
    """Counts of rows ``start..stop-1`` in ``replicate`` of n rows drawn with replacement.

    Examples
    --------
    >>> whole = replicate_counts(7, 0, 10, 0, 10, leaf_rows=2)
    >>> int(whole.sum())
    10
    >>> parts = [replicate_counts(7, 0, 10, a, b, leaf_rows=2) for a, b in [(0, 3), (3, 10)]]
    >>> bool((np.concatenate(parts) == whole).all())
    True
    """
    out = np.zeros(stop - start, dtype=np.int64)
    # Depth-first walk from the root; a node is (lo, hi, draws).
    todo = [(0, n_samples, n_samples)]
    while todo:
        lo, hi, draws = todo.pop()
        if hi <= start or lo >= stop or draws == 0:
            continue
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(replicate, lo, hi)))
        if hi - lo <= leaf_rows:
            counts = np.bincount(rng.integers(0, hi - lo, draws), minlength=hi - lo)
            a, b = max(lo, start), min(hi, stop)
            out[a - start:b - start] = counts[a - lo:b - lo]
            continue
        mid = (lo + hi) // 2
        left = int(rng.binomial(draws, (mid - lo) / (hi - lo)))
        todo.append((mid, hi, draws - left))
        todo.append((lo, mid, left))
    return out


@dataclass(frozen=True)
class DrawnCounts:
    """The counts of ``n_replicates`` replicates of ``n_samples`` rows drawn from ``seed``.

    Small and picklable: a task over rows [start, stop) draws its own counts.

    Examples
    --------
    >>> DrawnCounts(seed=1, n_replicates=3, n_samples=5).block(0, 5).sum(axis=1).tolist()
    [5, 5, 5]
    """

    seed: int
    n_replicates: int
    n_samples: int
    leaf_rows: int = LEAF_ROWS

    def block(self, start: int, stop: int) -> np.ndarray:
        """The counts of rows ``start..stop-1``, one row per replicate: (B, stop - start)."""
        return np.stack([replicate_counts(self.seed, b, self.n_samples, start, stop,
                                          self.leaf_rows) for b in range(self.n_replicates)])


@dataclass(frozen=True)
class FoldCounts:
    """``n_replicates`` contiguous folds of ``n_samples`` rows as 0/1 counts: fold f counts
    rows [f n / K, (f + 1) n / K) once, so "replicate" f's sums are the fold's own. Contiguous
    folds keep neighbouring samples of a series together (a held-out fold is not its
    training folds' neighbours interleaved). Same interface as :class:`DrawnCounts`.

    Examples
    --------
    >>> FoldCounts(n_replicates=3, n_samples=6).block(1, 5).tolist()
    [[1, 0, 0, 0], [0, 1, 1, 0], [0, 0, 0, 1]]
    """

    n_replicates: int
    n_samples: int

    def block(self, start: int, stop: int) -> np.ndarray:
        """The 0/1 counts of rows ``start..stop-1`` in each fold: (K, stop - start)."""
        fold = np.arange(start, stop) * self.n_replicates // max(self.n_samples, 1)
        return (fold[None, :] == np.arange(self.n_replicates)[:, None]).astype(np.int64)


def counts_of_indices(indices: np.ndarray, n_samples: int) -> np.ndarray:
    """Counts (B, n) of resampled row ``indices`` (B, n): how often each row was taken.

    Examples
    --------
    >>> counts_of_indices(np.array([[0, 0, 2]]), 3).tolist()
    [[2, 0, 1]]
    """
    return np.stack([np.bincount(row, minlength=n_samples) for row in indices]).astype(np.int64)
