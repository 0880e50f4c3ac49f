"""A Hilbert transform of a record shorter than the fit's warns, with the size of the effect
measured here and how to project new samples instead."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from kpca_dask import HilbertKernelEOF
from kpca_dask.errors import ShortRecordWarning

pytest.importorskip("eofs")
from _eof_data import sst  # noqa: E402


@pytest.fixture(scope="module")
def fitted():
    field = sst()
    return field, HilbertKernelEOF(4, weights="coslat").fit(field)


def test_a_short_record_warns_and_its_scores_differ_by_the_size_stated(fitted):
    """The last 10 of 50 winters as a record of their own: a ShortRecordWarning that says
    what to do, and scores 29-51 % off the fit's for the same winters (padding "exp"), as
    the warning's class states."""
    field, model = fitted
    with pytest.warns(ShortRecordWarning, match=r"record of 10 samples, shorter than the "
                                                r"fit's 50.*use scores\(\)"):
        new = np.asarray(model.transform(field.isel(time=slice(-10, None))))
    fit = np.asarray(model.scores())[-10:]
    off = np.linalg.norm(new - fit, axis=0) / np.linalg.norm(fit, axis=0)
    assert 0.25 < off.min() and off.max() < 0.55


def test_a_record_as_long_as_the_fits_does_not_warn(fitted):
    """The training record itself: its own scores, no warning."""
    field, model = fitted
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShortRecordWarning)
        scores = np.asarray(model.transform(field))
    np.testing.assert_allclose(scores, np.asarray(model.scores()), atol=1e-9)
