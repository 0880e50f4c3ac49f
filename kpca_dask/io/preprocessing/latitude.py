"""Area weights of a field on a latitude grid: √cos(latitude), from the field's own coordinate.

eofs and xeofs weight each grid point by the share of the sphere it covers on
a regular grid, cos(latitude); as a weight of the features (which multiplies
each feature before the kernel) that is √cos(latitude), so that a linear
kernel's inner product is the area-weighted one (docs/design.md §12).
``weights="coslat"`` finds the latitude among the field's coordinates
(:func:`field_coslat_weights`): by name (:data:`LATITUDE_NAMES`) or by its CF
``standard_name`` or ``units``.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from ...errors import InvalidInputError

__all__ = ["COSLAT", "LATITUDE_NAMES", "coslat_weights", "field_coslat_weights", "is_coslat"]

#: The ``weights`` value that asks for √cos(latitude) of the field being fitted.
COSLAT = "coslat"

#: Coordinate names taken for latitude (besides a coordinate whose ``standard_name`` is
#: latitude or whose ``units`` are degrees north, as CF defines them).
LATITUDE_NAMES = ("lat", "latitude", "nav_lat")
_NORTH_UNITS = ("degrees_north", "degree_north", "degree_N", "degrees_N", "degreeN", "degreesN")


def is_coslat(weights) -> bool:
    """Whether ``weights`` asks for the field's √cos(latitude).

    Examples
    --------
    >>> is_coslat("coslat"), is_coslat(None), is_coslat(np.ones(2))
    (True, False, False)
    """
    return isinstance(weights, str) and weights == COSLAT


def coslat_weights(latitude) -> xr.DataArray:
    """√cos(latitude) in float64, exactly 0 at the poles: the weights that make a linear
    kernel's inner product the area-weighted one (eofs' and xeofs' coslat weighting).

    cos(90°) computed in float32 is a little below 0, whose square root is
    NaN; here the cosine is taken in float64 and set to 0 at ±90°. A feature
    of weight 0 has no part in the fit, and its pre-image is NaN.

    Examples
    --------
    >>> lat = xr.DataArray(np.array([0.0, 60.0, 90.0], np.float32), dims="lat")
    >>> lat = lat.assign_coords(lat=lat)
    >>> coslat_weights(lat).values.round(4).tolist()
    [1.0, 0.7071, 0.0]
    """
    lat = latitude if isinstance(latitude, xr.DataArray) else xr.DataArray(
        np.asarray(latitude), dims="lat")
    lat = lat.astype(np.float64)
    # Exactly 0 at the poles (cos(pi / 2) is 6e-17, not 0): a pre-image is divided by
    # its weights, and a weight of 8e-9 would blow a pole's reconstruction up.
    cosine = np.cos(np.deg2rad(lat)).where(np.abs(lat) < 90.0, 0.0).clip(0.0, None)
    return np.sqrt(cosine).rename("weights")


#: What the messages of :func:`field_coslat_weights` suggest where no latitude is found.
INSTEAD = "give the weights themselves instead (a DataArray over the feature dimensions)"


def field_coslat_weights(X: xr.DataArray, sample_dim: str, *, option: str = 'weights="coslat"',
                         instead: str = INSTEAD) -> xr.DataArray:
    """√cos(latitude) over the latitude coordinate of the field ``X`` (samples along
    ``sample_dim``), as :func:`coslat_weights` computes it.

    The latitude is the one coordinate over feature dimensions named in
    :data:`LATITUDE_NAMES`, or whose CF ``standard_name`` is ``latitude`` or
    whose ``units`` are degrees north; its values must be degrees within ±90.
    ``option`` names what asked for the weights in the error messages, and
    ``instead`` what to do when no single latitude is found.

    Raises
    ------
    InvalidInputError
        No such coordinate, several, or one that is not a latitude in degrees.

    Examples
    --------
    >>> X = xr.DataArray(np.zeros((5, 3)), dims=("time", "lat"),
    ...                  coords={"lat": np.float32([-90.0, 0.0, 90.0])})
    >>> field_coslat_weights(X, "time").values.round(6).tolist()
    [0.0, 1.0, 0.0]
    """
    name = _latitude_name(X, sample_dim, option, instead)
    latitude = X.coords[name]
    degrees = np.asarray(latitude.values, dtype=np.float64)
    if np.any(~np.isfinite(degrees)) or np.any(np.abs(degrees) > 90):
        raise InvalidInputError(f"{option}: the coordinate {name!r} is not a latitude in "
                                "degrees (values beyond +/-90 or not finite).")
    coords = {d: X.indexes[d] for d in latitude.dims if d in X.indexes}
    return coslat_weights(xr.DataArray(degrees, dims=latitude.dims, coords=coords))


def _latitude_name(X: xr.DataArray, sample_dim: str, option: str, instead: str) -> str:
    """The name of the latitude coordinate among those over ``X``'s feature dimensions."""
    found = [str(name) for name, coord in X.coords.items()
             if coord.ndim and sample_dim not in coord.dims
             and (str(name).lower() in LATITUDE_NAMES
                  or coord.attrs.get("standard_name") == "latitude"
                  or coord.attrs.get("units") in _NORTH_UNITS)]
    if len(found) == 1:
        return found[0]
    if not found:
        features = ", ".join(str(d) for d in X.dims if d != sample_dim)
        shown = ", ".join(map(str, X.coords)) or "none"
        raise InvalidInputError(
            f"{option} found no latitude coordinate over the feature dimensions {features} "
            f"(coordinates: {shown}); it takes one named {' or '.join(LATITUDE_NAMES)}, or "
            f"with standard_name 'latitude' or units 'degrees_north'; {instead}.")
    raise InvalidInputError(f"{option} found several latitude coordinates ({', '.join(found)}); "
                            f"{instead}.")
