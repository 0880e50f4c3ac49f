"""Kernel MCA and kernel CCA of two fields that share their samples (docs/design.md §20).

Both estimators take each field's kernel parameters as a kernel PCA does, one
value for both fields or a pair ``(for X, for Y)``, make one pass over the two
fields and hold one immutable :class:`~kpca_dask.coupled.coupled_model.CoupledFit`.
Their outputs are pairs: the scores of X and of Y, the maps of X and of Y.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd
from scipy import special
from sklearn.utils.validation import check_is_fitted

from .._parallel import computed
from ..coupled.coupled_model import FIELDS, CoupledFit, field_rows, fit_coupled
from ..eof.patterns import patterns_of
from ..errors import InvalidInputError, InvalidParameterError
from ..io.labelled import label_embedding
from ..model.inputs import check_same_samples, fit_input
from ..model.outputs import one_sample_of
from ..model.parameters import check_params
from .base import FittedModelBase
from .kernel_pca import KernelPCA

__all__ = ["KernelMCA", "KernelCCA", "FIELD_PARAMETERS"]

#: The parameters each field has its own of: one value for both, or a pair (X's, Y's).
FIELD_PARAMETERS = ("kernel", "gamma", "degree", "coef0", "kernel_params", "n_landmarks",
                    "landmarks", "weights")

#: The parameters both fields share.
_SHARED = ("dtype", "rcond", "sample_dim")


def _per_field(name: str, value: Any) -> tuple[Any, Any]:
    """``value`` for X and for Y: a tuple of two is a pair, anything else (a list of several
    fields' weights, an array of landmark points) is both fields'."""
    if isinstance(value, tuple):
        if len(value) != 2:
            raise InvalidParameterError(
                f"{name} is a tuple of {len(value)} values; a tuple is a pair (for X, for Y): "
                f"give one value for both fields, or {name}=(value_for_X, value_for_Y).")
        return value[0], value[1]
    return value, value


class _CoupledEstimator(FittedModelBase):
    """What KernelMCA and KernelCCA share: the fit of two fields, their scores and maps."""

    _method: ClassVar[str]
    _model_file = ("..storage.coupled_files", "save_coupled")

    #: The fitted model; absent before a fit.
    model_: CoupledFit

    def field_params(self) -> tuple[dict, dict]:
        """Each field's parameters, as a :class:`~kpca_dask.KernelPCA` of that field would
        have them, checked (an invalid one raises
        :class:`~kpca_dask.errors.InvalidParameterError`).

        Examples
        --------
        >>> x, y = KernelMCA(kernel=("rbf", "linear"), n_landmarks=50).field_params()
        >>> x["kernel"], y["kernel"], y["n_landmarks"]
        ('rbf', 'linear', 50)
        """
        params = self.get_params(deep=False)
        pairs = {name: _per_field(name, params[name]) for name in FIELD_PARAMETERS}
        fields = []
        for which in range(2):
            given = {name: pair[which] for name, pair in pairs.items()}
            given.update({name: params[name] for name in _SHARED})
            if given["kernel"] == "precomputed":
                raise InvalidParameterError(
                    'kernel="precomputed" is not taken by a coupled fit: its kernels are '
                    "made from each field's samples; give each field's data and kernel name.")
            field = KernelPCA(**given).get_params(deep=False)
            check_params(field)
            fields.append(field)
        return fields[0], fields[1]

    def _check_common(self) -> None:
        n_modes = self.n_modes
        if isinstance(n_modes, bool) or not isinstance(n_modes, (int, np.integer)) or n_modes < 1:
            raise InvalidParameterError(
                f"n_modes must be a positive int (the pairs of modes to keep); got {n_modes!r}.")

    def fit(self, X, Y, y=None) -> "_CoupledEstimator":
        """Fit the coupled modes of the fields ``X`` and ``Y`` with one pass over both.

        Parameters
        ----------
        X, Y : array-like, dask array, xarray.DataArray or Zarr path/URL
            The two fields, shape (n_samples, n_features_X) and (n_samples, n_features_Y):
            the same samples, in the same order (for DataArrays, the same sample
            coordinate).
        y : ignored

        Returns
        -------
        self
        """
        started = time.perf_counter()
        self._check_common()
        extra = self._check_method()
        params = self.field_params()
        given = [fit_input(data, sample_dim=p["sample_dim"], weights=p["weights"], what=name)
                 for data, p, name in zip((X, Y), params, FIELDS)]
        check_same_samples(X, Y, given)
        model = fit_coupled(
            params, tuple(g.data for g in given), method=self._method, n_modes=self.n_modes,
            random_state=self.random_state, layouts=tuple(g.layout for g in given),
            feature_names=tuple(g.feature_names for g in given), **extra)
        self.model_ = model.replace(fit_seconds=time.perf_counter() - started)
        return self

    def _check_method(self) -> dict:
        return {}

    def fit_transform(self, X, Y, y=None):
        """Fit, then the scores of both fields' training samples (a second, lazy pass)."""
        return self.fit(X, Y).transform(X, Y)

    # -- outputs -----------------------------------------------------------------------

    def _rows(self, which: int, data, *, weighted: bool = True):
        return field_rows(self.model_, which, data, weighted=weighted)

    def _scores(self, which: int, data):
        rows = self._rows(which, data)
        scores = self.model_.scores(which, rows.data)
        if not rows.is_lazy:
            scores = computed(scores)
        if rows.like is None:
            return scores
        field = self.model_.fields[which]
        attrs = {"field": FIELDS[which], "kernel": str(field.kernel), **field.kernel_params,
                 "method": self._method}
        return one_sample_of(label_embedding(scores, rows.like, attrs), rows)

    def transform(self, X=None, Y=None):
        """The scores of new samples of either field or both (xeofs' ``transform``).

        Lazy for dask, Zarr and dask-backed input (one kernel block and a small product
        per row block), in memory for in-memory input; labelled over ``mode`` (from 1)
        for DataArrays. Returns the scores of the one field given, or a tuple
        ``(scores of X, scores of Y)`` when both are.
        """
        check_is_fitted(self)
        if X is None and Y is None:
            raise InvalidInputError(
                "transform needs samples of X, of Y or of both: transform(X=..., Y=...).")
        out = [None if data is None else self._scores(i, data) for i, data in enumerate((X, Y))]
        return tuple(out) if X is not None and Y is not None else next(
            o for o in out if o is not None)

    def _maps(self, which: int, data, scores, kind: str, variances=None):
        rows = self._rows(which, data, weighted=False)
        field = self.model_.fields[which]

        def embedding(weighted):  # the scores, cut as the field's rows are
            return scores.rechunk({0: weighted.chunks[0]})

        return patterns_of(rows, kind, layout=field.layout, embedding=embedding,
                           variances=variances)

    def _pair_scores(self, X, Y):
        rows = [self._rows(i, data).data for i, data in enumerate((X, Y))]
        n = [r.shape[0] for r in rows]
        if not (np.isfinite(n).all() and n[0] == n[1]):
            raise InvalidInputError(
                f"X has {n[0]} samples and Y has {n[1]}: the maps pair sample i of X with "
                "sample i of Y; pass the same samples of both fields (with known row counts: "
                "X.compute_chunk_sizes() for a dask array of unknown chunks).")
        return [self.model_.scores(i, r) for i, r in enumerate(rows)]

    def homogeneous_patterns(self, X, Y, kind: Literal["correlation", "covariance"]
                             = "correlation", *, pvalues: bool = False):
        """Each field's maps against its own scores: X with the scores of X, Y with Y's
        (xeofs' homogeneous patterns).

        ``kind="correlation"`` (Pearson, per feature) or ``"covariance"`` (with the scores
        at unit variance, in the field's units). Lazy in, lazy out: the maps of X and of Y
        computed together read each field once for these maps (the heterogeneous ones need
        the other field's scores, so computed apart they read both fields). Returns
        ``(maps of X, maps of Y)``, each (mode, features) or laid out on the field's own
        dimensions; with ``pvalues=True`` (correlations only), ``((maps of X, maps of Y),
        (p-values of X, p-values of Y))`` as xeofs returns them: two-sided, for no
        correlation, of the n samples given taken as independent (scipy's ``pearsonr``),
        not corrected for the many features tested.
        """
        check_is_fitted(self)
        _check_pattern_kind(kind, pvalues)
        a, b = self._pair_scores(X, Y)
        return self._with_pvalues((self._maps(0, X, a, kind), self._maps(1, Y, b, kind)),
                                  pvalues, a.shape[0])

    def heterogeneous_patterns(self, X, Y, kind: Literal["correlation", "covariance"]
                               = "correlation", *, pvalues: bool = False):
        """Each field's maps against the other field's scores: X with the scores of Y, Y
        with X's (xeofs' heterogeneous patterns). See :meth:`homogeneous_patterns`."""
        check_is_fitted(self)
        _check_pattern_kind(kind, pvalues)
        a, b = self._pair_scores(X, Y)
        return self._with_pvalues((self._maps(0, X, b, kind), self._maps(1, Y, a, kind)),
                                  pvalues, a.shape[0])

    @staticmethod
    def _with_pvalues(maps: tuple, pvalues: bool, n: int):
        """The maps, and with ``pvalues`` their p-values for the ``n`` samples given."""
        if not pvalues:
            return maps
        return maps, tuple(correlation_pvalues(m, int(n)) for m in maps)

    # -- the spectrum ------------------------------------------------------------------

    @property
    def n_samples_fit_(self) -> int:
        check_is_fitted(self)
        return self.model_.n_samples

    @property
    def singular_values_(self) -> np.ndarray:
        """The singular values of the pairs of modes (q,), descending."""
        check_is_fitted(self)
        return self.model_.solution.singular_values.copy()

    @property
    def n_landmarks_(self) -> tuple[int, int]:
        check_is_fitted(self)
        return tuple(field.n_landmarks for field in self.model_.fields)


def _check_pattern_kind(kind: str, pvalues: bool = False) -> None:
    if kind not in ("correlation", "covariance"):
        raise InvalidParameterError(
            f"kind must be 'correlation' or 'covariance'; got {kind!r}.")
    if pvalues and kind != "correlation":
        raise InvalidParameterError(
            "pvalues=True tests correlations: ask for kind='correlation'.")


def correlation_pvalues(r, n: int):
    """Two-sided p-values of Pearson correlations ``r`` of ``n`` samples, for no correlation
    (scipy's ``pearsonr``, and xeofs'): 2 I_{(1 - |r|)/2}(n/2 - 1, n/2 - 1). Elementwise:
    a DataArray, a dask array (lazily) or numpy in, the same out.

    Examples
    --------
    >>> from scipy import stats
    >>> r = stats.pearsonr([1.0, 2.0, 3.0, 5.0], [1.0, 3.0, 2.0, 4.0])
    >>> bool(np.isclose(correlation_pvalues(np.array(r.statistic), 4), r.pvalue))
    True
    """
    a = n / 2 - 1
    return 2 * special.betainc(a, a, (1 - abs(r)) / 2)


class KernelMCA(_CoupledEstimator):
    """Kernel maximum covariance analysis of two fields, in one pass over both.

    Each field is mapped to its Nyström features (its own kernel and landmarks);
    the pairs of modes are the singular vectors of the features' cross-covariance
    (docs/design.md §20). With ``kernel="linear"`` and every sample a landmark the
    result is linear MCA (xeofs' ``xeofs.cross.MCA`` with ``use_pca=False``).

    Parameters
    ----------
    n_modes : int, default=2
        The pairs of modes to keep, at most as many as the features' cross-covariance has
        (``singular_values_`` holds those found).
    kernel, gamma, degree, coef0, kernel_params, n_landmarks, landmarks, weights
        Each field's, as :class:`~kpca_dask.KernelPCA` takes them: one value for both
        fields, or a tuple ``(for X, for Y)`` (a list is one value: several fields' weights,
        or landmark points).
    dtype : {"float64", "float32"}, default="float64"
        The kernel blocks' type (the sums are float64).
    rcond : float, default=None
        The landmark cut-off (KernelPCA's).
    random_state : int, Generator or None
        Seeds the landmarks (and gamma's sample) of both fields, each from its own stream.
    sample_dim : str, default=None
        The sample dimension of DataArray fields.

    Attributes
    ----------
    model_ : CoupledFit
    singular_values_ : ndarray (n_modes,)
        The covariances of the pairs of scores.
    squared_covariance_fraction_ : ndarray (n_modes,)
        s_k^2 / sum_j s_j^2 over every singular value.

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_dask import KernelMCA
    >>> rng = np.random.default_rng(0)
    >>> t = rng.normal(size=(200, 1))
    >>> X = np.hstack([t, t**2]) + 0.1 * rng.normal(size=(200, 2))
    >>> Y = np.hstack([t**2, -t]) + 0.1 * rng.normal(size=(200, 2))
    >>> mca = KernelMCA(2, kernel="linear", n_landmarks=200).fit(X, Y)
    >>> a, b = mca.transform(X, Y)
    >>> a.shape, round(float(mca.squared_covariance_fraction_.sum()), 6)
    ((200, 2), 1.0)
    """

    _method = "mca"

    def __init__(self, n_modes: int = 2, *, kernel="rbf", gamma=None, degree=3, coef0=1.0,
                 kernel_params=None, n_landmarks=1000, landmarks="kmeans", weights=None,
                 dtype="float64", rcond=None, random_state=None, sample_dim=None):
        self.n_modes = n_modes
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.weights = weights
        self.dtype = dtype
        self.rcond = rcond
        self.random_state = random_state
        self.sample_dim = sample_dim

    @property
    def squared_covariance_fraction_(self) -> np.ndarray:
        """Each pair's share of the total squared covariance, s_k^2 / sum_j s_j^2."""
        check_is_fitted(self)
        solution = self.model_.solution
        return solution.singular_values**2 / solution.total_squared

    def components(self, X, Y):
        """The singular vectors in each field's features: cov(x, b_k) / s_k for X and
        cov(y, a_k) / s_k for Y over the weighted features (xeofs' ``components()``, to
        rounding, with a linear kernel; for any kernel, the regression of one field on the
        other field's scores, scaled by the pair's covariance). One lazy pass."""
        check_is_fitted(self)
        a, b = self._pair_scores(X, Y)
        s = self.model_.solution.singular_values
        return self._maps(0, X, b, "eof", s), self._maps(1, Y, a, "eof", s)

    def spectrum(self) -> pd.DataFrame:
        """Per pair of modes (from 1): singular value and squared covariance fraction."""
        return pd.DataFrame({
            "singular_value": self.singular_values_,
            "squared_covariance_fraction": self.squared_covariance_fraction_,
        }, index=pd.RangeIndex(1, len(self.singular_values_) + 1, name="mode"))


class KernelCCA(_CoupledEstimator):
    """Kernel canonical correlation analysis of two fields, in one pass over both.

    Each field's Nyström features are cut to their leading ``n_pca_modes`` kernel
    PCs (as xeofs' PCA pre-truncation) and whitened, optionally regularised by
    ``epsilon``; the canonical correlations are the singular values of the
    whitened cross-covariance (docs/design.md §20). With ``kernel="linear"`` and
    every sample a landmark the result is linear CCA on d PCs of each field
    (xeofs' ``xeofs.cross.CCA``, whose correlations and scores carry a factor
    n/(n - 1) and sqrt(n/(n - 1)): it whitens with 1/n and correlates with 1/(n - 1)).

    Parameters
    ----------
    n_modes : int, default=2
    n_pca_modes : int, float, None or a pair, default=0.999
        Each field's leading kernel PCs kept before the whitening: an int, a share of the
        variance of the field's Nyström features (of its kernel's variance when every
        sample is a landmark), or None for every positive one.
    epsilon : float or "auto", default=0.0
        Ridge on each field's kept PCs, relative to their mean variance:
        (Lambda_d + epsilon mean(Lambda_d))^{-1/2}. 0 is plain CCA on the kept PCs.
        ``"auto"`` chooses it among 0, 0.001, 0.01, 0.1, 1 and 10 by the leading pair's
        correlation on held-out samples: five contiguous folds, their sums added apart in the
        fit's one pass, each fold's correlation measured with the pair found on the other
        four (``held_out_correlations_``; docs/design.md §20).
    kernel, gamma, ..., sample_dim
        As :class:`KernelMCA`.

    Attributes
    ----------
    canonical_correlations_ : ndarray (n_modes,)
        The correlations of the pairs of canonical variates (their scores: of unit variance
        at epsilon = 0, smaller with a ridge).
    n_pca_modes_ : tuple of int
        The PCs kept per field.
    epsilon_ : float
        The ridge used (the one chosen, for ``epsilon="auto"``).

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_dask import KernelCCA
    >>> rng = np.random.default_rng(0)
    >>> t = rng.normal(size=(300, 1))
    >>> X = np.hstack([t, rng.normal(size=(300, 2))])
    >>> Y = np.hstack([rng.normal(size=(300, 2)), t + 0.5 * rng.normal(size=(300, 1))])
    >>> cca = KernelCCA(1, kernel="linear", n_landmarks=300, n_pca_modes=None).fit(X, Y)
    >>> round(float(cca.canonical_correlations_[0]), 2)  # 1 / sqrt(1.25) = 0.894
    0.89
    """

    _method = "cca"

    def __init__(self, n_modes: int = 2, *, n_pca_modes=0.999, epsilon: float = 0.0,
                 kernel="rbf", gamma=None, degree=3, coef0=1.0, kernel_params=None,
                 n_landmarks=1000, landmarks="kmeans", weights=None, dtype="float64",
                 rcond=None, random_state=None, sample_dim=None):
        self.n_modes = n_modes
        self.n_pca_modes = n_pca_modes
        self.epsilon = epsilon
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.weights = weights
        self.dtype = dtype
        self.rcond = rcond
        self.random_state = random_state
        self.sample_dim = sample_dim

    def _check_method(self) -> dict:
        pair = _per_field("n_pca_modes", self.n_pca_modes)
        for value in pair:
            whole = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
            share = isinstance(value, float) and 0 < value <= 1
            if not (value is None or (whole and value >= 1) or share):
                raise InvalidParameterError(
                    "n_pca_modes must be a positive int (PCs kept), a float in (0, 1] (the "
                    f"share of the field's feature variance kept) or None (all); got {value!r}.")
        epsilon = self.epsilon
        if epsilon == "auto":
            return {"n_pca_modes": pair, "epsilon": "auto"}
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not (
                np.isfinite(epsilon) and epsilon >= 0):
            raise InvalidParameterError(
                f"epsilon must be a finite float >= 0 (the ridge on each field's PCs, "
                f"relative to their mean variance) or 'auto' (chosen on held-out folds); "
                f"got {epsilon!r}.")
        return {"n_pca_modes": pair, "epsilon": float(epsilon)}

    @property
    def canonical_correlations_(self) -> np.ndarray:
        """The correlations of the pairs of canonical variates (with epsilon > 0, of the
        regularised problem), descending."""
        return self.singular_values_

    @property
    def epsilon_(self) -> float:
        """The ridge the fit used: ``epsilon``, or the one ``epsilon="auto"`` chose."""
        check_is_fitted(self)
        return self.model_.epsilon

    @property
    def held_out_correlations_(self) -> pd.Series | None:
        """With ``epsilon="auto"``: each ridge tried and its mean held-out correlation of the
        leading pair over the folds (None otherwise)."""
        check_is_fitted(self)
        held_out = self.model_.held_out
        if held_out is None:
            return None
        return pd.Series(held_out.correlations, index=pd.Index(held_out.grid, name="epsilon"),
                         name="held_out_correlation")

    @property
    def n_pca_modes_(self) -> tuple[int, int]:
        check_is_fitted(self)
        return self.model_.solution.pca_modes

    def spectrum(self) -> pd.DataFrame:
        """Per pair of modes (from 1): the canonical correlation."""
        return pd.DataFrame({"canonical_correlation": self.canonical_correlations_},
                            index=pd.RangeIndex(1, len(self.singular_values_) + 1, name="mode"))
