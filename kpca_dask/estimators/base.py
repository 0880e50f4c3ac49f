"""What every estimator of the family shares: one fitted model, its file, its spectrum.

Each estimator's ``fit`` makes one immutable fitted model, ``model_`` (a
:class:`~kpca_dask.model.fitted.FittedModel`,
:class:`~kpca_dask.exact.exact_model.ExactFit`,
:class:`~kpca_dask.eof.hilbert_model.HilbertFit` or
:class:`~kpca_dask.eof.extended_model.ExtendedFit`); :class:`FittedModelEstimator`
gives each the rest from it: ``save`` by the estimator's model-file writer,
``sample_dim_``, scikit-learn's fitted check, the check of its parameters against its
class's table of constraints, and the spectrum's variances
(:class:`~kpca_dask.eof.scalings.EOFVarianceMixin`). A base class rather than
copies: the same few lines were written four times (docs/architecture.md).
"""

from __future__ import annotations

import importlib
import operator
from collections.abc import Mapping
from typing import Any, ClassVar

from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ..eof.scalings import EOFVarianceMixin
from ..model.parameters import check_params
from ..validation import Constraint

__all__ = ["FittedModelBase", "FittedModelEstimator", "model_view"]


class FittedModelBase(BaseEstimator):
    """The base of every estimator that holds one immutable fitted model, ``model_``: its
    file, its sample dimension and scikit-learn's fitted check.

    A subclass names its model-file writer in ``_model_file`` (module and
    function, imported when first saved: a worker that unpickles a block
    function never loads the storage code).

    Examples
    --------
    >>> import numpy as np
    >>> from kpca_dask import ExactKernelPCA
    >>> model = ExactKernelPCA(2, kernel="linear").fit(np.eye(5))
    >>> isinstance(model, FittedModelBase), model.sample_dim_
    (True, None)
    """

    #: The model-file writer: (module, function), the module relative to this package.
    _model_file: ClassVar[tuple[str, str]]

    #: What each constructor parameter may be: the class's table
    #: (:mod:`kpca_dask.model.parameters`, :mod:`kpca_dask.model.eof_parameters`), which
    #: its fit checks the parameters against (the coupled estimators check each field's by
    #: KernelPCA's table instead).
    _parameter_constraints: ClassVar[Mapping[str, Constraint]]

    def _check_params(self) -> None:
        """Refuse a parameter its class's table does not allow, saying what it may be."""
        check_params(self.get_params(deep=False), constraints=self._parameter_constraints,
                     estimator=type(self).__name__)

    #: The fitted model; absent before a fit.
    model_: Any

    def save(self, path, *, overwrite: bool = False, storage_options: dict | None = None) -> str:
        """Write the fitted model to a Zarr group at ``path`` (arrays and JSON attributes under
        checksums, no pickle); read it back with :func:`kpca_dask.load`.

        Parameters
        ----------
        path : str or path-like
            A local path or a URL (``s3://...``, with ``storage_options``).
        overwrite : bool, default=False
            Replace an existing group; without it an existing ``path`` is an
            :class:`~kpca_dask.errors.OutputExistsError`, and nothing is written.

        Returns
        -------
        path : str

        Examples
        --------
        >>> import tempfile, numpy as np, kpca_dask
        >>> X = np.random.default_rng(0).normal(size=(100, 3))
        >>> kpca = kpca_dask.KernelPCA(n_components=2, n_landmarks=20, random_state=0).fit(X)
        >>> path = kpca.save(tempfile.mkdtemp() + "/model.zarr")
        >>> bool((kpca_dask.load(path).transform(X) == kpca.transform(X)).all())
        True
        """
        check_is_fitted(self)
        module, writer = self._model_file
        write = getattr(importlib.import_module(module, __package__), writer)
        return write(self, path, overwrite=overwrite, storage_options=storage_options)

    @property
    def sample_dim_(self) -> str | None:
        """The sample dimension of a field's fit, as given or chosen (None for arrays)."""
        check_is_fitted(self)
        layout = self.model_.layout
        return None if layout is None else layout.sample_dim

    def __sklearn_is_fitted__(self) -> bool:
        return getattr(self, "model_", None) is not None


class FittedModelEstimator(EOFVarianceMixin, FittedModelBase):
    """The base of the one-field estimators: :class:`FittedModelBase`, the spectrum's
    variances (:class:`~kpca_dask.eof.scalings.EOFVarianceMixin`) and the preprocessing
    the fit learnt. The coupled estimators (:mod:`kpca_dask.estimators.coupled`), whose
    modes are pairs, take the base alone."""

    @property
    def preprocessing_(self):
        """How the input became the rows of the kernel: the field's layout, then the
        estimator's steps (:class:`~kpca_dask.io.preprocessing.Preprocessing`; the Hilbert
        EOF's analytic signal, the extended EOF's lagged copies), each saved with the
        model.

        Examples
        --------
        >>> import numpy as np
        >>> from kpca_dask import HilbertKernelEOF
        >>> X = np.random.default_rng(0).normal(size=(40, 3))
        >>> HilbertKernelEOF(1, padding="none").fit(X).preprocessing_.steps
        (AnalyticSignal(padding='none', decay_factor=0.2, mean of 3 features),)
        """
        check_is_fitted(self)
        return self.model_.preprocessing


def model_view(field: str, doc: str) -> property:
    """A read-only fitted attribute that is the field ``field`` of the estimator's
    ``model_`` (a dotted name reaches a field of a field).

    Examples
    --------
    >>> class Holder:
    ...     model_ = type("Fit", (), {"solver": "gram", "solution": complex(1, 2)})()
    ...     solver_ = model_view("solver", "The way taken.")
    ...     imag_ = model_view("solution.imag", "The imaginary part.")
    >>> Holder().solver_, Holder().imag_
    ('gram', 2.0)
    """
    read = operator.attrgetter(field)
    return property(lambda self: read(self.model_), doc=doc)
