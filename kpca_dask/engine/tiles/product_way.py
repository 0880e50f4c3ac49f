"""Whether M's products on tiles solve with L's tiles or multiply by L^-1's.

docs/design.md §11. A product v -> M v takes two triangular solves with the
tiled factor L, or two products with X = L^-1 once X is formed. Both read
m^2 words and make m^2 b flops; what differs is the schedule. A solve is T
steps one after another (the diagonal tile's solve, then every worker's
update for the next step), each a round trip through the scheduler; a product
with X is one task per worker. Forming X costs m^3 / 3 (1 + 3 / T) flops on
the workers, in T (T + 1) / 2 tasks and T^3 / 6 tile products, once. So X
pays where the steps are many and cheap, T large against m, and the solves
where m^3 is large against the products' steps.

The model, fitted on LocalClusters of one-thread workers (Intel Xeon,
AVX-512, 2 to 8 workers, m = 2000 to 8000, T = 2 to 32):

- a product with solves takes longer than one with X by 2 T steps of
  (6.4 + 0.34 T + 1.4 W) ms on W workers (:func:`solve_step_seconds`; eleven
  of the twelve measured differences within 15 %, one 35 % off);
- forming X takes m^3 / 3 (1 + 3 / T) flops at 56 Gflop/s a thread and
  1.07 ms for each of its T^3 / 6 tile products beyond their flops (small
  tiles' GEMMs and their tasks; :func:`inversion_seconds`; within 25 % from
  0.4 s up, below which a fixed cost left out dominates: 0.23 s measured
  against 0.12).

X is formed when it pays back within :data:`PRODUCTS` products, a fit's
usual count (24 to 27 at m = 16 000, q = 10). On two workers: at
m = 16 000 in tiles of 3200, X takes 19.5 s by the model (20.0 s measured)
against 0.11 s a product saved, so the solves; at m = 8000 in tiles of 500,
3.0 s measured against 0.48 s a product, so X.
The choice hangs on m, the tiles and the workers only, so a fit takes
the same way each time on the same cluster. Dask's configuration key
:data:`PRODUCTS_KEY` overrides it.
"""

from __future__ import annotations

from ...validation import configured_choice

__all__ = ["PRODUCTS_KEY", "PRODUCT_WAYS", "PRODUCTS", "inverse_pays", "product_way",
           "configured_product_way", "solve_step_seconds", "inversion_seconds"]

#: Dask's configuration key that chooses the products' way: "auto" (the model),
#: "solves" (L's tiles) or "inverse" (X = L^-1 formed first).
PRODUCTS_KEY = "kpca-dask.tile-products"
PRODUCT_WAYS = ("auto", "solves", "inverse")

#: Products with M a fit is taken to make when the way is chosen.
PRODUCTS = 20

#: A solve step's seconds beyond a product with X: fixed, per tile a side, per worker.
STEP_SECONDS = (6.4e-3, 0.34e-3, 1.4e-3)
#: The inversion's cost: flops a second a worker thread, and seconds a tile product beyond
#: its flops (T^3 / 6 of them).
THREAD_FLOPS = 56e9
TASK_SECONDS = 1.07e-3


def solve_step_seconds(tiles: int, workers: int) -> float:
    """Seconds a step of a tiled triangular solve takes beyond its share of a product with X.

    Examples
    --------
    >>> round(solve_step_seconds(16, 2) * 1000, 1)
    14.6
    """
    fixed, per_tile, per_worker = STEP_SECONDS
    return fixed + per_tile * tiles + per_worker * workers


def inversion_seconds(n_landmarks: int, tiles: int, threads: int) -> float:
    """Seconds to form X = L^-1 from L's ``tiles`` a side on workers of ``threads`` in all.

    Examples
    --------
    >>> round(inversion_seconds(8000, 16, 2), 1), round(inversion_seconds(16_000, 5, 2), 1)
    (2.5, 19.5)
    """
    flops = n_landmarks**3 / 3 * (1 + 3 / tiles)
    return flops / (THREAD_FLOPS * max(1, threads)) + TASK_SECONDS * tiles**3 / 6


def inverse_pays(n_landmarks: int, tiles: int, workers: int, threads: int,
                 products: int = PRODUCTS) -> bool:
    """Whether forming X = L^-1 costs less than the solves' steps over ``products`` products.

    Examples
    --------
    >>> inverse_pays(8000, 16, workers=2, threads=2), inverse_pays(16_000, 5, 2, 2)
    (True, False)
    """
    saved = products * 2 * tiles * solve_step_seconds(tiles, workers)
    return inversion_seconds(n_landmarks, tiles, threads) < saved


def product_way(n_landmarks: int, tiles: int, workers: int, threads: int) -> str:
    """``"solves"`` or ``"inverse"``: :data:`PRODUCTS_KEY`'s value, or for ``"auto"`` (the
    default) the model's (:func:`inverse_pays`).

    Examples
    --------
    >>> import dask
    >>> product_way(16_000, 5, 2, 2), product_way(2000, 8, 2, 2)
    ('solves', 'inverse')
    >>> with dask.config.set({PRODUCTS_KEY: "solves"}):
    ...     product_way(2000, 8, 2, 2)
    'solves'
    """
    chosen = configured_product_way()
    if chosen != "auto":
        return chosen
    return "inverse" if inverse_pays(n_landmarks, tiles, workers, threads) else "solves"


def configured_product_way() -> str:
    """The value of :data:`PRODUCTS_KEY` (default ``"auto"``), checked: before a fit's pass.

    Examples
    --------
    >>> import dask
    >>> with dask.config.set({PRODUCTS_KEY: "by hand"}):
    ...     configured_product_way()
    Traceback (most recent call last):
    ...
    kpca_dask.errors.InvalidParameterError: dask's configuration key 'kpca-dask.tile-products' ...
    """
    return configured_choice(PRODUCTS_KEY, PRODUCT_WAYS)
