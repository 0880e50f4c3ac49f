"""KernelPCA's Gram way: the exact fit of wide data by the n x n kernel matrix.

For a field the samples are few and the features many (n = 10³–10⁵ time steps,
p = 10⁵–10⁶ points). Every kernel of inner products or Euclidean distances is a
function of the weighted n x n Gram matrix and its diagonal, so one read of the
data gives the exact kernel PCA in O(n² + a chunk per thread) memory, with no
m x p landmarks held (docs/design.md §19). ``KernelPCA(solver=...)`` takes this
way where it is the better one (:func:`chosen_solver`): the fit is then an
:class:`~kpca_dask.ExactKernelPCA` fit, its model an
:class:`~kpca_dask.exact.exact_model.ExactFit`, and what a ``KernelPCA`` answers
from it is what the ``ExactKernelPCA`` of the same model answers
(:func:`exact_view`). What only landmarks give (``partial_fit``,
``kpca_dask.merge``, the pre-image map) is refused by name (:func:`refuse`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from dask.utils import format_bytes
from sklearn.exceptions import NotFittedError

from ..blocks.feature_sums import CITYBLOCK, feature_sum
from ..blocks.kernels import kernel_name
from ..errors import InsufficientMemoryError, InvalidParameterError
from ..exact.exact_fitting import DENSE_WORDS, dense_fits
from ..exact.exact_model import ExactFit
from ..model.inputs import FitInput, holds_sparse_rows, method_input
from ..model.precomputed import PRECOMPUTED
from .exact import ExactKernelPCA

__all__ = ["chosen_solver", "exact_fit", "is_gram_model", "exact_view", "refuse", "forwarded",
           "refuse_growing", "in_fit_dtype", "EXACT_PARAMS"]

#: KernelPCA's parameters that an ExactKernelPCA takes as they are.
EXACT_PARAMS = ("n_components", "kernel", "gamma", "degree", "coef0", "kernel_params",
                "remove_zero_eig", "sample_dim", "weights", "dtype")


def chosen_solver(params: dict, given: FitInput) -> str:
    """``"gram"`` or ``"nystrom"``: the way ``KernelPCA(solver=params["solver"])`` fits
    ``given``.

    ``"auto"`` takes the Gram way for wide data (at least as many features as
    samples) whose n x n matrices fit the memory at hand and cost no more than the
    landmark pass asked for (n <= 2 ``n_landmarks``: n²p/2 multiply-adds against
    n m p), with a kernel of inner products or squared distances, no pre-image map
    asked for and no landmarks given or searched for; else landmarks. ``"gram"``
    refuses what it cannot do.

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_dask.model.inputs import fit_input
    >>> params = {"solver": "auto", "kernel": "rbf", "fit_inverse_transform": False,
    ...           "landmarks": "kmeans", "n_landmarks": 1000}
    >>> wide = fit_input(np.ones((20, 50)), sample_dim=None, weights=None)
    >>> tall = fit_input(np.ones((50, 20)), sample_dim=None, weights=None)
    >>> chosen_solver(params, wide), chosen_solver(params, tall)
    ('gram', 'nystrom')
    """
    solver = params["solver"]
    if solver == "nystrom":
        return "nystrom"
    n, p = given.data.shape
    if solver == "auto":
        kernel = params["kernel"]
        named = isinstance(kernel, str) and kernel != PRECOMPUTED
        # sigmoid is not positive semi-definite: landmarks fit it with a warning, the
        # whole kernel matrix is refused
        sums = (named and feature_sum(kernel) not in (None, CITYBLOCK)
                and kernel_name(kernel) != "sigmoid")
        m = params["n_landmarks"]
        landmarks_chosen = not isinstance(params["landmarks"], str) or m == "auto"
        # The Gram matrix costs n^2 p / 2 multiply-adds, the pass with m landmarks n m p:
        # at n <= 2m the exact way costs no more than the approximation asked for.
        # Tables keep landmarks (their column names, lazy frames out), and sparse rows (the
        # exact fit of a stored sparse file fails).
        way = (sums and not params["fit_inverse_transform"] and not landmarks_chosen
               and not given.is_table and not holds_sparse_rows(given.data)
               and p >= n and n <= 2 * m and dense_fits(n, given.data))
        return "gram" if way else "nystrom"
    _check_gram(params, given)
    return "gram"


def _check_gram(params: dict, given: FitInput) -> None:
    """Refuse what ``solver="gram"`` cannot do, saying what to use instead."""
    n = given.data.shape[0]
    if given.is_table or holds_sparse_rows(given.data):
        raise InvalidParameterError(
            'solver="gram" takes arrays and fields; a table keeps its column names and lazy '
            'frame outputs, and sparse rows their sparsity, by landmarks: use '
            'solver="nystrom" (or "auto", which takes them for these).')
    if params["fit_inverse_transform"]:
        raise InvalidParameterError(
            'solver="gram" learns no pre-image map; fit_inverse_transform=True needs '
            'landmarks: use solver="nystrom" (or "auto", which takes them for it).')
    if not isinstance(params["landmarks"], str):
        raise InvalidParameterError(
            'solver="gram" uses every sample and no landmarks, so the landmarks given would be '
            'unused; leave landmarks at its default or use solver="nystrom".')
    if not dense_fits(n, given.data):
        raise InsufficientMemoryError(
            f'solver="gram" holds about {format_bytes(int(DENSE_WORDS * 8 * n * n))} of n x n '
            f'arrays for {n} samples, more than the memory at hand. Use solver="nystrom" '
            "(landmarks, memory O(m^2)).")


def exact_fit(params: dict, X) -> ExactFit:
    """The model of ``ExactKernelPCA`` fitted on ``X`` with KernelPCA's ``params`` (the dense
    solver: :func:`chosen_solver` takes this way only where it fits)."""
    return _exact_estimator(params).fit(X).model_


def _exact_estimator(params: dict) -> ExactKernelPCA:
    """The ExactKernelPCA of KernelPCA's ``params``, with the dense solver."""
    return ExactKernelPCA(**{name: params[name] for name in EXACT_PARAMS},
                          eigen_solver="dense")


def is_gram_model(estimator) -> bool:
    """Whether ``estimator`` (a fitted KernelPCA) was fitted by the Gram way."""
    return isinstance(getattr(estimator, "model_", None), ExactFit)


def exact_view(estimator) -> ExactKernelPCA:
    """The :class:`~kpca_dask.ExactKernelPCA` of ``estimator``'s parameters holding its
    model: what a Gram-way KernelPCA answers with (a new object; nothing is copied)."""
    view = _exact_estimator(estimator.get_params(deep=False))
    view.model_ = estimator.model_
    return view


def refuse(estimator, what: str, error: type = InvalidParameterError) -> None:
    """Raise ``error`` for ``what``, which a Gram-way model cannot do."""
    if not is_gram_model(estimator):
        return
    raise error(
        f"{type(estimator).__name__} was fitted by the Gram way (solver_ = 'gram'), which "
        f"keeps the n x n kernel matrix's eigenvectors and no landmark sums, so it cannot "
        f"{what}. Fit with solver=\"nystrom\" for that.")


def in_fit_dtype(estimator, X, Y):
    """The scores ``Y`` (float64 from the exact model) in float32 where the landmark way
    gives float32: for float32 rows or ``dtype="float32"`` (scikit-learn's float32 kept)."""
    rows = method_input(estimator, estimator.model_.layout, X)
    single = estimator.dtype == "float32" or rows.data.dtype == np.float32
    return Y.astype(np.float32) if single else Y


def refuse_growing(solver: str) -> None:
    """Raise InvalidParameterError for a ``partial_fit`` asked of ``solver="gram"``."""
    if solver == "gram":
        raise InvalidParameterError(
            'partial_fit adds the landmark sums of each batch, and solver="gram" keeps none; '
            'use solver="nystrom" (or "auto", which takes landmarks here).')


def forwarded(estimator, name: str) -> Any:
    """A fitted attribute of a Gram-way model, read from its :func:`exact_view`; the
    AttributeError of a landmark attribute (``landmarks_``, ...) it has not."""
    # object.__getattribute__: a missing model_ is an AttributeError here, not a call back
    # into the estimator's __getattr__
    model = None if name == "model_" else _model_of(estimator)
    if not isinstance(model, ExactFit) or not name.endswith("_") or name.startswith("__"):
        view = getattr(type(estimator), name, None)
        if isinstance(view, property):  # its own AttributeError, which says why
            view.fget(estimator)
        raise AttributeError(
            f"{type(estimator).__name__!r} object has no attribute {name!r}")
    if name == "gamma_":  # KernelPCA's name for the resolved bandwidth
        return model.kernel_params.get("gamma")
    try:
        return getattr(exact_view(estimator), name)
    except (AttributeError, NotFittedError):
        raise AttributeError(
            f"{type(estimator).__name__} fitted by the Gram way (solver_ = 'gram') has no "
            f"{name}: it holds the exact model (an ExactKernelPCA's), not landmarks and their "
            f"sums. Fit with solver=\"nystrom\" for it.") from None


def _model_of(estimator):
    try:
        return object.__getattribute__(estimator, "model_")
    except AttributeError:
        return None
