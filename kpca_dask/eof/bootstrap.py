"""The bootstrap of every mode of a fitted model, in one read of the data.

North's rule of thumb takes the samples as independent; resampling them
gives each mode's variance and pattern a distribution instead. xeofs'
``EOFBootstrapper`` refits B times; here B replicates, each row weighted by
how often the replicate drew it, are summed in one pass over the data and
each solved with the fit's landmarks, kernel and parameters
(docs/design.md §18).
"""

from __future__ import annotations

import numbers

import dask.array as da
import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..blocks.replicate_counts import DrawnCounts
from ..coupled.coupled_model import CoupledFit
from ..engine.passes.replicates import ReplicateSpectra, replicate_pass, solve_replicates
from ..errors import InvalidInputError, InvalidParameterError
from ..exact.exact_model import ExactFit
from ..io.labelled import MODE_DIM, modes
from ..model.fitted import FittedModel
from ..model.inputs import method_input
from ..model.precomputed import PRECOMPUTED
from .bootstrap_rules import (
    REPLICATE_DIM,
    SIGNIFICANCE_RULE,
    check_levels,
    feature_space_cosines,
    intervals_apart,
    replicate_counts_of,
    result_attributes,
)
from .complex_bootstrap import hilbert_landmark_replicates
from .coupled_bootstrap import coupled_bootstrap
from .exact_bootstrap import check_replicate_memory, exact_replicates, hilbert_replicates
from .hilbert_model import HilbertFit

__all__ = ["bootstrap", "SIGNIFICANCE_RULE", "REPLICATE_DIM"]

def bootstrap(estimator, X, n_bootstraps: int = 100, *, seed: int | None = None,
              indices=None, n_modes: int | None = None, confidence: float = 0.95,
              min_congruence: float = 0.9):
    """Bootstrap every mode of a fitted :class:`~kpca_dask.KernelPCA` (or
    :class:`~kpca_dask.ExactKernelPCA`, or :class:`~kpca_dask.HilbertKernelEOF`) in one
    read of ``X``.

    Each replicate draws the n rows of ``X`` with replacement: row i is
    counted c_bi times, the counts exact multinomial and drawn from ``seed``
    by global row index, so any chunking, scheduler or number of workers
    gives the same replicates. The pass adds, for every replicate at once,
    the fit's sums weighted by those counts; each replicate is then solved
    with the fit's landmarks, kernel and parameters (docs/design.md §18).
    With a linear kernel and every sample a landmark this is xeofs'
    ``EOFBootstrapper`` (which refits B times) for the same resampled rows.

    The B replicates' m x m sums are held at once: B (m^2 + m + 1) float64
    words, reported in ``attrs["memory_bytes"]`` (800 MB for B = 100 and
    m = 1000), in every task that adds a chain of row blocks and on the
    client.

    An :class:`~kpca_dask.ExactKernelPCA` has no landmarks: its replicates
    are solved from its n x n kernel matrix, made in one read of ``X``, each
    a weighted eigenproblem of the rows it drew (about 0.63 n of them, n³
    work per replicate; 0.2 s at n = 2000 on 2 cores), and the result has no
    ``projection`` or ``offset`` (:mod:`kpca_dask.eof.exact_bootstrap`). A
    Hilbert kernel EOF fitted with ``solver="gram"`` is bootstrapped the same
    way from its Hermitian kernel matrix, one fitted with landmarks by their
    complex sums in one read (:mod:`kpca_dask.eof.complex_bootstrap`): the
    analytic signal of the whole record, its rows resampled. An
    :class:`~kpca_dask.ExtendedKernelEOF` is bootstrapped by its kernel stage
    on its embedded samples (``estimator.embedded(X)``, n - (L - 1) tau of
    them), which are resampled; with ``n_pca_modes`` the linear stage is held.

    Significance: {rule}.

    Parameters
    ----------
    estimator : KernelPCA, ExactKernelPCA, HilbertKernelEOF, ExtendedKernelEOF, KernelMCA
        or KernelCCA
        A fitted estimator; its landmarks (or its kernel matrix), kernel and
        parameters are used.
    X : array-like, dask array, DataArray, Dataset or store
        The data the estimator was fitted on (or other data of its
        features), any input its ``transform`` takes; read once. For KernelMCA and
        KernelCCA, the pair of fields ``(X, Y)``: each replicate draws pairs of samples,
        and the result is :func:`~kpca_dask.eof.coupled_bootstrap.coupled_bootstrap`'s.
    n_bootstraps : int, default=100
        B, the number of replicates (ignored with ``indices``).
    seed : int, optional
        The counts' seed (None: a fresh one, kept in ``attrs["seed"]``).
    indices : array of shape (B, n) of ints, optional
        Resampled row indices, one row per replicate, used instead of drawn
        counts (e.g. the rows xeofs' ``EOFBootstrapper`` draws).
    n_modes : int, optional
        The leading modes bootstrapped (default: every component of the fit).
    confidence : float, default=0.95
        The central share of the replicates the intervals hold.
    min_congruence : float, default=0.9
        The median congruence a significant mode needs.

    Returns
    -------
    xarray.Dataset
        Over ``n`` (replicate, 1..B) and ``mode`` (1..k): ``eigenvalues``,
        ``explained_variance``, ``explained_variance_ratio`` and
        ``congruence`` (n, mode), ``total_variance`` (n); ``projection``
        (n, landmark, mode) and ``offset`` (n, mode), each replicate's
        y = P_b^T k_m(x) - c_b signed to agree with the fit; per mode the
        intervals ``explained_variance_lower``/``_upper``,
        ``explained_variance_ratio_lower``/``_upper``, the medians
        ``explained_variance_median`` and ``congruence_median``,
        ``significant``, and the fit's ``fit_explained_variance``,
        ``fit_explained_variance_ratio`` and ``north_error``. ``attrs``:
        ``n_bootstraps``, ``seed``, ``confidence``, ``min_congruence``,
        ``rule``, ``memory_bytes``, ``n_samples``, ``n_landmarks``.

    Examples
    --------
    >>> import numpy as np, kpca_dask
    >>> X = np.random.default_rng(0).normal(size=(80, 4)) * [4.0, 2.0, 1.0, 0.5]
    >>> kpca = kpca_dask.KernelPCA(3, kernel="linear", n_landmarks=80).fit(X)
    >>> boot = kpca_dask.bootstrap(kpca, X, 20, seed=0)
    >>> boot["explained_variance"].dims, boot["significant"].values.tolist()
    (('n', 'mode'), [True, True, True])
    """
    check_is_fitted(estimator)
    if isinstance(getattr(estimator, "model_", None), CoupledFit):  # KernelMCA, KernelCCA
        return coupled_bootstrap(estimator, X, n_bootstraps, seed=seed, indices=indices,
                                 n_modes=n_modes, confidence=confidence,
                                 min_congruence=min_congruence)
    stage = getattr(estimator, "kpca_", None)
    if stage is not None:  # an extended EOF: its kernel stage, on the embedded samples
        check_is_fitted(estimator)
        return bootstrap(stage, estimator.embedded(X), n_bootstraps, seed=seed,
                         indices=indices, n_modes=n_modes, confidence=confidence,
                         min_congruence=min_congruence)
    model, k = _checked_estimator(estimator, n_modes)
    check_levels(confidence, min_congruence)
    if isinstance(model, (ExactFit, HilbertFit)):
        counts, seed = replicate_counts_of(indices, n_bootstraps, seed, model.n_samples)
        solve = (exact_replicates if isinstance(model, ExactFit)
                 else hilbert_replicates if model.solver == "gram"
                 else hilbert_landmark_replicates)
        replicates = solve(estimator, X, counts, k)
        B = replicates.traces.size
        attrs = result_attributes(B, seed, confidence, min_congruence, replicates.memory_bytes,
                            model.n_samples, replicates.n_landmarks)
        return _result(estimator, replicates.eigenvalues, replicates.ratios,
                       replicates.traces, replicates.congruence, model.n_samples, k, attrs)
    rows = method_input(estimator, model.layout, X).data
    rows = da.asarray(rows)  # the dispatch's rows, lazy already
    if rows.shape[1] != model.n_features:
        raise InvalidInputError(
            f"X has {rows.shape[1]} features, but the model was fitted on "
            f"{model.n_features}: bootstrap the data the model was fitted on.")
    n = int(rows.shape[0])
    counts, seed = replicate_counts_of(indices, n_bootstraps, seed, n)
    B = counts.n_replicates if isinstance(counts, DrawnCounts) else counts.shape[0]
    _check_memory(rows, B, len(model.landmarks))
    landmarks = np.asarray(model.landmarks)
    sums = replicate_pass(rows, landmarks, model.kernel, model.kernel_params, counts,
                          np.dtype(model.settings.dtype))
    spectra = solve_replicates(sums, landmarks, model.kernel, model.kernel_params,
                               model.settings.rcond, k, np.dtype(model.settings.dtype))
    attrs = result_attributes(B, seed, confidence, min_congruence, sums.memory_bytes, n,
                        len(landmarks))
    congruence, signs = _congruence(model, spectra, k)
    signed = {"projection": ((REPLICATE_DIM, "landmark", MODE_DIM),
                             spectra.projections * signs[:, None, :]),
              "offset": ((REPLICATE_DIM, MODE_DIM), spectra.offsets * signs)}
    return _result(estimator, spectra.eigenvalues, spectra.ratios, spectra.traces, congruence,
                   n, k, attrs, signed)


bootstrap.__doc__ = bootstrap.__doc__.replace("{rule}", SIGNIFICANCE_RULE)


def _checked_estimator(estimator, n_modes):
    """The fitted model of ``estimator`` and the number of modes, or a clear error."""
    check_is_fitted(estimator)
    model = getattr(estimator, "model_", None)
    if not isinstance(model, (FittedModel, ExactFit, HilbertFit)):
        raise InvalidParameterError(
            f"bootstrap needs a kpca_dask.KernelPCA (its landmarks), an ExactKernelPCA or a "
            f"HilbertKernelEOF (their kernel matrix); got {type(estimator).__name__}. Fit "
            "KernelPCA(n_landmarks=n) for every sample a landmark.")
    if isinstance(model, FittedModel) and model.kernel == PRECOMPUTED:
        raise InvalidParameterError(
            'bootstrap needs the data\'s rows; a kernel="precomputed" model has none. Fit '
            "the model on the data with a named kernel.")
    q = int(estimator.n_components_)
    k = q if n_modes is None else n_modes
    if not (isinstance(k, numbers.Integral) and not isinstance(k, bool) and 1 <= k <= q):
        raise InvalidParameterError(
            f"n_modes must be an int from 1 to {q} (the fit's components); got {n_modes!r}.")
    return model, int(k)


def _check_memory(rows, n_replicates: int, m: int) -> None:
    """Refuse B replicates whose sums do not fit the client, or whose pairwise merge (two
    chains' sums) does not fit a process of the pass."""
    check_replicate_memory(rows, n_replicates, m)


def _congruence(model, spectra: ReplicateSpectra, k: int) -> tuple[np.ndarray, np.ndarray]:
    """|cos| of each replicate's mode with the fit's in the kernel's feature space, and the
    sign that makes it positive: p_b^T K_mm p / (|p_b| |p|), |p|^2 = p^T K_mm p."""
    cosine = feature_space_cosines(model.landmarks, model.kernel, model.kernel_params,
                                   model.solution.projection[:, :k], spectra.projections)
    signs = np.where(cosine < 0, -1.0, 1.0)
    return np.clip(np.abs(cosine), 0.0, 1.0), signs


def _result(estimator, eigenvalues: np.ndarray, ratios: np.ndarray, traces: np.ndarray,
            congruence: np.ndarray, n: int, k: int, attrs: dict, extra: dict | None = None):
    """The bootstrap's Dataset from each replicate's k + 1 leading ``eigenvalues``, their
    ``ratios``, ``traces`` and the ``congruence`` of its k modes (B, k) with the fit's."""
    import xarray as xr

    confidence = attrs["confidence"]
    variance = eigenvalues / max(n - 1, 1)
    low, high = (1 - confidence) / 2, (1 + confidence) / 2
    lower, upper = np.quantile(variance, [low, high], axis=0)
    median_congruence = np.median(congruence, axis=0)
    significant = (intervals_apart(lower, upper, k)
                   & (median_congruence >= attrs["min_congruence"]))
    ratio_lower, ratio_upper = np.quantile(ratios[:, :k], [low, high], axis=0)
    rep, mode = (REPLICATE_DIM, MODE_DIM), (MODE_DIM,)
    data = {
        "eigenvalues": (rep, eigenvalues[:, :k]),
        "explained_variance": (rep, variance[:, :k]),
        "explained_variance_ratio": (rep, ratios[:, :k]),
        "total_variance": ((REPLICATE_DIM,), traces / max(n - 1, 1)),
        "congruence": (rep, congruence),
        **(extra or {}),
        "explained_variance_lower": (mode, lower[:k]),
        "explained_variance_upper": (mode, upper[:k]),
        "explained_variance_median": (mode, np.median(variance[:, :k], axis=0)),
        "explained_variance_ratio_lower": (mode, ratio_lower),
        "explained_variance_ratio_upper": (mode, ratio_upper),
        "congruence_median": (mode, median_congruence),
        "significant": (mode, significant),
        "fit_explained_variance": (mode, estimator.explained_variance_[:k]),
        "fit_explained_variance_ratio": (mode, estimator.explained_variance_ratio_[:k]),
        "north_error": (mode, estimator.north_errors()[:k]),
    }
    coords = {REPLICATE_DIM: np.arange(1, eigenvalues.shape[0] + 1), MODE_DIM: modes(k)}
    return xr.Dataset(data, coords=coords, attrs=attrs)
