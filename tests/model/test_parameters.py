"""The declared table of KernelPCA's parameters: complete, read by fit and by the loader."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
import zarr

import kpca_dask
from kpca_dask import KernelPCA
from kpca_dask.blocks.kernels import (
    KERNEL_NAMES,
    POINT_KERNEL_NAMES,
    canonical_kernel_name,
    kernel_diagonal,
    pairwise_kernel,
)
from kpca_dask.errors import InvalidParameterError, ModelFormatError
from kpca_dask.model.eof_parameters import EXTENDED_CONSTRAINTS, HILBERT_CONSTRAINTS
from kpca_dask.model.parameters import (
    CONSTRAINTS,
    EXACT_CONSTRAINTS,
    KERNEL_PARAMETERS,
    check_params,
    resolve_kernel_params,
)

#: One value each parameter refuses.
BAD_VALUES = {
    "n_components": 1.5,
    "kernel": "gauss",
    "gamma": -0.5,
    "degree": 2.5,
    "coef0": float("nan"),
    "kernel_params": "nu=2.5",
    "remove_zero_eig": "yes",
    "n_landmarks": 0,
    "landmarks": "everywhere",
    "tol": 1.5,
    "max_landmarks": 10.0,
    "dtype": "float16",
    "rcond": 1.0,
    "random_state": -1,
    "fit_inverse_transform": 1,
    "alpha": -1.0,
    "sample_dim": 0,
    "weights": "cos(lat)",
    "solver": "dense",
    "eigen_solver": "arpack",
}


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(0).normal(size=(60, 3))


def test_constraints_cover_exactly_the_constructor_parameters():
    """Every constructor parameter has one entry in the table, and nothing else has."""
    assert list(CONSTRAINTS) == list(inspect.signature(KernelPCA).parameters)


def test_the_defaults_are_allowed():
    """KernelPCA() passes its own table."""
    check_params(KernelPCA().get_params(deep=False))


@pytest.mark.parametrize("name", list(CONSTRAINTS))
def test_a_bad_value_is_refused_by_fit_naming_the_parameter(X, name):
    """A refused value of each parameter is an InvalidParameterError at fit that names it."""
    with pytest.raises(InvalidParameterError) as caught:
        KernelPCA(**{name: BAD_VALUES[name]}).fit(X)
    assert re.search(rf"\b{name}\b", str(caught.value)), str(caught.value)


def test_exact_constraints_cover_exactly_its_constructor_parameters():
    assert set(EXACT_CONSTRAINTS) == set(inspect.signature(kpca_dask.ExactKernelPCA).parameters)


@pytest.mark.parametrize("name", sorted(EXACT_CONSTRAINTS))
def test_exact_kernel_pca_refuses_what_kernel_pca_refuses(X, name):
    """ExactKernelPCA checks every parameter by the same rules (remove_zero_eig="no" was
    taken as true before), and its fitted state is untouched."""
    model = kpca_dask.ExactKernelPCA(**{name: BAD_VALUES[name]})
    with pytest.raises(InvalidParameterError) as caught:
        model.fit(X)
    assert re.search(rf"\b{name}\b", str(caught.value)), str(caught.value)
    assert not hasattr(model, "eigenvalues_")


def test_exact_kernel_pca_takes_precomputed(X):
    check_params({"kernel": "precomputed"}, constraints=EXACT_CONSTRAINTS)
    with pytest.raises(InvalidParameterError, match="Unknown kernel 'precomputd'.*precomputed"):
        check_params({"kernel": "precomputd"}, constraints=EXACT_CONSTRAINTS)


def test_an_unknown_name_is_refused():
    """A name the constructor does not take is an error, which lists the ones it takes."""
    with pytest.raises(InvalidParameterError, match=r"Unknown parameter\(s\) \['bandwidth'\].*"
                                                    r"n_components, kernel, gamma"):
        check_params({"bandwidth": 1.0, "gamma": 0.5})


def test_a_bool_is_not_a_count():
    """True is refused where an int is wanted, as scikit-learn refuses it."""
    with pytest.raises(InvalidParameterError, match="n_landmarks must be an int >= 1"):
        check_params({"n_landmarks": True})


@pytest.mark.parametrize("points", [np.ones((4, 3)), [[0.0, 1.0], [2.0, 3.0]]])
def test_landmark_points_pass_the_table(points):
    """Explicit landmark points are a valid value; their shape is checked against X at fit."""
    check_params({"landmarks": points})


def test_set_n_components_checks_through_the_table(X):
    """set_n_components refuses what the constructor's n_components refuses."""
    kpca = KernelPCA(n_components=2, n_landmarks=20, random_state=0).fit(X)
    with pytest.raises(InvalidParameterError, match="n_components must be None, an int >= 1"):
        kpca.set_n_components(0)


@pytest.mark.parametrize("name, value, message", [
    ("tol", 5, r"tol must be a number in \(0, 1\); got 5\."),
    ("kernel", "gauss", r"Unknown kernel 'gauss'"),
    ("bandwidth", 1.0, r"Unknown parameter\(s\) \['bandwidth'\]"),
])
def test_model_file_with_an_invalid_parameter_is_refused(X, tmp_path, name, value, message):
    """A saved model whose stored parameter was edited to an invalid value (or a name the
    estimator does not take) is refused on load, naming the parameter."""
    path = tmp_path / "model.zarr"
    KernelPCA(n_components=2, n_landmarks=20, random_state=0).fit(X).save(path)
    group = zarr.open_group(str(path), mode="r+")
    attrs = group.attrs.asdict()
    attrs["params"][name] = value
    group.attrs.put(attrs)
    with pytest.raises(ModelFormatError, match=rf"{re.escape(str(path))}: the model is "
                                               rf"damaged: a parameter is invalid: {message}"):
        kpca_dask.load(path)


# -- the parameters of each kernel ---------------------------------------------------


def test_every_named_kernel_has_its_parameters_declared():
    """KERNEL_PARAMETERS names every kernel (aliases resolved) and nothing else."""
    assert set(KERNEL_PARAMETERS) == {canonical_kernel_name(name) for name in KERNEL_NAMES}


@pytest.mark.parametrize("name", POINT_KERNEL_NAMES)
def test_resolved_parameters_are_the_kernels_keyword_arguments(name):
    """The resolved parameters are exactly what the kernel function and its diagonal take:
    a parameter missing from the table or one too many would be a TypeError here."""
    A = np.random.default_rng(1).normal(size=(5, 3))
    params = resolve_kernel_params(name, A.shape[1])
    assert pairwise_kernel(A, A, name, **params).shape == (5, 5)
    assert kernel_diagonal(A, name, **params).shape == (5,)


def test_gamma_defaults_to_one_over_n_features():
    """gamma=None resolves to 1 / n_features, as in scikit-learn."""
    assert resolve_kernel_params("rbf", 8) == {"gamma": 0.125}


def test_kernel_params_are_not_modified():
    """The caller's kernel_params dict is copied, never written into."""
    params = {"nu": 2.5}
    resolve_kernel_params("matern", 3, kernel_params=params)
    assert params == {"nu": 2.5}


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"kernel": "rbff"}, "Unknown kernel 'rbff'.*rbf"),
        ({"kernel": "rbf", "gamma": -1.0}, "gamma must be a positive"),
        ({"kernel": "rbf", "gamma": float("nan")}, "gamma must be a positive"),
        ({"kernel": "polynomial", "degree": 0}, "degree must be a whole number >= 1"),
        ({"kernel": "polynomial", "degree": 2.5}, "degree must be a whole number >= 1"),
        ({"kernel": "polynomial", "degree": float("inf")}, "degree must be a whole number"),
        ({"kernel": "sigmoid", "coef0": float("inf")}, "coef0 must be a finite"),
        ({"kernel": "matern", "kernel_params": {"nu": 0}}, "nu must be a positive"),
        ({"kernel": "rbf", "kernel_params": {"degree": 2}}, "does not take"),
    ],
)
def test_invalid_kernel_parameters(kwargs, match):
    """Bad kernel names and parameter values raise InvalidParameterError naming the fix."""
    kernel = kwargs.pop("kernel")
    with pytest.raises(InvalidParameterError, match=match):
        resolve_kernel_params(kernel, 3, **kwargs)


def test_whole_float_degree_becomes_an_int():
    """degree=2.0 is accepted as the integer 2 (scikit-learn's integer degree)."""
    params = resolve_kernel_params("polynomial", 3, degree=2.0)
    assert params["degree"] == 2 and isinstance(params["degree"], int)


#: The EOF estimators' tables, and a value each of their own parameters refuses.
EOF_TABLES = {"HilbertKernelEOF": HILBERT_CONSTRAINTS, "ExtendedKernelEOF": EXTENDED_CONSTRAINTS}
EOF_BAD_VALUES = {"HilbertKernelEOF": {"kernel": "sigmoid", "landmarks": "kmeans",
                                       "padding": "zero", "decay_factor": 0.0, "coef0": -1.0,
                                       "degree": 0},
                  "ExtendedKernelEOF": {"tau": 0, "embedding": 0, "n_pca_modes": 0}}


@pytest.mark.parametrize("estimator", sorted(EOF_TABLES))
def test_eof_constraints_cover_exactly_their_constructor_parameters(estimator):
    """Each EOF table has one entry per constructor parameter, in the constructor's order,
    and its defaults pass it."""
    cls = getattr(kpca_dask, estimator)
    assert list(EOF_TABLES[estimator]) == list(inspect.signature(cls).parameters)
    defaults = {"n_components": 2} if estimator == "ExtendedKernelEOF" else {}
    check_params(cls(**defaults).get_params(deep=False), constraints=EOF_TABLES[estimator])


@pytest.mark.parametrize(("estimator", "name"), [
    (estimator, name) for estimator, table in sorted(EOF_TABLES.items()) for name in table])
def test_eof_estimators_refuse_a_bad_value_naming_it(X, estimator, name):
    """A refused value of each parameter is an InvalidParameterError at fit that names it,
    before anything is read; the estimator is left unfitted."""
    value = EOF_BAD_VALUES[estimator].get(name, BAD_VALUES.get(name))
    params = {"n_components": 2, **({"kernel": "poly"} if name in ("degree", "coef0") else {}),
              name: value}
    model = getattr(kpca_dask, estimator)(**params)
    with pytest.raises(InvalidParameterError) as caught:
        model.fit(X)
    assert re.search(rf"\b{name}\b", str(caught.value)), str(caught.value)
    assert not hasattr(model, "model_") and not hasattr(model, "kpca_")
