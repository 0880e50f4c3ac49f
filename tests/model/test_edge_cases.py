"""Numerical edge cases of the Nyström fit, each with one clear outcome.

Rank-deficient landmark matrices, constant data, extreme bandwidths, a
kernel that is not positive semi-definite, data far from the origin, as many
components as the kernel has, and unusual row chunkings.
"""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest

from kpca_dask import ExactKernelPCA, KernelPCA
from kpca_dask.errors import InvalidParameterError, TooFewComponentsError, ZeroEigenvalueWarning


@pytest.fixture
def X() -> np.ndarray:
    return np.random.default_rng(7).normal(size=(300, 3))


def _fit(X, **params) -> KernelPCA:
    params.setdefault("random_state", 0)
    return KernelPCA(**params).fit(X)


def test_duplicate_landmarks_are_dropped_and_reported(X):
    """Duplicate landmark points make K_mm rank-deficient: the repeated directions are
    dropped (landmark_rank_ says how many remain) and the model equals one on the
    distinct points."""
    Z = X[:20]
    doubled = _fit(X, n_components=5, landmarks=np.vstack([Z, Z]), gamma=0.5)
    single = _fit(X, n_components=5, landmarks=Z, gamma=0.5)
    assert doubled.n_landmarks_ == 40
    assert doubled.landmark_rank_ == 20
    np.testing.assert_allclose(doubled.eigenvalues_, single.eigenvalues_, rtol=1e-9)
    # Up to sign: P spreads over a repeated landmark what the single fit gives one copy, so
    # the largest entry, which fixes a column's sign, can change.
    np.testing.assert_allclose(np.abs(doubled.transform(X)), np.abs(single.transform(X)),
                               atol=1e-8)


def test_duplicate_rows_with_every_row_a_landmark_match_exact(X):
    """Data with repeated rows and m = n: K_mm is singular, yet the eigenvalues are
    those of exact kernel PCA."""
    X = np.vstack([X[:60]] * 3)
    fitted = _fit(X, n_components=4, n_landmarks=len(X), gamma=0.5)
    exact = ExactKernelPCA(n_components=4, gamma=0.5).fit(X)
    assert fitted.landmark_rank_ <= 60
    np.testing.assert_allclose(fitted.eigenvalues_, exact.eigenvalues_, rtol=1e-8)


@pytest.mark.parametrize("n_components, remove_zero_eig", [(None, False), (2, True)])
def test_constant_data_give_no_component(n_components, remove_zero_eig):
    """Constant data have no variance in any feature space: n_components=None or
    remove_zero_eig=True give 0 components with a warning naming the cause (no NaN)."""
    X = np.full((100, 3), 2.5)
    with pytest.warns(ZeroEigenvalueWarning, match="constant data"):
        model = _fit(X, n_components=n_components, n_landmarks=30,
                     remove_zero_eig=remove_zero_eig)
    assert model.n_components_ == 0 and model.transform(X).shape == (100, 0)


def test_constant_data_with_a_fraction_raise_too_few_components():
    """A fraction of no variance cannot be explained: TooFewComponentsError naming the cause."""
    with pytest.raises(TooFewComponentsError, match="constant data"):
        _fit(np.full((100, 3), 2.5), n_components=0.9, n_landmarks=30)


@pytest.mark.parametrize("gamma", [1e-300, 1e-12])
def test_tiny_gamma_gives_no_component(X, gamma):
    """A gamma so small that every rbf value rounds to 1 leaves only rounding noise: the
    fit keeps no component (with a warning to increase gamma), never components of noise."""
    with pytest.warns(ZeroEigenvalueWarning, match="increase gamma"):
        model = _fit(X, n_components=None, n_landmarks=50, gamma=gamma)
    assert model.n_components_ == 0


def test_small_gamma_is_still_accurate(X):
    """With gamma = 1e-9 the kernel differs from 1 only in the 9th digit; the shifted
    accumulation keeps the eigenvalues equal to exact kernel PCA (m = n)."""
    fitted = _fit(X, n_components=3, n_landmarks=len(X), gamma=1e-9)
    exact = ExactKernelPCA(n_components=3, gamma=1e-9).fit(X)
    np.testing.assert_allclose(fitted.eigenvalues_, exact.eigenvalues_, rtol=1e-6)


@pytest.mark.parametrize("gamma", [1e4, 1e8])
def test_huge_gamma_gives_the_diagonal_kernel(X, gamma):
    """A huge gamma turns the rbf kernel into the identity: every landmark is its own
    feature, the centred eigenvalues are 1, and trace_error_ = 1 - m / n says the
    landmarks capture only themselves (landmarks that are data rows)."""
    m = 50
    fitted = _fit(X, n_components=None, n_landmarks=m, gamma=gamma, landmarks="uniform")
    assert fitted.landmark_rank_ == m
    assert fitted.n_components_ == m
    np.testing.assert_allclose(fitted.eigenvalues_[:-1], 1.0, rtol=1e-6)
    np.testing.assert_allclose(fitted.eigenvalues_[-1], 1.0 - m / len(X), rtol=1e-6)
    np.testing.assert_allclose(fitted.trace_error_, 1.0 - m / len(X), rtol=1e-6)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy's own overflow notes
@pytest.mark.parametrize(("kernel", "params", "scale"), [
    ("polynomial", {"gamma": 1e200}, 1.0),
    ("linear", {}, 1e200),
    ("rbf", {}, 1e200),
])
def test_kernel_overflow_raises_invalid_parameter(X, kernel, params, scale):
    """Kernel values that overflow to inf raise InvalidParameterError saying so,
    instead of a NaN model or a LinAlgError."""
    with pytest.raises(InvalidParameterError, match="overflowed"):
        _fit(X * scale, n_components=2, n_landmarks=30, kernel=kernel, **params)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_float32_overflow_in_the_pass_raises_invalid_parameter(X):
    """float32 kernel blocks overflow above 3e38 although the float64 K_mm does not:
    the pass reports it as InvalidParameterError."""
    with pytest.raises(InvalidParameterError, match="float32"):
        _fit(X, n_components=2, n_landmarks=30, kernel="polynomial", gamma=1e20,
             dtype="float32")


def test_sigmoid_negative_eigenvalues_are_warned_and_excluded(X):
    """The sigmoid kernel is not PSD: the negative eigenvalues of K_mm are counted in
    a warning and excluded, and the model is finite with positive eigenvalues."""
    with pytest.warns(UserWarning, match=r"not positive semi-definite.*negative"):
        fitted = _fit(X, n_components=3, n_landmarks=100, kernel="sigmoid", gamma=2.0,
                      coef0=-1.0)
    assert fitted.landmark_rank_ < fitted.n_landmarks_
    assert np.all(fitted.eigenvalues_ > 0)
    assert np.isfinite(fitted.transform(X)).all()


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "matern"])
def test_huge_offset_fits_like_centred_data(X, kernel):
    """Data at 1e6 + N(0, 1): distance kernels see the same distances as for N(0, 1),
    so the model equals the offset-free one (|a|^2 + |b|^2 - 2ab alone would lose
    the digits)."""
    plain = _fit(X, n_components=3, n_landmarks=100, kernel=kernel, gamma=0.5)
    shifted = _fit(X + 1e6, n_components=3, n_landmarks=100, kernel=kernel, gamma=0.5)
    np.testing.assert_allclose(shifted.eigenvalues_, plain.eigenvalues_, rtol=1e-9)
    np.testing.assert_allclose(shifted.transform(X[:20] + 1e6), plain.transform(X[:20]),
                               atol=1e-7)


def test_huge_offset_in_float32_keeps_float32_accuracy(X):
    """With dtype='float32' the shift to the landmark mean happens in float64, before
    the cast, so data at 1e6 lose no more than offset-free float32 data."""
    plain = _fit(X, n_components=3, n_landmarks=100, gamma=0.5, dtype="float32")
    shifted = _fit(X + 1e6, n_components=3, n_landmarks=100, gamma=0.5, dtype="float32")
    np.testing.assert_allclose(shifted.eigenvalues_, plain.eigenvalues_, rtol=1e-5)


def test_n_components_equal_to_the_rank(X):
    """The linear kernel on 3 features has rank 3 after centring: n_components=3 gives
    ordinary PCA's eigenvalues, n_components=4 adds a zero one with a warning."""
    fitted = _fit(X, n_components=3, n_landmarks=50, kernel="linear")
    Xc = X - X.mean(axis=0)
    np.testing.assert_allclose(fitted.eigenvalues_, np.linalg.svd(Xc, compute_uv=False) ** 2,
                               rtol=1e-10)
    with pytest.warns(ZeroEigenvalueWarning, match="n_components=4, but only 3"):
        four = _fit(X, n_components=4, n_landmarks=50, kernel="linear")
    assert four.eigenvalues_[3] == 0.0


@pytest.mark.parametrize("chunks", [
    (1,) * 300,  # a single sample in every chunk
    (150, 1, 149),  # a single sample in one chunk
    (100, 0, 1, 0, 199),  # empty chunks between the others
    (0, 300, 0),  # empty first and last chunks
])
def test_unusual_row_chunks_give_the_same_model(X, chunks):
    """One-row and zero-row blocks contribute nothing wrong: the model equals the one
    from the whole array in one chunk, and transform keeps the chunking."""
    reference = _fit(X, n_components=3, n_landmarks=50, gamma=0.5)
    Xd = da.from_array(X, chunks=(chunks, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted = _fit(Xd, n_components=3, n_landmarks=50, gamma=0.5)
    np.testing.assert_allclose(fitted.eigenvalues_, reference.eigenvalues_, rtol=1e-10)
    Y = fitted.transform(Xd)
    assert Y.chunks[0] == chunks
    np.testing.assert_allclose(Y.compute(), reference.transform(X), atol=1e-10)
