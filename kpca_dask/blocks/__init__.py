"""Pure-numpy block functions (no dask): kernel blocks by family and their compiled epilogue,
a row block's pass statistics and projection, kernel terms summed over feature chunks, sparse
and wide rows, scikit-learn-style row-pair kernels, deterministic signs."""
