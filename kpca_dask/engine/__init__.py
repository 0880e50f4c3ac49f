"""The computation on dask: seeded row sampling, bandwidth rules, the one pass and its
statistics, the landmarks' factor and the small m x m problem (in process, on a worker or in
tiles over the workers), the eigensolver, reconstruction and novelty, feature-chunked terms,
the exact Gram of wide data, and the memory each of these may take."""
