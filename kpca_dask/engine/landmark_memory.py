"""How many landmarks fit in memory: the small problem's 2.2 m^2 float64 words (docs/design.md §11).

At its peak a fit holds the pass's sums G (m x m float64) and the landmark
factor's buffer (m x m float64, K_mm then its Cholesky factor), plus row
blocks and the eigensolver's blocks of vectors, a small share of m^2 for
m >= 5000: :data:`SMALL_PROBLEM_WORDS` m^2 words in all. On a cluster the
pass's sums are added on the workers and the small problem is solved here,
so both places must hold them. A fit refuses up front, before reading any
data, an m that does not fit (:func:`refuse_landmarks_beyond_memory`), and
``n_landmarks="auto"`` stops growing m where it would stop fitting
(:func:`landmark_cap`).
"""

from __future__ import annotations

import math

from dask.utils import format_bytes

from .._memory import MemoryBudget, memory_budget
from ..errors import InsufficientMemoryError

__all__ = ["SMALL_PROBLEM_WORDS", "landmark_problem_bytes", "landmark_cap",
           "refuse_landmarks_beyond_memory"]

#: float64 words per m^2 a fit holds at its peak.
SMALL_PROBLEM_WORDS = 2.2


def landmark_problem_bytes(n_landmarks: int) -> int:
    """Bytes of the small problem with ``n_landmarks`` landmarks.

    Examples
    --------
    >>> format_bytes(landmark_problem_bytes(10_000))
    '1.64 GiB'
    """
    return int(SMALL_PROBLEM_WORDS * 8 * n_landmarks ** 2)


def _budgets(X) -> list[MemoryBudget]:
    """Where the m x m work runs: the workers computing X, and this process."""
    where = memory_budget(X)
    return [where, memory_budget(None)] if where.on_cluster else [where]


def landmark_cap(X) -> tuple[int, str]:
    """The largest m whose small problem fits, and the memory that sets it (for messages).

    Examples
    --------
    >>> import dask, dask.array as da
    >>> with dask.config.set({"kpca-dask.memory-limit": "1 GiB"}):
    ...     landmark_cap(da.zeros((10, 2)))[0]
    7810
    """
    tightest = min(_budgets(X), key=lambda budget: budget.free_bytes)
    free = tightest.free_bytes
    # The last 1e-9 keeps a budget of exactly m^2 words from rounding down to m - 1.
    cap = int(math.sqrt(free / (8 * SMALL_PROBLEM_WORDS)) + 1e-9)
    if tightest.headroom_bytes is None:
        return cap, tightest.describe()
    return cap, (f"{format_bytes(free)} (below the pause threshold of the smallest worker's "
                 f"memory_limit, {format_bytes(tightest.process_bytes)}, less what it holds)")


def refuse_landmarks_beyond_memory(n_landmarks: int, X) -> None:
    """Raise :class:`~kpca_dask.errors.InsufficientMemoryError` if m landmarks do not fit.

    Examples
    --------
    >>> import dask, dask.array as da
    >>> with dask.config.set({"kpca-dask.memory-limit": "1 GiB"}):
    ...     refuse_landmarks_beyond_memory(20_000, da.zeros((10, 2)))
    Traceback (most recent call last):
    ...
    kpca_dask.errors.InsufficientMemoryError: n_landmarks=20000 needs about 6.56 GiB ...
    """
    cap, where = landmark_cap(X)
    if n_landmarks <= cap:
        return
    raise InsufficientMemoryError(
        f"n_landmarks={n_landmarks} needs about {format_bytes(landmark_problem_bytes(n_landmarks))}"
        f" for the landmark problem ({SMALL_PROBLEM_WORDS} m^2 float64 words: the pass's m x m "
        f"sums and the factor of the landmarks' kernel matrix), more than {where}. Use at most "
        f"n_landmarks={cap}, give the workers (or this machine) more memory, or set dask's "
        "'kpca-dask.memory-limit' if that figure is wrong.")
