"""The EOF toolbox: what a climate analyst reads beside the components, for both estimators.

- :mod:`~kpca_dask.eof.scalings`: explained variances, North's rule-of-thumb errors and the
  scalings of scores and EOFs (``scaling=``, ``eofscaling=``, ``pcscaling=``);
- :mod:`~kpca_dask.eof.patterns`: covariance, correlation and EOF maps of the components over
  the features of the data, put back on the fields the model was fitted on;
- :mod:`~kpca_dask.eof.rotation`: varimax and promax rotation of the leading modes
  (:func:`kpca_dask.rotate`, :class:`kpca_dask.RotatedEOF`).

The numbers underneath are in the engine: the orthomax rotation of a small q x q problem in
:mod:`kpca_dask.engine.orthomax` and the cross moments of scores with the data in
:mod:`kpca_dask.engine.exact.cross_moments`; several fields are joined and split back in
:mod:`kpca_dask.io.preprocessing.field_sets`. The toolbox reads a fitted estimator through
its ``model_``
and the model's outputs (:mod:`kpca_dask.model.outputs`), so it sits above :mod:`kpca_dask.model`.
"""
