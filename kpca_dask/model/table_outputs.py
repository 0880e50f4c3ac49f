"""A fitted model applied to a table, with its key columns kept beside the outputs.

:func:`transform_table` is what ``kpca-dask transform --keep-columns id``
runs: the feature columns of a dask (or pandas) DataFrame are projected and
the key columns (an ``id`` to join the embedding back on) are copied beside
the components, row for row, from the same read of each partition.
:func:`kpca_dask.io.parquet_out.write_table` writes the result as Parquet.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import InvalidInputError
from ..io.frames import check_feature_names, select_columns
from ..io.labelled import frame_like
from .inputs import require_table, table_rows

__all__ = ["METHODS", "transform_table", "output_names", "output_dtype"]

#: What a table can be given to, and the name of a one-column output.
METHODS = {"transform": None, "reconstruction_error": "reconstruction_error",
           "score_samples": "score_samples", "inverse_transform": None}


def output_dtype(model: Any, dtype: Any = None) -> np.dtype:
    """``dtype`` if given, else float32 for a model fitted in float32 and float64 otherwise.

    Examples
    --------
    >>> from kpca_dask import KernelPCA
    >>> output_dtype(KernelPCA(dtype="float32")), output_dtype(KernelPCA(), "float32")
    (dtype('float32'), dtype('float32'))
    """
    settings = getattr(model, "fit_settings_", None)  # a fitted KernelPCA's; absent otherwise
    own = settings.dtype if settings is not None else getattr(model, "dtype", "float64")
    chosen = np.dtype(dtype if dtype is not None else own)
    if chosen not in (np.float32, np.float64):
        raise InvalidInputError(f"The output dtype must be float32 or float64; got {chosen}.")
    return chosen


def output_names(model: Any, method: str) -> list[str]:
    """Column names of ``method``'s output: ``get_feature_names_out()`` for transform,
    the fitted feature names (or x0, x1, ...) for inverse_transform."""
    if method == "transform":
        return [str(name) for name in model.get_feature_names_out()]
    if method == "inverse_transform":
        names = getattr(model, "feature_names_in_", None)
        return ([str(name) for name in names] if names is not None
                else [f"x{i}" for i in range(model.n_features_in_)])
    return [METHODS[method]]


def transform_table(model: Any, frame: Any, method: str = "transform", *,
                    columns: Sequence[str] | None = None, keep_columns: Sequence[str] = (),
                    dtype: Any = None) -> Any:
    """Apply ``model.<method>`` to the feature columns of a table; keep its key columns.

    Parameters
    ----------
    model : KernelPCA
        A fitted model.
    frame : dask.dataframe.DataFrame or pandas.DataFrame
        The table: feature columns and any others.
    method : {"transform", "reconstruction_error", "score_samples", "inverse_transform"}
    columns : list of str, optional
        The feature columns (for inverse_transform: the component columns).
        Default: the model's ``feature_names_in_`` where it has them (for
        inverse_transform, its ``get_feature_names_out()``), else every
        column not in ``keep_columns``.
    keep_columns : list of str, default=()
        Columns copied beside the outputs, row for row, first.
    dtype : {"float32", "float64"}, optional
        Of the outputs; default float32 for a float32 model, else float64.

    Returns
    -------
    DataFrame
        Lazy (dask) for a dask frame, on its index and divisions; pandas for pandas.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from kpca_dask import KernelPCA
    >>> table = pd.DataFrame({"id": [7, 8, 9], "a": [0.0, 1.0, 2.0], "b": [1.0, 0.0, 1.0]})
    >>> kpca = KernelPCA(n_components=2, n_landmarks=3, random_state=0).fit(table[["a", "b"]])
    >>> transform_table(kpca, table, keep_columns=["id"]).columns.tolist()
    ['id', 'kernelpca0', 'kernelpca1']
    """
    if method not in METHODS:
        raise InvalidInputError(f"method must be one of {list(METHODS)}; got {method!r}.")
    require_table(frame)
    keep = [keep_columns] if isinstance(keep_columns, str) else list(keep_columns)
    missing = [name for name in keep if name not in frame.columns]
    if missing:
        raise InvalidInputError(
            f"The table has no column(s) {missing} to keep; its columns are "
            f"{list(frame.columns)}.")
    features = _features(model, frame, method, columns, keep)
    what = "The embedding" if method == "inverse_transform" else "X"
    chosen = select_columns(frame, features, what=what)
    if method != "inverse_transform":
        check_feature_names(model, chosen, reset=False)
    out_dtype = output_dtype(model, dtype)
    names = output_names(model, method)
    call = getattr(model, method)
    # A dask table's rows have no counts: a transform maps block by block, and counting
    # rows the metadata does not keep would read the whole table once more.
    rows = table_rows(frame, chosen, features, keep, what=what)
    with warnings.catch_warnings():
        # The names were checked above on the frame; the array has none.
        warnings.filterwarnings("ignore", message="X does not have valid feature names")
        out = call(rows.data)
    if rows.is_lazy:
        out = out.astype(out_dtype)
        return frame_like(out if out.ndim == 2 else out[:, None], rows.frame, names, keep)
    out = np.asarray(out, dtype=out_dtype)
    return frame_like(out.reshape(len(frame), -1), frame, names, keep)


def _features(model, frame, method, columns, keep) -> list:
    if columns is not None:
        return [columns] if isinstance(columns, str) else list(columns)
    if method == "inverse_transform":
        fitted = [str(name) for name in model.get_feature_names_out()]
        if all(name in frame.columns for name in fitted):
            return fitted
    else:
        fitted = getattr(model, "feature_names_in_", None)
        if fitted is not None:
            return [str(name) for name in fitted]
    return [name for name in frame.columns if name not in keep]
