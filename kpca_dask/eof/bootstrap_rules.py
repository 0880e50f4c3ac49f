"""What every bootstrap shares: the replicates' counts, the levels, the significance rule.

:func:`kpca_dask.bootstrap` of every estimator (docs/design.md §18) and of coupled fields
(:mod:`kpca_dask.eof.coupled_bootstrap`, §20) draw their replicates, check their levels,
name their result's attributes and decide which modes are significant here, once.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..blocks.replicate_counts import DrawnCounts, counts_of_indices
from ..engine.solve.landmark_factor import landmark_kernel_panels
from ..errors import InvalidParameterError

__all__ = ["REPLICATE_DIM", "SIGNIFICANCE_RULE", "replicate_counts_of", "check_levels",
           "result_attributes", "intervals_apart", "feature_space_cosines"]

#: The replicates' dimension, as xeofs' ``EOFBootstrapper`` names it.
REPLICATE_DIM = "n"

#: How ``significant`` is decided (also in the result's ``attrs["rule"]``).
SIGNIFICANCE_RULE = (
    "a mode is significant when its explained-variance interval (the replicates' central "
    "`confidence` quantiles) overlaps neither the previous mode's nor the next mode's, and "
    "the median congruence of its replicates' patterns with the fit's is at least "
    "`min_congruence`")


def feature_space_cosines(landmarks, kernel, params: dict, P_fit: np.ndarray,
                          P: np.ndarray) -> np.ndarray:
    """The cosine of each replicate's mode (B, m, k) with the fit's (m, k) in the kernel's
    feature space, y = P^T k_m(x): p_b^T K_mm p / (‖p_b‖ ‖p‖), ‖p‖^2 = p^T K_mm p (0 where
    either is 0).

    Examples
    --------
    >>> Z = np.eye(2)
    >>> feature_space_cosines(Z, "linear", {}, np.eye(2), -np.eye(2)[None]).tolist()
    [[-1.0, -1.0]]
    """
    landmarks = np.asarray(landmarks)
    K = np.empty((len(landmarks), len(landmarks)))
    landmark_kernel_panels(landmarks, kernel, params, out=K)
    KP = K @ P_fit
    inner = np.einsum("bmk,mk->bk", P, KP)
    own = np.einsum("bmk,bmk->bk", P, np.einsum("ml,blk->bmk", K, P))
    norms = np.sqrt(np.clip(own, 0, None)) * np.sqrt(
        np.clip(np.einsum("mk,mk->k", P_fit, KP), 0, None))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(norms > 0, inner / norms, 0.0)


def intervals_apart(lower: np.ndarray, upper: np.ndarray, k: int) -> np.ndarray:
    """Whether each of the k leading modes' interval overlaps neither the previous mode's
    nor the next's (``lower``, ``upper`` of k + 1 modes, descending).

    Examples
    --------
    >>> intervals_apart(np.array([5.0, 3.0, 2.5]), np.array([6.0, 4.0, 3.5]), 2).tolist()
    [True, False]
    """
    apart_next = lower[:k] > upper[1:k + 1]
    apart_previous = np.concatenate([[True], upper[1:k] < lower[:k - 1]])
    return apart_next & apart_previous


def result_attributes(n_replicates, seed, confidence, min_congruence, memory_bytes, n_samples,
                n_landmarks) -> dict:
    """The result's ``attrs`` (see :func:`bootstrap`)."""
    return {"n_bootstraps": int(n_replicates), "seed": seed, "confidence": float(confidence),
            "min_congruence": float(min_congruence), "rule": SIGNIFICANCE_RULE,
            "memory_bytes": int(memory_bytes), "n_samples": int(n_samples),
            "n_landmarks": int(n_landmarks)}


def check_levels(confidence, min_congruence) -> None:
    if not (isinstance(confidence, numbers.Real) and 0 < confidence < 1):
        raise InvalidParameterError(
            f"confidence must be a number between 0 and 1 (e.g. 0.95); got {confidence!r}.")
    if not (isinstance(min_congruence, numbers.Real) and 0 <= min_congruence <= 1):
        raise InvalidParameterError(
            f"min_congruence must be a number from 0 to 1 (e.g. 0.9); got {min_congruence!r}.")


def replicate_counts_of(indices, n_bootstraps, seed, n: int):
    """The replicates' counts: drawn from ``seed``, or those of ``indices``; and the seed."""
    if indices is not None:
        indices = np.asarray(indices)
        if indices.ndim != 2 or indices.shape[1] != n or indices.shape[0] < 1:
            raise InvalidParameterError(
                f"indices must have shape (B, n) = (B, {n}): one row of {n} resampled row "
                f"indices per replicate; got shape {indices.shape}.")
        if not np.issubdtype(indices.dtype, np.integer):
            raise InvalidParameterError(
                f"indices must be integers (row numbers); got dtype {indices.dtype}.")
        if indices.min() < 0 or indices.max() >= n:
            raise InvalidParameterError(
                f"indices must be row numbers from 0 to {n - 1}; got values from "
                f"{indices.min()} to {indices.max()}.")
        return counts_of_indices(indices, n), None
    if not (isinstance(n_bootstraps, numbers.Integral) and not isinstance(n_bootstraps, bool)
            and n_bootstraps >= 1):
        raise InvalidParameterError(
            f"n_bootstraps must be an int >= 1 (e.g. 100); got {n_bootstraps!r}.")
    if seed is None:
        seed = int(np.random.SeedSequence().generate_state(1, np.uint64)[0])
    if not (isinstance(seed, numbers.Integral) and not isinstance(seed, bool) and seed >= 0):
        raise InvalidParameterError(f"seed must be an int >= 0 or None; got {seed!r}.")
    return DrawnCounts(int(seed), int(n_bootstraps), n), int(seed)
