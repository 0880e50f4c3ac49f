"""The Nyström model's life and the input dispatch, between the estimators and the engine.

- inputs: :mod:`~kpca_dask.model.inputs`, the one place input kinds are told
  apart (every input made dask rows; fields and weights on those rows are in
  :mod:`kpca_dask.io.preprocessing.field_inputs`, several fields in
  :mod:`kpca_dask.io.preprocessing.field_sets`);
- parameters: :mod:`~kpca_dask.model.parameters`, the declared table of what
  each parameter may be, and the kernels' parameters;
- the model: :mod:`~kpca_dask.model.fitted` (:class:`~kpca_dask.model.fitted.FittedModel`,
  immutable, whose fields declare how a model file keeps them), made by
  :mod:`~kpca_dask.model.fitting` and :mod:`~kpca_dask.model.growing` (more
  rows, another ``n_components``, merged shards), read by
  :mod:`~kpca_dask.model.outputs` and :mod:`~kpca_dask.model.table_outputs`;
- kernel matrices: :mod:`~kpca_dask.model.precomputed` (``kernel="precomputed"``
  for the Nyström estimator) and :mod:`~kpca_dask.model.kernel_matrices` (the n x n
  matrices worked in place, for the exact estimator and a Nyström fit whose every row is
  a landmark);
- what a read model is held to: :mod:`~kpca_dask.model.checks`; statistics held on a
  cluster: :mod:`~kpca_dask.model.held_statistics`; which rows a model holds:
  :mod:`~kpca_dask.model.provenance`.

Beside it: checkpointed fits, fingerprints and the statistics' files are in
:mod:`kpca_dask.checkpoints` (one layer down: a fit writes them); the exact estimator's model
and fitting in :mod:`kpca_dask.exact` and the EOF toolbox (scalings, patterns, rotation) in
:mod:`kpca_dask.eof` (one layer up: they read this model). Model files themselves (save and
load) are in :mod:`kpca_dask.storage`.
"""
