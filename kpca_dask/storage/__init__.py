"""Model files: a fitted model saved to and loaded from a Zarr group, field by field.

:mod:`~kpca_dask.storage.model_files` saves and loads (checksums, format
versions, the checks a loaded model passes); :mod:`~kpca_dask.storage.model_entries`
is the file's schema, derived from what the fields of
:class:`~kpca_dask.model.fitted.FittedModel` declare;
:mod:`~kpca_dask.storage.layout_files` keeps a field's layout as JSON.
"""
