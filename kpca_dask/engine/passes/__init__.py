"""The one pass over the data: the Nyström statistics summed by chains of row blocks
(:mod:`~kpca_dask.engine.passes.nystrom`), by feature panels for wide rows
(:mod:`~kpca_dask.engine.passes.wide`), and the bootstrap's replicate sums in the same read
(:mod:`~kpca_dask.engine.passes.replicates`)."""
