"""Varimax and promax rotation of kernel MCA's pairs of modes, as xeofs' ``MCARotator``.

Cheng and Dunkerton (1995): the singular vectors of both fields, stacked over their
features and scaled by √s, are rotated together, L = [U_x; U_y] diag(√s), L R = [Q_x; Q_y].
Each rotated pair's "explained covariance" is ‖Q_x,k‖ ‖Q_y,k‖, its components Q / ‖Q‖, and
its scores the unrotated ones scaled to 1/√s, turned by R^{-T} and scaled by ‖Q‖ (R itself
for varimax). The pairs are ordered by their explained covariance and signed so that each
stacked column's largest-magnitude entry is positive (docs/design.md §20). Both fields' singular
vectors are read from their data (:meth:`KernelMCA.components
<kpca_dask.KernelMCA.components>`); the rotated scores of any samples are one more
projection of each field, with the projection and offset of the fit turned the same way.
"""

from __future__ import annotations

import dask
import numpy as np
from sklearn.base import clone

from ..blocks.signs import fix_signs
from ..coupled.coupled_model import CoupledFit, CoupledRotation
from ..engine.orthomax import asks_for, promax, rotated_count, varimax
from ..errors import InvalidInputError, InvalidParameterError
from ..model.inputs import relabelled
from .estimator_copies import holding

__all__ = ["rotate_coupled", "RotatedMCA"]


def _flat(maps) -> np.ndarray:
    """(mode, features...) maps as (features, mode), the masked features left out."""
    values = np.asarray(maps, dtype=np.float64)
    values = values.reshape(values.shape[0], -1)
    return values[:, np.isfinite(values).all(axis=0)].T


def rotate_coupled(estimator, fields, *, method: str = "varimax", power: int = 4,
                   n_components: int | None = None, max_iter: int = 1000,
                   rtol: float = 1e-8) -> "RotatedMCA":
    """Rotate the leading pairs of a fitted :class:`~kpca_dask.KernelMCA`; see
    :func:`kpca_dask.rotate`, which calls it with ``fields`` the pair (X, Y)."""
    model: CoupledFit = estimator.model_
    if model.method != "mca":
        raise InvalidParameterError(
            "kpca_dask.rotate rotates the pairs of a KernelMCA; a KernelCCA's canonical "
            "variates are not rotated here (fit a KernelMCA to rotate coupled patterns).")
    if fields is None and model.rotation is not None:  # a rotated model (loaded): its own
        if not asks_for(model.rotation, method, power, n_components):
            raise InvalidParameterError(
                "This model holds another rotation than the one asked for: pass both fields "
                "to rotate it otherwise, kpca_dask.rotate(model, (X, Y), method=...).")
        return RotatedMCA(estimator, model.rotation)
    if not (isinstance(fields, (tuple, list)) and len(fields) == 2):
        raise InvalidInputError(
            "A coupled model is rotated from both of its fields: pass them as a pair, "
            "kpca_dask.rotate(model, (X, Y), ...).")
    r = rotated_count(model.n_modes, n_components, method, power)
    X, Y = fields
    s = model.solution.singular_values[:r]
    # (mode, ...): DataArrays or arrays, computed together (each field read once for them).
    maps = dask.compute(*[m[:r] for m in estimator.components(X, Y)])
    flat = [_flat(m) for m in maps]
    loadings = np.vstack(flat) * np.sqrt(s)
    if method == "varimax":
        rotated, R = varimax(loadings, max_iter=max_iter, rtol=rtol)
        correlation = np.eye(r)
    else:
        rotated, R, correlation = promax(loadings, power, max_iter=max_iter, rtol=rtol)
    p_x = flat[0].shape[0]
    norms = np.stack([np.linalg.norm(rotated[:p_x], axis=0),
                      np.linalg.norm(rotated[p_x:], axis=0)])
    covariance = norms[0] * norms[1]
    order = np.argsort(-covariance**2, kind="stable")
    signs = fix_signs(rotated)
    components = tuple(_turned(m, R, s, norm, signs, order) for m, norm in zip(maps, norms))
    rotation = CoupledRotation(method, int(power if method == "promax" else 1), R, correlation,
                               norms, signs, order.astype(np.int64), components)
    # A copy holds the rotation (what its save keeps): the estimator given is not changed.
    return RotatedMCA(holding(estimator, rotation=rotation), rotation)


def _turned(maps, R, s, norm, signs, order):
    """Rotated unit components, (mode, features...), as the unrotated maps come."""
    change = (np.diag(np.sqrt(s)) @ R / norm * signs)[:, order]
    values = np.asarray(maps, dtype=np.float64)
    turned = np.einsum("j...,jk->k...", np.nan_to_num(values), change)
    turned[:, np.isnan(values[0])] = np.nan  # the mask stays
    return relabelled(maps, turned)


class RotatedMCA:
    """The rotated pairs of a :class:`~kpca_dask.KernelMCA`, as :func:`kpca_dask.rotate`
    makes them (xeofs' ``MCARotator``).

    Attributes
    ----------
    estimator : KernelMCA
        A copy of the model rotated, whose ``model_`` holds the rotation (what :meth:`save`
        writes); the model :func:`kpca_dask.rotate` was given is not changed.
    rotation : CoupledRotation
        The rotation, everything the rotated pairs are rebuilt from.
    model_ : CoupledFit
        The rotated model: the fit's landmarks and kernels with each field's projection and
        offset turned, so that ``transform`` gives the rotated scores.
    singular_values_ : ndarray (r,)
        Each rotated pair's explained covariance ‖Q_x‖ ‖Q_y‖ (xeofs: √ of its
        ``squared_covariance``), descending.
    squared_covariance_fraction_ : ndarray (r,)
        Their squares' shares of the unrotated total squared covariance.
    rotation_matrix_, correlation_matrix_ : ndarray (r, r)
        R, from the unrotated pairs (before the pairs are ordered), and the correlation of
        the rotated modes (the identity for varimax).
    """

    def __init__(self, estimator, rotation: CoupledRotation) -> None:
        self.estimator, self.rotation = estimator, rotation
        self.method, self.power = rotation.method, rotation.power
        self.rotation_matrix_, self.correlation_matrix_ = rotation.matrix, rotation.correlation
        r = rotation.n_components
        model = estimator.model_
        solution = model.solution
        s = solution.singular_values[:r]
        scale = np.diag(1.0 / np.sqrt(s)) @ rotation.turn
        turned = []
        for (P, c), norm in zip((model.projection(0), model.projection(1)), rotation.norms):
            change = (scale * norm * rotation.signs)[:, rotation.order]
            turned += [P[:, :r] @ change, c[:r] @ change]
        values = (rotation.norms[0] * rotation.norms[1])[rotation.order]
        self.model_ = model.replace(rotation=None, solution=type(solution)(
            *turned, singular_values=values, total_squared=solution.total_squared,
            pca_modes=solution.pca_modes, field_variances=solution.field_variances))
        self.singular_values_ = values
        self.squared_covariance_fraction_ = values**2 / solution.total_squared
        self._scored = clone(estimator)
        self._scored.model_ = self.model_

    def __repr__(self) -> str:
        power = f", power={self.power}" if self.method == "promax" else ""
        return f"RotatedMCA({self.method}{power}, {len(self.singular_values_)} pairs)"

    def save(self, path, *, overwrite: bool = False, storage_options: dict | None = None) -> str:
        """Write the model with this rotation and its rotated components:
        ``kpca_dask.rotate(kpca_dask.load(path))`` gives these rotated pairs back without
        the data."""
        return self.estimator.save(path, overwrite=overwrite, storage_options=storage_options)

    def components(self):
        """The rotated components of X and of Y (unit vectors over each field's weighted
        features), laid out as :meth:`KernelMCA.components <kpca_dask.KernelMCA.components>`
        gives the unrotated ones."""
        return tuple(self.rotation.components)

    def transform(self, X=None, Y=None):
        """The rotated scores of samples of X, of Y or of both (lazy for lazy input)."""
        return self._scored.transform(X, Y)

    def homogeneous_patterns(self, X, Y, kind: str = "correlation"):
        """Each field's maps against its own rotated scores; see
        :meth:`KernelMCA.homogeneous_patterns <kpca_dask.KernelMCA.homogeneous_patterns>`."""
        return self._scored.homogeneous_patterns(X, Y, kind)

    def heterogeneous_patterns(self, X, Y, kind: str = "correlation"):
        """Each field's maps against the other's rotated scores; see
        :meth:`KernelMCA.heterogeneous_patterns <kpca_dask.KernelMCA.heterogeneous_patterns>`."""
        return self._scored.heterogeneous_patterns(X, Y, kind)
