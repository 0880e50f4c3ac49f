"""The Hilbert (complex) EOF's computation: its landmarks and kernel scale, the Hermitian
Gram matrix of a field and the Hermitian landmark problem (the analytic signal itself is
preprocessing of the rows, :mod:`kpca_dask.io.preprocessing.analytic_signal`)."""
