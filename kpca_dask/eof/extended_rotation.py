"""Rotated extended kernel EOFs: varimax or promax of space-time modes.

An extended EOF's modes are its kernel stage's (``estimator.kpca_``, a kernel PCA of
the delay-embedded samples, docs/design.md §17), so they are rotated there, on the
embedded samples of the data (:func:`kpca_dask.rotate` of the stage); the rotated
maps are laid out over (mode, embedding, field) and, with ``n_pca_modes``, mapped
back to the field through the linear EOFs, as the extended EOF's own maps are.
"""

from __future__ import annotations

import dask
import numpy as np
import xarray as xr

from ..engine.orthomax import asks_for
from ..errors import InvalidParameterError
from .estimator_copies import holding

__all__ = ["rotate_extended", "RotatedExtendedEOF", "space_time_maps", "flat_space_time",
           "PCA_MODE_DIM"]

#: The dimension of the linear EOF scores a field is reduced to with ``n_pca_modes``.
PCA_MODE_DIM = "pca_mode"


def space_time_maps(maps, linear, embedding: int):
    """Maps over the embedded features (mode, embedding, ...) as space-time maps of the
    field: through the ``linear`` EOFs (pca_mode, field...) when the field was reduced to
    their scores (xeofs: its PCA components times the EEOFs), else as they are.

    Examples
    --------
    >>> space_time_maps(np.ones((2, 6)), None, 3).shape
    (2, 3, 2)
    >>> space_time_maps(np.ones((2, 6)), np.ones((2, 5)), 3).shape
    (2, 3, 5)
    """
    if isinstance(maps, xr.DataArray):
        if linear is not None:
            linear = linear.rename(mode=PCA_MODE_DIM)
            maps = xr.dot(maps, linear, dim=PCA_MODE_DIM).transpose("mode", "embedding", ...)
        maps.name = "components"
        return maps
    maps = np.asarray(maps).reshape(maps.shape[0], embedding, -1)
    return maps if linear is None else np.einsum("klp,pf->klf", maps, np.asarray(linear))


def flat_space_time(maps) -> np.ndarray:
    """Space-time maps as an array (mode, embedding, features): a field's maps (mode,
    embedding, field...) with the field's positions flattened in its order and those of
    its mask (NaN in every map, :func:`kpca_dask.io.preprocessing.fields.as_field`) left out, so the
    features are those the fit read, as the Hilbert EOF's ``components_`` are.

    Examples
    --------
    >>> maps = xr.DataArray([[[1.0, np.nan, 2.0]]], dims=("mode", "embedding", "x"))
    >>> flat_space_time(maps).tolist()
    [[[1.0, 2.0]]]
    """
    if not isinstance(maps, xr.DataArray):
        return np.asarray(maps)
    values = np.asarray(maps.transpose("mode", "embedding", ...).values)
    values = values.reshape(values.shape[0], values.shape[1], -1)
    return values[:, :, ~np.isnan(values).all(axis=(0, 1))]


def scaled_space_time(maps, eigenvalues: np.ndarray, normalized: bool):
    """The maps as computed (``normalized``), or each mode's times its singular value
    √(λ (n − 1)) = √eigenvalue (xeofs' ``components(normalized=False)``).

    Examples
    --------
    >>> scaled_space_time(np.ones((2, 1, 1)), np.array([4.0, 9.0]), False).ravel().tolist()
    [2.0, 3.0]
    """
    if normalized:
        return maps
    scale = np.sqrt(np.asarray(eigenvalues, dtype=np.float64))
    if isinstance(maps, xr.DataArray):
        scaled = maps * xr.DataArray(scale, dims="mode", coords={"mode": maps["mode"]})
        return scaled.rename(maps.name)
    return maps * scale[:, None, None]


def rotate_extended(estimator, X, rotate_stage, **options) -> "RotatedExtendedEOF":
    """Rotate the leading space-time modes of a fitted extended EOF on the data ``X`` it was
    fitted on: ``rotate_stage`` (:func:`kpca_dask.rotate`, whose ``options`` these are) of
    its kernel stage on the embedded samples. With no ``X``, the rotation a rotated model
    holds (saved by :meth:`RotatedExtendedEOF.save` and loaded).

    Examples
    --------
    >>> import numpy as np, kpca_dask
    >>> X = np.random.default_rng(0).normal(size=(80, 4)) * [3.0, 2.0, 1.0, 0.5]
    >>> eeof = kpca_dask.ExtendedKernelEOF(3, tau=1, embedding=2, n_landmarks=80).fit(X)
    >>> rotated = kpca_dask.rotate(eeof, X, method="varimax")
    >>> rotated.components_.shape, rotated.transform(X).shape
    ((3, 2, 4), (79, 3))
    >>> rotated.components().shape  # on the field for a field's fit
    (3, 2, 4)
    """
    if X is None:
        held = estimator.model_
        if held.rotation is None or held.rotated_maps is None or not asks_for(
                held.rotation, options["method"], options["power"], options["n_components"]):
            raise InvalidParameterError(
                "An extended EOF is rotated on the data it was fitted on: "
                "kpca_dask.rotate(model, X, method=...) (with no data, a rotated model "
                "gives back the rotation it holds only).")
        # a rotated model (loaded): its kernel stage's rotation and the maps kept with it
        return RotatedExtendedEOF(estimator, rotate_stage(held.kernel_stage),
                                  held.rotated_maps)
    stage = rotate_stage(estimator.kpca_, estimator.embedded(X), **options)
    linear = None if estimator.pca_ is None else estimator.pca_.patterns(X, kind="eof")
    maps, linear = dask.compute(stage.components(), linear)
    return RotatedExtendedEOF(estimator, stage,
                              space_time_maps(maps, linear, estimator.delay_[1]))


class RotatedExtendedEOF:
    """The rotated space-time modes of an :class:`~kpca_dask.ExtendedKernelEOF`.

    Attributes
    ----------
    estimator : ExtendedKernelEOF
    stage : RotatedEOF
        The rotation of the kernel stage on the embedded samples, which the
        variances, the rotation matrix and the scores are.
    components_ : ndarray of shape (r, embedding, n_features)
        The rotated space-time maps, each of unit norm over the embedded
        features, over the features fitted (:meth:`components` lays them on the
        field).
    n_components_, explained_variance_, explained_variance_ratio_,
    field_variance_, field_variance_ratio_, rotation_matrix_, correlation_matrix_
        The stage's (see :class:`~kpca_dask.eof.rotation.RotatedEOF`).
    """

    def __init__(self, estimator, stage, components) -> None:
        self.estimator, self.stage, self._maps = estimator, stage, components
        self.components_ = flat_space_time(components)
        self.rotation = stage.rotation
        for name in ("n_components_", "explained_variance_", "explained_variance_ratio_",
                     "field_variance_", "field_variance_ratio_", "rotation_matrix_",
                     "correlation_matrix_"):
            setattr(self, name, getattr(stage, name))

    def __repr__(self) -> str:
        return f"RotatedExtendedEOF({self.rotation.method}, {self.n_components_} modes)"

    def save(self, path, *, overwrite: bool = False, storage_options: dict | None = None) -> str:
        """Write the extended EOF with this rotation (its kernel stage's) and the rotated
        space-time maps: ``kpca_dask.rotate(kpca_dask.load(path))`` gives these rotated modes
        back without the data. The estimator rotated is not changed.

        Examples
        --------
        >>> import tempfile, numpy as np, kpca_dask
        >>> X = np.random.default_rng(0).normal(size=(80, 4)) * [3.0, 2.0, 1.0, 0.5]
        >>> eeof = kpca_dask.ExtendedKernelEOF(3, tau=1, embedding=2, n_landmarks=80).fit(X)
        >>> rotated = kpca_dask.rotate(eeof, X, method="varimax")
        >>> again = kpca_dask.rotate(kpca_dask.load(rotated.save(tempfile.mkdtemp() + "/r")))
        >>> bool(np.allclose(again.transform(X), rotated.transform(X)))
        True
        """
        held = holding(self.estimator, rotation=self.rotation, rotated_maps=self._maps)
        return held.save(path, overwrite=overwrite, storage_options=storage_options)

    def spectrum(self):
        """The rotated modes' variances over ``mode`` (the stage's :meth:`spectrum`)."""
        return self.stage.spectrum()

    def components(self):
        """The rotated space-time maps: for a field's fit a DataArray ``components`` (mode,
        embedding, the field's dims), NaN on its mask; else ``components_``."""
        return self._maps

    def transform(self, X):
        """The rotated scores of ``X``'s embedded samples (the extended EOF's ``transform``,
        rotated): computed for data in memory, lazy for lazy data."""
        scores = self.stage.transform(self.estimator.embedded(X))
        data = getattr(X, "data", X)
        lazy = dask.is_dask_collection(data)
        return scores if lazy or not dask.is_dask_collection(scores) else scores.compute()
