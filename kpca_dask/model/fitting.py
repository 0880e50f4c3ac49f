"""How a :class:`~kpca_dask.model.fitted.FittedModel` is made: a fit, a re-solve, more rows.

A fit (docs/design.md §3) samples rows once for gamma, the landmarks and the
automatic m, builds K_mm and its whitening basis once, makes the one pass
over the data, and solves the small m x m problem; with
``fit_inverse_transform`` one more pass learns the pre-image map
(docs/design.md §6). Growing models (docs/design.md §7) add pass statistics
and solve again with the same K_mm: :func:`solved` and :func:`with_rows_added`.
Every function returns a new model; nothing is changed in place.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import time

import dask
import dask.array as da
import numpy as np

from .._parallel import capped_blas
from ..blocks.statistics import PassStatistics, add_statistics
from ..checkpoints.fingerprints import fit_identity
from ..checkpoints.fit_checkpoint import FitCheckpoint
from ..engine.bandwidth import gamma_sample_size
from ..engine.kernel_params import ResolvedKernel, kernel_function, resolve_kernel, with_gamma
from ..engine.passes.nystrom import compute_pass, raise_if_nonfinite
from ..engine.preimages.reconstruction import (
    embed_landmarks,
    preimage_basis,
    preimage_statistics,
    solve_preimage,
)
from ..engine.sampling import RowSampler, as_generator, independent_generators, sample_indices
from ..engine.solve.landmark_factor import reference_row
from ..engine.solve.landmark_memory import (
    landmark_cap,
    landmark_solve_mode,
    refuse_landmarks_beyond_memory,
)
from ..engine.solve.on_cluster import added_statistics, cluster_pass, is_held, solve_statistics
from ..errors import NonFiniteInputError
from ..landmarks.auto import grow_landmarks, planned_samples
from ..landmarks.strategies import Landmarks, planned_sample, select_landmarks
from .fitted import FitSettings, FittedModel, Preimage
from .kernel_matrices import check_landmark_spectrum, every_row_a_landmark
from .provenance import source_of, with_rows

__all__ = ["fit_model", "solved", "with_rows_added", "sampled_landmarks"]


def fit_model(params: dict, X: da.Array, *, feature_names: np.ndarray | None = None,
              checkpoint: str | os.PathLike | None = None, started: float | None = None,
              landmark_rows: np.ndarray | None = None) -> FittedModel:
    """The model of one fit of ``X`` with the estimator parameters ``params``.

    ``params`` are :meth:`KernelPCA.get_params <sklearn.base.BaseEstimator.get_params>`,
    already checked; ``X`` a validated dask array. See :meth:`kpca_dask.KernelPCA.fit`.
    ``landmark_rows`` are the rows of ``X`` that landmarks given as points are (a kernel
    matrix's landmark columns), for the refusal of :func:`_refuse_indefinite`.

    Examples
    --------
    >>> import dask.array as da
    >>> from kpca_dask import KernelPCA
    >>> X = da.from_array(np.random.default_rng(0).normal(size=(50, 2)), chunks=20)
    >>> params = KernelPCA(n_components=2, gamma=0.5, n_landmarks=10, random_state=0).get_params()
    >>> fit_model(params, X).n_components
    2
    """
    started = time.perf_counter() if started is None else started
    function = kernel_function(params, X.shape[1])
    rng = as_generator(params["random_state"])
    # Child streams, so the landmarks drawn from rng do not depend on whether
    # gamma or m are estimated from the data.
    bandwidth_rng, validation_rng = independent_generators(rng, 2)
    settings = FitSettings.from_params(params)
    rcond = settings.rcond
    # Refused before any data is read: m landmarks need 2.2 m^2 words (docs/design.md §11).
    if params["n_landmarks"] != "auto":
        refuse_landmarks_beyond_memory(_landmark_count(params, X.shape[0]), X)
    saved = None if checkpoint is None else FitCheckpoint.open(
        checkpoint, _identity(params, X, function))
    if saved is not None and saved.landmarks is not None:
        # Resuming: the gamma, landmarks and growth path of the first try, which
        # an unseeded sample could not reproduce.
        kernel = with_gamma(params, X.shape[1], function, saved.gamma)
        chosen, path = saved.landmarks, saved.landmark_path
    else:
        kernel, chosen, path = sampled_landmarks(params, X, function, rng, bandwidth_rng,
                                                 validation_rng, rcond)
        if saved is not None:
            saved.landmark_path = path  # stored with the landmarks
    _raise_if_landmarks_nonfinite(chosen.points, chosen.indices)
    # The reference row by panels of K_mm: K_mm itself is built and factorised
    # after the pass, in the memory the pass's sums leave (docs/design.md §11).
    reference = reference_row(chosen.points, kernel.function, kernel.params)
    stats = _pass(X, chosen, kernel, np.dtype(params["dtype"]), reference, saved)
    small = solve_statistics(stats, chosen.points, kernel.function, kernel.params, rcond,
                                params["n_components"], bool(params["remove_zero_eig"]),
                                pass_dtype=params["dtype"])
    rows = chosen.indices if landmark_rows is None else landmark_rows
    _refuse_indefinite(small.factor_method, rows, X.shape[0], chosen.points, kernel,
                       params["n_components"])
    model = FittedModel(
        kernel=kernel.function, kernel_params=kernel.params, landmarks=chosen.points,
        landmark_indices=chosen.indices, landmark_rank=small.landmark_rank,
        solution=small.solution, n_features=X.shape[1], n_samples=X.shape[0], statistics=stats,
        novelty=small.novelty, settings=settings, feature_names=feature_names,
        landmark_path=path, row_provenance=with_rows(None, source_of(X), 0, X.shape[0]))
    if params["fit_inverse_transform"]:
        model = model.replace(preimage=_fit_preimage(X, model, params, rcond))
    return model.replace(fit_seconds=time.perf_counter() - started)


def sampled_landmarks(params: dict, X: da.Array, function, rng, bandwidth_rng, validation_rng,
                      rcond: float) -> tuple[ResolvedKernel, Landmarks, list | None]:
    """The kernel with its gamma, the landmarks and their growth path (automatic m) of a fit
    of ``X``, from one read of the rows they sample.

    ``params`` are a KernelPCA's, checked; the three generators those of
    :func:`fit_model` (gamma's stream and the automatic m's are children of ``rng``).
    A coupled fit (:mod:`kpca_dask.coupled`) chooses each field's this way.
    """
    sampler = RowSampler.reading_ahead(X, _planned_samples(
        params, X, function, rng, bandwidth_rng, validation_rng))
    kernel = resolve_kernel(params, X, rng=bandwidth_rng, sampler=sampler, function=function)
    chosen, path = _choose_landmarks(params, X, kernel, rng, validation_rng, rcond, sampler)
    _raise_if_landmarks_nonfinite(chosen.points, chosen.indices)
    return kernel, chosen, path


def _refuse_indefinite(factor_method: str, rows, n: int, points, kernel: ResolvedKernel,
                       n_components) -> None:
    """With every row a landmark the fit is exact kernel PCA: refused as scikit-learn refuses a
    centred kernel matrix with significantly negative eigenvalues. Only a K_mm that was not
    positive semi-definite (factorised by its eigenvalues) can give them."""
    if factor_method == "eigen" and every_row_a_landmark(rows, n):
        check_landmark_spectrum(points, kernel.function, kernel.params, n_components)


def solved(model: FittedModel, stats: PassStatistics, *,
           n_components: int | float | None | str = "fitted") -> FittedModel:
    """``model`` with the statistics ``stats``, the small problem solved again (landmarks kept).

    The same K_mm, basis and settings (:class:`~kpca_dask.model.fitted.FitSettings`)
    as the fit's, so a re-solve repeats it exactly; ``n_components`` other than
    ``"fitted"`` asks for another number of components and becomes the model's.
    The novelty terms follow the statistics; a pre-image map was learnt by a
    pass over the rows of the old solution and cannot follow without another,
    so it is dropped, and so is a rotation of the old components.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> kpca = KernelPCA(n_components=2, gamma=0.5, n_landmarks=10, random_state=0)
    >>> model = kpca.fit(np.random.default_rng(0).normal(size=(50, 2))).model_
    >>> solved(model, model.statistics, n_components=3).n_components
    3
    """
    settings = model.settings
    if n_components != "fitted":
        settings = dataclasses.replace(settings, n_components=n_components)
    small = solve_statistics(stats, np.asarray(model.landmarks), model.kernel,
                                model.kernel_params, settings.rcond, settings.n_components,
                                settings.remove_zero_eig, pass_dtype=settings.dtype)
    return model.replace(
        solution=small.solution, landmark_rank=small.landmark_rank, statistics=stats,
        n_samples=int(stats.n_samples), novelty=small.novelty, preimage=None, rotation=None,
        settings=settings)


def with_rows_added(model: FittedModel, X: da.Array) -> PassStatistics:
    """The model's statistics plus those of one pass over the rows ``X`` (its landmarks kept).

    Examples
    --------
    >>> import dask.array as da
    >>> from kpca_dask import KernelPCA
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> model = KernelPCA(n_components=2, n_landmarks=10, random_state=0).fit(X[:30]).model_
    >>> with_rows_added(model, da.from_array(X[30:])).n_samples
    50
    """
    total = model.statistics
    batch = _checked_pass(X, model.landmarks, model.kernel, model.kernel_params,
                          np.dtype(model.settings.dtype), total.reference)
    # Into the batch's own arrays: the model's stay as they are.
    if is_held(batch) or is_held(total):
        return added_statistics(batch, total)
    return add_statistics(batch, total)


def _identity(params: dict, X: da.Array, kernel) -> dict:
    """What a checkpoint must have been made by: the data and every parameter of the fit."""
    rule = params["gamma"] if isinstance(params["gamma"], str) else None
    return fit_identity(
        X, kernel, with_gamma(params, X.shape[1], kernel, None if rule else params["gamma"]).params,
        gamma=rule, dtype=params["dtype"], landmarks=params["landmarks"],
        n_landmarks=params["n_landmarks"], random_state=params["random_state"],
        tol=params["tol"], max_landmarks=params["max_landmarks"])


def _landmark_count(params: dict, n: int) -> int:
    """m for an int ``n_landmarks``: the points given, or n_landmarks capped at n."""
    if isinstance(params["landmarks"], str) or callable(params["landmarks"]):
        return min(int(params["n_landmarks"]), n)
    return len(params["landmarks"])


def _auto_cap(params: dict, X) -> tuple[int, str]:
    """The cap on m for ``n_landmarks="auto"``, and what sets it (for the warning at the cap)."""
    cap, where = landmark_cap(X, tiles=False)  # grown here: K_mm is factorised in this process
    if params["max_landmarks"] is not None and params["max_landmarks"] <= cap:
        return int(params["max_landmarks"]), f"max_landmarks={params['max_landmarks']}"
    return cap, f"the most landmarks that fit in {where}"


#: Automatic m reads ahead the samples of every m up to this one; larger m read as they go.
READ_AHEAD_LANDMARKS = 4096


def _planned_samples(params: dict, X, kernel, rng, bandwidth_rng, validation_rng):
    """The row samples gamma and the landmarks will draw, from copies of their generators."""
    n = X.shape[0]
    samples = [sample_indices(n, gamma_sample_size(params["gamma"], kernel),
                              copy.deepcopy(bandwidth_rng))]
    if params["n_landmarks"] == "auto":
        cap = min(_auto_cap(params, X)[0], READ_AHEAD_LANDMARKS)
        return samples + planned_samples(n, params["landmarks"], rng=rng,
                                         validation_rng=validation_rng, max_landmarks=cap)
    return samples + [planned_sample(n, params["n_landmarks"], params["landmarks"], rng)]


def _choose_landmarks(params: dict, X, kernel: ResolvedKernel, rng, validation_rng, rcond,
                      sampler) -> tuple[Landmarks, list | None]:
    """The landmarks, and the growth path when m is chosen automatically."""
    if params["n_landmarks"] == "auto":
        cap, reason = _auto_cap(params, X)
        return grow_landmarks(
            X, params["landmarks"], rng=rng, validation_rng=validation_rng,
            kernel=kernel.function, params=kernel.params, tol=params["tol"],
            max_landmarks=cap, rcond=rcond, sampler=sampler, cap_reason=reason)
    chosen = select_landmarks(X, params["n_landmarks"], params["landmarks"], rng=rng,
                              kernel=kernel.function, params=kernel.params, sampler=sampler)
    return chosen, None


def _pass(X, chosen: Landmarks, kernel: ResolvedKernel, dtype, reference, saved) -> PassStatistics:
    """The one pass over X: checkpointed when asked, else a single compute."""
    if saved is not None:
        stats = saved.run_pass(X, chosen, kernel.function, kernel.params, dtype, reference)
        raise_if_nonfinite(stats)
        return stats
    return _checked_pass(X, chosen.points, kernel.function, kernel.params, dtype, reference)


def _checked_pass(X, landmarks, kernel, params: dict, dtype, reference) -> PassStatistics:
    """A pass over X, its sums left on the workers of a cluster (docs/design.md §11)."""
    mode = landmark_solve_mode(X, len(landmarks))
    if mode is not None:
        return cluster_pass(X, landmarks, kernel, params, dtype, reference, mode)
    stats = compute_pass(X, landmarks, kernel, params, dtype, reference=reference)
    raise_if_nonfinite(stats)
    return stats


def _fit_preimage(X, model: FittedModel, params: dict, rcond: float) -> Preimage:
    """The pre-image map (docs/design.md §6): one more pass, over the training rows, then a
    ridge regression with the fit's mean as its intercept (alpha given or chosen by GCV)."""
    dtype = np.dtype(params["dtype"])
    kernel, kernel_params = model.kernel, model.kernel_params
    projection, offset = model.solution.projection, model.solution.offset
    centres = embed_landmarks(model.landmarks, projection, offset, kernel, kernel_params, dtype)
    centre_basis = preimage_basis(centres, kernel, kernel_params, rcond)
    stats = preimage_statistics(X, model.landmarks, projection, offset, kernel, kernel_params,
                                dtype, centres, centre_basis)
    with capped_blas(X):
        (stats,) = dask.compute(stats)
    solution = solve_preimage(stats, centre_basis, params["alpha"])
    score = solution.score if np.isfinite(solution.score) else None  # JSON holds no inf
    return Preimage(centres, solution.coefficients, intercept=solution.intercept,
                    alpha=solution.alpha, score=score)


def _raise_if_landmarks_nonfinite(points: np.ndarray, indices) -> None:
    bad = ~np.isfinite(points).all(axis=1)
    if bad.any():
        where = (f"row {int(indices[np.flatnonzero(bad)[0]])} of X" if indices is not None
                 else f"landmark {int(np.flatnonzero(bad)[0])}")
        raise NonFiniteInputError(
            f"A landmark contains NaN or infinite values ({where}). Remove or impute "
            "non-finite values in X (or in the landmarks you passed) first.")
