"""Saving and loading :class:`~kpca_dask.ExactKernelPCA` models as Zarr groups (no pickle).

An exact model transforms through every training row, so the file holds
them: the rows are **copied** into the model's group, not kept by reference
to the store they came from, so that a model file stands alone (the data may
be moved, edited or deleted after the fit) and is checked as a whole when it
is read. The cost is n p words of storage, as much as the data. Layout
(``format_version`` 3 of "kpca-dask-model", ``estimator = "ExactKernelPCA"``)::

    exact.zarr/
      rows                      (n, p)  the training rows, in the dtype the fit read them in,
                                        chunked by row panels (docs/design.md §13)
      eigenvectors              (n, q)  float64, A_q, chunked like the rows
      eigenvalues               (q,)    float64
      explained_variance_ratio  (q,)    float64
      eigenvalue_residuals      (q,)    float64, only for the matrix-free solver
      centring                  (2, q)  float64, 1^T S and k^T S / n - g 1^T S (S = A_q Lambda^-1/2)
      feature_kept, feature_weights     a field's kept positions and weights, when it has them
      rotation_matrix, ...      a rotated model's rotation (kpca_dask.storage.rotation_files)
      attributes (JSON): format, format_version, kpca_dask_version, estimator, params,
                         unsaved_params, checksums, and fitted: kernel_, kernel_params_,
                         n_components_, n_samples_fit_, n_features_in_, eigen_solver_,
                         n_products_, grand_mean (g, the mean of K), feature_layout_,
                         rotation (its method, or null)

A model from either solver is saved the same way; a loaded one transforms by
row panels (:class:`~kpca_dask.exact.exact_model.ExactModel`), lazily. As for
:mod:`kpca_dask.storage.model_files`: every chunk carries a crc32c checksum,
every array and the attributes a digest, and loading checks them all (the
large arrays are read once, panel by panel, for their digests), the
parameters against the table a fit checks them with, and the shapes against
each other. A callable kernel, scipy.sparse rows and ``kernel="precomputed"``
(whose model holds no rows) cannot be saved.
"""

from __future__ import annotations

import os

import dask.array as da
import numpy as np
import zarr
from sklearn.utils.validation import check_is_fitted

from .._json import jsonable
from ..blocks.kernels import canonical_kernel_name
from ..checkpoints.file_checks import damaged
from ..checkpoints.statistics_files import file_digest
from ..engine.exact.matrix_free import RowPanels
from ..engine.kernel_params import resolve_kernel_params
from ..errors import InvalidParameterError, about
from ..exact.exact_model import ExactFit, ExactModel, scaled_vectors
from ..io import PathOrURL, open_group, write_group
from ..io.checksums import (
    digest,
    digest_of_rows,
    read_checked,
)
from ..model.inputs import holds_sparse_rows
from ..model.parameters import EXACT_CONSTRAINTS, check_params
from .file_headers import check_header, header_attributes, layout_entries, with_checksums
from .layout_files import layout_from_attribute
from .model_files import check_written
from .rotation_files import rotation_entries, rotation_from_entries

__all__ = ["save_exact", "load_exact", "ESTIMATOR", "array_digest", "stored_digest"]

ESTIMATOR = "ExactKernelPCA"
FORMAT_VERSION = 3
_LARGE = ("rows", "eigenvectors")
_SMALL = ("eigenvalues", "explained_variance_ratio", "centring")
#: In this order: n, p, q.
_SCALARS = ("n_components_", "n_features_in_", "n_samples_fit_")


def save_exact(estimator, path: PathOrURL, *, overwrite: bool = False,
               storage_options: dict | None = None) -> str:
    """Write a fitted ExactKernelPCA, its training rows included, to a Zarr group at ``path``.

    Returns the path written. Raises :class:`~kpca_dask.errors.InvalidParameterError`
    for a model that a file cannot hold (module docstring), and
    :class:`~kpca_dask.errors.OutputExistsError` for an existing ``path``
    without ``overwrite``.
    """
    check_is_fitted(estimator)
    _check_savable(estimator)
    fit = estimator.model_
    model = fit.by_panels or ExactModel.of_dense_fit(fit)
    arrays = {"rows": model.panels.rows, "eigenvectors": model.eigenvectors,
              "eigenvalues": model.eigenvalues,
              "explained_variance_ratio": np.asarray(estimator.explained_variance_ratio_),
              "centring": np.vstack([model.sums, model.offset])}
    fitted = {name: int(getattr(estimator, name)) for name in _SCALARS}  # JSON ints
    fitted.update(kernel_=estimator.kernel_, kernel_params_=jsonable(estimator.kernel_params_),
                  eigen_solver_=estimator.eigen_solver_, grand_mean=model.grand_mean,
                  dtype=str(model.panels.dtype),
                  n_products_=fit.n_products, feature_layout_=None)
    if fit.residuals is not None:
        arrays["eigenvalue_residuals"] = np.asarray(fit.residuals)
    layout_entries(fit.layout, fitted, arrays)
    rotation_entries(fit.rotation, fitted, arrays)
    attrs = with_checksums(header_attributes(estimator, ESTIMATOR, FORMAT_VERSION, fitted),
                           {name: array_digest(value) for name, value in arrays.items()})
    return write_group(arrays, path, attrs=attrs, overwrite=overwrite,
                       storage_options=storage_options)


def _check_savable(estimator) -> None:
    if callable(estimator.kernel_):
        raise InvalidParameterError(
            "A model with a callable kernel cannot be saved: a model file holds data only, "
            "never code. Use a named kernel (e.g. kernel='rbf') to save the model.")
    if estimator.model_.rows is None:
        raise InvalidParameterError(
            'A model fitted on kernel="precomputed" holds no training rows, which a saved '
            "exact model transforms through; fit it on the rows with a named kernel to save it.")
    if holds_sparse_rows(estimator.X_fit_):
        raise InvalidParameterError(
            "A model fitted on scipy.sparse rows cannot be saved (a model file holds dense "
            "arrays); fit it on X.toarray() to save it.")


def array_digest(value) -> str:
    """The digest of an array; a dask array's taken panel by panel, one computed at a time."""
    if not isinstance(value, da.Array):
        return digest(np.asarray(value))
    panels = (value[start:start + size].compute()
              for start, size in zip(np.cumsum((0,) + value.chunks[0][:-1]), value.chunks[0]))
    return digest_of_rows(panels, value.dtype, value.shape)


def load_exact(path: PathOrURL, estimator_class: type, *,
               storage_options: dict | None = None):
    """Read a model written by :func:`save_exact`: checked as a whole, its rows lazily.

    Raises
    ------
    ModelFormatError
        Not such a model, a damaged array or attribute, or a model no fit
        could have made; the message names the array or attribute.
    """
    where = os.fspath(path)
    with about(where):
        group = open_group(path, storage_options=storage_options)
        attrs = group.attrs.asdict()
        check_header(attrs, ESTIMATOR, FORMAT_VERSION,
                     f"{ESTIMATOR}.save or `kpca-dask fit --exact`")
        return _rebuilt(group, attrs, estimator_class)


def _rebuilt(group: zarr.Group, attrs: dict, estimator_class: type):
    names = sorted(set(group.array_keys()))
    missing = [name for name in _LARGE + _SMALL if name not in names]
    if missing or not isinstance(attrs.get("fitted"), dict):
        raise damaged(f"{', '.join(missing) or 'the attribute fitted'} missing")
    small = {name: read_checked(group, name) for name in names if name not in _LARGE}
    # The large arrays are read panel by panel for their digests; transform reads them lazily.
    check_written(attrs, {**small, **{name: None for name in _LARGE}},
                  taken={name: stored_digest(group, name) for name in _LARGE})
    params = attrs.get("params", {})
    try:
        check_params(params, constraints=EXACT_CONSTRAINTS, estimator=ESTIMATOR)
    except InvalidParameterError as exc:
        raise damaged(f"a parameter is invalid: {exc}") from None
    estimator = estimator_class(**params)
    estimator.model_ = _fitted(group, attrs["fitted"], small)
    return estimator


def stored_digest(group: zarr.Group, name: str) -> str:
    """The digest of a large array, read panel by panel; a chunk that fails its checksum is a
    damaged array, named."""
    try:
        return file_digest(group[name])
    except (ValueError, RuntimeError, TypeError) as exc:
        reason = ("a stored chunk fails its crc32c checksum" if "checksum" in str(exc)
                  else f"it cannot be read ({type(exc).__name__}: {exc})")
        raise damaged(f"the array {name!r} is damaged: {reason}") from None


def _fitted(group: zarr.Group, fitted: dict, small: dict) -> ExactFit:
    """The fitted model in ``group``, its shapes checked against each other."""
    rows = da.from_zarr(group["rows"], chunks=group["rows"].chunks)
    vectors = da.from_zarr(group["eigenvectors"], chunks=group["eigenvectors"].chunks)
    try:
        n, p, q = (int(fitted[name]) for name in _SCALARS[::-1])
        kernel, params = canonical_kernel_name(fitted["kernel_"]), dict(fitted["kernel_params_"])
        resolve_kernel_params(kernel, p, kernel_params=params)
        grand_mean, dtype = float(fitted["grand_mean"]), np.dtype(fitted["dtype"])
    except (KeyError, TypeError, ValueError):
        raise damaged("its fitted attributes are not those a fit writes") from None
    shapes = {"rows": rows.shape, "eigenvectors": vectors.shape,
              "eigenvalues": small["eigenvalues"].shape, "centring": small["centring"].shape,
              "explained_variance_ratio": small["explained_variance_ratio"].shape}
    expected = {"rows": (n, p), "eigenvectors": (n, q), "eigenvalues": (q,), "centring": (2, q),
                "explained_variance_ratio": (q,)}
    wrong = [name for name in expected if shapes[name] != expected[name]]
    if wrong or vectors.chunks[0] != rows.chunks[0] or not all(
            np.isfinite(value).all() for value in small.values() if value.dtype.kind == "f"):
        raise damaged(f"the array {(wrong or ['eigenvectors'])[0]!r} does not fit the model "
                      f"of {n} rows and {q} components")
    panels = RowPanels(rows, kernel, params, dtype, held=False)
    model = ExactModel(panels, small["eigenvalues"], vectors,
                       scaled_vectors(vectors, small["eigenvalues"]), small["centring"][0],
                       small["centring"][1], grand_mean)
    layout = None
    if fitted.get("feature_layout_") is not None:
        try:
            layout = layout_from_attribute(fitted["feature_layout_"], small.get("feature_kept"),
                                           small.get("feature_weights"))
        except (KeyError, TypeError, ValueError) as exc:
            raise damaged(f"feature_layout_ is invalid ({exc})") from None
    try:
        rotation = rotation_from_entries(fitted, small, q, p)
    except (KeyError, TypeError, ValueError) as exc:
        raise damaged(f"its rotation is invalid ({exc})") from None
    n_products = fitted.get("n_products_")
    return ExactFit(kernel, params, small["eigenvalues"], vectors,
                    small["explained_variance_ratio"], fitted.get("eigen_solver_"), n, p,
                    rows=rows, lazy=True, grand_mean=grand_mean, by_panels=model,
                    residuals=small.get("eigenvalue_residuals"),
                    n_products=None if n_products is None else int(n_products), layout=layout,
                    rotation=rotation)
