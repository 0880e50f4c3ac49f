"""Private APIs of other libraries: used through kpca_dask/_compat.py only, each recorded with
the versions it was checked against, and each working on the versions installed."""

from __future__ import annotations

import ast
import importlib
import warnings
from importlib.metadata import version
from pathlib import Path

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from packaging.version import Version
from sklearn.base import BaseEstimator

from kpca_dask import _compat

PACKAGE = Path(_compat.__file__).parent


@pytest.mark.parametrize("api", sorted(_compat.PRIVATE_APIS))
def test_each_private_api_is_checked_for_the_installed_version(api):
    """The installed version is at least the oldest supported, and the API is still there.
    A release newer than the last one checked warns (the shims' test below says whether it
    still works) until the API has been read again and the record raised."""
    distribution, oldest, newest = _compat.PRIVATE_APIS[api]
    installed = Version(version(distribution))
    assert Version(oldest) <= installed, f"{distribution} {installed} is older than {oldest}"
    if installed > Version(newest):
        warnings.warn(f"{distribution} {installed} is newer than {newest}, the last version "
                      f"{api} was checked against: read it again in that release and raise "
                      "the record in kpca_dask/_compat.py", UserWarning, stacklevel=1)
    if "." in api and " " not in api:
        module, _, name = api.rpartition(".")
        assert hasattr(importlib.import_module(module), name), f"{api} is gone"


def test_no_module_but_compat_imports_a_private_name_of_another_library():
    """Every `from x._y import` or `from x import _y` of another library is in _compat.py."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "_compat.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                    and node.module != "__future__"):
                private_module = any(part.startswith("_") for part in node.module.split("."))
                private_name = any(alias.name.startswith("_") for alias in node.names)
                if private_module or private_name:
                    found.append(f"{path.relative_to(PACKAGE)}: from {node.module} import "
                                 f"{', '.join(alias.name for alias in node.names)}")
    assert not found, found


def test_the_shims_work():
    frame = dd.from_pandas(pd.DataFrame({"a": np.arange(5.0), "b": 1.0}), npartitions=2)
    assert _compat.known_lengths(frame) == (3, 2)
    assert _compat.known_lengths(frame[frame.a > 1]) is None  # unknown until read
    assert list(_compat.get_feature_names(_compat.meta_of(frame))) == ["a", "b"]
    estimator = BaseEstimator()
    _compat.check_feature_names(estimator, _compat.meta_of(frame), reset=True)
    assert list(estimator.feature_names_in_) == ["a", "b"]
    assert isinstance(_compat.meta_of(da.zeros(3)), np.ndarray)
    Task, TaskRef, Alias, convert_legacy_graph = _compat.task_spec()
    graph = convert_legacy_graph({"x": 1, "y": (max, "x", 2)})
    assert isinstance(graph["y"], Task) and graph["y"]({"x": 1}) == 2
    assert graph["y"].dependencies == {"x"} and TaskRef("x").key == "x" and Alias
    X = da.arange(24.0, chunks=6).reshape(4, 6).rechunk((2, 3))[1:]
    copy = _compat.independent_copy(X)
    assert set(dict(copy.__dask_graph__())).isdisjoint(dict(X.__dask_graph__()))
    np.testing.assert_array_equal(copy.compute(), X.compute())
    L, F = da.ones((4, 1), chunks=(2, 1)), da.ones((1, 6), chunks=(1, 3))
    product = L @ F + da.random.default_rng(0).random((4, 6), chunks=(2, 3))
    fused = _compat.with_own_inputs(product)
    assert len(dict(fused.__dask_graph__())) < len(dict(product.__dask_graph__()))
    np.testing.assert_array_equal(fused.compute(), product.compute())
    stored = da.from_array(np.ones((4, 6)), chunks=(2, 3))  # chunks of one shared array
    assert _compat.with_own_inputs(stored) is stored
    keys = [(frame._name, i) for i in range(frame.npartitions)]
    rebuilt = _compat.frame_from_graph(dict(frame.__dask_graph__()), _compat.meta_of(frame),
                                       frame.divisions, keys, "copy")
    pd.testing.assert_frame_equal(rebuilt.compute(), frame.compute())
