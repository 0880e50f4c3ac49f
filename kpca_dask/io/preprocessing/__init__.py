"""Preprocessing: how a fit's input becomes the rows of its kernel, and how new data follow.

One concern, in modules a newcomer can name:

* ``fields``: a field's layout (:class:`FeatureLayout`: its dims, mask and weights), the
  stacking of its feature dimensions into one feature axis, and outputs put back on it;
* ``field_rows``: its mask found and every block checked as it is read;
* ``field_inputs``: weights, stacking and unstacking of rows already opened;
* ``multiple_fields`` and ``field_sets``: several fields' layouts joined and split back,
  and several fields fitted as one;
* ``latitude``: √cos(latitude) weights found among a field's coordinates;
* ``delay_embedding`` and ``analytic_signal``: the lagged copies of the extended EOF and
  the analytic signal of the Hilbert EOF, lazily on dask;
* ``steps``: the steps a fitted model holds, saves and applies to new rows
  (:class:`Preprocessing`, :class:`DelayEmbedding`, :class:`AnalyticSignal`).

Examples
--------
>>> from kpca_dask.io.preprocessing import DelayEmbedding, Preprocessing
>>> Preprocessing(None, (DelayEmbedding(tau=1, embedding=2),)).step("delay_embedding")
DelayEmbedding(tau=1, embedding=2)
"""

from .fields import FeatureLayout, coslat_weights
from .steps import (
    STEPS,
    AnalyticSignal,
    DelayEmbedding,
    EOFReduction,
    Preprocessing,
    steps_attribute,
    steps_from_attribute,
)

__all__ = ["FeatureLayout", "coslat_weights", "Preprocessing", "DelayEmbedding",
           "AnalyticSignal", "EOFReduction", "STEPS", "steps_attribute", "steps_from_attribute"]
