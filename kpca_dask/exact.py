"""Exact kernel PCA on the full n x n Gram matrix (DESIGN §1), for small n.

O(n^2) memory and O(n^3) time: this is the reference the Nyström estimator is
tested against, not a tool for large data.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ._validation import as_numpy_array
from .errors import InvalidInputError
from .kernels import canonical_kernel_name, pairwise_kernel, resolve_kernel_params
from .nystrom import ZERO_EIGENVALUE_RTOL, n_components_for

__all__ = ["ExactKernelPCA"]


class ExactKernelPCA(TransformerMixin, BaseEstimator):
    """Exact kernel PCA through the centred Gram matrix (small n only).

    Parameters
    ----------
    n_components : int, float in (0, 1) or None, default=None
        Number of components; a float eta keeps the smallest q whose cumulative
        explained-variance ratio reaches eta; None keeps every positive one.
    kernel : str or callable, default="rbf"
        See :mod:`kpca_dask.kernels`.
    gamma, degree, coef0, kernel_params
        Kernel parameters, named as in scikit-learn.

    Attributes
    ----------
    eigenvalues_ : ndarray of shape (n_components,)
        Eigenvalues of the centred Gram matrix J K J, descending.
    eigenvectors_ : ndarray of shape (n_samples, n_components)
        The matching unit eigenvectors A_q.
    explained_variance_ratio_ : ndarray of shape (n_components,)

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(50, 3))
    >>> ExactKernelPCA(n_components=2, kernel="rbf", gamma=0.5).fit_transform(X).shape
    (50, 2)
    """

    def __init__(self, n_components=None, *, kernel="rbf", gamma=None, degree=3, coef0=1.0,
                 kernel_params=None):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params

    def fit(self, X, y=None):
        X = as_numpy_array(X, min_samples=2)
        self.kernel_ = canonical_kernel_name(self.kernel)
        self.kernel_params_ = resolve_kernel_params(
            self.kernel_, X.shape[1], gamma=self.gamma, degree=self.degree, coef0=self.coef0,
            kernel_params=self.kernel_params)
        K = pairwise_kernel(X, X, self.kernel_, **self.kernel_params_).astype(np.float64)
        K = 0.5 * (K + K.T)
        self._column_means = K.mean(axis=0)
        self._grand_mean = self._column_means.mean()
        # K~ = J K J: subtract row and column means, add back the grand mean.
        Kc = K - self._column_means[None, :] - self._column_means[:, None] + self._grand_mean
        lam, A = linalg.eigh(Kc)
        lam, A = lam[::-1], A[:, ::-1]
        n_positive = int(np.sum(lam > ZERO_EIGENVALUE_RTOL * max(lam[0], 0.0)))
        total = float(np.sum(lam[lam > 0]))
        q = n_components_for(self.n_components, lam, n_positive, total)
        A = A[:, :q]
        signs = np.sign(A[np.argmax(np.abs(A), axis=0), np.arange(q)])
        signs[signs == 0] = 1.0
        self.eigenvalues_ = lam[:q].copy()
        self.eigenvectors_ = A * signs
        self.explained_variance_ratio_ = self.eigenvalues_ / total
        self.X_fit_ = X
        self.n_features_in_ = X.shape[1]
        return self

    def fit_transform(self, X, y=None):
        """Components of the training points: Y = A_q Lambda_q^{1/2}."""
        self.fit(X)
        return self.eigenvectors_ * np.sqrt(self.eigenvalues_)

    def transform(self, X):
        """y(x) = Lambda_q^{-1/2} A_q^T k~_n(x) with the centred kernel vector."""
        check_is_fitted(self)
        X = as_numpy_array(X, min_samples=1)
        if X.shape[1] != self.n_features_in_:
            raise InvalidInputError(
                f"X has {X.shape[1]} features, but ExactKernelPCA is expecting "
                f"{self.n_features_in_} features as input."
            )
        Kx = pairwise_kernel(X, self.X_fit_, self.kernel_, **self.kernel_params_)
        Kx = Kx - Kx.mean(axis=1, keepdims=True) - self._column_means[None, :] + self._grand_mean
        return Kx @ self.eigenvectors_ / np.sqrt(self.eigenvalues_)
