"""The fitted Hilbert kernel EOF as one immutable object, and its outputs.

:class:`HilbertFit` is what :class:`~kpca_dask.HilbertKernelEOF` learns
(docs/design.md §16, §19): the complex modes, the kernel, the landmarks (or
none, for the Gram way), the feature means, the field's layout and the
training samples' complex scores. The estimator's attributes are views of it;
:func:`kpca_dask.rotate` and the model files read it (and never the
estimator's private state), and a fit or a loader makes a new one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import dask.array as da
import numpy as np
import xarray as xr

from .._parallel import computed
from ..engine.exact.gram import cross_inner_products, inner_products
from ..engine.hilbert.complex_gram import kernel_of_gram, record_gram
from ..engine.hilbert.complex_solve import ComplexSolution, complex_scores
from ..errors import InvalidInputError
from ..io.labelled import MODE_DIM, label_embedding, modes
from ..io.preprocessing import AnalyticSignal, Preprocessing
from ..io.preprocessing.analytic_signal import MIN_SAMPLES
from ..io.preprocessing.field_sets import field_output
from ..model.inputs import method_input
from ..validation import check_n_features

__all__ = ["HilbertFit", "GramState", "record_scores", "score_output", "map_output",
           "sample_labels"]


@dataclass(frozen=True)
class GramState:
    """What the Gram way keeps for new records: the training rows (lazy, as the fit read
    them, or read from a model file), X Xᵀ 1, 1ᵀ X Xᵀ 1 and the training analytic signal's
    squared norms (docs/design.md §19)."""

    rows: Any
    train_sums: np.ndarray
    train_total: float
    norms: np.ndarray


@dataclass(frozen=True)
class HilbertFit:
    """A fitted Hilbert kernel EOF.

    ``solver`` is ``"gram"`` or ``"nystrom"``; ``solution`` the complex modes;
    ``analytic`` the step that makes the complex rows (its padding and the training
    means, :class:`~kpca_dask.io.preprocessing.AnalyticSignal`);
    ``landmarks`` the landmarks' analytic signal (m x p complex, None for the
    Gram way, which holds ``gram`` instead); ``scores`` the training samples'
    complex scores (n x q numpy, read at the end of the fit); ``samples`` a
    DataArray of the training samples' coordinates that their outputs are
    labelled with (None for arrays); ``lazy`` whether the training outputs are
    lazy; ``rotation`` the last rotation :func:`kpca_dask.rotate` took of it.

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_dask import HilbertKernelEOF
    >>> t, x = np.arange(60)[:, None], np.arange(8)[None, :]
    >>> X = np.cos(0.3 * x - 0.2 * t)
    >>> fit = HilbertKernelEOF(1, padding="none", solver="nystrom").fit(X).model_
    >>> fit.solver, fit.scores.shape, fit.n_samples
    ('nystrom', (60, 1), 60)
    """

    solver: str
    solution: ComplexSolution
    kernel_params: dict
    landmarks: np.ndarray | None
    landmark_indices: np.ndarray
    analytic: AnalyticSignal
    layout: Any
    scores: Any
    samples: xr.DataArray | None
    lazy: bool
    gram: GramState | None = None
    rotation: Any = None

    @property
    def n_samples(self) -> int:
        return int(self.solution.n_samples)

    @property
    def n_features(self) -> int:
        return self.analytic.n_features

    @property
    def preprocessing(self) -> Preprocessing:
        """The field's layout, then the analytic signal."""
        return Preprocessing(self.layout, (self.analytic,))

    def replace(self, **changes) -> "HilbertFit":
        """A copy with ``changes``: the fit itself never changes."""
        return dataclasses.replace(self, **changes)


def sample_labels(like: xr.DataArray | None) -> xr.DataArray | None:
    """The training samples' coordinates as a DataArray without the data, which outputs over
    the samples are labelled with (:func:`kpca_dask.io.labelled.label_rows`): a fitted model
    keeps no graph of the data for its labels."""
    if like is None:
        return None
    dim = like.dims[0]
    # Coordinates along the samples only: a scalar one (a level selected) is the field's.
    coords = {name: coord.variable.compute() for name, coord in like.coords.items()
              if coord.dims == (dim,)}
    return xr.DataArray(np.zeros(like.sizes[dim], dtype=bool), dims=(dim,), coords=coords)


def record_scores(fit: HilbertFit, estimator: Any, X) -> tuple:
    """The complex scores of the record ``X`` (lazy), the DataArray they are labelled like and
    whether they stay lazy; ``estimator``'s feature names are checked against ``X``'s."""
    rows = method_input(estimator, fit.layout, X)
    check_n_features(rows.data, fit.n_features, type(estimator).__name__)
    if fit.solver == "gram":
        return _gram_record_scores(fit, rows.data), rows.like, rows.is_lazy
    Z = fit.analytic.rows(rows.data)
    Y = complex_scores(Z, fit.landmarks, fit.solution, fit.kernel_params)
    return Y, rows.like, rows.is_lazy


def _gram_record_scores(fit: HilbertFit, new) -> da.Array:
    """A new record's complex scores by the Gram way: its inner products with the training
    samples and its own, read now (docs/design.md §19)."""
    if new.shape[0] < MIN_SAMPLES:
        raise InvalidInputError(
            f"The Hilbert transform needs at least {MIN_SAMPLES} samples; X has "
            f"{new.shape[0]}.")
    state = fit.gram
    cross = cross_inner_products(new, state.rows)
    own, _ = inner_products(new)
    H, norms = record_gram(cross, own, state.train_sums, state.train_total,
                           fit.analytic.padding, fit.analytic.decay_factor)
    K = kernel_of_gram(H, norms, state.norms, fit.kernel_params)
    Y = (K - fit.solution.centre) @ fit.solution.projection
    return da.from_array(Y, chunks=(new.chunks[0], -1))


def _part(values, name: str):
    """The modulus or the argument of complex ``values`` by the output's ``name`` (numpy or
    dask alike: np.abs and np.angle dispatch to dask)."""
    if name.endswith("_amplitude"):
        return np.abs(values)
    if name.endswith("_phase"):
        return np.angle(values)
    return values


def score_output(fit: HilbertFit, Y, like, is_lazy: bool, name: str, *, divisor=None,
                 attrs: dict | None = None):
    """Scores (or their amplitude or phase, by ``name``) in the input's kind: numpy, lazy,
    or a DataArray over the samples of ``like`` and ``mode``."""
    if divisor is not None:
        Y = Y / divisor
    Y = _part(Y, name)
    if not is_lazy:
        Y = computed(Y) if isinstance(Y, da.Array) else np.asarray(Y)
    elif not isinstance(Y, da.Array):
        Y = da.from_array(Y, chunks=(min(max(len(Y), 1), 100_000), -1))
    if like is None:
        return Y
    attrs = {"kernel": fit.kernel_params["kernel"], "padding": fit.analytic.padding,
             **(attrs or {})}
    return label_embedding(Y, like, attrs).rename(name)


def map_output(fit: HilbertFit, maps: np.ndarray, name: str, attrs: dict | None = None):
    """Maps (or their amplitude or phase, by ``name``) on the field of a field's fit."""
    maps = _part(maps, name)
    layout = fit.layout
    if layout is None or not layout.dims:
        return maps
    leading = {MODE_DIM: modes(maps.shape[0])}
    if not np.iscomplexobj(maps):
        return field_output(maps, layout, leading, name=name, attrs=attrs)
    # The mask is NaN-filled per real array: the two parts go on the field apart.
    real, imag = (field_output(part, layout, leading, name=name, attrs=attrs)
                  for part in (maps.real, maps.imag))
    if isinstance(real, list):
        return [a + 1j * b for a, b in zip(real, imag)]
    return real + 1j * imag
