"""A rotation in a model file: the arrays of a :class:`~kpca_dask.engine.orthomax.Rotation` and
its method, for the files that are not written from declarations (exact and Hilbert models;
a landmark model's file declares its rotation in :mod:`kpca_dask.model.fitted`).

A rotated model is saved with its rotation, so that ``kpca_dask.rotate`` of the loaded model
gives the same rotated modes without the data. The arrays are ``rotation_matrix``,
``rotation_correlation``, ``rotation_order``, ``rotation_signs``,
``rotation_explained_variance`` and ``rotation_loadings``; the attribute ``rotation`` holds
the method, the power, the total variance and which arrays are complex (a Hilbert EOF's
matrix, correlation, signs and loadings), stored as their real and imaginary parts along a
leading axis of two, as the Hilbert model's own complex arrays are.
"""

from __future__ import annotations

import numpy as np

from ..engine.orthomax import METHODS, Rotation

__all__ = ["rotation_entries", "rotation_from_entries"]

#: The arrays of a rotation, by the field of :class:`Rotation` each holds.
_ARRAYS = ("matrix", "correlation", "order", "signs", "explained_variance", "loadings")


def rotation_entries(rotation: Rotation | None, fitted: dict, arrays: dict) -> None:
    """Add ``rotation`` to a model file's ``fitted`` attribute and ``arrays`` (nothing for
    None: the file then says ``rotation: null``).

    Examples
    --------
    >>> fitted, arrays = {}, {}
    >>> rotation_entries(None, fitted, arrays)
    >>> fitted, arrays
    ({'rotation': None}, {})
    """
    fitted["rotation"] = None
    if rotation is None:
        return
    complex_ = [name for name in _ARRAYS if np.iscomplexobj(getattr(rotation, name))]
    fitted["rotation"] = {"method": rotation.method, "power": int(rotation.power),
                          "total_variance": float(rotation.total_variance),
                          "complex": complex_}
    for name in _ARRAYS:
        value = np.asarray(getattr(rotation, name))
        if name in complex_:
            value = np.stack([value.real, value.imag]).astype(np.float64)
        arrays[f"rotation_{name}"] = value


def rotation_from_entries(fitted: dict, arrays: dict, n_components: int,
                          n_features: int) -> Rotation | None:
    """The rotation :func:`rotation_entries` wrote, its shapes held to a model of
    ``n_components`` modes over ``n_features`` features; None if the file holds none (or
    was written before files kept rotations).

    Raises
    ------
    ValueError
        A rotation no fit could have made: the loader reports the file as damaged.
    """
    stored = fitted.get("rotation")
    if stored is None:
        return None
    method = stored.get("method") if isinstance(stored, dict) else stored
    if method not in METHODS:
        raise ValueError(f"rotation method {method!r}")
    values = {}
    for name in _ARRAYS:
        key = f"rotation_{name}"
        if key not in arrays:
            raise ValueError(f"{key} missing")
        value = np.asarray(arrays[key])
        if name in stored["complex"]:
            if value.ndim < 1 or value.shape[0] != 2:
                raise ValueError(f"{key} holds no real and imaginary parts")
            value = value[0] + 1j * value[1]
        values[name] = value
    r = values["explained_variance"].shape[0] if values["explained_variance"].ndim == 1 else -1
    expected = {"matrix": (r, r), "correlation": (r, r), "order": (r,), "signs": (r,),
                "explained_variance": (r,), "loadings": (r, n_features)}
    wrong = [name for name, shape in expected.items() if values[name].shape != shape]
    order = values["order"]
    if wrong or not 1 <= r <= n_components or not np.array_equal(np.sort(order), np.arange(r)):
        raise ValueError(f"the rotation's {(wrong or ['order'])[0]} does not fit {r} rotated "
                         f"modes of {n_components} over {n_features} features")
    total = float(stored["total_variance"])
    if not (np.isfinite(total) and total >= 0):
        raise ValueError(f"the rotation's total variance {total!r}")
    return Rotation(stored["method"], int(stored["power"]), values["matrix"],
                    values["correlation"], order.astype(np.int64), values["signs"],
                    values["explained_variance"], total, values["loadings"])
