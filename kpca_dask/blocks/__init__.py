"""Pure-numpy block functions: kernel blocks and deterministic signs (no dask)."""
