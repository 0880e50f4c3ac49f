"""Checkpoints and the saved state they share with model files, on disk in Zarr groups.

- :mod:`~kpca_dask.checkpoints.fit_checkpoint`: the Nyström fit's checkpoint (the finished
  part of the pass), resumed by the fit it was made for;
- :mod:`~kpca_dask.checkpoints.exact_checkpoint`: the matrix-free exact solve's checkpoint
  (the Krylov state after every product);
- :mod:`~kpca_dask.checkpoints.checkpoint_files`: a checkpoint's arrays written with checksums
  and read back checked;
- :mod:`~kpca_dask.checkpoints.fingerprints`: what identifies a fit's data and parameters,
  from metadata only, by which a checkpoint is matched (and a model's rows recorded);
- :mod:`~kpca_dask.checkpoints.statistics_files`: the pass statistics in a Zarr group, one
  layout for model files and checkpoints;
- :mod:`~kpca_dask.checkpoints.file_checks`: the checks an array, pass statistics or a
  landmark path read back from a file is held to, and the error a damaged file raises.

A fit writes its checkpoint as it goes, so this package sits below :mod:`kpca_dask.model`;
the checks of a whole fitted model are there (:mod:`kpca_dask.model.checks`), and model files
themselves one layer up, in :mod:`kpca_dask.storage`.
"""
