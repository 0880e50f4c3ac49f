"""The embedding of rows by an exact model, a function of the fitted model alone.

y(x) = Λ_q^−½ A_qᵀ k̃(x), k̃ the kernel vector of x against the training rows,
centred with the fit's column means and grand mean (docs/design.md §1). The
estimator's ``transform``, ``patterns`` and :func:`kpca_dask.rotate` all take it
from here, from :class:`~kpca_dask.exact.exact_model.ExactFit`, never from the
estimator's own state.
"""

from __future__ import annotations

import warnings
from typing import Callable

import dask.array as da
import numpy as np
from dask.array.core import PerformanceWarning

from ..blocks.kernels import kernel_diagonal, pairwise_kernel
from ..engine.exact.gram import cross_kernel_by_panels, gram_hold_bytes, panel_bytes
from ..engine.exact.runs import Held, chained_runs, run_rows
from ..model.inputs import in_memory_input, lazy_or_none
from ..model.kernel_matrices import new_point_kernel_rows
from ..model.precomputed import PRECOMPUTED
from ..validation import check_n_features
from .exact_model import ExactFit

__all__ = ["embedding", "training_embedding", "transform_rows", "kernel_rows", "projected",
           "reconstruction_errors", "by_runs"]

_NAME = "ExactKernelPCA"


def training_embedding(fit: ExactFit) -> np.ndarray:
    """The embedding of the training rows, A_q Λ_q^½ (zero columns for zero eigenvalues):
    what projecting them gives, K̃ A_q Λ_q^−½, without the n x n product.

    Examples
    --------
    >>> from kpca_dask import ExactKernelPCA
    >>> X = np.random.default_rng(0).normal(size=(30, 3))
    >>> model = ExactKernelPCA(2, kernel="linear").fit(X)
    >>> bool(np.allclose(training_embedding(model.model_), model.transform(X)))
    True
    """
    return np.asarray(fit.eigenvectors) * np.sqrt(fit.eigenvalues)


def kernel_rows(fit: ExactFit, X) -> tuple[np.ndarray, np.ndarray]:
    """k(X, X_fit) and k(x, x) of new rows in memory; lazy training rows are read once
    more, by panels."""
    check_n_features(X, fit.n_features, _NAME)
    if fit.lazy:
        return cross_kernel_by_panels(X, fit.rows, fit.kernel, fit.kernel_params)
    Kx = np.asarray(pairwise_kernel(X, fit.rows, fit.kernel, **fit.kernel_params),
                    dtype=np.float64)
    return Kx, np.asarray(kernel_diagonal(X, fit.kernel, **fit.kernel_params),
                          dtype=np.float64)


def projected(fit: ExactFit, Kx: np.ndarray) -> np.ndarray:
    """The embedding of kernel rows ``Kx`` (new rows x training rows), centred as the fit's
    kernel matrix was."""
    Kx = Kx - Kx.mean(axis=1, keepdims=True) - fit.column_means[None, :] + fit.grand_mean
    vectors, values = np.asarray(fit.eigenvectors), np.asarray(fit.eigenvalues)
    nonzero = values > 0
    scaled = np.zeros_like(vectors)
    scaled[:, nonzero] = vectors[:, nonzero] / np.sqrt(values[nonzero])
    return Kx @ scaled


def transform_rows(fit: ExactFit, X) -> np.ndarray | da.Array:
    """The embedding of new rows (kernel rows for ``kernel="precomputed"``): numpy for rows
    in memory; lazy for lazy rows against lazy training rows (:func:`by_runs`)."""
    if fit.kernel == PRECOMPUTED:
        return projected(fit, new_point_kernel_rows(X, fit.n_samples))
    lazy = lazy_or_none(X)
    if lazy is not None and fit.lazy:
        return by_runs(fit, lazy, _embedding_of_rows, fit.n_components)
    return _embedding_of_rows(fit, X)


def reconstruction_errors(fit: ExactFit, X) -> np.ndarray | da.Array:
    """Squared feature-space distances of new rows to the principal subspace (docs/design.md
    §6), numpy or lazy as :func:`transform_rows` gives their embedding."""
    lazy = lazy_or_none(X)
    if lazy is not None and fit.lazy:
        return by_runs(fit, lazy, _errors_of_rows, None)
    return _errors_of_rows(fit, X)


def _embedding_of_rows(fit: ExactFit, X) -> np.ndarray:
    return projected(fit, kernel_rows(fit, X)[0])


def _errors_of_rows(fit: ExactFit, X) -> np.ndarray:
    Kx, diagonal = kernel_rows(fit, X)
    distance = diagonal - 2.0 * Kx.mean(axis=1) + fit.grand_mean
    Y = projected(fit, Kx)
    return distance - np.sum(Y * Y, axis=1)


def by_runs(fit: ExactFit, X: da.Array, of_rows: Callable, columns: int | None, *,
            rows_per_run: int | None = None) -> da.Array:
    """``of_rows(fit, rows)`` of lazy rows ``X`` against lazy training rows, lazily.

    ``X`` is cut into runs of rows as long as the row way of a Gram pass holds
    (:func:`~kpca_dask.engine.exact.gram.gram_hold_bytes`, at most an eighth of
    a worker's memory), and each run is a task that gives ``of_rows`` of its
    rows as a transform of rows in memory does: their kernel rows in one read
    of the training rows, the way that reads them fewer times
    (:func:`kernel_rows`). Inside the task both
    are read by dask's synchronous scheduler, and the runs go one after
    another, so that one run's working memory is held at a time. Few new rows
    (a run) read the training rows once; a task per block of ``X``, each
    projecting against the whole training set, would read them once per block.
    ``rows_per_run`` sets the rows of a run instead.

    Examples
    --------
    >>> from kpca_dask import ExactKernelPCA
    >>> X = da.from_array(np.random.default_rng(0).normal(size=(40, 3)), chunks=10)
    >>> fit = ExactKernelPCA(2, kernel="rbf", gamma=0.5).fit(X).model_
    >>> Y = by_runs(fit, X[:9], _embedding_of_rows, 2, rows_per_run=4)
    >>> Y.chunks, bool(np.allclose(Y, _embedding_of_rows(fit, X[:9].compute())))
    (((9,), (2,)), True)
    """
    check_n_features(X, fit.n_features, _NAME)
    rows = rows_per_run or run_rows(X, min(gram_hold_bytes(X), panel_bytes(X)))
    return chained_runs(X, rows, of_rows, columns, fit)


def embedding(fit: ExactFit, X: da.Array) -> da.Array:
    """The embedding of the weighted rows ``X``, lazily: one block of rows at a time (for
    ``patterns`` through :func:`~kpca_dask.eof.patterns.patterns_of`, whence the warning's
    stack level, and for :func:`kpca_dask.rotate`).

    The training rows given again take their known embedding; a model by panels (a
    matrix-free fit or a loaded model) its panels; lazy training rows are read by runs
    of ``X`` (:func:`by_runs`); otherwise each task projects whole rows against the
    training rows in memory, so rows chunked along the features are joined here, with a
    warning.
    """
    if X.name == fit.training_key:  # A_q is numpy after a dense solve, dask after matrix-free
        return da.asarray(training_embedding(fit)).rechunk((X.chunks[0], -1))
    if fit.by_panels is not None:
        return fit.by_panels.transform(X)
    if fit.lazy:
        return by_runs(fit, X, _embedding_of_rows, fit.n_components)
    if X.numblocks[1] > 1:
        warnings.warn(
            f"X has {X.numblocks[1]} chunks along the features; ExactKernelPCA projects "
            "whole rows, one block of rows per task, so they are joined into whole rows "
            "(KernelPCA keeps them).", PerformanceWarning, stacklevel=4)
        X = X.rechunk({1: -1})
    return X.map_blocks(transform_block, held=Held(fit),
                        chunks=(X.chunks[0], (fit.n_components,)), dtype=np.float64,
                        meta=np.empty((0, 0), np.float64))


def transform_block(block: np.ndarray, held: Held) -> np.ndarray:
    """The embedding of one block of rows by a fitted exact model (a task of
    :func:`embedding`)."""
    fit = held.value
    rows = in_memory_input(None, block, keep_lazy=False, precomputed=fit.kernel == PRECOMPUTED)
    return transform_rows(fit, rows.data)
