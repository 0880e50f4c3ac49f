"""What a test's worker process loads before its first task, loaded once per test process.

The tests start their clusters' worker processes from a forkserver
(:func:`_clusters.use_forkserver`): a server that imports this module once and then forks
one worker per request, each with these modules and kpca-dask's compiled kernels in place.
A spawned worker would import them again (about 2 s of CPU), and load the kernels on its
first task (1.4 s more); the suite starts hundreds of workers. Nothing here computes or
starts a thread, so forking stays safe.
"""

from __future__ import annotations

import importlib

from kpca_dask.blocks import epilogue

#: kpca-dask's modules that tasks run, and the libraries they read and write with.
MODULES = ("kpca_dask.engine.passes", "kpca_dask.engine.solve", "kpca_dask.blocks.statistics",
           "kpca_dask.blocks.kernels", "kpca_dask.blocks.projection", "kpca_dask.io",
           "sklearn.utils", "zarr", "xarray")

for _name in MODULES:
    importlib.import_module(_name)
epilogue.compile_all()  # numba's compiled kernels, from its cache after the first time
