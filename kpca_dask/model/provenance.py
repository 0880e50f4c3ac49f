"""Which rows a growing model has counted, so that no row is counted twice (docs/design.md §10).

A model's statistics are sums over rows (docs/design.md §7): adding rows it
already holds, by an update or by merging shards that overlap, silently
weights them twice. So every model records, in ``row_provenance_``, the rows
it has counted: per *source*, a fingerprint and the half-open row ranges::

    {"sources": [{"fingerprint": "3f9c...", "description": "file:///data/x.zarr",
                  "rows": [[0, 1000000], [1500000, 1600000]]}, ...],
     "unrecorded_rows": 0}

(and ``"repeated_rows"``: rows of in-memory batches given to ``partial_fit``
again, which count once more each time, as in scikit-learn.)

A source is identified the way a fit checkpoint identifies its data
(:func:`kpca_dask.checkpoints.fingerprints.fit_identity`), from metadata only:

* an input that reads one stored Zarr array and nothing else is that array's
  location (absolute path or URL, and the array in it), dtype and number of
  features, but *not* its number of rows, so that rows appended to the
  store later are the same source; its ranges are row positions in the array
  (``partial_fit(X, rows=(start, stop))``, ``kpca-dask update --rows``);
* anything else (numpy arrays, dask arrays computed from something, tables
  read from Parquet or CSV, described by their URLs) is its dask name, which
  for in-memory data is a hash of the values: a batch passed again is the
  same source, rows ``[0, n_batch)``. A batch that only
  shares some rows with an earlier one is a different source; such partial
  overlaps of in-memory batches are not detected.

Models saved before provenance was recorded count their rows as
``unrecorded_rows``: those cannot be checked, and every recorded row still
is.
"""

from __future__ import annotations

import copy
import hashlib
import json
import warnings
from collections.abc import Sequence

import dask.array as da

from ..checkpoints.fingerprints import data_identity, table_locations
from ..errors import OverlappingRowsError, RepeatedRowsWarning

__all__ = ["source_of", "recorded_rows", "with_rows", "combined", "describe"]


def source_of(X: da.Array) -> dict:
    """The fingerprint and a readable description of the data ``X`` reads.

    Examples
    --------
    >>> import numpy as np
    >>> X = da.from_array(np.eye(3))
    >>> source_of(X) == source_of(da.from_array(np.eye(3)))
    True
    >>> source_of(X) == source_of(da.from_array(np.ones((3, 3))))
    False
    """
    identity = data_identity(X)
    stores = identity.get("zarr", [])
    if "name" not in identity and len(stores) == 1:
        store = stores[0]
        key = {"url": store["url"], "array": store["array"], "dtype": identity["dtype"],
               "n_features": identity["shape"][1]}
        array = f" (array {store['array']!r})" if store["array"] else ""
        description = f"{store['url']}{array}"
    else:
        key = {"data": identity["name"], "shape": identity["shape"], "dtype": identity["dtype"]}
        tables = table_locations(X)
        description = (f"{', '.join(tables)} (a table of {identity['shape'][0]} rows x "
                       f"{identity['shape'][1]} columns)" if tables else
                       f"in-memory or computed data of {identity['shape'][0]} x "
                       f"{identity['shape'][1]} {identity['dtype']} (dask name "
                       f"{identity['name'][:40]})")
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    return {"fingerprint": digest[:32], "description": description}


def recorded_rows(model) -> dict:
    """The model's ``row_provenance_``; for a model saved without one, its rows as unrecorded.

    Examples
    --------
    >>> class Old:
    ...     n_samples_fit_ = 100
    >>> recorded_rows(Old())
    {'sources': [], 'unrecorded_rows': 100}
    """
    provenance = getattr(model, "row_provenance_", None)
    if provenance is None:
        return {"sources": [], "unrecorded_rows": int(model.n_samples_fit_)}
    return provenance


def with_rows(provenance: dict | None, source: dict, start: int, stop: int, *,
              name: str = "this model", repeatable: bool = False) -> dict:
    """``provenance`` plus rows ``[start, stop)`` of ``source``; refused if it holds any of them.

    With ``repeatable`` (an in-memory batch given whole, as scikit-learn's
    ``partial_fit`` takes it) rows held already are counted again, in
    ``repeated_rows``, with a :class:`~kpca_dask.errors.RepeatedRowsWarning`.

    Raises
    ------
    OverlappingRowsError
        Some of the rows are counted already; the message names them.

    Examples
    --------
    >>> source = {"fingerprint": "ab", "description": "x.zarr"}
    >>> first = with_rows(None, source, 0, 100)
    >>> with_rows(first, source, 100, 150)["sources"][0]["rows"]
    [[0, 150]]
    >>> with_rows(first, source, 50, 150)
    Traceback (most recent call last):
    ...
    kpca_dask.errors.OverlappingRowsError: Rows 50:100 of x.zarr are counted in this model...
    """
    added = {"sources": [{**source, "rows": [[int(start), int(stop)]]}], "unrecorded_rows": 0}
    base = provenance or {"sources": [], "unrecorded_rows": 0}
    return combined([base, added], names=[name, "the new rows"], repeatable=repeatable)


def combined(provenances: Sequence[dict], *, names: Sequence[str],
             repeatable: bool = False) -> dict:
    """The rows of all ``provenances`` together; refused where two of them share a row.

    With ``repeatable``, shared rows are counted again (``repeated_rows``) and warned of.

    Examples
    --------
    >>> a = with_rows(None, {"fingerprint": "ab", "description": "x.zarr"}, 0, 10)
    >>> b = with_rows(None, {"fingerprint": "ab", "description": "x.zarr"}, 10, 20)
    >>> combined([a, b], names=["a", "b"])["sources"][0]["rows"]
    [[0, 20]]
    """
    sources: dict[str, dict] = {}
    owners: dict[str, list[tuple[int, int, str]]] = {}
    repeated = sum(int(p.get("repeated_rows", 0)) for p in provenances)
    for provenance, name in zip(provenances, names):
        for source in provenance["sources"]:
            key = source["fingerprint"]
            entry = sources.setdefault(key, copy.deepcopy({**source, "rows": []}))
            for start, stop in source["rows"]:
                held = _joined([[a, b] for a, b, _ in owners.get(key, [])])
                again = sum(max(0, min(stop, b) - max(start, a)) for a, b in held)
                if again and not repeatable:
                    other_start, other_stop, other = next(
                        (a, b, o) for a, b, o in owners[key] if min(stop, b) > max(start, a))
                    raise OverlappingRowsError(_overlap_message(
                        source["description"], max(start, other_start),
                        min(stop, other_stop), other, name))
                if again:
                    repeated += again
                    warnings.warn(
                        f"{again} rows of {source['description']} are counted in the model "
                        "already and now count again (twice or more in the statistics), as "
                        "a batch given twice to scikit-learn's partial_fit does. To count "
                        "each row once, give each batch once.", RepeatedRowsWarning,
                        stacklevel=4)
                owners.setdefault(key, []).append((start, stop, name))
                entry["rows"].append([start, stop])
    for entry in sources.values():
        entry["rows"] = _joined(entry["rows"])
    result = {"sources": list(sources.values()),
              "unrecorded_rows": sum(int(p["unrecorded_rows"]) for p in provenances)}
    if repeated:
        result["repeated_rows"] = repeated
    return result


def _overlap_message(description: str, low: int, high: int, holder: str, adding: str) -> str:
    if adding == "the new rows":
        return (f"Rows {low}:{high} of {description} are counted in {holder} already: adding "
                "them again would weight them twice in the statistics. Add only rows the "
                "model has not seen (`kpca-dask info` lists those it has).")
    return (f"Rows {low}:{high} of {description} are counted in both {holder} and {adding}: "
            "merging them would weight those rows twice. Merge only models fitted on "
            "disjoint rows (`kpca-dask info` lists the rows of each).")


def _joined(ranges: list[list[int]]) -> list[list[int]]:
    """Sorted ranges with touching ones joined: contiguous updates keep one range."""
    joined: list[list[int]] = []
    for start, stop in sorted(ranges):
        if joined and start <= joined[-1][1]:
            joined[-1][1] = max(joined[-1][1], stop)
        else:
            joined.append([start, stop])
    return joined


def describe(provenance: dict) -> list[str]:
    """One line per source (its description and row ranges), then the unrecorded rows.

    Examples
    --------
    >>> describe(with_rows(None, {"fingerprint": "ab", "description": "x.zarr"}, 0, 10))
    ['rows 0:10 of x.zarr']
    """
    lines = [f"rows {', '.join(f'{a}:{b}' for a, b in source['rows'])} of "
             f"{source['description']}" for source in provenance["sources"]]
    if provenance.get("repeated_rows"):
        lines.append(f"{provenance['repeated_rows']} of them counted more than once (in-memory "
                     "batches given again to partial_fit)")
    if provenance["unrecorded_rows"]:
        lines.append(f"{provenance['unrecorded_rows']} rows of unrecorded origin (saved before "
                     "kpca-dask recorded row provenance; they cannot be checked for overlap)")
    return lines
