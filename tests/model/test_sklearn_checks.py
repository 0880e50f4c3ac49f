"""scikit-learn's common estimator checks.

Skipped by scikit-learn itself: ``check_array_api_input`` (two variants), which
runs only when the environment variable SCIPY_ARRAY_API=1 is set. Every other
check passes, with no expected failures.
"""

from __future__ import annotations

from sklearn.utils.estimator_checks import parametrize_with_checks

from kpca_dask import ExactKernelPCA, KernelPCA


@parametrize_with_checks(
    [KernelPCA(n_landmarks=30, random_state=0), ExactKernelPCA()],
)
def test_sklearn_compatible_estimator(estimator, check):
    """Each common check of scikit-learn passes."""
    check(estimator)
