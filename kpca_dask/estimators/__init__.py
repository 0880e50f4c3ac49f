"""The scikit-learn estimators: parameters in, a fitted model out.

:class:`~kpca_dask.KernelPCA` (:mod:`~kpca_dask.estimators.kernel_pca`), Nyström
kernel PCA in one pass over data of any size, and
:class:`~kpca_dask.ExactKernelPCA` (:mod:`~kpca_dask.estimators.exact`), exact
kernel PCA on the full n x n kernel matrix, for small n. Every public method is
written, with its documentation, in its class, and calls a function of
:mod:`kpca_dask.model` that does the work.
"""
