"""pandas and dask DataFrames in and out, without computing a dask DataFrame's values.

A dask DataFrame becomes a row-blocked dask array lazily, one block per
partition (:func:`frame_to_array`). The fit needs the number of rows of each
block before its pass; where the source keeps them in its metadata (Parquet
row-group statistics, a frame made with ``from_pandas``) they are read from
there and nothing is computed. Otherwise (CSV, Parquet read with
``filters=``, a frame after a row filter) the partition lengths alone are
computed, which reads the partitions once before the pass; values never
reach the client. ``transform`` needs no lengths at all and stays lazy.

Every block is checked for NaN and infinite values as the pass reads it, so a
bad value is reported by column and partition without a read of its own.

Outputs keep the frame's index (and a dask frame's divisions); they are
built in :mod:`kpca_dask.io.labelled`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from .._compat import check_feature_names as sklearn_check_feature_names
from .._compat import get_feature_names, known_lengths, meta_of
from ..errors import InvalidInputError, NonFiniteInputError, NonNumericInputError

__all__ = [
    "is_frame",
    "is_dask_frame",
    "frame_feature_names",
    "select_columns",
    "frame_to_array",
    "frame_to_numpy",
    "Partitions",
]


def is_dask_frame(X: Any) -> bool:
    """Whether ``X`` is a dask DataFrame (without importing dask.dataframe for others)."""
    module = type(X).__module__
    return module.startswith("dask.dataframe") and hasattr(X, "columns")


def is_frame(X: Any) -> bool:
    """Whether ``X`` is a pandas or a dask DataFrame.

    Examples
    --------
    >>> import pandas as pd, numpy as np
    >>> is_frame(pd.DataFrame({"a": [1.0]})), is_frame(np.ones((1, 1)))
    (True, False)
    """
    if is_dask_frame(X):
        return True
    return type(X).__module__.startswith("pandas") and type(X).__name__ == "DataFrame"


def _pandas_view(X):
    """A pandas frame with the columns and dtypes of ``X``: a dask frame's empty meta."""
    return meta_of(X) if is_dask_frame(X) else X


def frame_feature_names(X: Any):
    """The feature names scikit-learn would take from ``X``, or None.

    A dask DataFrame's are those of its pandas meta, so the rules (string
    names only, no mix of strings and other types) are scikit-learn's own.

    Examples
    --------
    >>> import pandas as pd
    >>> frame_feature_names(pd.DataFrame({"a": [1.0], "b": [2.0]})).tolist()
    ['a', 'b']
    """
    return get_feature_names(_pandas_view(X)) if is_frame(X) else None


def select_columns(X: Any, columns: Sequence[str] | None = None, *, what: str = "X",
                   file: bool = False):
    """``X`` limited to ``columns``, refusing a missing or a non-numeric column.

    ``file=True`` words the error for a file read by name (``columns=``,
    ``--columns``) rather than for a frame in Python.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"id": ["a", "b"], "x": [1.0, 2.0]})
    >>> select_columns(df, ["x"]).columns.tolist()
    ['x']
    >>> select_columns(df)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    kpca_dask.errors.NonNumericInputError: X has non-numeric column(s) 'id' ...
    """
    if columns is not None:
        columns = list(columns)
        missing = [c for c in columns if c not in X.columns]
        if missing:
            raise InvalidInputError(
                f"{what} has no column(s) {missing}; its columns are {list(X.columns)}.")
        X = X[columns]
    dtypes = _pandas_view(X).dtypes
    bad = [name for name, dtype in dtypes.items()
           if not (np.issubdtype(np.dtype(dtype), np.number)
                   if isinstance(dtype, np.dtype) else _numeric_extension(dtype))]
    if bad:
        raise NonNumericInputError(_non_numeric_message(dtypes, bad, what, file))
    if len(dtypes) == 0:
        raise InvalidInputError(f"{what} has no columns; choose feature columns with columns=.")
    return X


def _non_numeric_message(dtypes, bad: list, what: str, file: bool) -> str:
    """Which columns are not numbers, and which to choose instead. Integer columns are
    suggested only when there are no float ones: they are most often keys (an ``id``),
    which a fit on them would treat as a feature."""
    numeric = [name for name in dtypes.index if name not in bad]
    floats = [name for name in numeric if np.dtype(getattr(dtypes[name], "numpy_dtype",
                                                            dtypes[name])).kind == "f"]
    chosen = floats or numeric
    left = [name for name in numeric if name not in chosen]
    listed = ", ".join(f"{name!r} ({dtypes[name]})" for name in bad)
    how = (f"choose numeric columns with columns={chosen!r} (--columns "
           f"{','.join(map(str, chosen))})" if file else
           f"choose the feature columns, X[{chosen!r}], or convert those to numbers")
    if left:
        keep = "--keep-columns" if file else "keep_columns="
        how += (f"; the integer column(s) {left!r} are left out as likely keys: add them if "
                f"they are features, or carry them beside the output with {keep}")
    return f"{what} has non-numeric column(s) {listed}; kernel PCA needs numbers: {how}."


def _numeric_extension(dtype) -> bool:
    """pandas extension dtypes (Int64, Float32, pyarrow numbers) that hold numbers."""
    kind = getattr(getattr(dtype, "numpy_dtype", None), "kind", None)
    return kind is not None and kind in "iuf" and not getattr(dtype, "name", "") == "category"


def _float_dtype(X) -> np.dtype:
    """float32 when every column is float32, float64 otherwise (as numpy would promote)."""
    kinds = {np.dtype(getattr(d, "numpy_dtype", d)) for d in _pandas_view(X).dtypes}
    return np.dtype(np.float32) if kinds == {np.dtype(np.float32)} else np.dtype(np.float64)


def frame_to_numpy(X: Any, *, what: str = "X") -> np.ndarray:
    """A pandas DataFrame's values as a float array, refusing NaN or inf by column and row.

    Examples
    --------
    >>> import pandas as pd
    >>> frame_to_numpy(pd.DataFrame({"a": [1, 2], "b": [0.5, 1.5]})).tolist()
    [[1.0, 0.5], [2.0, 1.5]]
    """
    X = select_columns(X, what=what)
    values = X.to_numpy(dtype=_float_dtype(X), na_value=np.nan)
    _raise_if_nonfinite(values, list(X.columns), what, rows=X.index)
    return values


@dataclass(frozen=True)
class Partitions:
    """A dask DataFrame's partitions, fixed: its task graph, partition keys and divisions.

    dask re-plans a DataFrame expression at each use (fusing small Parquet
    partitions differently for different columns), so the array read for the
    fit, the lengths of its blocks and the index of an output frame are all
    taken from this one plan, where partition i is the same rows for each.
    """

    frame: Any  # the optimised frame (its meta and columns)
    graph: dict
    keys: list
    divisions: tuple

    @classmethod
    def of(cls, X: Any) -> "Partitions":
        X = X.optimize()
        graph = dict(X.__dask_graph__())
        keys = list(X.__dask_keys__())
        divisions = X.divisions if len(X.divisions) == len(keys) + 1 else (None,) * (
            len(keys) + 1)
        return cls(X, graph, keys, tuple(divisions))

    def lengths(self, *, compute: bool = True) -> tuple[int, ...] | None:
        """Rows per partition: from metadata, else computed (reading each partition
        once, only its length reaching the client) or None."""
        known = known_lengths(self.frame)  # from metadata: no task runs
        if known is not None and len(known) == len(self.keys):
            return known
        if not compute:
            return None
        return tuple(int(n) for n in self.counted_lengths().compute())

    def counted_lengths(self):
        """The rows per partition as a dask Delayed that counts them.

        One small task per partition, so a partition is released as soon as
        it is counted and no task takes more than one partition as its input
        (on a cluster, no worker is handed the whole table to count it); the
        counts, one int each, are gathered in a tree of
        :data:`LENGTHS_SPLIT_EVERY`.
        """
        from dask.delayed import Delayed

        token = tokenize(self.keys)
        graph = dict(self.graph)
        keys = [("partition-length-" + token, i) for i in range(len(self.keys))]
        for key, partition in zip(keys, self.keys):
            graph[key] = (_length, partition)
        level = 0
        while len(keys) > 1:
            name = f"partition-lengths-{level}-" + token
            groups = [keys[i:i + LENGTHS_SPLIT_EVERY]
                      for i in range(0, len(keys), LENGTHS_SPLIT_EVERY)]
            keys = [(name, j) for j in range(len(groups))]
            graph.update({key: (_joined, group) for key, group in zip(keys, groups)})
            level += 1
        return Delayed(keys[0], graph)


#: Row counts gathered this many at a time (a count is one int: any tree works).
LENGTHS_SPLIT_EVERY = 32


def _length(partition) -> tuple[int]:
    return (len(partition),)


def _joined(groups: list) -> tuple[int, ...]:
    return tuple(n for group in groups for n in group)


def frame_to_array(X: Any, *, lengths: bool = True, what: str = "X",
                   file: bool = False, features: Sequence | None = None) -> da.Array:
    """A dask DataFrame as a lazy float dask array with one block per partition.

    Parameters
    ----------
    X : dask.dataframe.DataFrame or Partitions
        Numeric columns only (see :func:`select_columns`).
    lengths : bool, default=True
        Give the blocks their row counts: from metadata where the source
        keeps them, otherwise by computing the partition lengths (reading
        each partition once; no value reaches the client). False leaves them
        unknown (NaN) where the metadata lacks them, which is all a lazy
        ``transform`` needs.
    features : list, optional
        With :class:`Partitions` that hold more columns (keys kept for the
        output): the numeric columns that make the array.

    Examples
    --------
    >>> import pandas as pd, dask.dataframe as dd
    >>> df = dd.from_pandas(pd.DataFrame({"a": range(6), "b": range(6)}), npartitions=2)
    >>> frame_to_array(df).chunks
    ((3, 3), (2,))
    """
    parts = X if isinstance(X, Partitions) else Partitions.of(
        select_columns(X, what=what, file=file))
    known = parts.lengths(compute=lengths)
    rows = known if known is not None else (np.nan,) * len(parts.keys)
    columns = list(parts.frame.columns) if features is None else list(features)
    dtype = _float_dtype(parts.frame[columns])
    name = "frame-values-" + tokenize(parts.keys, what, columns)
    graph = dict(parts.graph)
    subset = None if features is None else columns
    for i, key in enumerate(parts.keys):
        graph[(name, i, 0)] = (_checked_values, key, dtype, columns, what, i, subset)
    return da.Array(HighLevelGraph.from_collections(name, graph, dependencies=()), name,
                    chunks=(tuple(rows), (len(columns),)), dtype=dtype,
                    meta=np.empty((0, 0), dtype))


def _checked_values(part, dtype: np.dtype, columns: list, what: str,
                    partition: int, subset: list | None = None) -> np.ndarray:
    """A partition's values as floats, or an error naming the first non-finite
    column and the partition."""
    values = (part if subset is None else part[subset]).to_numpy(dtype=dtype, na_value=np.nan)
    _raise_if_nonfinite(values, columns, what, partition=partition)
    return values


def _raise_if_nonfinite(values: np.ndarray, columns: list, what: str, *,
                        rows=None, partition: int | None = None) -> None:
    finite = np.isfinite(values)
    if finite.all():
        return
    bad = ~finite
    column = int(np.flatnonzero(bad.any(axis=0))[0])
    row = int(np.flatnonzero(bad[:, column])[0])
    where = (f"partition {partition} (row {row} of it)" if partition is not None
             else f"row {rows[row]!r}" if rows is not None else f"row {row}")
    raise NonFiniteInputError(
        f"{what} column {columns[column]!r} contains NaN or infinite values, the first in "
        f"{where}; {int(bad[:, column].sum())} in that column there. Remove or impute them "
        "first (e.g. df.dropna() or df.fillna(...)).")


def check_feature_names(estimator: Any, X: Any, *, reset: bool) -> None:
    """scikit-learn's own check of ``feature_names_in_``, a dask frame read by its meta.

    ``reset=True`` sets (or removes) ``feature_names_in_`` from ``X``;
    ``reset=False`` raises for other names or another order and warns for
    names at fit and none now, or the reverse, in scikit-learn's words.

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn.base import BaseEstimator
    >>> est = BaseEstimator()
    >>> check_feature_names(est, pd.DataFrame({"a": [1.0]}), reset=True)
    >>> est.feature_names_in_.tolist()
    ['a']
    """
    try:
        sklearn_check_feature_names(estimator, _pandas_view(X) if is_frame(X) else X,
                                    reset=reset)
    except ValueError as exc:  # scikit-learn's message, as a kpca-dask error (a ValueError)
        raise InvalidInputError(
            f"{exc}Pass the columns the model was fitted on, in that order "
            f"(X[{list(estimator.feature_names_in_)!r}]).") from None

