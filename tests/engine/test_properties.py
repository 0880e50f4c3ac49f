"""Property-based tests (hypothesis): invariants over random shapes, chunkings,
dtypes and kernels, and random bad input that must always end in a documented
kpca_dask error — never another exception, a hang, or a checkpoint left behind."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kpca_dask import ExactKernelPCA, KernelPCA, errors
from kpca_dask.errors import (
    InvalidInputError,
    InvalidParameterError,
    KPCAError,
    NonFiniteInputError,
)

PSD_KERNELS = ["rbf", "laplacian", "polynomial", "linear", "cosine", "matern"]
PROPERTY_SETTINGS = settings(max_examples=12, deadline=None, derandomize=True,
                             suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                    HealthCheck.too_slow])
#: For tests parametrized over every bad input: a few random draws of the rest each.
FEW = settings(PROPERTY_SETTINGS, max_examples=3)
#: The error classes kpca_dask documents: those kpca_dask.errors exports.
DOCUMENTED_ERRORS = frozenset(
    getattr(errors, name) for name in errors.__all__
    if isinstance(getattr(errors, name), type) and issubclass(getattr(errors, name), KPCAError))


@st.composite
def data_and_chunks(draw, min_rows=8, max_rows=120):
    """A random normal (n, p) array and a random row chunking of it (empty and
    one-row chunks included)."""
    n = draw(st.integers(min_rows, max_rows))
    p = draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2**32 - 1))
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=6)))
    edges = [0, *cuts, n]
    chunks = tuple(b - a for a, b in zip(edges[:-1], edges[1:]))
    X = np.random.default_rng(seed).normal(size=(n, p))
    return X, chunks


def _quiet_fit(estimator, X, **fit_params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the sigmoid kernel is not PSD
        return estimator.fit(X, **fit_params)


@PROPERTY_SETTINGS
@given(case=data_and_chunks(), kernel=st.sampled_from([*PSD_KERNELS, "sigmoid"]),
       dtype=st.sampled_from(["float64", "float32"]), m=st.integers(2, 40))
def test_model_does_not_depend_on_the_chunking(case, kernel, dtype, m):
    """Any row chunking gives the model of the single-chunk array: the same landmarks,
    eigenvalues, and embedding of the chunked rows (1e-10 in float64, 1e-4 in float32,
    relative to the largest value), all finite.

    Every draw must fit: the data are finite and n_components is an int, so too few
    positive eigenvalues give zero columns with a warning, never an error.
    """
    X, chunks = case
    lazy = da.from_array(X, chunks=(chunks, X.shape[1]))
    params = {"n_components": 2, "kernel": kernel, "n_landmarks": m, "dtype": dtype,
              "random_state": 0}
    whole = _quiet_fit(KernelPCA(**params), X)
    chunked = _quiet_fit(KernelPCA(**params), lazy)
    rtol = 1e-10 if dtype == "float64" else 1e-4
    # Landmarks are drawn by global row numbers, so no chunking may move them at all.
    np.testing.assert_array_equal(chunked.landmarks_, whole.landmarks_)
    np.testing.assert_allclose(chunked.eigenvalues_, whole.eigenvalues_, rtol=rtol,
                               atol=rtol * whole.eigenvalues_[0])
    # The chunked model on the chunked rows against the whole model on the whole array:
    # a fit or a transform that depended on the blocks would differ here.
    Y, expected = chunked.transform(lazy).compute(), whole.transform(X)
    assert np.isfinite(Y).all() and np.isfinite(chunked.eigenvalues_).all()
    np.testing.assert_allclose(Y, expected, rtol=rtol, atol=rtol * np.abs(expected).max())


@PROPERTY_SETTINGS
@given(case=data_and_chunks(max_rows=80), kernel=st.sampled_from(PSD_KERNELS))
def test_every_row_a_landmark_is_exact_kernel_pca(case, kernel):
    """m = n reproduces ExactKernelPCA's leading eigenvalues (1e-6 relative) for every
    positive semi-definite kernel, shape and chunking."""
    X, chunks = case
    exact = ExactKernelPCA(kernel=kernel).fit(X)
    significant = exact.eigenvalues_ > 1e-6 * exact.eigenvalues_[0]
    q = int(min(3, significant.sum()))
    fitted = KernelPCA(n_components=q, kernel=kernel, n_landmarks=len(X), random_state=0).fit(
        da.from_array(X, chunks=(chunks, X.shape[1])))
    np.testing.assert_allclose(fitted.eigenvalues_, exact.eigenvalues_[:q], rtol=1e-6)
    assert np.isfinite(fitted.transform(X)).all()


# -- bad input ----------------------------------------------------------------

BAD_PARAMETERS = [
    {"n_components": 0}, {"n_components": -2}, {"n_components": 1.5},
    {"n_components": "all"}, {"n_components": True},
    {"n_landmarks": 0}, {"n_landmarks": 2.5}, {"n_landmarks": None},
    {"gamma": 0.0}, {"gamma": -1.0}, {"gamma": float("nan")}, {"gamma": float("inf")},
    {"gamma": "wide"}, {"kernel": "quadratic"}, {"kernel": 3},
    {"kernel": "polynomial", "degree": 0}, {"kernel": "polynomial", "degree": "two"},
    {"kernel": "sigmoid", "coef0": float("nan")}, {"kernel_params": {"bandwidth": 1.0}},
    {"kernel": "matern", "kernel_params": {"nu": -1.0}},
    {"dtype": "float16"}, {"dtype": np.int32}, {"rcond": -1.0}, {"rcond": 1.0},
    {"rcond": "tiny"}, {"landmarks": "farthest"}, {"landmarks": np.ones((5, 7))},
    {"random_state": "seed"},
    {"random_state": -1}, {"random_state": 1.5}, {"kernel_params": "nu=1"},
    {"kernel": "polynomial", "degree": float("nan")},
    {"kernel": "polynomial", "degree": float("inf")}, {"n_components": float("nan")},
]


@st.composite
def nonfinite_data(draw):
    """A valid (n, 3) array with NaN / +inf / -inf written at random places."""
    n = draw(st.integers(4, 60))
    X = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).normal(size=(n, 3))
    places = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, 2)),
                           min_size=1, max_size=5))
    for row, column in places:
        X[row, column] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    return X, draw(st.integers(1, n))


def _fails_with_a_documented_error(action, checkpoint=None, expected=KPCAError):
    """Run ``action``; check that it raises ``expected``, one of the documented classes
    of :mod:`kpca_dask.errors` with a message, and that it wrote nothing where
    ``checkpoint`` (a path in a fresh folder) was asked for. Returns the error."""
    if checkpoint is not None:
        assert not any(checkpoint.parent.iterdir()), "the checkpoint's folder must start empty"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(expected) as caught:
            action()
    error = caught.value
    # Documented: exported by kpca_dask.errors (not an internal subclass), and saying
    # what is wrong.
    assert type(error) in DOCUMENTED_ERRORS, f"{type(error).__module__}.{type(error).__name__}"
    assert str(error).strip(), f"{type(error).__name__} without a message"
    if checkpoint is not None:
        # Not only the path given: a partial store, staging copy or lock beside it is
        # a checkpoint left behind too.
        left = sorted(path.name for path in checkpoint.parent.iterdir())
        assert not left, f"bad input left {left} beside the checkpoint path"
    return error


@PROPERTY_SETTINGS
@given(case=nonfinite_data(), lazy=st.booleans())
def test_nonfinite_data_raise_nonfinite_input_error(tmp_path_factory, case, lazy):
    """NaN or inf anywhere, in numpy or dask input with any chunk size, raises
    NonFiniteInputError from fit (leaving no checkpoint) and from transform."""
    X, block_rows = case
    data = da.from_array(X, chunks=(block_rows, 3)) if lazy else X
    checkpoint = tmp_path_factory.mktemp("ckpt") / "fit.ckpt"
    error = _fails_with_a_documented_error(
        lambda: KernelPCA(n_components=1, n_landmarks=10, random_state=0).fit(
            data, checkpoint=checkpoint), checkpoint)
    assert isinstance(error, NonFiniteInputError)
    fitted = KernelPCA(n_components=1, n_landmarks=10, random_state=0).fit(
        np.random.default_rng(0).normal(size=(30, 3)))
    error = _fails_with_a_documented_error(
        lambda: np.asarray(fitted.transform(data)))
    assert isinstance(error, NonFiniteInputError)


BAD_ARRAYS = {
    "1-D": lambda rng: rng.normal(size=10),
    "3-D": lambda rng: rng.normal(size=(4, 3, 2)),
    "0-D": lambda rng: np.float64(1.0),
    "no rows": lambda rng: np.empty((0, 3)),
    "one row": lambda rng: rng.normal(size=(1, 3)),
    "no features": lambda rng: np.empty((10, 0)),
    "complex": lambda rng: rng.normal(size=(10, 3)) + 1j,
    "strings": lambda rng: np.array([["a", "b"], ["c", "d"], ["e", "f"]]),
    "objects": lambda rng: np.array([[1.0, None], [2.0, 3.0], [4.0, 5.0]], dtype=object),
    "datetimes": lambda rng: np.array([["2024-01-01"] * 2] * 3, dtype="datetime64[D]"),
    "ragged": lambda rng: [[1.0, 2.0], [3.0]],
}


@pytest.mark.parametrize("kind", sorted(BAD_ARRAYS))
@FEW
@given(lazy=st.booleans(), seed=st.integers(0, 99))
def test_bad_arrays_raise_invalid_input(tmp_path_factory, kind, lazy, seed):
    """Wrong shapes and dtypes, as numpy or dask input, raise InvalidInputError and
    leave no checkpoint behind."""
    X = BAD_ARRAYS[kind](np.random.default_rng(seed))
    if lazy and isinstance(X, np.ndarray) and X.dtype != object and X.ndim >= 1:
        X = da.from_array(X)
    checkpoint = tmp_path_factory.mktemp("ckpt") / "fit.ckpt"
    _fails_with_a_documented_error(
        lambda: KernelPCA(n_components=1, n_landmarks=5).fit(X, checkpoint=checkpoint),
        checkpoint, expected=InvalidInputError)


@pytest.mark.parametrize("bad", BAD_PARAMETERS, ids=repr)
@FEW
@given(lazy=st.booleans(), n=st.integers(12, 60), block_rows=st.integers(1, 60))
def test_bad_parameters_raise_a_documented_error(tmp_path_factory, bad, lazy, n, block_rows):
    """Every bad parameter raises a kpca_dask error at fit (InvalidParameterError or
    a subclass), whatever the data and chunking, and no checkpoint is written."""
    X = np.random.default_rng(n).normal(size=(n, 3))
    data = da.from_array(X, chunks=(block_rows, 3)) if lazy else X
    checkpoint = tmp_path_factory.mktemp("ckpt") / "fit.ckpt"
    params = {"n_components": 2, "n_landmarks": 10, "random_state": 0, **bad}
    _fails_with_a_documented_error(
        lambda: KernelPCA(**params).fit(data, checkpoint=checkpoint), checkpoint,
        expected=InvalidParameterError)


def test_nonfinite_landmarks_raise_nonfinite_input_error(tmp_path):
    """Landmarks passed with NaN in them raise NonFiniteInputError at fit, no checkpoint."""
    checkpoint = tmp_path / "fit.ckpt"
    X = np.random.default_rng(0).normal(size=(30, 3))
    _fails_with_a_documented_error(
        lambda: KernelPCA(n_components=2, landmarks=np.full((5, 3), np.nan)).fit(
            X, checkpoint=checkpoint), checkpoint, expected=NonFiniteInputError)


@PROPERTY_SETTINGS
@given(n_features=st.integers(1, 6).filter(lambda p: p != 3), lazy=st.booleans())
def test_transform_with_other_features_raises_invalid_input(n_features, lazy):
    """transform with a different number of features raises InvalidInputError."""
    fitted = KernelPCA(n_components=1, n_landmarks=10, random_state=0).fit(
        np.random.default_rng(0).normal(size=(30, 3)))
    X = np.random.default_rng(1).normal(size=(7, n_features))
    _fails_with_a_documented_error(lambda: fitted.transform(da.from_array(X) if lazy else X),
                                   expected=InvalidInputError)
