"""A model's m x m statistics where a cluster holds them: read, saved, or found gone.

A fit on a distributed cluster leaves G, the pass's m x m sums, on the
workers as a persisted dask array (:mod:`kpca_dask.engine.solve.on_cluster`,
docs/design.md §11); the model in the client holds n, s, t and r only. Three
things follow, each here:

- **saving**: the workers write G into the model file, chunk by chunk, and the
  digest the file records is taken where G is (one chunk: on its worker; tiles:
  one row of tiles at a time through this process) — :func:`saved_gram`;
- **the cluster gone** (its client closed, or the workers holding G lost): a
  saved model reads G back from its file (:func:`live_statistics`), lazily when a
  distributed client is at hand, else into this process; an unsaved one
  cannot, and the error says so and what to do;
- every other statistic stays where it always was.
"""

from __future__ import annotations

import dataclasses

import dask
import dask.array as da
import numpy as np

from ..blocks.statistics import PassStatistics
from ..engine.solve.on_cluster import client_of, is_alive, is_held
from ..errors import NoStatisticsError, about
from ..io import open_group
from ..io.checksums import digest, digest_of_rows, read_checked
from .fitted import FittedModel

__all__ = ["live_statistics", "saved_gram", "GRAM_NAME"]

#: Where a model file keeps G (kpca_dask.checkpoints.statistics_files).
GRAM_NAME = "statistics_gram"


def live_statistics(model: FittedModel, action: str, name: str = "this model"
                    ) -> PassStatistics | None:
    """The statistics of ``model`` ready to use: held, re-read from its file, or an error.

    None for a model that keeps none (a version-1 file; the caller says so).
    """
    stats = model.statistics
    if not is_held(stats) or is_alive(stats.gram):
        return stats
    if model.statistics_file is None:
        raise NoStatisticsError(
            f"Cannot {action} {name}: its pass statistics (the m x m sums G) were kept on the "
            "cluster that fitted it, and that cluster is gone (its client was closed, or the "
            "workers that held them were lost), and the model was not saved while it ran. "
            "Save a model fitted on a cluster before closing its client (KernelPCA.save: the "
            "workers write G into the file, and the model reads it from there once the "
            "cluster is gone), or fit it again.")
    return dataclasses.replace(stats, gram=_gram_from_file(model.statistics_file))


def _gram_from_file(path: str):
    """G of the model file at ``path``: a lazy dask array on a cluster, else numpy here."""
    from .._parallel import distributed_client

    group = open_group(path)
    if distributed_client() is None:
        with about(path):
            return read_checked(group, GRAM_NAME)
    array = group[GRAM_NAME]  # every chunk checked against its crc32c as a worker reads it
    return da.from_zarr(array, chunks=array.chunks)


def saved_gram(gram: da.Array) -> tuple[da.Array, str]:
    """G as the workers will write it (C order, chunk by chunk) and its digest.

    The digest is that of the whole array (:func:`kpca_dask.io.checksums.digest`),
    as a model file records it, computed without bringing G here at once.
    """
    if gram.numblocks == (1, 1):
        gram = gram.map_blocks(c_ordered, dtype=np.float64)
        task = dask.delayed(digest, pure=True)(gram.to_delayed()[0, 0])
        client = client_of(gram)
        value = client.compute(task).result() if client is not None else task.compute()
        return gram, value
    rows = (gram.blocks[i, :] for i in range(gram.numblocks[0]))
    return gram, digest_of_rows((_computed(row) for row in rows), np.float64, gram.shape)


def c_ordered(gram: np.ndarray) -> np.ndarray:
    """A C-ordered G without a copy: the pass's G is Fortran-ordered and exactly symmetric
    (its upper triangle copied from its lower), so its transpose is the same matrix."""
    return gram.T if gram.flags.f_contiguous and not gram.flags.c_contiguous else gram


def _computed(collection) -> np.ndarray:
    client = client_of(collection)
    return client.compute(collection).result() if client is not None else collection.compute()
