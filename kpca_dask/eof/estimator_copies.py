"""A fitted estimator with another model, the estimator it came from left as it was.

:func:`kpca_dask.rotate` gives its rotated modes with an estimator whose model
holds the rotation (``rotation_``, what its ``save`` keeps), and an extended
EOF's model a kernel stage holding one: each a copy. The estimator a user
hands over is never changed by what is made from it (docs/architecture.md).
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["holding"]


def holding(estimator: Any, **changes) -> Any:
    """A shallow copy of the fitted ``estimator`` whose ``model_`` is its model with
    ``changes`` (``model_.replace(**changes)``); ``estimator`` itself is not changed. The
    two share every fitted array: models are immutable.

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_dask import ExactKernelPCA
    >>> kpca = ExactKernelPCA(2).fit(np.random.default_rng(0).normal(size=(20, 3)))
    >>> held = holding(kpca, rotation=None)
    >>> held is kpca, held.model_ is kpca.model_, held.eigenvalues_ is kpca.eigenvalues_
    (False, False, True)
    """
    held = copy.copy(estimator)
    held.model_ = estimator.model_.replace(**changes)
    return held
