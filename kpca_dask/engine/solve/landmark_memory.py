"""How many landmarks fit in memory: the small problem's 2.2 m^2 float64 words (docs/design.md §11).

At its peak a fit holds the pass's sums G (m x m float64) and the landmark
factor's buffer (m x m float64, K_mm then its Cholesky factor), plus row
blocks and the eigensolver's blocks of vectors, a small share of m^2 for
m >= 5000: :data:`SMALL_PROBLEM_WORDS` m^2 words in all. On a cluster the
pass's sums end on a worker and the small problem is solved there
(:mod:`kpca_dask.engine.solve.on_cluster`), so one worker must hold them; or,
past that, G, K_mm and its factor are tiles spread over the workers, which
hold :data:`TILED_PROBLEM_WORDS` m^2 words between them beside their tasks
(:func:`landmark_solve_mode` chooses). A fit refuses up front, before
reading any data, an m that does not fit (:func:`refuse_landmarks_beyond_memory`),
and ``n_landmarks="auto"``, which factorises K_mm here as m grows, stops
growing m where it would stop fitting here or on one worker
(:func:`landmark_cap`).
"""

from __future__ import annotations

import math

from dask.utils import format_bytes

from ..._memory import memory_budget
from ...errors import InsufficientMemoryError
from ...validation import configured_choice
from ..tiles.product_way import configured_product_way

__all__ = ["SMALL_PROBLEM_WORDS", "TILED_PROBLEM_WORDS", "landmark_problem_bytes",
           "landmark_cap", "refuse_landmarks_beyond_memory", "SOLVE_KEY", "SOLVE_MODES",
           "landmark_solve_mode", "configured_solve_mode", "WORKER_SOLVE_SHARE"]

#: float64 words per m^2 a fit holds at its peak.
SMALL_PROBLEM_WORDS = 2.2

#: float64 words per m^2 the workers hold between them when G, K_mm and L are tiles:
#: the lower tiles of G, K_mm and its factor (m^2 / 2 each, and the diagonal tiles; K_mm's
#: only until the factor has read them), with what dask's placement leaves uneven.
TILED_PROBLEM_WORDS = 2.0

#: The share of each worker's room left for the tiled pass's and solve's tasks (a tile
#: row's panel and its product, the factorisation's sums: a quarter of a thread's share).
TILED_TASK_SHARE = 0.25

#: The share of a worker's room (60 % of its memory_limit, less its code) that the m x m
#: work may take on one worker before "auto" takes tiles: beside the 2.2 m^2 words of the
#: solve, the pass's last merge holds two chains' sums and chunks are in flight (m = 5000,
#: 2.2 m^2 words = 0.41 GiB, peaked at 0.73 GiB on a worker of 0.88 GiB, which paused).
WORKER_SOLVE_SHARE = 0.75

#: dask configuration key choosing where the m x m work of a cluster fit runs.
SOLVE_KEY = "kpca-dask.landmark-solve"
#: Its values: decide from the workers' memory, one worker, or tiles over the workers.
SOLVE_MODES = ("auto", "worker", "tiles")


def configured_solve_mode() -> str:
    """The value of :data:`SOLVE_KEY` (default ``"auto"``), checked."""
    return configured_choice(SOLVE_KEY, SOLVE_MODES)


def landmark_solve_mode(collection, n_landmarks: int) -> str | None:
    """Where the m x m work on ``collection`` runs: ``"worker"``, ``"tiles"``, or None (here).

    None without a distributed client. Otherwise the value of the configuration key
    :data:`SOLVE_KEY`, and for ``"auto"`` (the default) ``"worker"`` when 2.2 m^2 float64
    words fit the smallest worker's room, 60 % of its memory_limit less its code (a
    figure fixed for a cluster, so that the same fit takes the same way each time), with
    :data:`WORKER_SOLVE_SHARE` of it to spare.

    Examples
    --------
    >>> import dask
    >>> import dask.array as da
    >>> with dask.config.set(scheduler="threads"):
    ...     landmark_solve_mode(da.zeros(3), 1000) is None
    True
    >>> with dask.config.set({SOLVE_KEY: "everywhere"}):
    ...     landmark_solve_mode(None, 1000)
    Traceback (most recent call last):
    ...
    kpca_dask.errors.InvalidParameterError: dask's configuration key 'kpca-dask.landmark-solve' ...
    """
    chosen = configured_solve_mode()
    configured_product_way()  # the tiles' key too: refused before the pass, not after it
    budget = memory_budget(collection)
    if not budget.on_cluster:
        return None
    if chosen != "auto":
        return chosen
    room = budget.process_bytes if budget.sizing_bytes is None else budget.sizing_bytes
    return ("worker" if landmark_problem_bytes(n_landmarks) <= WORKER_SOLVE_SHARE * room
            else "tiles")


def landmark_problem_bytes(n_landmarks: int) -> int:
    """Bytes of the small problem with ``n_landmarks`` landmarks.

    Examples
    --------
    >>> format_bytes(landmark_problem_bytes(10_000))
    '1.64 GiB'
    """
    return int(SMALL_PROBLEM_WORDS * 8 * n_landmarks ** 2)


def _cap(free_bytes: float, words: float) -> int:
    # The last 1e-9 keeps a budget of exactly m^2 words from rounding down to m - 1.
    return int(math.sqrt(max(free_bytes, 0) / (8 * words)) + 1e-9)


def landmark_cap(X, *, tiles: bool = True) -> tuple[int, str]:
    """The largest m whose small problem fits, and the memory that sets it (for messages).

    On a cluster that is one worker's memory, or with ``tiles`` (and the
    configuration key :data:`SOLVE_KEY` not ``"worker"``) all the workers'
    between them; without ``tiles`` (the automatic m, which factorises K_mm
    here as it grows) this process's memory as well.

    Examples
    --------
    >>> import dask, dask.array as da
    >>> with dask.config.set({"kpca-dask.memory-limit": "1 GiB"}):
    ...     landmark_cap(da.zeros((10, 2)))[0]
    7810
    """
    cap, where, _ = _cap_where_words(X, tiles)
    return cap, where


def _cap_where_words(X, tiles: bool) -> tuple[int, str, float]:
    """:func:`landmark_cap`, and the m^2 words per fit that set it."""
    where = memory_budget(X)
    budgets = [where] if tiles or not where.on_cluster else [where, memory_budget(None)]
    tightest = min(budgets, key=lambda budget: budget.free_bytes)
    cap = _cap(tightest.free_bytes, SMALL_PROBLEM_WORDS)
    mode = configured_solve_mode()
    if where.on_cluster and tiles and mode != "worker":
        total = where.workers * where.free_bytes * (1 - TILED_TASK_SHARE)
        tiled = _cap(total, TILED_PROBLEM_WORDS)
        if mode == "tiles" or tiled > cap:
            return tiled, (f"{format_bytes(total)} (three quarters of the {where.workers} "
                           "workers' memory_limit below its pause threshold, less what they "
                           "hold: G and the factor as tiles over them)"), TILED_PROBLEM_WORDS
    if tightest.headroom_bytes is None:
        return cap, tightest.describe(), SMALL_PROBLEM_WORDS
    return cap, (f"{format_bytes(tightest.free_bytes)} (below the pause threshold of the "
                 f"smallest worker's memory_limit, {format_bytes(tightest.process_bytes)}, "
                 "less what it holds)"), SMALL_PROBLEM_WORDS


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
    cap, where, words = _cap_where_words(X, tiles=True)
    if n_landmarks <= cap:
        return
    held = ("the pass's m x m sums and the factor of the landmarks' kernel matrix"
            if words == SMALL_PROBLEM_WORDS else
            "the tiles of the pass's m x m sums, of K_mm and of its factor")
    raise InsufficientMemoryError(
        f"n_landmarks={n_landmarks} needs about {format_bytes(int(words * 8 * n_landmarks**2))}"
        f" for the landmark problem ({words} m^2 float64 words: {held}), more than {where}. "
        f"Use at most n_landmarks={cap}, give the workers (or this machine) more memory, or "
        "set dask's 'kpca-dask.memory-limit' if that figure is wrong.")
