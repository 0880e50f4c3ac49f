"""What a fitted model gives: embeddings, pre-images and novelty scores, lazily.

Each method reads the fitted model (:class:`~kpca_dask.model.fitted.FittedModel`)
and returns the container it was given: a lazy dask array for dask or Zarr
input, numpy for in-memory input, a DataArray for a DataArray, a DataFrame
or Series for a frame (built by :mod:`kpca_dask.io.labelled`).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ..engine.passes import project
from ..engine.reconstruction import reconstruct, reconstruction_error
from ..errors import InvalidInputError, NotInvertibleError
from ..io.frames import (
    Partitions,
    frame_to_array,
    frame_to_numpy,
    is_dask_frame,
    is_frame,
    select_columns,
    table_input,
)
from ..io.labelled import frame_like, label_embedding, label_rows, series_like
from ..validation import check_n_features
from .inputs import as_rows, computed, is_xarray, open_input
from .precomputed import PRECOMPUTED, new_point_rows, refuse_scores

__all__ = ["OutputsMixin"]


def _result_dtype(model, input_dtype) -> np.dtype:
    """float32 when the model or the input is float32, float64 otherwise.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> model = SimpleNamespace(settings=SimpleNamespace(dtype="float64"))
    >>> _result_dtype(model, np.float32), _result_dtype(model, np.int64)
    (dtype('float32'), dtype('float64'))
    """
    single = model.settings.dtype == "float32" or np.dtype(input_dtype) == np.float32
    return np.dtype(np.float32 if single else np.float64)


class OutputsMixin(TransformerMixin):
    """transform, inverse_transform, reconstruction_error and score_samples of a fitted model.

    The estimator that mixes it in keeps its fitted model in ``model_``; every
    output reads that model only (its settings, not the estimator's
    parameters, which take effect at the next fit). Outputs are float32 when
    the model is (``dtype="float32"``) or the input is, as scikit-learn's
    transformers keep float32; float64 otherwise.
    """

    def transform(self, X):
        """Project rows onto the principal components: y(x) = P^T k_m(x) - c.

        Parameters
        ----------
        X : array-like, dask array, xarray.DataArray or Zarr path/URL
            Shape (n_samples, n_features).

        Returns
        -------
        Y : ndarray, dask array or xarray.DataArray of shape (n_samples, ``n_components_``)
            A lazy dask array (same row chunks) for dask or Zarr input, numpy
            for in-memory input; for a DataArray, a DataArray with dims
            (sample dim, "component"), the sample coordinates and the kernel
            parameters in ``attrs``.
        """
        check_is_fitted(self)
        X, frame = table_input(self, X)
        model = self.model_
        # Stored column chunks are kept: kernel rows (only the landmark columns are read)
        # and points (the kernels sum over them, docs/design.md §12).
        X = open_input(X)
        if is_xarray(X):
            attrs = {"kernel": model.kernel, **model.kernel_params,
                     "n_landmarks": model.n_landmarks}
            return label_embedding(self.transform(X.data), X, attrs)
        X, is_lazy = as_rows(X, frame)
        check_n_features(X, model.n_features, type(self).__name__)
        if model.kernel == PRECOMPUTED:
            X = new_point_rows(X, model.landmark_indices)
        Y = project(X, model.landmarks, model.solution.projection, model.solution.offset,
                    model.kernel, model.kernel_params, np.dtype(model.settings.dtype))
        Y = Y.astype(_result_dtype(model, X.dtype), copy=False)
        if is_lazy:
            return Y if frame is None else frame_like(Y, frame, self.get_feature_names_out())
        return computed(Y)

    def inverse_transform(self, Y):
        """Map embeddings back to input space: the pre-images x_hat(y) (docs/design.md §6).

        Needs a model fitted with ``fit_inverse_transform=True``. As in
        scikit-learn, x_hat is a kernel ridge regression from embeddings to
        rows, so it is an approximate pre-image, smoothed by ``alpha``.

        Parameters
        ----------
        Y : array-like, dask array or xarray.DataArray of shape (n_samples, ``n_components_``)
            Embeddings, e.g. from :meth:`transform`. A DataArray needs a
            ``component`` dimension.

        Returns
        -------
        X_hat : ndarray, dask array or xarray.DataArray of shape (n_samples, ``n_features_in_``)
            A lazy dask array for dask input, numpy for in-memory input; for a
            DataArray, a DataArray with its sample coordinates and a
            ``feature`` dimension.

        Examples
        --------
        >>> import numpy as np
        >>> from kpca_dask import KernelPCA
        >>> X = np.random.default_rng(0).normal(size=(300, 3))
        >>> kpca = KernelPCA(n_components=3, gamma=0.1, n_landmarks=100, random_state=0,
        ...                  fit_inverse_transform=True, alpha=1e-2).fit(X)
        >>> X_hat = kpca.inverse_transform(kpca.transform(X))
        >>> X_hat.shape, bool(np.mean((X_hat - X) ** 2) < 0.1 * np.mean(X ** 2))
        ((300, 3), True)
        """
        check_is_fitted(self)
        model = self.model_
        if model.preimage is None:
            raise NotInvertibleError(
                "This model has no pre-image map, so it cannot inverse_transform: it was fitted "
                "without fit_inverse_transform=True, or re-solved, updated or merged since (the "
                "map is learnt by a pass over the training rows). Fit it with "
                "KernelPCA(..., fit_inverse_transform=True) (one more pass over the data).")
        if is_xarray(Y):
            return self._inverse_data_array(Y)
        frame = None
        if is_dask_frame(Y):
            frame = Partitions.of(select_columns(Y, what="The embedding"))
            Y = frame_to_array(frame, lengths=False, what="The embedding")
        elif is_frame(Y):
            frame, Y = Y, frame_to_numpy(Y, what="The embedding")
        Y, is_lazy = as_rows(Y, frame, what="The embedding")
        if Y.shape[1] != model.n_components:
            raise InvalidInputError(
                f"The embedding has {Y.shape[1]} column(s), but this model has "
                f"{model.n_components} components; pass the output of transform (shape "
                f"(n_samples, {model.n_components})).")
        X_hat = reconstruct(Y, model.preimage.centres, model.preimage.coefficients,
                            model.kernel, model.kernel_params)
        X_hat = X_hat.astype(_result_dtype(model, Y.dtype), copy=False)
        if frame is not None:
            names = model.feature_names
            names = list(names) if names is not None else [
                f"x{i}" for i in range(model.n_features)]
            return frame_like(X_hat if is_lazy else computed(X_hat), frame, names)
        return X_hat if is_lazy else computed(X_hat)

    def _inverse_data_array(self, Y):
        if "component" not in Y.dims or Y.ndim != 2:
            raise InvalidInputError(
                f"A DataArray embedding needs dims (sample, 'component'); got {Y.dims}. "
                "Pass the output of transform, or rename its component dimension.")
        Y = Y.transpose(..., "component")
        return label_rows(self.inverse_transform(Y.data), Y, name="reconstruction",
                          column_dim="feature")

    def reconstruction_error(self, X):
        """Squared distance in feature space from each row to the principal subspace.

        ``e(x) = |phi(x) - phi_bar|^2 - sum_{j<=q} y_j(x)^2`` in the Nyström
        feature space (docs/design.md §6; Hoffmann 2007): large for rows unlike the
        training data, a novelty score. Every model can compute it; no pass
        beyond the fit's is needed.

        Parameters
        ----------
        X : array-like, dask array, xarray.DataArray or Zarr path/URL
            Shape (n_samples, n_features), as for :meth:`transform`.

        Returns
        -------
        errors : ndarray, dask array or xarray.DataArray of shape (n_samples,)
            Lazy for dask or Zarr input, numpy for in-memory input, a
            DataArray with the sample coordinates for a DataArray.

        Examples
        --------
        >>> import numpy as np, kpca_dask
        >>> X = np.random.default_rng(0).normal(size=(300, 2))
        >>> kpca = kpca_dask.KernelPCA(n_components=5, gamma=0.5, n_landmarks=100,
        ...                            random_state=0).fit(X)
        >>> errors = kpca.reconstruction_error(np.array([[0.0, 0.0], [6.0, 6.0]]))
        >>> bool(errors[0] < errors[1])
        True
        """
        check_is_fitted(self)
        model = self.model_
        if model.novelty is None:
            raise NotInvertibleError(
                "This model was saved by an older kpca-dask without the mean feature that "
                "reconstruction_error needs; fit it again.")
        if model.kernel == PRECOMPUTED:
            refuse_scores("reconstruction_error and score_samples")
        X, frame = table_input(self, X)
        X = open_input(X)
        if is_xarray(X):
            return label_rows(self.reconstruction_error(X.data), X, name="reconstruction_error")
        X, is_lazy = as_rows(X, frame)
        check_n_features(X, model.n_features, type(self).__name__)
        errors = reconstruction_error(
            X, model.landmarks, model.solution.projection, model.solution.offset,
            model.novelty, model.kernel, model.kernel_params, np.dtype(model.settings.dtype))
        errors = errors.astype(_result_dtype(model, X.dtype), copy=False)
        if frame is not None:
            return series_like(errors if is_lazy else computed(errors), frame,
                               "reconstruction_error")
        return errors if is_lazy else computed(errors)

    def score_samples(self, X):
        """Minus :meth:`reconstruction_error`: higher means more like the training data.

        scikit-learn's outlier-detection convention (as in
        ``IsolationForest.score_samples``); same input and output types as
        :meth:`reconstruction_error`.
        """
        scores = -self.reconstruction_error(X)
        return scores.rename("score_samples") if is_frame(X) else scores
