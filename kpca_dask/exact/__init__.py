"""The exact estimator's model and fitting: :class:`~kpca_dask.ExactKernelPCA` beyond memory.

- :mod:`~kpca_dask.exact.exact_fitting`: which solver a fit takes (dense, or matrix-free
  Krylov passes over the data) and the matrix-free fit, resumable from its checkpoint
  (:mod:`kpca_dask.checkpoints.exact_checkpoint`);
- :mod:`~kpca_dask.exact.exact_model`: the immutable fitted model that fit makes
  (:class:`~kpca_dask.exact.exact_model.ExactFit`, the estimator's ``model_``), held by
  blocks of its training rows, and what transform and the outputs read from it.

The n x n kernel matrices worked in place (the dense solver's, and the Nyström fit's when every
row is a landmark) are shared with :class:`~kpca_dask.KernelPCA` and stay in
:mod:`kpca_dask.model.kernel_matrices`. Model files of this estimator are in
:mod:`kpca_dask.storage.exact_files`.
"""
