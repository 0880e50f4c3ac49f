"""The bootstrap of coupled modes (kernel MCA and CCA) in one read of both fields.

Replicate b draws the n samples with replacement, a sample being the pair (x_i, y_i): the
coupled pass adds, for every replicate at once, its cross sums and each field's sums
weighted by how often it drew each sample
(:func:`kpca_dask.engine.passes.coupled.compute_coupled_replicates`), and each replicate is
solved with the fit's landmarks, kernels and parameters (docs/design.md §18, §20). A pair of
modes is significant by the rule of every bootstrap
(:data:`~kpca_dask.eof.bootstrap_rules.SIGNIFICANCE_RULE`), read with its singular value for
the variance and the lower of its two fields' congruences.
"""

from __future__ import annotations

import numbers

import dask.array as da
import numpy as np
import xarray as xr

from ..blocks.replicate_counts import DrawnCounts
from ..coupled.coupled_model import FIELDS, CoupledFit, field_rows
from ..engine.passes.coupled import compute_coupled_replicates, field_kernel
from ..engine.solve.coupled import solve_coupled
from ..engine.solve.landmark_factor import factor_landmarks, reference_row
from ..errors import InvalidInputError, InvalidParameterError
from ..io.labelled import MODE_DIM, modes
from ..model.parameters import rcond_for
from .bootstrap_rules import (
    REPLICATE_DIM,
    check_levels,
    feature_space_cosines,
    intervals_apart,
    replicate_counts_of,
    result_attributes,
)
from .exact_bootstrap import check_replicate_memory

__all__ = ["coupled_bootstrap"]


def _pair(fields) -> tuple:
    if not (isinstance(fields, (tuple, list)) and len(fields) == 2):
        raise InvalidInputError(
            "A coupled model is bootstrapped on both of its fields: pass them as a pair, "
            "kpca_dask.bootstrap(model, (X, Y), ...).")
    return fields[0], fields[1]


def _modes(model: CoupledFit, n_modes) -> int:
    q = model.n_modes
    k = q if n_modes is None else n_modes
    if not (isinstance(k, numbers.Integral) and not isinstance(k, bool) and 1 <= k <= q):
        raise InvalidParameterError(
            f"n_modes must be an int from 1 to {q} (the fit's pairs); got {n_modes!r}.")
    return int(k)


def coupled_bootstrap(estimator, fields, n_bootstraps: int = 100, *, seed=None, indices=None,
                      n_modes: int | None = None, confidence: float = 0.95,
                      min_congruence: float = 0.9) -> xr.Dataset:
    """Bootstrap every pair of modes of a fitted KernelMCA or KernelCCA; see
    :func:`kpca_dask.bootstrap`, which calls it with ``fields`` the pair (X, Y).

    Returns an ``xarray.Dataset`` over ``n`` (replicate) and ``mode``: ``singular_values``
    (MCA: covariances; CCA: canonical correlations), ``squared_covariance_fraction`` (MCA),
    ``congruence`` (the lower of the two fields'); per mode their ``_lower``, ``_upper``
    and ``_median``, ``congruence_median``, ``significant`` and the fit's
    ``fit_singular_values``.
    """
    model: CoupledFit = estimator.model_
    k = _modes(model, n_modes)
    check_levels(confidence, min_congruence)
    rows = [da.asarray(field_rows(model, which, data).data)
            for which, data in enumerate(_pair(fields))]
    for which, (data, field) in enumerate(zip(rows, model.fields)):
        if data.shape[1] != field.n_features:
            raise InvalidInputError(
                f"{FIELDS[which]} has {data.shape[1]} features, but the model was fitted on "
                f"{field.n_features}: bootstrap the fields the model was fitted on.")
    if not np.isfinite([rows[0].shape[0], rows[1].shape[0]]).all():
        raise InvalidInputError(
            "The fields' row counts are unknown (a dask array of unknown chunks): the "
            "replicates draw samples by their global index. Call X.compute_chunk_sizes() "
            "(and Y's) first.")
    if rows[0].shape[0] != rows[1].shape[0]:
        raise InvalidInputError(
            f"X has {rows[0].shape[0]} samples and Y has {rows[1].shape[0]}: the replicates "
            "draw pairs of samples; pass the same samples of both fields.")
    n = int(rows[0].shape[0])
    counts, seed = replicate_counts_of(indices, n_bootstraps, seed, n)
    B = counts.n_replicates if isinstance(counts, DrawnCounts) else counts.shape[0]
    within = model.method == "cca"
    sizes = [field.n_landmarks for field in model.fields]
    words = sizes[0] * sizes[1] + (sizes[0] ** 2 + sizes[1] ** 2 if within else 0)
    check_replicate_memory(rows[0], B, int(np.ceil(np.sqrt(words))))
    dtype = np.dtype(model.dtype)
    sides = [field_kernel(data, field.landmarks, field.kernel, field.kernel_params,
                          reference_row(field.landmarks, field.kernel, field.kernel_params),
                          dtype) for data, field in zip(rows, model.fields)]
    sums = compute_coupled_replicates(rows[0], rows[1], *sides, counts, dtype, within=within)
    rcond = float(rcond_for(estimator.rcond, model.dtype))
    factors = [factor_landmarks(f.landmarks, f.kernel, f.kernel_params, rcond)
               for f in model.fields]
    values = np.zeros((B, k + 1))
    totals = np.zeros(B)
    P = [np.zeros((B, m, k)) for m in sizes]
    for b in range(B):
        solution = solve_coupled(sums.replicate(b), *factors, method=model.method,
                                 n_modes=k + 1, n_pca_modes=model.n_pca_modes,
                                 epsilon=model.epsilon, warn=False, dtype=dtype)
        got = solution.singular_values.size
        values[b, :got], totals[b] = solution.singular_values, solution.total_squared
        P[0][b, :, :min(got, k)] = solution.projection_x[:, :k]
        P[1][b, :, :min(got, k)] = solution.projection_y[:, :k]
    cosines = [feature_space_cosines(field.landmarks, field.kernel, field.kernel_params,
                                     model.projection(which)[0][:, :k], P[which])
               for which, field in enumerate(model.fields)]
    # A pair's two columns flip together: the sign is X's, the congruence the lower one.
    congruence = np.clip(np.minimum(np.abs(cosines[0]), np.abs(cosines[1])), 0.0, 1.0)
    attrs = result_attributes(B, seed, confidence, min_congruence, 8 * B * words, n,
                              max(sizes))
    attrs["method"] = model.method
    return _result(model, values, totals, congruence, k, attrs)


def _result(model: CoupledFit, values, totals, congruence, k: int, attrs: dict) -> xr.Dataset:
    low, high = (1 - attrs["confidence"]) / 2, (1 + attrs["confidence"]) / 2
    lower, upper = np.quantile(values, [low, high], axis=0)
    median_congruence = np.median(congruence, axis=0)
    significant = intervals_apart(lower, upper, k) & (median_congruence
                                                      >= attrs["min_congruence"])
    rep, mode = (REPLICATE_DIM, MODE_DIM), (MODE_DIM,)
    data = {
        "singular_values": (rep, values[:, :k]),
        "congruence": (rep, congruence),
        "singular_values_lower": (mode, lower[:k]),
        "singular_values_upper": (mode, upper[:k]),
        "singular_values_median": (mode, np.median(values[:, :k], axis=0)),
        "congruence_median": (mode, median_congruence),
        "significant": (mode, significant),
        "fit_singular_values": (mode, model.solution.singular_values[:k]),
    }
    if model.method == "mca":
        with np.errstate(divide="ignore", invalid="ignore"):
            fractions = np.where(totals[:, None] > 0, values[:, :k] ** 2 / totals[:, None], 0.0)
        data["squared_covariance_fraction"] = (rep, fractions)
        data["squared_covariance_fraction_lower"] = (mode, np.quantile(fractions, low, axis=0))
        data["squared_covariance_fraction_upper"] = (mode, np.quantile(fractions, high, axis=0))
        data["fit_squared_covariance_fraction"] = (
            mode, model.solution.singular_values[:k] ** 2 / model.solution.total_squared)
    coords = {REPLICATE_DIM: np.arange(1, values.shape[0] + 1), MODE_DIM: modes(k)}
    return xr.Dataset(data, coords=coords, attrs=attrs)
