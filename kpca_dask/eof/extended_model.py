"""The fitted extended kernel EOF as one immutable object.

:class:`ExtendedFit` is what :class:`~kpca_dask.ExtendedKernelEOF` learns
(docs/design.md §17): its kernel stage (the kernel PCA of the delay-embedded
samples), its linear stage (with ``n_pca_modes``), the space-time maps, the
delay and the way the field was read. The estimator's attributes are views of
it, as the other estimators' are of their ``model_``; a fit or a loader
(:mod:`kpca_dask.storage.extended_files`) makes a new one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..io.preprocessing import DelayEmbedding, EOFReduction, Preprocessing
from .estimator_copies import holding

__all__ = ["ExtendedFit"]


@dataclass(frozen=True, eq=False)
class ExtendedFit:
    """A fitted extended kernel EOF.

    ``kernel_stage`` is the fitted kernel PCA of the embedded samples (a
    :class:`~kpca_dask.KernelPCA` or, the Gram way, an
    :class:`~kpca_dask.ExactKernelPCA`); ``linear_stage`` the linear EOFs the
    field was reduced to first (``n_pca_modes``), or None; ``maps`` the
    space-time maps, on the field for a field's fit (a DataArray ``components``
    over mode, embedding and the field's dims) else an ndarray (mode,
    embedding, features); ``solver`` the way the stage that read the field took;
    ``delay_embedding`` the lagged copies the kernel stage reads
    (:class:`~kpca_dask.io.preprocessing.DelayEmbedding`); ``n_features`` the features of
    one sample before embedding (a field's positions off its mask); ``rotated_maps`` the
    space-time maps of the kernel stage's rotation, laid out as ``maps`` (None unless a
    rotated model was kept: :meth:`RotatedExtendedEOF.save
    <kpca_dask.eof.extended_rotation.RotatedExtendedEOF.save>`). Frozen, as the
    other fitted models; its stages are fitted estimators, which a user should not
    change in place (a re-solve of ``kpca_`` would no longer match ``maps``).

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_dask import ExtendedKernelEOF
    >>> X = np.random.default_rng(0).normal(size=(50, 3))
    >>> fit = ExtendedKernelEOF(2, tau=2, embedding=3).fit(X).model_
    >>> fit.delay, fit.n_features, fit.maps.shape, fit.layout is None
    ((2, 3), 3, (2, 3, 3), True)
    """

    kernel_stage: Any
    linear_stage: Any
    maps: Any
    solver: str
    delay_embedding: DelayEmbedding
    n_features: int
    rotated_maps: Any = None

    @property
    def delay(self) -> tuple[int, int]:
        """The ``(tau, embedding)`` of the fit."""
        return self.delay_embedding.tau, self.delay_embedding.embedding

    @property
    def preprocessing(self) -> Preprocessing:
        """The field's own layout, then (with ``n_pca_modes``) the reduction to the linear
        stage's EOF scores, then the lagged copies."""
        if self.linear_stage is None:
            return Preprocessing(self.delay_embedding.unembedded(self.layout),
                                 (self.delay_embedding,))
        return Preprocessing(self.layout, (EOFReduction(self.linear_stage.n_components_),
                                           self.delay_embedding))

    @property
    def layout(self):
        """The layout of the rows the field-reading stage fitted (None for arrays): the
        linear stage's field, or the kernel stage's embedded field (the lags, then the
        field's dims); its ``sample_dim`` is the field's."""
        stage = self.linear_stage if self.linear_stage is not None else self.kernel_stage
        return stage.model_.layout

    @property
    def rotation(self):
        """The last rotation of the space-time modes: its kernel stage's."""
        return self.kernel_stage.model_.rotation

    @property
    def lags(self) -> np.ndarray:
        """The lag of each copy in samples: 0, tau, ..., (embedding - 1) tau."""
        return self.delay_embedding.lags

    def replace(self, **changes) -> "ExtendedFit":
        """A copy with ``changes``: the fit itself never changes. ``rotation`` is the kernel
        stage's, so a new rotation gives a copy of that stage holding it (the stage of
        this fit keeps its own), and drops the rotated maps unless ``changes`` give them.

        Examples
        --------
        >>> import numpy as np
        >>> from kpca_dask import ExtendedKernelEOF
        >>> fit = ExtendedKernelEOF(2).fit(np.random.default_rng(0).normal(size=(30, 3))).model_
        >>> fit.replace(rotation=None).kernel_stage is fit.kernel_stage
        False
        """
        rotation = changes.pop("rotation", _UNCHANGED)
        if rotation is not _UNCHANGED:
            changes.setdefault("rotated_maps", None)
        fit = dataclasses.replace(self, **changes)
        if rotation is _UNCHANGED:
            return fit
        return dataclasses.replace(fit, kernel_stage=holding(fit.kernel_stage,
                                                             rotation=rotation))


#: No change asked for (``None`` is a rotation: none).
_UNCHANGED = object()
