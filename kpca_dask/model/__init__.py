"""The fitted model and everything around it, between the estimators and the engine.

- inputs: :mod:`~kpca_dask.model.inputs`, the one place input kinds are told
  apart (every input made dask rows), and :mod:`~kpca_dask.model.field_inputs`
  (fields and weights on those rows);
- parameters: :mod:`~kpca_dask.model.parameters`, the declared table of what
  each parameter may be, and the kernels' parameters;
- the model: :mod:`~kpca_dask.model.fitted` (:class:`~kpca_dask.model.fitted.FittedModel`,
  immutable, whose fields declare how a model file keeps them), made by
  :mod:`~kpca_dask.model.fitting` and :mod:`~kpca_dask.model.growing` (more
  rows, another ``n_components``, merged shards), read by
  :mod:`~kpca_dask.model.outputs`, :mod:`~kpca_dask.model.patterns` and
  :mod:`~kpca_dask.model.table_outputs`;
- kernel matrices: :mod:`~kpca_dask.model.precomputed` (``kernel="precomputed"``
  for the Nyström estimator) and :mod:`~kpca_dask.model.kernel_matrices` (for
  the exact one);
- what a read model or checkpoint is held to: :mod:`~kpca_dask.model.checks`;
  the pass statistics in a Zarr group: :mod:`~kpca_dask.model.statistics_files`;
  statistics held on a cluster: :mod:`~kpca_dask.model.held_statistics`;
- checkpointed fits: :mod:`~kpca_dask.model.checkpoints`,
  :mod:`~kpca_dask.model.checkpoint_files` and the fingerprints they are matched
  by (:mod:`~kpca_dask.model.fingerprints`); which rows a model holds:
  :mod:`~kpca_dask.model.provenance`.

Model files themselves (save and load) are one layer up, in :mod:`kpca_dask.storage`.
"""
