"""What a fitted model gives: embeddings, pre-images and novelty scores, lazily.

Each method reads the fitted model (:class:`~kpca_dask.model.fitted.FittedModel`)
and returns the container it was given: a lazy dask array for dask or Zarr
input, numpy for in-memory input, a DataArray for a DataArray, a DataFrame
or Series for a frame (built by :mod:`kpca_dask.io.labelled`).
"""

from __future__ import annotations

import dask
import numpy as np
from sklearn.base import TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ..engine.passes import project
from ..engine.reconstruction import reconstruct, reconstruction_error
from ..errors import InvalidInputError, NotInvertibleError
from ..io.fields import as_field
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
from .field_inputs import model_rows, stacked_positions, unweighted
from .inputs import as_rows, computed, held_in_memory, is_xarray
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
        lazy = not held_in_memory(X)  # dask, Zarr, a path: a lazy result
        X, like = self._model_rows(X, frame)
        Y = self._embedding(X, frame)
        if not lazy:
            Y = computed(Y)
        if like is not None:
            attrs = {"kernel": model.kernel, **model.kernel_params,
                     "n_landmarks": model.n_landmarks}
            return label_embedding(Y, like, attrs)
        if lazy and frame is not None:
            return frame_like(Y, frame, self.get_feature_names_out())
        return Y

    def _layout(self):
        """The fitted layout of the features (:class:`~kpca_dask.io.fields.FeatureLayout`)."""
        return self.model_.layout

    def _model_rows(self, X, frame=None, *, weighted: bool = True):
        """``X`` as rows of the model's features (masked, checked, weighted), and the DataArray
        the outputs are labelled like (None for unlabelled input)."""
        return model_rows(self.model_.layout, X, weighted=weighted, frame=frame)

    def _embedding(self, X, frame=None):
        """The lazy embedding of the rows ``X`` (features as :meth:`_model_rows` gives them)."""
        model = self.model_
        # Stored column chunks are kept: kernel rows (only the landmark columns are read)
        # and points (the kernels sum over them, docs/design.md §12).
        X, _ = as_rows(X, frame)
        check_n_features(X, model.n_features, type(self).__name__)
        if model.kernel == PRECOMPUTED:
            X = new_point_rows(X, model.landmark_indices)
        Y = project(X, model.landmarks, model.solution.projection, model.solution.offset,
                    model.kernel, model.kernel_params, np.dtype(model.settings.dtype))
        return Y.astype(_result_dtype(model, X.dtype), copy=False)

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
            ``feature`` dimension, or for a model fitted on a field the field
            itself (its feature dimensions and coordinates, NaN on the mask).
            Weighted features are divided by their weights (NaN where a weight
            is 0), so pre-images are in the units of the input.

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
        X_hat = self._preimages(Y)
        if model.layout is not None and model.layout.dims:  # the field's stacked positions
            X_hat = stacked_positions(X_hat, model.layout)
        if frame is not None:
            names = model.feature_names
            names = list(names) if names is not None else [
                f"x{i}" for i in range(model.n_features)]
            return frame_like(X_hat if is_lazy else computed(X_hat), frame, names)
        return X_hat if is_lazy else computed(X_hat)

    def _preimages(self, Y):
        """Lazy pre-images of the embedding rows ``Y``, in the units of the input features."""
        model = self.model_
        if Y.shape[1] != model.n_components:
            raise InvalidInputError(
                f"The embedding has {Y.shape[1]} column(s), but this model has "
                f"{model.n_components} components; pass the output of transform (shape "
                f"(n_samples, {model.n_components})).")
        X_hat = reconstruct(Y, model.preimage.centres, model.preimage.coefficients,
                            model.kernel, model.kernel_params)
        return unweighted(X_hat.astype(_result_dtype(model, Y.dtype), copy=False),
                          model.layout)

    def _inverse_data_array(self, Y):
        if "component" not in Y.dims or Y.ndim != 2:
            raise InvalidInputError(
                f"A DataArray embedding needs dims (sample, 'component'); got {Y.dims}. "
                "Pass the output of transform, or rename its component dimension.")
        Y = Y.transpose(..., "component")
        layout = self.model_.layout
        if layout is not None and layout.dims:
            X_hat = self._preimages(as_rows(Y.data, None, what="The embedding")[0])
            if not dask.is_dask_collection(Y.data):
                X_hat = computed(X_hat)
            sample_dim = Y.dims[0]
            coord = Y.indexes[sample_dim] if sample_dim in Y.indexes else None
            return as_field(X_hat, layout, {sample_dim: coord}, name="reconstruction")
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
        is_lazy = not held_in_memory(X)
        X, like = self._model_rows(X, frame)
        X, _ = as_rows(X, frame)
        check_n_features(X, model.n_features, type(self).__name__)
        errors = reconstruction_error(
            X, model.landmarks, model.solution.projection, model.solution.offset,
            model.novelty, model.kernel, model.kernel_params, np.dtype(model.settings.dtype))
        errors = errors.astype(_result_dtype(model, X.dtype), copy=False)
        errors = errors if is_lazy else computed(errors)
        if like is not None:
            return label_rows(errors, like, name="reconstruction_error")
        if frame is not None:
            return series_like(errors, frame, "reconstruction_error")
        return errors

    def score_samples(self, X):
        """Minus :meth:`reconstruction_error`: higher means more like the training data.

        scikit-learn's outlier-detection convention (as in
        ``IsolationForest.score_samples``); same input and output types as
        :meth:`reconstruction_error`.
        """
        scores = -self.reconstruction_error(X)
        return scores.rename("score_samples") if is_frame(X) else scores
