"""Rotated Hilbert (complex) kernel EOFs: varimax or promax of complex modes.

:func:`kpca_dask.rotate` sends a :class:`~kpca_dask.HilbertKernelEOF` here.
The loadings rotated are the covariances of the analytic field with each
complex score scaled to unit variance (for a linear kernel the complex EOF
times √λ, xeofs' loadings), which the fit keeps: no pass over the data. They
are rotated as xeofs' ``HilbertEOFRotator`` rotates them
(:func:`~kpca_dask.engine.orthomax.complex_rotation_of`); the rotated scores
of the training samples follow by an r x r product (docs/design.md §16). With
the ``rbf`` kernel this is ROCK-PCA's rotated complex kernel PCA (Bueso, Piles
and Camps-Valls 2020), the rotation taken on the maps as xeofs takes it.
"""

from __future__ import annotations

import numpy as np

from ..engine.orthomax import (
    Rotation,
    asks_for,
    complex_rotation_of,
    complex_score_rotation,
    rotated_count,
)
from ..errors import InvalidInputError
from ..model.inputs import method_input
from ..validation import check_n_features
from .estimator_copies import holding
from .hilbert_model import map_output, record_scores, score_output

__all__ = ["rotate_hilbert", "RotatedHilbertEOF"]


def rotate_hilbert(estimator, X=None, *, method: str = "varimax", power: int = 4,
                   n_components: int | None = None, max_iter: int = 1000,
                   rtol: float = 1e-8) -> "RotatedHilbertEOF":
    """Rotate the leading complex modes of a fitted Hilbert kernel EOF (see
    :func:`kpca_dask.rotate`, whose parameters these are). ``X`` may be left out: the
    fit keeps the loadings; given, it must have the fit's shape. Left out for a model that
    holds a rotation (a rotated model, saved and loaded), it gives that rotation back, as
    for the other estimators, unless the options ask for another
    (:func:`~kpca_dask.engine.orthomax.asks_for`), which is rotated from the loadings.

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_dask.estimators.hilbert import HilbertKernelEOF
    >>> t, x = np.arange(100)[:, None], np.arange(20)[None, :]
    >>> X = np.cos(0.3 * x - 0.2 * t) + np.cos(0.1 * t) * (x < 5)
    >>> rotated = rotate_hilbert(HilbertKernelEOF(2, padding="none").fit(X))
    >>> rotated.scores().shape
    (100, 2)
    """
    fit = estimator.model_
    if X is None and fit.rotation is not None and asks_for(fit.rotation, method, power,
                                                           n_components):
        return RotatedHilbertEOF(estimator, fit.rotation)  # a rotated model's (loaded) own
    r = rotated_count(int(estimator.n_components_), n_components, method, power)
    if X is not None:
        rows = method_input(estimator, fit.layout, X)  # lazy: reads nothing
        check_n_features(rows.data, fit.n_features, type(estimator).__name__)
        n = rows.data.shape[0]
        if n != fit.n_samples:
            raise InvalidInputError(
                f"X has {n} samples, not the fit's {fit.n_samples}: a Hilbert kernel "
                "EOF is rotated on the data it was fitted on (or pass no X).")
    loadings = fit.solution.loadings[:r]
    rotation = complex_rotation_of(loadings, fit.solution.field_total_variance, method, power,
                                   max_iter=max_iter, rtol=rtol)
    # A copy holds the rotation, as for KernelPCA: the estimator given is not changed.
    return RotatedHilbertEOF(holding(estimator, rotation=rotation), rotation)


class RotatedHilbertEOF:
    """The rotated complex modes of a :class:`~kpca_dask.HilbertKernelEOF`.

    Attributes
    ----------
    estimator : HilbertKernelEOF
    rotation : Rotation
        The rotation (complex ``matrix``; ``signs`` the unit phase of each mode).
    n_components_ : int
    explained_variance_ : ndarray of shape (r,)
        The variance of the analytic field each rotated map explains, the sum of
        the squared moduli of its loadings (xeofs' ``explained_variance`` of its
        rotator); the rotated scores have it.
    explained_variance_ratio_ : ndarray of shape (r,)
        Its share of the field's total (``estimator.field_total_variance_``).
    rotation_matrix_, correlation_matrix_ : ndarray of complex128, shape (r, r)
    components_ : ndarray of complex128, shape (r, n_features)
        The rotated maps, unit norm, largest entry real and positive.
    """

    def __init__(self, estimator, rotation: Rotation) -> None:
        self.estimator = estimator
        self.rotation = rotation
        self.n_components_ = rotation.n_components
        self.explained_variance_ = rotation.explained_variance
        total = float(rotation.total_variance)
        self.explained_variance_ratio_ = (self.explained_variance_ / total if total > 0
                                          else np.zeros(self.n_components_))
        self.rotation_matrix_ = rotation.matrix
        self.correlation_matrix_ = rotation.correlation
        self.components_ = rotation.loadings / np.sqrt(rotation.explained_variance)[:, None]
        self._rotation = complex_score_rotation(rotation, estimator.explained_variance_)

    def __repr__(self) -> str:
        r = self.rotation
        power = f", power={r.power}" if r.method == "promax" else ""
        return f"RotatedHilbertEOF({r.method}{power}, {self.n_components_} modes)"

    def save(self, path, *, overwrite: bool = False, storage_options: dict | None = None) -> str:
        """Write the estimator's model with this rotation: ``kpca_dask.rotate(
        kpca_dask.load(path))`` gives these rotated modes back.

        Examples
        --------
        >>> import tempfile, numpy as np, kpca_dask
        >>> t, x = np.arange(80)[:, None], np.arange(12)[None, :]
        >>> X = np.cos(0.3 * x - 0.2 * t) + np.cos(0.1 * t) * (x < 4)
        >>> rotated = kpca_dask.rotate(kpca_dask.HilbertKernelEOF(2, padding="none").fit(X))
        >>> path = rotated.save(tempfile.mkdtemp() + "/rotated.zarr")
        >>> again = kpca_dask.rotate(kpca_dask.load(path))
        >>> bool(np.allclose(again.scores(), rotated.scores()))
        True
        """
        return self.estimator.save(path, overwrite=overwrite, storage_options=storage_options)

    def _scores(self, found: tuple, name: str, normalized: bool = False):
        """Rotated scores of ``found`` (the estimator's raw scores, their labels and
        laziness), as ``name`` (scores, their amplitude or phase) in the input's kind."""
        Y, like, is_lazy = found
        Y = Y[:, :self.n_components_] @ self._rotation
        fit = self.estimator.model_
        divisor = (np.sqrt(self.explained_variance_ * (fit.n_samples - 1))
                   if normalized else None)
        return score_output(fit, Y, like, is_lazy, name, divisor=divisor,
                            attrs={"rotation": self.rotation.method})

    def _training(self) -> tuple:
        fit = self.estimator.model_
        return fit.scores, fit.samples, fit.lazy

    def scores(self, normalized: bool = False):
        """The rotated complex scores of the training samples (xeofs' rotator's
        ``scores``); ``normalized``: each divided by √(explained variance (n − 1))."""
        return self._scores(self._training(), "scores", normalized)

    def transform(self, X):
        """The rotated complex scores of the record ``X`` (see the estimator's
        ``transform``)."""
        return self._scores(record_scores(self.estimator.model_, self.estimator, X), "scores")

    def scores_amplitude(self, normalized: bool = True):
        """The modulus of the rotated scores (normalized by default, as xeofs)."""
        return self._scores(self._training(), "scores_amplitude", normalized)

    def scores_phase(self):
        """The phase of each rotated score."""
        return self._scores(self._training(), "scores_phase")

    def _maps(self, name: str, normalized: bool = True):
        maps = self.components_
        if not normalized:
            maps = maps * np.sqrt(self.explained_variance_
                                  * (self.estimator.n_samples_fit_ - 1))[:, None]
        return map_output(self.estimator.model_, maps, name,
                          attrs={"rotation": self.rotation.method})

    def components(self, normalized: bool = True):
        """The rotated complex maps, unit norm (or times √(explained variance (n − 1))),
        on the field for a field's fit."""
        return self._maps("components", normalized)

    def components_amplitude(self, normalized: bool = True):
        """The modulus of the rotated maps."""
        return self._maps("components_amplitude", normalized)

    def components_phase(self):
        """The phase of each rotated map entry."""
        return self._maps("components_phase")
