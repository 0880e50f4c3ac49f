"""The preprocessing a fitted model holds: how its input became the rows its kernel saw.

Every fit reads its input as rows: a field stacked, masked and weighted as its
:class:`~kpca_dask.io.preprocessing.fields.FeatureLayout` records, an array as it is. Two
estimators then transform the rows before their kernel, each by one step:

* :class:`DelayEmbedding`, the extended EOF's lagged copies (docs/design.md §17);
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
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

import dask.array as da
import numpy as np
import xarray as xr

from ...errors import InvalidParameterError
from .analytic_signal import PADDINGS, analytic_rows
from .delay_embedding import check_delay, lagged_field, lagged_rows, lags, n_embedded
from .fields import FeatureLayout

__all__ = ["DelayEmbedding", "AnalyticSignal", "Preprocessing", "STEPS", "steps_attribute",
           "steps_from_attribute"]


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
    {step.kind: step for step in (DelayEmbedding, AnalyticSignal)})


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

    def step(self, kind: str):
        """The step of ``kind`` (``"delay_embedding"``, ``"analytic_signal"``), or None."""
        return next((step for step in self.steps if step.kind == kind), None)

    def rows(self, rows) -> da.Array:
        """The steps applied in order to ``rows``, already read by the layout."""
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
