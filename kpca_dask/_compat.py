"""Every private API of another library that kpca-dask uses, in one place.

Each is wrapped here and nowhere else is it imported, so that a release of
dask or scikit-learn that changes one breaks this module alone, and
:data:`PRIVATE_APIS` says which versions each was checked against:
tests/test_compat.py exercises each on the versions installed, and warns when
one is newer than recorded, so the API is read again and the record raised.

Why each is private and still used:

* scikit-learn's feature-name checks (``_check_feature_names``,
  ``_get_feature_names``): what ``validate_data`` does for in-memory arrays,
  which kpca-dask cannot call on a lazy table without reading it; using them
  keeps the messages and rules identical to scikit-learn's estimators.
* dask-expr's ``Lengths`` expression: the partition lengths a reader knows
  from metadata (Parquet footers, ``from_pandas``) without running a task.
* ``from_graph``: a dask DataFrame from a graph that reads each partition
  once beside the array block it labels.
* dask's task spec (``Task``, ``TaskRef``, ``Alias``,
  ``convert_legacy_graph``): to read a row block inside the task that adds
  it to the pass's sums (:func:`kpca_dask.engine.passes.nystrom.reads_inlined`).
* ``_meta``: the empty object a dask collection carries for its type and
  dtype; documented by dask, named as private.
* ``GraphNode.substitute`` (task spec): to copy an array's graph under new
  keys (:func:`independent_copy`), which ``dask.graph_manipulation.clone``
  does not do for task-spec layers (rechunk, reshape, slicing) in the dask
  releases checked: it renames their keys but not the references inside their
  tasks (dask/dask#12455), so the "copy" still reads through the original.
* ``GraphNode.fuse`` (task spec): to make each chunk of an array one task with
  what it alone depends on (:func:`with_own_inputs`), which dask's own
  optimisation does for linear chains only.
* ``dask.array.optimization.optimize``: the optimisation dask applies before
  a compute, applied first by :func:`with_own_inputs` so that the chunks it
  fuses are the ones a compute would run.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PRIVATE_APIS", "check_feature_names", "get_feature_names", "known_lengths",
           "frame_from_graph", "task_spec", "meta_of", "independent_copy", "with_own_inputs"]

#: Each private API: (distribution, oldest version supported, newest version checked).
PRIVATE_APIS: dict[str, tuple[str, str, str]] = {
    "sklearn.utils.validation._check_feature_names": ("scikit-learn", "1.6", "1.9.1"),
    "sklearn.utils.validation._get_feature_names": ("scikit-learn", "1.6", "1.9.1"),
    "dask.dataframe.dask_expr._expr.Lengths": ("dask", "2025.1", "2026.7.0"),
    "dask.dataframe.dask_expr._expr.Literal": ("dask", "2025.1", "2026.7.0"),
    "dask.dataframe.dask_expr.from_graph": ("dask", "2025.1", "2026.7.0"),
    "dask._task_spec.Task": ("dask", "2025.1", "2026.7.0"),
    "dask._task_spec.TaskRef": ("dask", "2025.1", "2026.7.0"),
    "dask._task_spec.Alias": ("dask", "2025.1", "2026.7.0"),
    "dask._task_spec.convert_legacy_graph": ("dask", "2025.1", "2026.7.0"),
    "dask collections' _meta": ("dask", "2025.1", "2026.7.0"),
    "dask._task_spec.GraphNode": ("dask", "2025.1", "2026.7.0"),
    "dask._task_spec.GraphNode's fuse": ("dask", "2025.1", "2026.7.0"),
    "dask.array.optimization.optimize": ("dask", "2025.1", "2026.7.0"),
}


def check_feature_names(estimator: Any, X: Any, *, reset: bool) -> None:
    """scikit-learn's feature-name check of ``X`` against ``estimator`` (sets them on reset)."""
    from sklearn.utils.validation import _check_feature_names

    _check_feature_names(estimator, X, reset=reset)


def get_feature_names(X: Any):
    """The string column names of a pandas-like ``X`` as scikit-learn reads them, or None."""
    from sklearn.utils.validation import _get_feature_names

    return _get_feature_names(X)


def known_lengths(frame: Any) -> tuple[int, ...] | None:
    """The rows of each partition of a dask DataFrame if its reader knows them, else None.

    Nothing is computed: dask simplifies the lengths to a literal when the
    metadata holds them (Parquet statistics, ``from_pandas``).

    Examples
    --------
    >>> import pandas as pd, dask.dataframe as dd
    >>> known_lengths(dd.from_pandas(pd.DataFrame({"a": range(5)}), npartitions=2))
    (3, 2)
    """
    from dask.dataframe.dask_expr._expr import Lengths, Literal

    simplified = Lengths(frame.expr).optimize()
    if isinstance(simplified, Literal) and len(simplified.value) == frame.npartitions:
        return tuple(int(n) for n in simplified.value)
    return None


def frame_from_graph(graph: dict, meta: Any, divisions: tuple, keys: list, name: str) -> Any:
    """A dask DataFrame whose partitions are the tasks ``keys`` of ``graph``."""
    from dask.dataframe.dask_expr import from_graph

    return from_graph(graph, meta, divisions, keys, name)


def task_spec():
    """dask's task classes: ``(Task, TaskRef, Alias, convert_legacy_graph)``."""
    from dask._task_spec import Alias, Task, TaskRef, convert_legacy_graph

    return Task, TaskRef, Alias, convert_legacy_graph


def meta_of(collection: Any) -> Any:
    """The empty object of a dask collection's type and dtype (its ``_meta``)."""
    return collection._meta


def independent_copy(X: Any) -> Any:
    """The dask array ``X`` computed by a copy of its whole graph, under keys of its own.

    What ``dask.graph_manipulation.clone`` is for, done node by node: every
    key gets a new name and every reference inside a task follows it
    (``GraphNode.substitute``), so the copy shares no task with ``X`` and reads
    its data again.

    Examples
    --------
    >>> import dask.array as da
    >>> X = da.arange(6.0, chunks=2).reshape(2, 3).rechunk((1, 3))
    >>> copy = independent_copy(X)
    >>> set(dict(copy.__dask_graph__())).isdisjoint(dict(X.__dask_graph__()))
    True
    >>> copy.compute().tolist()
    [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    """
    import dask.array as da
    from dask.base import tokenize

    _, _, _, convert_legacy_graph = task_spec()
    graph = convert_legacy_graph(dict(X.__dask_graph__()))
    suffix = "-copy-" + tokenize(X.name, "independent_copy")

    def renamed(key):
        return (key[0] + suffix, *key[1:]) if isinstance(key, tuple) else str(key) + suffix

    names = {key: renamed(key) for key in graph}
    copy = {names[key]: node.substitute(names, key=names[key]) for key, node in graph.items()}
    return da.Array(copy, X.name + suffix, X.chunks, meta=meta_of(X))


def with_own_inputs(X: Any) -> Any:
    """The dask array ``X`` with each chunk one task, fused with the tasks only it uses.

    dask's local schedulers run the task made ready last first. Where the chunks
    of ``X`` are made from a shared input (a user's ``L @ F + noise``: every chunk
    of a row block waits on that block of ``L``), all of them become ready when it
    is done and all their products are made before the first is used: a row of
    chunks held at once. With each chunk's own tasks (its product, its noise, their
    sum) fused into one, the chunk is made and used inside one task. Tasks shared
    between chunks stay tasks; ``X`` is returned as it is when no chunk has tasks
    of its own (a Zarr array's chunks read from one shared array).

    Examples
    --------
    >>> import dask.array as da
    >>> L, F = da.ones((4, 1), chunks=(2, 1)), da.ones((1, 6), chunks=(1, 3))
    >>> X = L @ F + da.ones((4, 6), chunks=(2, 3))
    >>> fused = with_own_inputs(X)
    >>> len(dict(fused.__dask_graph__())) < len(dict(X.__dask_graph__()))
    True
    >>> fused.compute().tolist() == X.compute().tolist()
    True
    """
    import dask.array as da
    from dask._task_spec import GraphNode
    from dask.array.optimization import optimize
    from dask.base import tokenize
    from dask.core import flatten

    _, _, _, convert_legacy_graph = task_spec()
    keys = list(flatten(X.__dask_keys__()))
    graph = convert_legacy_graph(dict(optimize(X.__dask_graph__(), keys)))
    dependents: dict = {}
    for key, node in graph.items():
        for dependency in node.dependencies:
            dependents.setdefault(dependency, set()).add(key)
    owned = {key: _owned_tasks(key, graph, dependents) for key in keys}
    if all(len(members) == 1 for members in owned.values()):
        return X
    name = "own-inputs-" + tokenize(X.name)
    absorbed = set().union(*owned.values())
    fused = {key: node for key, node in graph.items() if key not in absorbed}
    for key, members in owned.items():
        new_key = (name, *key[1:])
        fused[new_key] = GraphNode.fuse(*(graph[k] for k in members), key=new_key)
    return da.Array(fused, name, X.chunks, meta=meta_of(X))


def _owned_tasks(key, graph: dict, dependents: dict) -> set:
    """``key`` and the tasks of ``graph`` whose results only ``key`` (or they) use."""
    members, todo = {key}, [key]
    while todo:
        for dependency in graph[todo.pop()].dependencies:
            if (dependency in graph and dependency not in members
                    and dependents[dependency] <= members):
                members.add(dependency)
                todo.append(dependency)
    return members
