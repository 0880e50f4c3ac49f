"""What an EOF analyst reads beside the components: variances, North's errors and scalings.

The eigenvalues of kpca-dask are those of the centred Gram matrix
(scikit-learn's scale); an EOF analysis quotes those of the covariance
matrix, divided by n - 1 (ddof = 1): ``explained_variance_`` (eofs'
``eigenvalues``, xeofs' ``explained_variance``, scikit-learn PCA's
``explained_variance_``), ``total_variance_``, the variance of every
component, kept or not (eofs' ``totalAnomalyVariance``), and North et al.'s
typical errors λ √(2 / n) (eofs' ``northTest``). Scores and patterns are
scaled as eofs scales them (``pcscaling``, ``eofscaling``: 0, 1, 2;
docs/design.md §15). Everything here is small (q numbers) or a lazy product.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..errors import InvalidParameterError

__all__ = ["SCALINGS", "TOTAL_VARIANCE_KINDS", "check_scaling", "explained_variance",
           "total_variance", "north_errors", "scaled_scores", "score_factors", "eof_divisors",
           "spectrum_dataset", "EOFVarianceMixin"]

#: What ``total_variance_`` is: the centred kernel matrix's trace itself, or the Nyström
#: approximation's (fewer landmarks than samples; below the exact one, docs/design.md §2).
TOTAL_VARIANCE_KINDS = ("exact", "nystrom-estimate")

#: eofs' scalings of PCs and EOFs: 0 none, 1 divided by √λ, 2 multiplied by √λ.
SCALINGS = (0, 1, 2)


def check_scaling(value, name: str) -> int:
    """``value`` if it is one of eofs' scalings 0, 1 or 2, else a clear error.

    Examples
    --------
    >>> check_scaling(1, "pcscaling")
    1
    >>> check_scaling(3, "eofscaling")
    Traceback (most recent call last):
    ...
    kpca_dask.errors.InvalidParameterError: eofscaling must be 0, 1 or 2 (eofs' scalings: \
0 none, 1 divided by sqrt(eigenvalue), 2 multiplied by it); got 3.
    """
    if not (isinstance(value, numbers.Integral) and not isinstance(value, bool)
            and value in SCALINGS):
        raise InvalidParameterError(
            f"{name} must be 0, 1 or 2 (eofs' scalings: 0 none, 1 divided by "
            f"sqrt(eigenvalue), 2 multiplied by it); got {value!r}.")
    return int(value)


def explained_variance(eigenvalues: np.ndarray, n_samples: int) -> np.ndarray:
    """The variance of each component's score over the fit's rows: eigenvalues / (n - 1).

    Examples
    --------
    >>> explained_variance(np.array([9.0, 3.0]), 4).tolist()
    [3.0, 1.0]
    """
    return np.asarray(eigenvalues, dtype=np.float64) / max(int(n_samples) - 1, 1)


def total_variance(eigenvalues: np.ndarray, ratios: np.ndarray, n_samples: int) -> float:
    """The variance of every component, kept or not, divided by n - 1: the total each
    ``explained_variance_ratio_`` is a share of (the kernel's trace, centred).

    Examples
    --------
    >>> total_variance(np.array([6.0, 2.0]), np.array([0.6, 0.2]), 11)
    1.0
    """
    share = float(np.sum(ratios))
    if share <= 0:
        return 0.0
    return float(np.sum(eigenvalues)) / share / max(int(n_samples) - 1, 1)


def north_errors(variances: np.ndarray, n_samples: int, total: float,
                 scaled: bool = False) -> np.ndarray:
    """North et al.'s (1982) typical error of each eigenvalue, λ √(2 / n) (eofs' ``northTest``).

    ``scaled``: of the variance fraction instead (divided by the total
    variance, eofs' ``vfscaled=True``). Two neighbouring eigenvalues closer
    than their errors are not separated by the sample: their patterns mix.

    Examples
    --------
    >>> north_errors(np.array([8.0, 2.0]), 50, 20.0).tolist()
    [1.6, 0.4]
    >>> north_errors(np.array([8.0, 2.0]), 50, 20.0, scaled=True).tolist()
    [0.08, 0.02]
    """
    errors = np.asarray(variances, dtype=np.float64) * np.sqrt(2.0 / n_samples)
    return errors / total if scaled and total > 0 else errors


def score_factors(variances: np.ndarray, pcscaling: int) -> np.ndarray:
    """What each score is multiplied by for ``pcscaling``: 1, 1 / √λ (unit variance over
    the fit's rows) or √λ; 0 for a component of variance 0.

    Examples
    --------
    >>> score_factors(np.array([4.0, 0.0]), 1).tolist(), score_factors(np.array([4.0]), 2)
    ([0.5, 0.0], array([2.]))
    """
    root = np.sqrt(np.clip(np.asarray(variances, dtype=np.float64), 0.0, None))
    if pcscaling == 0:
        return np.ones_like(root)
    if pcscaling == 2:
        return root
    with np.errstate(divide="ignore"):
        return np.where(root > 0, 1.0 / root, 0.0)


def scaled_scores(Y, variances: np.ndarray, pcscaling: int):
    """Scores ``Y`` (numpy, dask, DataArray or DataFrame, components last) scaled as eofs'
    ``pcs(pcscaling)``: lazily for lazy ``Y``.

    Examples
    --------
    >>> scaled_scores(np.array([[2.0, 3.0]]), np.array([4.0, 9.0]), 1).tolist()
    [[1.0, 1.0]]
    """
    if pcscaling == 0:
        return Y
    factors = score_factors(variances, pcscaling)
    if hasattr(Y, "columns"):  # a pandas or dask DataFrame: by column
        import pandas as pd

        return Y * pd.Series(factors, index=Y.columns)
    factors = factors.astype(getattr(Y, "dtype", np.float64))
    if hasattr(Y, "dims"):  # a DataArray: its name, coordinates and attrs kept
        return Y.copy(data=Y.data * factors)
    return Y * factors


def eof_divisors(variances: np.ndarray, eofscaling: int) -> np.ndarray:
    """What cov(y_j, w x) is divided by for eofs' ``eofs(eofscaling)``: λ for unit EOFs
    (with a linear kernel; the regression of the weighted field on y_j for any kernel),
    λ^{3/2} (``eofscaling=1``) or √λ (``eofscaling=2``); NaN for a variance of 0.

    Examples
    --------
    >>> eof_divisors(np.array([4.0]), 0), eof_divisors(np.array([4.0]), 1)
    (array([4.]), array([8.]))
    """
    lam = np.asarray(variances, dtype=np.float64)
    power = {0: 1.0, 1: 1.5, 2: 0.5}[eofscaling]
    return np.where(lam > 0, lam ** power, np.nan)


def spectrum_dataset(eigenvalues: np.ndarray, ratios: np.ndarray, n_samples: int,
                     total_kind: str):
    """The spectrum as one ``xr.Dataset`` over ``mode`` (1..q): eigenvalues, explained
    variances and their ratios (with the cumulative one) and North's errors of both.

    Examples
    --------
    >>> ds = spectrum_dataset(np.array([18.0, 6.0]), np.array([0.6, 0.2]), 10, "exact")
    >>> ds["explained_variance"].values.tolist(), ds.attrs["total_variance_kind"]
    ([2.0, 0.6666666666666666], 'exact')
    """
    import xarray as xr

    from ..io.labelled import MODE_DIM, modes

    variances = explained_variance(eigenvalues, n_samples)
    total = total_variance(eigenvalues, ratios, n_samples)
    ratios = np.asarray(ratios, dtype=np.float64)
    described = {
        "eigenvalues": (eigenvalues, "eigenvalue of the centred kernel matrix (sum of "
                                     "squared scores)"),
        "explained_variance": (variances, "variance of the mode's score (ddof=1)"),
        "explained_variance_ratio": (ratios, "share of the total variance"),
        "cumulative_explained_variance_ratio": (np.cumsum(ratios),
                                                "share of the total variance, modes 1..k"),
        "north_error": (north_errors(variances, n_samples, total),
                        "North et al.'s (1982) typical error of explained_variance"),
        "north_error_ratio": (north_errors(variances, n_samples, total, scaled=True),
                              "North et al.'s typical error of explained_variance_ratio"),
    }
    data = {name: ((MODE_DIM,), np.asarray(values, dtype=np.float64), {"description": text})
            for name, (values, text) in described.items()}
    return xr.Dataset(data, coords={MODE_DIM: modes(len(ratios))}, attrs={
        "total_variance": total, "total_variance_kind": total_kind,
        "n_samples": int(n_samples)})


class EOFVarianceMixin:
    """``explained_variance_``, ``total_variance_`` and :meth:`north_errors` of a fitted
    estimator with ``eigenvalues_``, ``explained_variance_ratio_`` and ``n_samples_fit_``."""

    @property
    def explained_variance_(self) -> np.ndarray:
        """The variance of each component's score: ``eigenvalues_ / (n_samples_fit_ - 1)``.

        eofs' ``eigenvalues()``, xeofs' ``explained_variance()`` and
        scikit-learn PCA's ``explained_variance_`` (ddof = 1).
        """
        return explained_variance(self.eigenvalues_, self.n_samples_fit_)

    @property
    def total_variance_(self) -> float:
        """The variance of every component, kept or not: what ``explained_variance_ratio_``
        is a share of, on the scale of ``explained_variance_`` (eofs'
        ``totalAnomalyVariance()``, xeofs' ``total_variance()``; for a linear kernel the
        total variance of the weighted features).

        Exact (the centred kernel matrix's trace) for :class:`~kpca_dask.ExactKernelPCA`
        and for a :class:`~kpca_dask.KernelPCA` whose every training row is a landmark;
        with fewer landmarks than samples it is the Nyström approximation's trace, an
        estimate below the exact one by about ``trace_error_`` of the uncentred trace,
        so every ``explained_variance_ratio_`` is a little larger than the exact
        share. ``total_variance_kind_`` says which.
        """
        return total_variance(self.eigenvalues_, self.explained_variance_ratio_,
                              self.n_samples_fit_)

    @property
    def total_variance_kind_(self) -> str:
        """``"exact"`` or ``"nystrom-estimate"``: what ``total_variance_`` is (see there)."""
        return "exact"

    def spectrum(self):
        """The spectrum as one ``xr.Dataset`` over ``mode`` (numbered 1..q, as xeofs).

        Variables ``eigenvalues``, ``explained_variance``,
        ``explained_variance_ratio``, ``cumulative_explained_variance_ratio``,
        ``north_error`` and ``north_error_ratio`` (North's errors of the
        variances and of the ratios); ``attrs`` hold ``total_variance``, what
        ``total_variance_kind`` it is (``"exact"`` or ``"nystrom-estimate"``,
        see ``total_variance_``) and ``n_samples``. The ratios are shares of the
        kernel-space total. The estimator's attributes stay numpy arrays.

        Returns
        -------
        spectrum : xarray.Dataset

        Examples
        --------
        >>> from kpca_dask import ExactKernelPCA
        >>> X = np.random.default_rng(0).normal(size=(50, 3)) * [3.0, 1.0, 0.5]
        >>> ds = ExactKernelPCA(n_components=2, kernel="linear").fit(X).spectrum()
        >>> ds["mode"].values.tolist(), ds.attrs["total_variance_kind"]
        ([1, 2], 'exact')
        """
        return spectrum_dataset(self.eigenvalues_, self.explained_variance_ratio_,
                                self.n_samples_fit_, self.total_variance_kind_)

    def north_errors(self, scaled: bool = False) -> np.ndarray:
        """North et al.'s typical error of each eigenvalue: ``explained_variance_`` × √(2/n).

        eofs' ``northTest(vfscaled=scaled)``: with ``scaled=True`` the errors of
        ``explained_variance_ratio_`` instead. Neighbouring eigenvalues closer
        than their errors are not separated by the sample, and their patterns mix
        (North, Bell, Cahalan and Moeng 1982, "Sampling errors in the estimation
        of empirical orthogonal functions", Monthly Weather Review 110). n is the
        number of samples, taken as independent.

        Parameters
        ----------
        scaled : bool, default=False
            Errors of the variance fractions (divided by ``total_variance_``).

        Returns
        -------
        errors : ndarray of shape (``n_components_``,)

        Examples
        --------
        >>> from kpca_dask import ExactKernelPCA
        >>> X = np.random.default_rng(0).normal(size=(50, 3)) * [3.0, 1.0, 0.5]
        >>> kpca = ExactKernelPCA(n_components=2, kernel="linear").fit(X)
        >>> bool(np.allclose(kpca.north_errors(), kpca.explained_variance_ * 0.2))
        True
        """
        return north_errors(self.explained_variance_, self.n_samples_fit_,
                            self.total_variance_, bool(scaled))
