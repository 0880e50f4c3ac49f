"""``kpca-dask fit --fit-inverse-transform --alpha auto``: the ridge chosen by generalised
cross-validation, reported by ``info``, the same as the library's; a wrong ``--alpha`` is a
usage error."""

from __future__ import annotations

import numpy as np
import pytest
from test_cli_updates import main

from kpca_dask import KernelPCA, load
from kpca_dask.io import write_array


def test_alpha_auto_is_chosen_as_the_library_chooses_it_and_shown_by_info(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4)) + 3.0
    write_array(X, tmp_path / "x.zarr")
    status, _, err = main("fit", "x.zarr", "--model", "m.zarr", "--n-components", "3",
                          "--n-landmarks", "60", "--seed", "0", "--fit-inverse-transform",
                          "--alpha", "auto", cwd=tmp_path, capsys=capsys)
    assert status == 0, err
    model = load(tmp_path / "m.zarr")
    library = KernelPCA(n_components=3, n_landmarks=60, random_state=0,
                        fit_inverse_transform=True, alpha="auto").fit(X)
    assert model.inverse_alpha_ == pytest.approx(library.inverse_alpha_, rel=1e-10)
    status, out, _ = main("info", "m.zarr", cwd=tmp_path, capsys=capsys)
    assert status == 0
    assert f"ridge alpha = {model.inverse_alpha_:.3g}" in out


@pytest.mark.parametrize("alpha", ["-1", "often"])
def test_a_wrong_alpha_is_a_usage_error(tmp_path, capsys, alpha):
    write_array(np.ones((20, 2)), tmp_path / "x.zarr")
    with pytest.raises(SystemExit) as stopped:  # argparse's usage error
        main("fit", "x.zarr", "--model", "m.zarr", "--alpha", alpha,
             cwd=tmp_path, capsys=capsys)
    assert stopped.value.code == 2
    assert "neither a number >= 0 nor 'auto'" in capsys.readouterr().err
    assert not (tmp_path / "m.zarr").exists()
