"""The small m x m problem after the pass: the landmarks' factor and its memory, the
eigensolver and its hand-over to the dense way, the components and the solution
(:mod:`~kpca_dask.engine.solve.nystrom`), in this process or on a worker that holds the
statistics (:mod:`~kpca_dask.engine.solve.on_cluster`)."""
