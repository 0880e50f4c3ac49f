"""The fitted model of two coupled fields, and how one fit makes it (docs/design.md §20).

A coupled fit chooses each field's kernel parameters and landmarks as a
:class:`~kpca_dask.KernelPCA` fit of that field would
(:func:`kpca_dask.model.fitting.sampled_landmarks`, from each field's own child
stream of the seed), makes the one coupled pass over both
(:mod:`kpca_dask.engine.passes.coupled`), factorises each field's K_mm and
solves the small problem (:mod:`kpca_dask.engine.solve.coupled`). The result,
:class:`CoupledFit`, is immutable and holds m-sized arrays only.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import dask.array as da
import numpy as np

from ..blocks.replicate_counts import FoldCounts
from ..engine.kernel_params import kernel_function
from ..engine.passes.coupled import compute_coupled_pass, compute_coupled_replicates, field_kernel
from ..engine.passes.nystrom import project
from ..engine.passes.replicates import check_replicate_memory
from ..engine.sampling import as_generator, independent_generators
from ..engine.solve.coupled import CoupledSolution, solve_coupled
from ..engine.solve.held_out import N_FOLDS, HeldOutRidge, choose_epsilon, summed
from ..engine.solve.landmark_factor import factor_landmarks, reference_row
from ..engine.solve.landmark_memory import refuse_landmarks_beyond_memory
from ..io.preprocessing.fields import FeatureLayout
from ..model.fitting import sampled_landmarks
from ..model.inputs import method_input
from ..model.parameters import rcond_for
from ..validation import check_n_features

__all__ = ["CoupledField", "CoupledFit", "CoupledRotation", "fit_coupled", "field_rows",
           "FIELDS"]

#: The two fields' names, in the order every pair is given.
FIELDS = ("X", "Y")


@dataclass(frozen=True)
class CoupledField:
    """One field of a coupled model: its kernel, landmarks and features."""

    kernel: Any
    kernel_params: dict
    landmarks: np.ndarray
    landmark_indices: np.ndarray | None
    landmark_rank: int
    n_features: int
    layout: FeatureLayout | None = None
    feature_names: np.ndarray | None = None

    @property
    def n_landmarks(self) -> int:
        return int(len(self.landmarks))


@dataclass(frozen=True, eq=False)
class CoupledRotation:
    """A rotation of the leading r pairs of a kernel MCA (:func:`kpca_dask.rotate`, as xeofs'
    ``MCARotator``): the rotation ``matrix`` R of the stacked loadings, the ``correlation``
    of the rotated modes, each field's rotated loadings' ``norms`` (2 x r), the ``signs``
    and the ``order`` (by explained covariance) of the rotated pairs, and the rotated
    ``components`` of X and of Y as ``KernelMCA.components`` lays them out. Everything a
    rotated result is rebuilt from without the data (docs/design.md §20)."""

    method: str
    power: int
    matrix: np.ndarray
    correlation: np.ndarray
    norms: np.ndarray
    signs: np.ndarray
    order: np.ndarray
    components: tuple

    @property
    def n_components(self) -> int:
        """The number r of rotated pairs."""
        return int(np.shape(self.matrix)[0])

    @property
    def turn(self) -> np.ndarray:
        """How the unrotated scores turn: R for varimax, R^{-T} for promax."""
        return self.matrix if self.method == "varimax" else np.linalg.inv(self.matrix).T


@dataclass(frozen=True)
class CoupledFit:
    """What a coupled fit learnt: both fields and the solution of the small problem; a
    rotated result's copy holds its ``rotation`` too."""

    method: str  # "mca" or "cca"
    fields: tuple[CoupledField, CoupledField]
    solution: CoupledSolution
    n_samples: int
    dtype: str
    n_pca_modes: tuple = (None, None)
    epsilon: float = 0.0  # the ridge the CCA used (chosen on held-out folds for "auto")
    fit_seconds: float = 0.0
    held_out: HeldOutRidge | None = None  # the held-out choice of the ridge, if made
    rotation: CoupledRotation | None = None  # kpca_dask.rotate's, on a rotated result's copy

    def replace(self, **changes) -> "CoupledFit":
        return dataclasses.replace(self, **changes)

    @property
    def layout(self) -> FeatureLayout | None:
        """The first field's layout (the sample dimension both share)."""
        return self.fields[0].layout

    @property
    def n_modes(self) -> int:
        return int(len(self.solution.singular_values))

    def projection(self, which: int) -> tuple[np.ndarray, np.ndarray]:
        """(P, c) of field ``which`` (0: X, 1: Y)."""
        s = self.solution
        return ((s.projection_x, s.offset_x) if which == 0 else (s.projection_y, s.offset_y))

    def scores(self, which: int, rows: da.Array) -> da.Array:
        """The lazy scores of the weighted dask ``rows`` of field ``which``: P^T k_m(x) - c."""
        field = self.fields[which]
        check_n_features(rows, field.n_features, f"field {FIELDS[which]}")
        P, c = self.projection(which)
        return project(rows, field.landmarks, P, c, field.kernel, field.kernel_params,
                       np.dtype(self.dtype))


def field_rows(model: CoupledFit, which: int, data, *, weighted: bool = True):
    """``data`` as rows of field ``which``'s features (its layout and feature names), as
    :func:`~kpca_dask.model.inputs.method_input` gives them.

    Examples
    --------
    >>> from kpca_dask import KernelMCA
    >>> X = np.random.default_rng(0).normal(size=(30, 3))
    >>> model = KernelMCA(kernel="linear", n_landmarks=30).fit(X, X[:, :2]).model_
    >>> field_rows(model, 1, X[:, :2]).data.shape
    (30, 2)
    """
    field = model.fields[which]
    names = SimpleNamespace() if field.feature_names is None else SimpleNamespace(
        feature_names_in_=field.feature_names)
    return method_input(names, field.layout, data, weighted=weighted)


def _field(params: dict, X: da.Array, rng, rcond: float):
    """One field's kernel, landmarks and reference row, chosen as a KernelPCA fit would."""
    if params["n_landmarks"] != "auto":
        refuse_landmarks_beyond_memory(min(int(params["n_landmarks"]), X.shape[0]), X)
    bandwidth_rng, validation_rng = independent_generators(rng, 2)
    kernel, chosen, _ = sampled_landmarks(params, X, kernel_function(params, X.shape[1]), rng,
                                          bandwidth_rng, validation_rng, rcond)
    return kernel, chosen, reference_row(chosen.points, kernel.function, kernel.params)


def fit_coupled(params: tuple[dict, dict], data: tuple[da.Array, da.Array], *, method: str,
                n_modes: int, random_state=None, n_pca_modes=(None, None),
                epsilon: float = 0.0, layouts=(None, None),
                feature_names=(None, None)) -> CoupledFit:
    """The coupled model of the rows ``data`` (X, Y) with each field's KernelPCA ``params``.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> X = da.from_array(np.random.default_rng(0).normal(size=(40, 3)), chunks=20)
    >>> params = KernelPCA(kernel="linear", n_landmarks=40).get_params()
    >>> fit = fit_coupled((params, params), (X, X), method="mca", n_modes=2)
    >>> fit.n_samples, fit.n_modes, fit.fields[1].n_landmarks
    (40, 2, 40)
    """
    started = time.perf_counter()
    dtype = params[0]["dtype"]
    rcond = float(rcond_for(params[0]["rcond"], dtype))
    streams = independent_generators(as_generator(random_state), 2)
    chosen = [_field(p, X, rng, rcond) for p, X, rng in zip(params, data, streams)]
    sides = [field_kernel(X, c.points, k.function, k.params, r, np.dtype(dtype))
             for X, (k, c, r) in zip(data, chosen)]
    held_out = None
    if epsilon == "auto":  # CCA: the folds' sums apart, the ridge chosen on them
        stats, factors, held_out = _held_out_pass(data, sides, chosen, rcond, dtype,
                                                  n_pca_modes)
        epsilon = held_out.epsilon
    else:
        stats = compute_coupled_pass(data[0], data[1], *sides, dtype=np.dtype(dtype),
                                     within=method == "cca")
        factors = [factor_landmarks(c.points, k.function, k.params, rcond)
                   for k, c, _ in chosen]
    solution = solve_coupled(stats, *factors, method=method, n_modes=n_modes,
                             n_pca_modes=n_pca_modes, epsilon=epsilon, dtype=dtype)
    fields = tuple(
        CoupledField(k.function, dict(k.params), c.points, c.indices, f.rank, X.shape[1],
                     layout, names)
        for (k, c, _), f, X, layout, names in zip(chosen, factors, data, layouts, feature_names))
    return CoupledFit(method, fields, solution, int(stats.n_samples), dtype,
                      tuple(n_pca_modes), float(epsilon), time.perf_counter() - started,
                      held_out)


def _held_out_pass(data, sides, chosen, rcond: float, dtype, n_pca_modes):
    """One pass adding each of :data:`~kpca_dask.engine.solve.held_out.N_FOLDS` contiguous
    folds' sums apart; their total, the factors and the ridge chosen on them."""
    folds_memory = N_FOLDS * sum(len(side.reference) for side in sides) ** 2
    check_replicate_memory(data[0], N_FOLDS, int(np.ceil(np.sqrt(folds_memory))),
                           what="folds (epsilon='auto')")
    sums = compute_coupled_replicates(data[0], data[1], *sides,
                                      FoldCounts(N_FOLDS, int(data[0].shape[0])),
                                      np.dtype(dtype), within=True)
    folds = [sums.replicate(f) for f in range(N_FOLDS)]
    factors = [factor_landmarks(c.points, k.function, k.params, rcond) for k, c, _ in chosen]
    choice = choose_epsilon(folds, *factors, n_pca_modes=n_pca_modes, dtype=dtype)
    return summed(folds), factors, choice
