"""The preprocessing steps a fitted model holds: applied lazily as the functions they name,
written as JSON entries and arrays, and rebuilt by their kind."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from kpca_dask.errors import InvalidParameterError
from kpca_dask.io.preprocessing import (
    STEPS,
    AnalyticSignal,
    DelayEmbedding,
    EOFReduction,
    Preprocessing,
    steps_attribute,
    steps_from_attribute,
)
from kpca_dask.io.preprocessing.analytic_signal import analytic_signal
from kpca_dask.io.preprocessing.delay_embedding import lagged_rows

RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 3))


def test_each_step_is_the_function_it_names_and_stays_lazy():
    rows = da.from_array(X, chunks=(10, 3))
    delayed = DelayEmbedding(tau=2, embedding=3).rows(rows)
    analytic = AnalyticSignal("exp", 0.2, mean=X.mean(axis=0)).rows(rows)
    assert isinstance(delayed, da.Array) and isinstance(analytic, da.Array)
    np.testing.assert_array_equal(delayed.compute(), lagged_rows(X, 2, 3).compute())
    np.testing.assert_allclose(analytic.compute(), analytic_signal(X, "exp", 0.2),
                               rtol=1e-12, atol=1e-12)


def test_the_steps_apply_in_order():
    steps = (DelayEmbedding(tau=1, embedding=2), AnalyticSignal("none", 0.2, np.zeros(6)))
    got = Preprocessing(None, steps).rows(X).compute()
    want = analytic_signal(lagged_rows(X, 1, 2).compute(), "none", 0.2, mean=np.zeros(6))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert Preprocessing(None, steps).step("analytic_signal") is steps[1]
    assert Preprocessing(None).step("delay_embedding") is None


def test_steps_come_back_from_their_attribute_and_arrays():
    steps = (DelayEmbedding(tau=3, embedding=2),
             AnalyticSignal("exp", 0.3, mean=np.array([1.0, -2.0, 0.5])))
    stored = steps_attribute(steps)
    assert stored == [{"step": "delay_embedding", "tau": 3, "embedding": 2},
                      {"step": "analytic_signal", "padding": "exp", "decay_factor": 0.3}]
    arrays = {name: value for step in steps for name, value in step.arrays().items()}
    assert steps_from_attribute(stored, arrays) == steps
    assert set(STEPS) == {"delay_embedding", "eof_reduction", "analytic_signal"}


@pytest.mark.parametrize("stored, match", [
    ({"step": "delay_embedding"}, "not a list"),
    ([{"step": "smoothing", "width": 3}], r"'smoothing' is not a preprocessing step.*known"),
    ([{"step": "delay_embedding", "tau": 2}], "lacks or mistakes"),
    ([{"step": "delay_embedding", "tau": 0, "embedding": 2}], "lacks or mistakes"),
    ([{"step": "analytic_signal", "padding": "exp", "decay_factor": 0.2}], "lacks or mistakes"),
])
def test_an_entry_no_step_reads_is_refused_by_what_is_wrong(stored, match):
    with pytest.raises(ValueError, match=match):
        steps_from_attribute(stored, {})


def test_a_step_with_a_bad_parameter_says_what_it_may_be():
    with pytest.raises(InvalidParameterError, match="tau=0 must be an int >= 1"):
        DelayEmbedding(tau=0, embedding=2)
    with pytest.raises(InvalidParameterError, match="padding must be one of"):
        AnalyticSignal("zero", 0.2, np.zeros(2))


def test_the_pipeline_reads_as_its_layout_then_its_steps():
    text = repr(Preprocessing(None, (AnalyticSignal("none", 0.2, np.zeros(4)),)))
    assert text == ("Preprocessing(rows as given; then AnalyticSignal(padding='none', "
                    "decay_factor=0.2, mean of 4 features))")


def test_an_analytic_signals_means_are_its_own_and_read_only():
    mean = np.zeros(3)
    step = AnalyticSignal("none", 0.2, mean)
    mean[0] = 5.0
    assert step.mean[0] == 0.0 and not step.mean.flags.writeable


def test_the_reduction_to_linear_eofs_is_named_not_applied():
    step = EOFReduction(4)
    assert steps_from_attribute(steps_attribute((step,)), {}) == (step,)
    with pytest.raises(InvalidParameterError, match="embedded"):
        Preprocessing(None, (step,)).rows(X)


def test_an_extended_eof_names_the_reduction_then_the_lagged_copies_on_the_fields_layout():
    """With n_pca_modes the rows are reduced first; either way the layout is the field's own
    (one lag's positions and mask), not that of the embedded field the kernel stage read."""
    import xarray as xr

    from kpca_dask import ExtendedKernelEOF

    values = RNG.normal(size=(60, 2, 4))
    values[:, 0, 0] = np.nan
    field = xr.DataArray(values, dims=("time", "lat", "lon"))
    for n_pca_modes, kinds in ((None, ["delay_embedding"]),
                               (3, ["eof_reduction", "delay_embedding"])):
        model = ExtendedKernelEOF(2, tau=1, embedding=3, n_pca_modes=n_pca_modes).fit(field)
        held = model.preprocessing_
        assert [step.kind for step in held.steps] == kinds
        assert held.layout.dims == ("lat", "lon") and held.layout.kept.tolist() == list(
            range(1, 8))
