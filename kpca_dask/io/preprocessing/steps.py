"""The preprocessing a fitted model holds: how its input became the rows its kernel saw.

Every fit reads its input as rows: a field stacked, masked and weighted as its
:class:`~kpca_dask.io.preprocessing.fields.FeatureLayout` records, an array as it is. Two
estimators then transform the rows before their kernel, each by one step:

* :class:`DelayEmbedding`, the extended EOF's lagged copies (docs/design.md §17), after
  :class:`EOFReduction` to the linear EOF scores with ``n_pca_modes``;
* :class:`AnalyticSignal`, the Hilbert EOF's complex rows x + i H(x) (§16), with the
  training means that the anomalies of new records are taken from.

:class:`Preprocessing` is the whole path, the layout and then the steps in order;
every fitted model answers it (``model_.preprocessing``, the estimators'
``preprocessing_``), and applies it to new rows as to the training rows.

A step is a frozen value, written to a model file as one JSON entry (its kind and
parameters, :meth:`~DelayEmbedding.attribute`) and the arrays it learnt
(:meth:`~DelayEmbedding.arrays`), and read back by its kind through :data:`STEPS`
(:func:`steps_from_attribute`): a loader rebuilds the steps without knowing which
they are. The layout is written by the model files' own layout attribute
(:mod:`kpca_dask.storage.layout_files`).

Examples
--------
>>> import numpy as np
>>> steps = (DelayEmbedding(tau=2, embedding=3),)
>>> Preprocessing(None, steps)
Preprocessing(rows as given; then DelayEmbedding(tau=2, embedding=3))
>>> steps_from_attribute(steps_attribute(steps), {}) == steps
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, ClassVar

import dask.array as da
import numpy as np
import xarray as xr

from ...errors import InvalidParameterError
from .analytic_signal import PADDINGS, analytic_rows
from .delay_embedding import (
    EMBEDDING_DIM,
    check_delay,
    lagged_field,
    lagged_rows,
    lags,
    n_embedded,
)
from .field_inputs import layout_differences
from .fields import FeatureLayout

__all__ = ["DelayEmbedding", "EOFReduction", "AnalyticSignal", "Preprocessing", "STEPS",
           "steps_attribute", "steps_from_attribute"]


@dataclass(frozen=True)
class DelayEmbedding:
    """Lagged copies of each sample: the row of sample t becomes
    ``[x_t, x_{t+tau}, ..., x_{t+(L-1)tau}]`` (L = ``embedding``), and the last
    ``(L-1) tau`` samples, which have no complete row, are dropped
    (:mod:`kpca_dask.io.preprocessing.delay_embedding`).

    Examples
    --------
    >>> step = DelayEmbedding(tau=2, embedding=2)
    >>> step.rows(np.arange(10.0).reshape(5, 2)).compute().tolist()
    [[0.0, 1.0, 4.0, 5.0], [2.0, 3.0, 6.0, 7.0], [4.0, 5.0, 8.0, 9.0]]
    >>> step.lags.tolist(), step.n_samples(5)
    ([0, 2], 3)
    """

    tau: int
    embedding: int

    #: The step's name in a model file.
    kind: ClassVar[str] = "delay_embedding"

    def __post_init__(self) -> None:
        check_delay(self.tau, self.embedding)

    @property
    def lags(self) -> np.ndarray:
        """The lag of each copy in samples: 0, tau, ..., (embedding - 1) tau."""
        return lags(self.tau, self.embedding)

    def n_samples(self, n_samples: int) -> int:
        """The samples left of ``n_samples`` once embedded."""
        return n_embedded(n_samples, self.tau, self.embedding)

    def rows(self, rows) -> da.Array:
        """Rows (n, p) as lazy embedded rows (n - (L-1) tau, L p), lag-major."""
        return lagged_rows(rows, self.tau, self.embedding)

    def field(self, X: xr.DataArray, sample_dim: str) -> xr.DataArray:
        """The field ``X`` with its lagged copies along a new ``embedding`` dimension."""
        return lagged_field(X, sample_dim, self.tau, self.embedding)

    def unembedded(self, layout: FeatureLayout | None) -> FeatureLayout | None:
        """The field's own layout from the layout of its embedded field (the ``embedding``
        dimension first, then the field's): one lag's positions, mask and weights.

        Examples
        --------
        >>> embedded = FeatureLayout("time", ("embedding", "x"), (2, 3),
        ...                          kept=np.array([0, 2, 3, 5]))
        >>> field = DelayEmbedding(1, 2).unembedded(embedded)
        >>> field.dims, field.shape, field.kept.tolist()
        (('x',), (3,), [0, 2])
        """
        if layout is None or layout.parts or layout.dims[:1] != (EMBEDDING_DIM,):
            return layout
        per_lag = layout.n_positions // layout.shape[0]
        kept = None if layout.kept is None else layout.kept[layout.kept < per_lag]
        n_kept = per_lag if kept is None else int(kept.size)
        return replace(layout, dims=layout.dims[1:], shape=layout.shape[1:],
                       coords={dim: values for dim, values in layout.coords.items()
                               if dim != EMBEDDING_DIM},
                       kept=kept, weights=None if layout.weights is None
                       else layout.weights[:n_kept],
                       weight_dims=tuple(d for d in layout.weight_dims if d != EMBEDDING_DIM))

    def attribute(self) -> dict:
        """The step as a model file's JSON entry."""
        return {"step": self.kind, "tau": int(self.tau), "embedding": int(self.embedding)}

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays the step learnt: none."""
        return {}

    @classmethod
    def from_attribute(cls, stored: Mapping, arrays: Mapping[str, np.ndarray]
                       ) -> "DelayEmbedding":
        """The step :meth:`attribute` wrote."""
        return cls(int(stored["tau"]), int(stored["embedding"]))


@dataclass(frozen=True)
class EOFReduction:
    """The rows reduced to the scores of their leading ``n_modes`` linear EOFs (the extended
    EOF's ``n_pca_modes``) before the next step. The EOFs are a fitted model of their own
    (the extended EOF's linear stage, ``pca_``, saved as a stage of its file), so this step
    names the reduction and its size; new data are reduced by that stage
    (``ExtendedKernelEOF.embedded``).

    Examples
    --------
    >>> EOFReduction(4).attribute()
    {'step': 'eof_reduction', 'n_modes': 4}
    """

    n_modes: int

    #: The step's name in a model file.
    kind: ClassVar[str] = "eof_reduction"

    def rows(self, rows) -> da.Array:
        """Refused: the reduction is the model's linear stage, not a function of the rows."""
        raise InvalidParameterError(
            "The reduction to linear EOF scores is the model's linear stage: reduce new data "
            "with it (ExtendedKernelEOF.embedded(X) embeds them as the fit did).")

    def attribute(self) -> dict:
        """The step as a model file's JSON entry."""
        return {"step": self.kind, "n_modes": int(self.n_modes)}

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays the step learnt: none here (the EOFs are the linear stage's)."""
        return {}

    @classmethod
    def from_attribute(cls, stored: Mapping, arrays: Mapping[str, np.ndarray]
                       ) -> "EOFReduction":
        """The step :meth:`attribute` wrote."""
        return cls(int(stored["n_modes"]))


@dataclass(frozen=True, eq=False)
class AnalyticSignal:
    """The analytic signal of each feature along the samples, z = x + i H(x), of the
    anomalies from ``mean`` (the training samples' means: a new record is centred as the
    training record was), padded as ``padding`` says against the transform's edge effects
    (:mod:`kpca_dask.io.preprocessing.analytic_signal`).

    Examples
    --------
    >>> t = np.arange(64) * 2 * np.pi / 16
    >>> step = AnalyticSignal("none", 0.2, mean=np.zeros(1))
    >>> bool(np.allclose(step.rows(np.cos(t)[:, None]).compute()[:, 0], np.exp(1j * t)))
    True
    """

    padding: str
    decay_factor: float
    mean: np.ndarray

    #: The step's name in a model file.
    kind: ClassVar[str] = "analytic_signal"

    def __post_init__(self) -> None:
        mean = np.array(self.mean, dtype=np.float64)  # its own, read-only: the step is frozen
        mean.flags.writeable = False
        object.__setattr__(self, "mean", mean)
        if self.padding not in PADDINGS:
            raise InvalidParameterError(
                f"padding must be one of {PADDINGS}; got {self.padding!r}.")

    def __repr__(self) -> str:
        return (f"AnalyticSignal(padding={self.padding!r}, decay_factor={self.decay_factor!r}, "
                f"mean of {np.shape(self.mean)[0]} features)")

    def __eq__(self, other: Any) -> bool:
        return (type(other) is AnalyticSignal and self.padding == other.padding
                and self.decay_factor == other.decay_factor
                and np.array_equal(self.mean, other.mean))

    __hash__ = None  # equal by value, and mutable arrays inside: no hash

    @property
    def n_features(self) -> int:
        """The features of one sample."""
        return int(np.shape(self.mean)[0])

    def rows(self, rows) -> da.Array:
        """The complex rows of the real rows ``rows`` (n, p), lazily, in their row blocks."""
        return analytic_rows(da.asarray(rows), self.padding, self.decay_factor,
                             mean=self.mean)

    def attribute(self) -> dict:
        """The step as a model file's JSON entry (its means go in :meth:`arrays`)."""
        return {"step": self.kind, "padding": self.padding,
                "decay_factor": float(self.decay_factor)}

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays the step learnt: the training means."""
        return {"mean": np.asarray(self.mean, dtype=np.float64)}

    @classmethod
    def from_attribute(cls, stored: Mapping, arrays: Mapping[str, np.ndarray]
                       ) -> "AnalyticSignal":
        """The step :meth:`attribute` and :meth:`arrays` wrote."""
        return cls(str(stored["padding"]), float(stored["decay_factor"]),
                   np.asarray(arrays["mean"], dtype=np.float64))


#: Every step by the kind a model file names it by.
STEPS: Mapping[str, type] = MappingProxyType(
    {step.kind: step for step in (DelayEmbedding, EOFReduction, AnalyticSignal)})


@dataclass(frozen=True, eq=False)
class Preprocessing:
    """How a fit's input became the rows of its kernel: read by ``layout`` (a field's; None
    for an array), then each of ``steps`` in order.

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_dask import ExtendedKernelEOF
    >>> X = np.random.default_rng(0).normal(size=(50, 3))
    >>> ExtendedKernelEOF(2, tau=2, embedding=3).fit(X).preprocessing_
    Preprocessing(rows as given; then DelayEmbedding(tau=2, embedding=3))
    """

    layout: FeatureLayout | None
    steps: tuple = ()

    def __repr__(self) -> str:
        read = "rows as given" if self.layout is None else f"read by {self.layout!r}"
        then = "".join(f"; then {step!r}" for step in self.steps)
        return f"Preprocessing({read}{then})"

    def __eq__(self, other: Any) -> bool:
        """Equal layouts (dims, sizes, mask, weights) and equal steps."""
        return (type(other) is Preprocessing and self.steps == other.steps
                and not layout_differences(self.layout, other.layout))

    __hash__ = None  # equal by value, arrays inside: no hash

    def step(self, kind: str):
        """The step of ``kind`` (``"delay_embedding"``, ``"analytic_signal"``), or None."""
        return next((step for step in self.steps if step.kind == kind), None)

    def rows(self, rows) -> da.Array:
        """The steps applied in order to ``rows``, already read by the layout (refused for a
        step that is a fitted model of its own, :class:`EOFReduction`)."""
        for step in self.steps:
            rows = step.rows(rows)
        return da.asarray(rows)


def steps_attribute(steps) -> list[dict]:
    """``steps`` as a model file's JSON attribute: one entry each, in order."""
    return [step.attribute() for step in steps]


def steps_from_attribute(stored, arrays: Mapping[str, np.ndarray]) -> tuple:
    """The steps :func:`steps_attribute` wrote, each rebuilt by its kind (:data:`STEPS`)
    with the ``arrays`` read beside them.

    Raises
    ------
    ValueError
        An entry that is not a step this version knows, or lacks what its step needs:
        the loader reports the file as damaged or written by a newer version.
    """
    if not isinstance(stored, list):
        raise ValueError(f"the preprocessing steps are {type(stored).__name__}, not a list")
    steps = []
    for entry in stored:
        kind = entry.get("step") if isinstance(entry, Mapping) else None
        if kind not in STEPS:
            raise ValueError(f"{kind!r} is not a preprocessing step of this version "
                             f"(known: {sorted(STEPS)})")
        try:
            steps.append(STEPS[kind].from_attribute(entry, arrays))
        except (KeyError, TypeError, InvalidParameterError) as exc:
            raise ValueError(f"the step {kind!r} lacks or mistakes a value ({exc})") from None
    return tuple(steps)
