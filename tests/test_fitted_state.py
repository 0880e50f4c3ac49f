"""Every estimator's fitted state is read through one protocol: ``estimator.model_``.

KernelPCA holds a :class:`~kpca_dask.model.fitted.FittedModel`, ExactKernelPCA an
:class:`~kpca_dask.exact.exact_model.ExactFit`, HilbertKernelEOF a
:class:`~kpca_dask.eof.hilbert_model.HilbertFit` and ExtendedKernelEOF an
:class:`~kpca_dask.eof.extended_model.ExtendedFit`, each immutable, each with ``layout``,
``preprocessing``, ``rotation`` and ``replace``. Library code never tells the estimators apart by
``hasattr(estimator, "model_")`` nor reads an instance's ``__dict__`` (or ``vars``);
read with ``ast`` as tests/test_layout.py reads imports.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.utils.validation import check_is_fitted

from kpca_dask import (
    ExactKernelPCA,
    ExtendedKernelEOF,
    HilbertKernelEOF,
    KernelCCA,
    KernelMCA,
    KernelPCA,
)
from kpca_dask.errors import KPCAError

PACKAGE = Path(__file__).resolve().parents[1] / "kpca_dask"


def _switches(source: str) -> list[tuple[int, str]]:
    """(line, what) of every ``hasattr(x, "model_")``, ``x.__dict__`` and ``vars(x)`` read."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            found.append((node.lineno, "__dict__"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "vars" and node.args:
                found.append((node.lineno, "vars()"))
            elif (node.func.id == "hasattr" and len(node.args) == 2
                  and isinstance(node.args[1], ast.Constant) and node.args[1].value == "model_"):
                found.append((node.lineno, 'hasattr(..., "model_")'))
    return sorted(found)


def test_the_switch_finder_finds_each_kind():
    """Each read the rule forbids is found; reading an attribute by name is not one."""
    source = ('hasattr(e, "model_")\ne.__dict__.get("x")\n"x" in vars(e)\n'
              'getattr(e, "model_", None)\nhasattr(e, "dims")\n')
    assert _switches(source) == [(1, 'hasattr(..., "model_")'), (2, "__dict__"), (3, "vars()")]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_estimator_switch_in_library_code(path):
    """No module tells the estimators apart by ``model_`` or reads ``__dict__``/``vars``."""
    found = _switches(path.read_text())
    assert not found, f"{path.relative_to(PACKAGE)} reads {found}: read estimator.model_"


@pytest.mark.parametrize("solver", ["dense", "matrix-free"])
def test_exact_fitted_attributes_are_views_of_one_model(solver):
    """ExactKernelPCA's fitted attributes read its one model; a refit replaces it whole."""
    X = np.random.default_rng(0).normal(size=(40, 3))
    exact = ExactKernelPCA(n_components=2, gamma=0.5, eigen_solver=solver).fit(X)
    check_is_fitted(exact)
    model = exact.model_
    assert exact.eigenvalues_ is model.eigenvalues and exact.n_components_ == 2
    assert exact.X_fit_ is model.rows and exact.eigen_solver_ == solver
    assert hasattr(exact, "n_products_") == (solver == "matrix-free")
    assert not hasattr(exact, "feature_layout_") and not hasattr(exact, "rotation_")
    with pytest.raises(AttributeError):
        exact.eigenvalues_ = np.ones(2)  # read-only: the model is changed only by a fit
    exact.fit(X[:30])
    assert exact.model_ is not model and exact.n_samples_fit_ == 30


def test_every_estimator_answers_the_protocol():
    """layout, preprocessing, rotation and replace are read the same way from every fitted
    model."""
    X = np.random.default_rng(0).normal(size=(40, 3))
    for estimator in (KernelPCA(2, gamma=0.5, n_landmarks=20, random_state=0),
                      ExactKernelPCA(2, gamma=0.5), HilbertKernelEOF(2, padding="none"),
                      ExtendedKernelEOF(2, tau=1, embedding=2, n_landmarks=20)):
        model = estimator.fit(X).model_
        assert model.layout is None and model.rotation is None
        assert model.preprocessing.layout is None and len(model.preprocessing.steps) <= 1
        again = model.replace(rotation=None)
        assert type(again) is type(model) and again is not model and again.rotation is None


def test_unfitted_exact_has_no_model():
    """Before a fit there is no model_, and the fitted attributes are absent."""
    exact = ExactKernelPCA()
    assert not hasattr(exact, "model_") and not hasattr(exact, "eigenvalues_")
    with pytest.raises((KPCAError, ValueError, AttributeError)):
        check_is_fitted(exact)


#: The names library code gives an estimator it is handed.
_ESTIMATOR_NAMES = {"estimator", "kpca", "model", "stage", "fitted", "loaded"}


def _private_reads(source: str) -> list[tuple[int, str]]:
    """(line, name) of every ``estimator._name`` read (not a dunder) in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            value = node.value
            owner = value.attr if isinstance(value, ast.Attribute) else getattr(value, "id", "")
            if owner in _ESTIMATOR_NAMES:
                found.append((node.lineno, f"{owner}.{node.attr}"))
    return sorted(found)


def test_the_private_read_finder_finds_them():
    source = "estimator._embedding(X)\nself.estimator._norms()\nmodel.__class__\nx._y\n"
    assert _private_reads(source) == [(1, "estimator._embedding"), (2, "estimator._norms")]


@pytest.mark.parametrize("path", sorted(p for p in PACKAGE.rglob("*.py")
                                        if "estimators" not in p.parts),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_private_attribute_of_an_estimator_is_read_outside_its_package(path):
    """Outside kpca_dask/estimators/, an estimator is read through its public attributes and
    its fitted model, never its private ones."""
    assert not _private_reads(path.read_text()), path.relative_to(PACKAGE)


#: The one place a fitted model may hold a graph of the training data: the training rows
#: where the maths needs the rows themselves for new data (an exact kernel PCA's ``X_fit_``,
#: the Hilbert EOF's Gram way), as scikit-learn holds ``X_fit_`` (docs/design.md §16).
_TRAINING_ROWS = {"ExactFit.rows", "RowPanels.rows", "GramState.rows"}


def _reads(collection, data: str) -> bool:
    """Whether the dask ``collection`` reads the array named ``data`` (a key of its graph is
    one of ``data``'s); an array in memory wrapped as a dask array does not."""
    keys = dict(collection.__dask_graph__())
    return any((key[0] if isinstance(key, tuple) else key) == data for key in keys)


def _graphs(value, where: str, data: str, seen: set) -> list[str]:
    """The places in a fitted model ``value`` (its dataclasses, estimators, dicts, sequences)
    that hold a graph reading the array named ``data``, each as ``Class.field``."""
    if id(value) in seen:
        return []
    seen.add(id(value))
    if dask.is_dask_collection(value):
        return [where] if _reads(value, data) else []
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [found for field in dataclasses.fields(value)
                for found in _graphs(getattr(value, field.name),
                                     f"{type(value).__name__}.{field.name}", data, seen)]
    if hasattr(value, "model_"):  # a stage of an extended EOF: a fitted estimator
        return _graphs(value.model_, f"{type(value).__name__}.model_", data, seen)
    if isinstance(value, dict):
        return [found for item in value.values() for found in _graphs(item, where, data, seen)]
    if isinstance(value, (list, tuple)):
        return [found for item in value for found in _graphs(item, where, data, seen)]
    return []


@pytest.mark.parametrize("estimator", [
    KernelPCA(2, gamma=0.5, n_landmarks=20, random_state=0),
    ExactKernelPCA(2, gamma=0.5), ExactKernelPCA(2, gamma=0.5, eigen_solver="matrix-free"),
    HilbertKernelEOF(2, padding="none", solver="nystrom", n_landmarks=20, random_state=0),
    HilbertKernelEOF(2, padding="none", solver="gram"),
    ExtendedKernelEOF(2, tau=1, embedding=2, n_landmarks=20, random_state=0),
    ExtendedKernelEOF(2, tau=1, embedding=2, n_pca_modes=2, solver="gram")],
    ids=["kpca", "exact-dense", "exact-matrix-free", "hilbert-nystrom", "hilbert-gram",
         "extended", "extended-gram"])
def test_a_fitted_model_holds_no_graph_of_the_data_but_its_training_rows(estimator):
    """Fitted on a dask array, a model keeps no lazy graph of the data (its scores, means
    and maps are read at the fit) but the training rows an exact way needs for new data."""
    X = da.from_array(np.random.default_rng(0).normal(size=(60, 4)), chunks=(20, 4))
    model = estimator.fit(X).model_
    found = set(_graphs(model, type(model).__name__, X.name, set()))
    assert found <= _TRAINING_ROWS, sorted(found - _TRAINING_ROWS)


@pytest.mark.parametrize("estimator", [KernelMCA(2, n_landmarks=20, random_state=0),
                                       KernelCCA(2, n_pca_modes=3, n_landmarks=20,
                                                 random_state=0)],
                         ids=["mca", "cca"])
def test_a_coupled_model_holds_no_graph_of_either_field(estimator):
    """Kernel MCA and CCA fitted on two dask arrays keep a graph of neither."""
    rng = np.random.default_rng(1)
    X = da.from_array(rng.normal(size=(200, 4)), chunks=(50, 4))
    Y = da.from_array(rng.normal(size=(200, 3)), chunks=(100, 3))
    model = estimator.fit(X, Y).model_
    assert not _graphs(model, type(model).__name__, X.name, set())
    assert not _graphs(model, type(model).__name__, Y.name, set())
