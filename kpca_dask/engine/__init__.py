"""The computation on dask, by concern: row sampling (:mod:`~kpca_dask.engine.sampling`), the
kernels' bandwidth and parameters (:mod:`~kpca_dask.engine.bandwidth`,
:mod:`~kpca_dask.engine.kernel_params`), the one pass (:mod:`~kpca_dask.engine.passes`), the
small m x m problem (:mod:`~kpca_dask.engine.solve`), the same in tiles over the workers
(:mod:`~kpca_dask.engine.tiles`), exact kernel PCA's Gram and matrix-free ways
(:mod:`~kpca_dask.engine.exact`), the Hilbert EOF (:mod:`~kpca_dask.engine.hilbert`),
reconstruction and pre-images (:mod:`~kpca_dask.engine.preimages`), rotation numerics
(:mod:`~kpca_dask.engine.orthomax`), and how graph values are held and fetched
(:mod:`~kpca_dask.engine.graph_values`)."""
