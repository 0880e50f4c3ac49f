"""scikit-learn's common estimator checks.

Skipped by scikit-learn itself: ``check_array_api_input`` (two variants), which
runs only when the environment variable SCIPY_ARRAY_API=1 is set. Every other
check passes but ``check_fit_score_takes_y`` for KernelPCA, listed below with why.
"""

from __future__ import annotations

from sklearn.utils.estimator_checks import parametrize_with_checks

from kpca_dask import ExactKernelPCA, KernelPCA

#: Checks that do not apply to KernelPCA, with the reason. Keep empty unless a check is
#: wrong for us.
EXPECTED_FAILED_CHECKS: dict[str, str] = {
    "check_fit_score_takes_y": (
        "calls fit(X) and then partial_fit(X) with the same rows, which would count them "
        "twice in the statistics; kpca-dask refuses that with OverlappingRowsError "
        "(tests/model/test_provenance.py). That y is accepted is checked by the others."),
}


@parametrize_with_checks(
    [KernelPCA(n_landmarks=30, random_state=0), ExactKernelPCA()],
    expected_failed_checks=lambda est: EXPECTED_FAILED_CHECKS if isinstance(est, KernelPCA)
    else {},
)
def test_sklearn_compatible_estimator(estimator, check):
    """Each common check of scikit-learn passes."""
    check(estimator)
