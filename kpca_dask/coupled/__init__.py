"""Coupled fields: kernel MCA and kernel CCA of two fields that share their samples.

- :mod:`~kpca_dask.coupled.coupled_model`: the immutable fitted model
  (:class:`~kpca_dask.coupled.coupled_model.CoupledFit`, the estimators' ``model_``) and the
  fit that makes it: each field's landmarks as a kernel PCA's, one coupled pass, the small
  problem (:mod:`kpca_dask.engine.solve.coupled`).

The estimators are :class:`~kpca_dask.KernelMCA` and :class:`~kpca_dask.KernelCCA`
(:mod:`kpca_dask.estimators.coupled`); their files are in :mod:`kpca_dask.storage.coupled_files`.
"""
