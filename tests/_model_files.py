"""Model files as an older version (or a hand) would have written them: attributes edited and
signed again, so that a loader reads what they say rather than refusing a changed digest."""

from __future__ import annotations

from collections.abc import Callable

import zarr

from kpca_dask.io.checksums import attributes_digest


def rewritten_attributes(path, edit: Callable[[dict], None]) -> None:
    """Apply ``edit`` to the attributes of the model file at ``path`` (a dict, changed in
    place) and write them back with the digest of the attributes they now hold."""
    group = zarr.open_group(str(path), mode="r+")
    attrs = group.attrs.asdict()
    edit(attrs)
    checksums = attrs["checksums"]
    names = [name for name in checksums["attribute_names"] if name in attrs]
    checksums["attribute_names"] = names
    checksums["attributes"] = attributes_digest({name: attrs[name] for name in names})
    group.attrs.put(attrs)
