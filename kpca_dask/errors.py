"""The exceptions kpca-dask raises on purpose.

Every error a user can cause by bad input or parameters is one of these, and
its message says what is wrong and how to fix it. They subclass the builtin
exception a Python or scikit-learn user would expect (``ValueError``,
``FileExistsError``, ...) so existing ``except`` clauses keep working.

An error about a file, store or URL names it once, at the start of its
message: code deep in a reader raises without a name, and the boundary that
knows what the user gave wraps the work in :func:`about`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "about",
    "KPCAError",
    "InvalidInputError",
    "NonNumericInputError",
    "NonFiniteInputError",
    "InvalidParameterError",
    "TooFewComponentsError",
    "NotPositiveSemidefiniteError",
    "InsufficientMemoryError",
    "ModelFormatError",
    "OutputExistsError",
    "ConcurrentWriteError",
    "CheckpointMismatchError",
    "NoStatisticsError",
    "ParametersChangedWarning",
    "RepeatedRowsWarning",
    "NonSymmetricKernelWarning",
    "ShortRecordWarning",
    "ModelMismatchError",
    "OverlappingRowsError",
    "ZeroEigenvalueWarning",
    "NegativeEigenvalueWarning",  # noqa: F822 - made on first use, by __getattr__ below
    "SlowKernelWarning",
    "CanonicalOverfitWarning",
    "NotInvertibleError",  # noqa: F822 - made on first use, by __getattr__ below
]


class KPCAError(Exception):
    """Base class of every error raised deliberately by kpca-dask.

    ``where`` names the file, store or URL the error is about, and the message
    begins with it. Code deep in a reader raises without it; the boundary that
    knows what the user gave names it once, with :func:`about`.
    """

    #: The file, store or URL the error is about, as the user gave it (no credentials).
    where: str | None = None

    def __str__(self) -> str:
        text = super().__str__()
        return f"{self.where}: {text}" if self.where else text


@contextmanager
def about(where: str) -> Iterator[None]:
    """Name ``where`` in every :class:`KPCAError` raised inside that names no place yet.

    The innermost ``about`` wins, so a reader of one array inside a model file
    can name the array's path while the loader names the file.

    Examples
    --------
    >>> try:
    ...     with about("model.zarr"):
    ...         raise ModelFormatError("the array 'projection' is missing")
    ... except ModelFormatError as exc:
    ...     print(exc)
    model.zarr: the array 'projection' is missing
    """
    try:
        yield
    except KPCAError as exc:
        if exc.where is None:
            exc.where = where
        raise


class InvalidInputError(KPCAError, ValueError):
    """The data have the wrong shape, dtype or layout."""


class NonNumericInputError(InvalidInputError, TypeError):
    """The data are not numbers (strings, objects)."""


class NonFiniteInputError(InvalidInputError):
    """The data contain NaN or infinite values."""


class InvalidParameterError(KPCAError, ValueError):
    """An estimator or kernel parameter is out of range or unknown."""


class TooFewComponentsError(InvalidParameterError):
    """More components were asked for than the kernel has positive eigenvalues."""


class NotPositiveSemidefiniteError(KPCAError, ValueError):
    """The centred kernel matrix has significantly negative eigenvalues among those asked for.

    scikit-learn's KernelPCA refuses the same matrices with a ``ValueError`` and the same
    sentence (docs/design.md §1): the kernel is not positive semi-definite on the data.
    """


class InsufficientMemoryError(KPCAError, MemoryError):
    """The landmark problem asked for needs more memory than the fit may use."""


class ModelFormatError(KPCAError, ValueError):
    """A saved model is missing a part or was written by an unknown format version."""


class OutputExistsError(KPCAError, FileExistsError):
    """An output path exists already and overwriting was not asked for."""


class ConcurrentWriteError(OutputExistsError):
    """Another process wrote the same output or model at the same time; this write was dropped."""


class CheckpointMismatchError(KPCAError, ValueError):
    """A fit checkpoint belongs to other data or parameters, so it cannot be resumed."""


class NoStatisticsError(ModelFormatError):
    """A model keeps no pass statistics, so it cannot take rows, be merged or be re-solved."""


class ModelMismatchError(KPCAError, ValueError):
    """Models to be merged differ in their landmarks, kernel or parameters."""


class OverlappingRowsError(KPCAError, ValueError):
    """Rows a model has counted already were given again, to an update or in a merge."""


class ZeroEigenvalueWarning(UserWarning):
    """Components with eigenvalue 0: zero embedding columns, or none at all.

    An int n_components above the number of positive eigenvalues keeps zero
    columns; with no positive eigenvalue at all, n_components=None or
    remove_zero_eig=True give 0 components (an (n, 0) embedding).
    """




class ParametersChangedWarning(UserWarning):
    """A parameter set after the fit, which a call on the fitted model does not use.

    A fitted model keeps the settings it was fitted with (``fit_settings_``);
    parameters take effect at the next fit, as in scikit-learn.
    """


class RepeatedRowsWarning(UserWarning):
    """The same in-memory rows were given to partial_fit again: they now count twice.

    As scikit-learn's incremental estimators do with a batch passed twice.
    Stored arrays and explicit ``rows=`` ranges are refused instead
    (:class:`OverlappingRowsError`): there a repeat is a mistake.
    """


class NonSymmetricKernelWarning(UserWarning):
    """A precomputed kernel matrix that is not symmetric on its landmarks: it is taken as
    (K + K^T) / 2, which reads the landmarks' rows as well as their columns."""


class ShortRecordWarning(UserWarning):
    """A Hilbert transform of a record shorter than the fit's: the analytic signal is taken
    over that record alone, so its scores carry larger edge effects than the fit's did.

    On eofs' SST example (√cos(latitude) weights, 4 modes), the last 10 of 50 winters
    transformed as a record of their own differed from the fit's scores for the same
    winters by 29-51 % per mode (padding "exp"; 38-65 % without padding).
    """


class CanonicalOverfitWarning(UserWarning):
    """A CCA on so many PCs for its samples that independent fields would show a large
    leading canonical correlation: its correlations are biased toward 1.

    With d_x and d_y PCs of n samples of independent fields, the leading sample canonical
    correlation lies near sqrt(p (1 - q)) + sqrt(q (1 - p)), p = d_x / n, q = d_y / n (the
    upper edge of Wachter's law, Johnstone 2008): 0.6 for 5 and 5 PCs of 50 samples.
    """


class SlowKernelWarning(UserWarning):
    """A kernel callable takes two 1-D rows (scikit-learn's style): called once per pair."""


def _not_invertible_error() -> type:
    from sklearn.exceptions import NotFittedError  # noqa: PLC0415 - see __getattr__ below

    class NotInvertibleError(KPCAError, NotFittedError):
        """The model lacks what going back needs (fitted without fit_inverse_transform=True).

        Also a :class:`sklearn.exceptions.NotFittedError` (and so a ``ValueError``
        and an ``AttributeError``), which is what scikit-learn's KernelPCA raises
        there and what code written for it catches.
        """

    return NotInvertibleError


def _negative_eigenvalue_warning() -> type:
    from sklearn.exceptions import PositiveSpectrumWarning  # noqa: PLC0415 - see below

    class NegativeEigenvalueWarning(PositiveSpectrumWarning):
        """Negative eigenvalues of the centred kernel matrix too small to refuse, set to 0.

        A subclass of scikit-learn's :class:`~sklearn.exceptions.PositiveSpectrumWarning`,
        so filters written for scikit-learn apply (docs/design.md §1).
        """

    return NegativeEigenvalueWarning


#: The classes whose base is one of scikit-learn's, made when first asked for.
_SCIKIT_LEARN_BASED = {"NotInvertibleError": _not_invertible_error,
                       "NegativeEigenvalueWarning": _negative_eigenvalue_warning}


def __getattr__(name: str):
    # Importing sklearn.exceptions imports scikit-learn's package (~180 MiB resident):
    # these classes are made when first asked for, so that Dask workers, which import this
    # module with every block function, do not pay for it (docs/design.md §14).
    make = _SCIKIT_LEARN_BASED.get(name)
    if make is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = make()
    value.__module__, value.__qualname__ = __name__, name
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SCIKIT_LEARN_BASED))

