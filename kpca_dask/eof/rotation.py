"""Rotated EOFs: varimax or promax rotation of a fitted model's leading modes.

:func:`rotate` takes the loadings of the leading r modes over the data they
were fitted on (one lazy pass: the covariance of each weighted feature with
each score, :mod:`kpca_dask.engine.exact.cross_moments`), rotates them
(:mod:`kpca_dask.engine.orthomax`) and gives them with a copy of the estimator
whose model holds the rotation (the estimator given is not changed), which a
KernelPCA's ``save`` keeps; :class:`RotatedEOF` gives the rotated scores of any
rows (a lazy r x r product of the embedding), the rotated maps on the field,
the correlation maps of the rotated scores and the variance each rotated mode
explains. With a linear kernel and every sample a landmark these are xeofs'
``EOFRotator``'s; for a kernel, the rotation of the embedding that makes the
regression maps of the weighted field simple (docs/design.md §15).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import dask
import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..coupled.coupled_model import CoupledFit
from ..engine.exact.cross_moments import pattern_maps
from ..engine.orthomax import (
    Rotation,
    asks_for,
    kernel_space_variance,
    rotated_count,
    rotation_of,
    score_rotation,
)
from ..errors import InvalidParameterError
from ..exact.exact_embedding import embedding as exact_embedding
from ..exact.exact_model import ExactFit
from ..io.labelled import MODE_DIM, modes
from ..io.preprocessing.field_inputs import weighted_rows
from ..io.preprocessing.field_sets import field_output
from ..model.inputs import method_input
from ..model.outputs import embedding
from .coupled_rotation import rotate_coupled
from .estimator_copies import holding
from .hilbert_model import HilbertFit
from .patterns import patterns_of

__all__ = ["rotate", "RotatedEOF"]


def _embedding_of(estimator) -> Any:
    """The lazy embedding of weighted dask rows by the estimator's fitted model."""
    model = estimator.model_
    if isinstance(model, ExactFit):
        return partial(exact_embedding, model)
    return partial(embedding, model, name=type(estimator).__name__)


def _layout_of(estimator):
    return estimator.model_.layout


def _stored_rotation(estimator) -> Rotation | None:
    return estimator.model_.rotation


def rotate(estimator, X=None, *, method: str = "varimax", power: int = 4,
           n_components: int | None = None, max_iter: int = 1000,
           rtol: float = 1e-8) -> "RotatedEOF":
    """Rotate the leading modes of a fitted estimator: varimax (orthogonal) or promax (oblique).

    The loadings rotated are the covariances of each weighted feature of ``X``
    (the fit's data) with each score scaled to unit variance: for a linear
    kernel the EOF times √λ, xeofs' loadings. The estimator given is not
    changed: the result's ``estimator`` is a copy whose model holds the rotation
    (``rotation_``; :meth:`RotatedEOF.save` writes it, and a refit, re-solve or update of
    that copy drops it).

    Parameters
    ----------
    estimator : KernelPCA, ExactKernelPCA, HilbertKernelEOF or KernelMCA
        A fitted estimator. A :class:`~kpca_dask.KernelMCA`'s pairs are rotated together, as
        xeofs' ``MCARotator`` rotates them, from both fields (``X`` the pair ``(X, Y)``),
        into a :class:`~kpca_dask.eof.coupled_rotation.RotatedMCA`. A
        :class:`~kpca_dask.HilbertKernelEOF`'s complex modes are rotated as xeofs'
        ``HilbertEOFRotator`` rotates them, from the loadings its fit keeps (``X`` may be
        left out), into a
        :class:`~kpca_dask.eof.hilbert_rotation.RotatedHilbertEOF`.
    X : the data the estimator was fitted on, optional
        Any input its ``patterns`` takes (a field, several fields, an array);
        read once, lazily. None: the rotation the estimator holds (a rotated
        result saved and loaded: every estimator's file keeps it); a Hilbert EOF
        that holds none is rotated from the loadings its fit keeps.
    method : {"varimax", "promax"}, default="varimax"
    power : int, default=4
        Promax's power (>= 2); varimax takes none (xeofs' ``power=1``).
    n_components : int, optional
        The number r of leading modes to rotate, from 2 to ``n_components_``
        (default: all).
    max_iter, rtol : int and float
        The varimax iteration's limit and relative tolerance (xeofs' defaults).

    Returns
    -------
    RotatedEOF or RotatedHilbertEOF

    Examples
    --------
    >>> import numpy as np, kpca_dask
    >>> X = np.random.default_rng(0).normal(size=(60, 5)) * [3.0, 2.0, 1.0, 1.0, 0.5]
    >>> kpca = kpca_dask.KernelPCA(3, kernel="linear", n_landmarks=60).fit(X)
    >>> rotated = kpca_dask.rotate(kpca, X, method="varimax")
    >>> rotated.transform(X).shape, bool(rotated.explained_variance_ratio_.sum() <= 1)
    ((60, 3), True)
    """
    check_is_fitted(estimator)
    if isinstance(getattr(estimator, "model_", None), CoupledFit):  # KernelMCA's pairs
        return rotate_coupled(estimator, X, method=method, power=power,
                              n_components=n_components, max_iter=max_iter, rtol=rtol)
    if getattr(estimator, "kpca_", None) is not None:  # an extended EOF: by its kernel stage
        from .extended_rotation import rotate_extended

        return rotate_extended(estimator, X, rotate, method=method, power=power,
                               n_components=n_components, max_iter=max_iter, rtol=rtol)
    if getattr(estimator, "model_", None) is None:
        raise InvalidParameterError(
            f"kpca_dask.rotate takes a fitted estimator of kpca-dask; got "
            f"{type(estimator).__name__}.")
    if isinstance(estimator.model_, HilbertFit):  # complex modes (docs/design.md §16)
        from .hilbert_rotation import rotate_hilbert

        return rotate_hilbert(estimator, X, method=method, power=power,
                              n_components=n_components, max_iter=max_iter, rtol=rtol)
    if X is None:
        stored = _stored_rotation(estimator)
        if stored is None:
            raise InvalidParameterError(
                "This model holds no rotation: pass the data it was fitted on, "
                "kpca_dask.rotate(model, X, method=...).")
        if not asks_for(stored, method, power, n_components):
            raise InvalidParameterError(
                f"This model holds a {stored!r}, not the rotation asked for: pass the data "
                "it was fitted on to rotate it otherwise, kpca_dask.rotate(model, X, "
                "method=...), or leave the options out for the one it holds.")
        return RotatedEOF(estimator, stored)
    r = rotated_count(int(estimator.n_components_), n_components, method, power)
    variances = estimator.explained_variance_[:r]
    layout = _layout_of(estimator)
    weighted = weighted_rows(method_input(estimator, layout, X, weighted=False).data, layout)
    Y = _embedding_of(estimator)(weighted)[:, :r]
    maps = pattern_maps(Y, weighted, "cross-covariance") / np.sqrt(variances)[:, None]
    total = weighted.astype(np.float64).var(axis=0, ddof=1).sum()
    loadings, total = dask.compute(maps, total)
    rotation = rotation_of(loadings, float(total), method, power, max_iter=max_iter, rtol=rtol)
    # A copy holds the rotation (what its save keeps): the estimator given is not changed.
    return RotatedEOF(holding(estimator, rotation=rotation), rotation)


class RotatedEOF:
    """The rotated modes of a fitted estimator, as :func:`rotate` makes them.

    Two variances, under two names, as each mode's share of two totals:

    * ``explained_variance_`` and ``explained_variance_ratio_`` are in the
      kernel's feature space, as the estimator's own: the variance along each
      rotated mode's direction there, Σ_i λ_i R_ij², a share of the
      estimator's ``total_variance_``. Rotated and unrotated ratios of one
      model compare: r rotated modes explain together what the r unrotated
      ones do.
    * ``field_variance_`` and ``field_variance_ratio_`` are in the space of
      the weighted input: the variance of the weighted features each rotated
      mode's map explains (Σ of its squared loadings), a share of their total
      variance (xeofs' ``explained_variance`` and ``explained_variance_ratio``
      of its rotator). The rotated scores of :meth:`transform` have these
      variances, as xeofs' do.

    For a linear kernel fitted exactly the two are the same numbers; for any
    other kernel they differ (docs/design.md §15).

    Attributes
    ----------
    estimator : KernelPCA or ExactKernelPCA
        The fitted estimator whose model holds this rotation (``rotation_``): a copy
        of the one :func:`rotate` was given, which it does not change, sharing its
        fitted arrays. :meth:`save` writes it.
    rotation : Rotation
        The stored rotation (:class:`~kpca_dask.engine.orthomax.Rotation`).
    explained_variance_, explained_variance_ratio_ : ndarray of shape (r,)
        Kernel-space variance of each rotated mode, and its share of the
        estimator's ``total_variance_``.
    field_variance_, field_variance_ratio_ : ndarray of shape (r,)
        Variance of the weighted features each rotated mode explains, and its
        share of their total variance (``rotation.total_variance``).
    rotation_matrix_, correlation_matrix_ : ndarray of shape (r, r)
        R, and the correlation of the rotated scores (the identity for varimax).
    """

    def __init__(self, estimator, rotation: Rotation) -> None:
        self.estimator = estimator
        self.rotation = rotation
        self.n_components_ = rotation.n_components
        self.field_variance_ = rotation.explained_variance
        self.field_variance_ratio_ = (rotation.explained_variance / rotation.total_variance
                                      if rotation.total_variance > 0
                                      else np.zeros(self.n_components_))
        self.explained_variance_ = kernel_space_variance(rotation,
                                                         estimator.explained_variance_)
        total = float(estimator.total_variance_)
        self.explained_variance_ratio_ = (self.explained_variance_ / total if total > 0
                                          else np.zeros(self.n_components_))
        self.rotation_matrix_ = rotation.matrix
        self.correlation_matrix_ = rotation.correlation
        self._scores = score_rotation(rotation, estimator.explained_variance_)

    def save(self, path, *, overwrite: bool = False, storage_options: dict | None = None) -> str:
        """Write the estimator's model with this rotation (every model file keeps it):
        ``kpca_dask.rotate(kpca_dask.load(path))`` gives these rotated modes back.

        Examples
        --------
        >>> import tempfile, numpy as np, kpca_dask
        >>> X = np.random.default_rng(0).normal(size=(60, 4)) * [3.0, 2.0, 1.0, 0.5]
        >>> kpca = kpca_dask.KernelPCA(3, kernel="linear", n_landmarks=60).fit(X)
        >>> rotated = kpca_dask.rotate(kpca, X, method="varimax")
        >>> path = rotated.save(tempfile.mkdtemp() + "/rotated.zarr")
        >>> kpca_dask.rotate(kpca_dask.load(path)).n_components_, hasattr(kpca, "rotation_")
        (3, False)
        """
        return self.estimator.save(path, overwrite=overwrite, storage_options=storage_options)

    def __repr__(self) -> str:
        r = self.rotation
        power = f", power={r.power}" if r.method == "promax" else ""
        return f"RotatedEOF({r.method}{power}, {self.n_components_} modes)"

    def spectrum(self):
        """The rotated modes' variances as one ``xr.Dataset`` over ``mode`` (1..r).

        ``explained_variance`` and ``explained_variance_ratio`` (kernel space, shares
        of the estimator's total variance, ``attrs["total_variance"]``),
        ``field_variance`` and ``field_variance_ratio`` (the weighted features',
        shares of ``attrs["field_total_variance"]``).

        Examples
        --------
        >>> import numpy as np, kpca_dask
        >>> X = np.random.default_rng(0).normal(size=(60, 5)) * [3.0, 2.0, 1.0, 1.0, 0.5]
        >>> kpca = kpca_dask.KernelPCA(3, kernel="linear", n_landmarks=60).fit(X)
        >>> kpca_dask.rotate(kpca, X).spectrum()["mode"].values.tolist()
        [1, 2, 3]
        """
        import xarray as xr

        values = {"explained_variance": self.explained_variance_,
                  "explained_variance_ratio": self.explained_variance_ratio_,
                  "field_variance": self.field_variance_,
                  "field_variance_ratio": self.field_variance_ratio_}
        return xr.Dataset(
            {name: ((MODE_DIM,), np.asarray(v, dtype=np.float64)) for name, v in values.items()},
            coords={MODE_DIM: modes(self.n_components_)},
            attrs={"rotation": self.rotation.method,
                   "total_variance": float(self.estimator.total_variance_),
                   "total_variance_kind": self.estimator.total_variance_kind_,
                   "field_total_variance": float(self.rotation.total_variance)})

    def transform(self, X):
        """The rotated scores of ``X`` (xeofs' ``scores()``/``transform``), lazily as the
        estimator's ``transform``: a DataArray ``scores`` (sample, mode) for a field, with
        the modes numbered 1..r."""
        return self._rotated(self.estimator.transform(X))

    def _rotated(self, Y):
        r = self.n_components_
        if hasattr(Y, "dims"):  # a DataArray, components last
            leading = Y.isel({MODE_DIM: slice(0, r)})
            return leading.copy(data=leading.data @ self._scores.astype(Y.dtype))
        if hasattr(Y, "columns"):
            Y = Y.to_dask_array() if hasattr(Y, "to_dask_array") else Y.to_numpy()
        return Y[:, :r] @ self._scores.astype(Y.dtype)

    def components(self):
        """The rotated maps over the weighted features, each of unit norm (xeofs'
        ``components()``): on the field (or fields) for a field model, else (r, p)."""
        maps = self.rotation.loadings / np.sqrt(self.rotation.explained_variance)[:, None]
        layout = _layout_of(self.estimator)
        if layout is None or not layout.dims:
            return maps
        return field_output(maps, layout, {MODE_DIM: modes(self.n_components_)},
                            name="components", attrs={"rotation": self.rotation.method})

    def patterns(self, X, kind: str = "correlation"):
        """Covariance or correlation maps of the rotated scores over ``X`` (unweighted
        features; one lazy pass), as the estimator's ``patterns`` of the unrotated ones."""
        if kind not in ("covariance", "correlation"):
            raise InvalidParameterError(
                f"kind must be 'covariance' or 'correlation'; got {kind!r}.")
        layout = _layout_of(self.estimator)
        rows = method_input(self.estimator, layout, X, weighted=False)
        unrotated = _embedding_of(self.estimator)
        return patterns_of(rows, kind, layout=layout,
                           embedding=lambda weighted: self._rotated(unrotated(weighted)))
