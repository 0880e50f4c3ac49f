"""Keywords of other EOF and kernel PCA libraries, answered with kpca-dask's own.

A user coming from xeofs writes ``n_modes=4``, ``use_coslat=True`` or
``fit(X, dim="time")``; Python's answer, "got an unexpected keyword argument",
does not say what to write instead. :func:`explains_keywords` wraps a
constructor or ``fit`` so that a keyword of :data:`EQUIVALENTS` raises a
TypeError that names kpca-dask's equivalent; any other unknown keyword gets
Python's own error, and the signature (what scikit-learn's ``get_params`` and
the API pages read) stays the method's.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from types import MappingProxyType
from typing import Any, TypeVar

__all__ = ["EQUIVALENTS", "explains_keywords"]

#: A keyword of xeofs (EOF, HilbertEOF, ExtendedEOF and their ``fit``) or of
#: scikit-learn's KernelPCA, and what kpca-dask takes instead.
EQUIVALENTS = MappingProxyType({
    "n_modes": "kpca-dask calls it n_components (xeofs' n_modes)",
    "use_coslat": "kpca-dask takes weights=\"coslat\" for √cos(latitude) (xeofs' "
                  "use_coslat=True)",
    "dim": "the sample dimension is the constructor's sample_dim=... (xeofs' fit(X, dim=...))",
    "sample_name": "outputs keep X's own sample dimension; name it with sample_dim=...",
    "feature_name": "outputs keep X's own feature dimensions",
    "standardize": "there is no standardize option: divide X by its standard deviation "
                   "along the samples first, e.g. X / X.std(\"time\")",
    "center": "there is no center option: the kernel's features are always centred",
    "check_nans": "there is no check_nans option: NaN at the same positions in every sample "
                  "(a land mask) is dropped, and any other NaN is refused, naming where",
    "n_jobs": "there is no n_jobs: the Dask scheduler runs the work in parallel (a "
              "distributed Client, or dask.config.set(scheduler=...))",
    "copy_X": "there is no copy_X: a fitted model holds no copy of the training data",
})

Method = TypeVar("Method", bound=Callable[..., Any])


def explains_keywords(method: Method) -> Method:
    """``method`` refusing a keyword of :data:`EQUIVALENTS` it does not take with a
    TypeError that names kpca-dask's equivalent.

    Examples
    --------
    >>> class Model:
    ...     @explains_keywords
    ...     def __init__(self, n_components=2):
    ...         self.n_components = n_components
    >>> Model(n_modes=3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: Model() got an unexpected keyword argument 'n_modes': kpca-dask calls it n_...
    """
    taken = inspect.signature(method).parameters
    varargs = any(p.kind is p.VAR_KEYWORD for p in taken.values())
    owner = method.__qualname__.rsplit(".", 1)[0]
    shown = owner if method.__name__ == "__init__" else method.__qualname__

    @functools.wraps(method)
    def explaining(*args, **kwargs):
        foreign = [name for name in kwargs if name in EQUIVALENTS and name not in taken]
        if foreign and not varargs:
            name = foreign[0]
            raise TypeError(f"{shown}() got an unexpected keyword argument {name!r}: "
                            f"{EQUIVALENTS[name]}.")
        return method(*args, **kwargs)

    return explaining  # type: ignore[return-value]
