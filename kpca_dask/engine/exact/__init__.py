"""Exact kernel PCA's computation: the n x n Gram matrix of the rows by pairs of row panels
(:mod:`~kpca_dask.engine.exact.gram`), the matrix-free solver by row panels
(:mod:`~kpca_dask.engine.exact.matrix_free`) and the maps' moments of the fitted modes
(:mod:`~kpca_dask.engine.exact.cross_moments`)."""
