"""The matrix-free solve's checkpoint: the Krylov state after every product, on disk.

Each product of a matrix-free exact fit is a pass over the data (docs/design.md
§13), minutes at n = 10^5 and more beyond; ``ExactKernelPCA.fit(X,
checkpoint=path)`` saves the solver's state
(:class:`~kpca_dask.engine.solve.eigensolver.KrylovState`) after each one, and a
later fit with the same data and parameters goes on from the last one saved
and ends as the uninterrupted fit would have. Layout of the Zarr v3 group (no
pickle; JSON attributes and plain arrays)::

    zarr.json        attributes["kpca_dask_exact_checkpoint"]: format, format version,
                     identity of the fit, trace K, the current state (its cycle's group,
                     how many of its blocks count, the solver's counters) and the
                     digests of every array that counts
    row_sums         (n,) float64, k = K 1, from the first product
    cycle-NNNNNN/    the Krylov basis of the current cycle:
        basis-KKK    (n, b) float64, its K-th orthonormal block (the restart block first)
        image-KKK    (n, b) float64, that block times J K J

A product adds its block and image to the cycle's group, then commits them by
one rewrite of the root ``zarr.json`` (Zarr's local store writes a temporary
file and renames it); a restart writes a new cycle's group, commits, and only
then deletes the old one. A kill at any instant leaves the last committed
state whole; arrays written after it are not counted and are overwritten. As
for the Nyström pass's checkpoints (:mod:`kpca_dask.checkpoints.fit_checkpoint`), the
identity is matched key by key, every chunk carries a crc32c checksum and every
array a digest (:mod:`kpca_dask.io.checksums`), and what is read is checked
before the solver believes it. Storage: at most 2 n b (depth + 1) float64
words (the blocks of a cycle); each product writes 2 n b.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import zarr

from ..engine.solve.eigensolver import KrylovState
from ..errors import about
from ..io import PathOrURL, store_location
from ..io.checksums import (
    CHECKSUMS_ATTRIBUTE,
    check_digests,
    checksummed_codecs,
    digest,
    read_checked,
    recorded_digests,
)
from .file_checks import damaged
from .fingerprints import callable_identity, data_identity, recorded
from .fit_checkpoint import opened_checkpoint

__all__ = ["SolveCheckpoint", "solve_identity"]

FORMAT = "kpca-dask-exact-checkpoint"
FORMAT_VERSION = 1
_ATTRIBUTE = "kpca_dask_exact_checkpoint"
_FIX = "Delete the checkpoint and fit again: a fit with a new checkpoint path starts afresh."


def solve_identity(X, params: dict, kernel, count: int, *, tol: float) -> dict:
    """What a checkpoint must match to be resumed: the data (from metadata, as
    :func:`~kpca_dask.checkpoints.fingerprints.fit_identity` identifies them), the kernel as
    given (a gamma rule stays its word), the tiles' dtype and the solve.

    Examples
    --------
    >>> import dask.array as da
    >>> params = {"gamma": "median", "degree": 3, "coef0": 1.0, "kernel_params": None,
    ...           "dtype": "float64"}
    >>> solve_identity(da.zeros((10, 2), chunks=5), params, "rbf", 3, tol=1e-10)["solve"]
    {'count': 3, 'tol': 1e-10, 'seed': 0}
    """
    return recorded({
        "data": data_identity(X),
        "kernel": callable_identity(kernel) if callable(kernel) else kernel,
        "kernel_params": {name: params[name] for name in ("gamma", "degree", "coef0",
                                                          "kernel_params")},
        "dtype": params["dtype"],
        "solve": {"count": int(count), "tol": float(tol), "seed": 0},
    })


@dataclass
class SolveCheckpoint:
    """A matrix-free solve's checkpoint, opened (and checked) at ``path``.

    ``state`` is the solver's state to go on from and ``known`` the row sums
    k and trace K of the first product (both None for a new checkpoint).
    """

    path: str
    identity: dict
    state: KrylovState | None = None
    known: tuple = (None, None)
    _group: zarr.Group | None = None
    _location: object = field(default=None, repr=False)

    @classmethod
    def open(cls, path: PathOrURL, identity: dict) -> "SolveCheckpoint":
        """Read the checkpoint at ``path`` (a local path or fsspec URL), if any; writes nothing.

        Raises
        ------
        CheckpointMismatchError
            ``path`` holds a checkpoint of another fit, or something else.
        ModelFormatError
            An unknown format version, or a damaged checkpoint.
        """
        where = str(path)
        location = store_location(path)
        checkpoint = cls(where, identity, _location=location)
        if not location.exists():
            return checkpoint
        with about(where):
            checkpoint._group, meta = opened_checkpoint(
                location, _ATTRIBUTE, FORMAT, (FORMAT_VERSION,), identity,
                " of a matrix-free exact fit")
            if meta.get("state") is not None:
                checkpoint.state, checkpoint.known = _read_state(
                    checkpoint._group, meta, identity["data"]["shape"][0])
        return checkpoint

    def save(self, state: KrylovState, row_sums: np.ndarray, diagonal_sum: float) -> None:
        """Store ``state`` (after a product), with k and trace K, and commit it."""
        with about(self.path):
            group = self._group if self._group is not None else self._create()
            meta = dict(group.attrs[_ATTRIBUTE])
            digests = recorded_digests(meta, _FIX)
            if "row_sums" not in digests:
                digests["row_sums"] = _write(group, "row_sums", row_sums)
                meta["diagonal_sum"] = float(diagonal_sum)
            current = meta.get("state")
            new_cycle = current is None or current["cycles"] != state.cycles
            name = f"cycle-{state.cycles:06d}" if new_cycle else current["group"]
            cycle = group.create_group(name, overwrite=True) if new_cycle else group[name]
            if new_cycle and current is not None:
                digests = {key: value for key, value in digests.items()
                           if not key.startswith(current["group"] + "/")}
            for k in range(0 if new_cycle else current["blocks"], len(state.blocks)):
                for kind, arrays in (("basis", state.blocks), ("image", state.images)):
                    digests[f"{name}/{kind}-{k:03d}"] = _write(cycle, f"{kind}-{k:03d}",
                                                               arrays[k])
            meta["state"] = {"group": name, "blocks": len(state.blocks),
                             "best": None if np.isinf(state.best) else float(state.best),
                             "stalled": state.stalled, "products": state.products,
                             "passes": state.passes, "cycles": state.cycles}
            meta[CHECKSUMS_ATTRIBUTE] = {"arrays": digests}
            group.attrs[_ATTRIBUTE] = meta  # the commit
            if new_cycle and current is not None and current["group"] in group:
                del group[current["group"]]

    def remove(self) -> None:
        """Delete the checkpoint from its store."""
        if self._location.exists():
            self._location.remove()
        self._group = None

    def _create(self) -> zarr.Group:
        meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "identity": self.identity,
                "state": None, CHECKSUMS_ATTRIBUTE: {"arrays": {}}}
        self._group = zarr.open_group(self._location.url, mode="w-", zarr_format=3,
                                      attributes={_ATTRIBUTE: meta},
                                      **self._location.zarr_kwargs())
        return self._group


def _write(group: zarr.Group, name: str, value: np.ndarray) -> str:
    """Store one array, checksummed (over whatever an uncommitted save left); its digest."""
    value = np.ascontiguousarray(value, dtype=np.float64)
    group.create_array(name, data=value, compressors=checksummed_codecs(compressed=False),
                       overwrite=True)
    return digest(value)


def _read_state(group: zarr.Group, meta: dict, n: int) -> tuple[KrylovState, tuple]:
    """The committed state and (k, trace K), every array checked against its digest."""
    state = meta["state"]
    try:
        name, count = state["group"], int(state["blocks"])
        counters = {key: int(state[key]) for key in ("stalled", "products", "passes", "cycles")}
        best = np.inf if state["best"] is None else float(state["best"])
        diagonal_sum = float(meta["diagonal_sum"])
    except (KeyError, TypeError, ValueError):
        raise damaged("its state attribute is not the one a fit writes", "checkpoint") from None
    names = ["row_sums"] + [f"{name}/{kind}-{k:03d}" for k in range(count)
                            for kind in ("basis", "image")]
    arrays = {key: read_checked(group, key, _FIX) for key in names}
    check_digests(arrays, {key: value for key, value in recorded_digests(meta, _FIX).items()
                           if key in arrays}, _FIX)
    missing = [key for key in names if key not in recorded_digests(meta, _FIX)]
    if missing:
        raise damaged(f"no digest is recorded for {missing[0]!r}", "checkpoint")
    blocks = [arrays[f"{name}/basis-{k:03d}"] for k in range(count)]
    images = [arrays[f"{name}/image-{k:03d}"] for k in range(count)]
    if count < 1 or any(b.ndim != 2 or b.shape[0] != n or b.shape != i.shape
                        for b, i in zip(blocks, images)) or arrays["row_sums"].shape != (n,):
        raise damaged(f"its arrays are not blocks of {n} rows", "checkpoint")
    return (KrylovState(blocks, images, best, **counters),
            (arrays["row_sums"], diagonal_sum))
