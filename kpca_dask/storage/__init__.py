"""Model files: a fitted model saved to and loaded from a Zarr group, field by field."""
