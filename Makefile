# Two entry points: `make demo` and `make test`. Each creates .venv on first use.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test test-deploy lint docs bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m kpca_dask.demo

test: $(STAMP)
	$(PY) -m pytest

# The image built from Debian's packages and a wheelhouse (no registry), and a TLS cluster
# run in containers as the pods are. Needs root (apt, dockerd, debootstrap); see
# deploy/README.md, "Try the cluster on one machine with Docker".
test-deploy: $(STAMP)
	PYTHON=$(PY) deploy/test-deploy.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# The documentation site (docs/), warnings as errors; open docs/_build/html/index.html.
docs: $(STAMP)
	$(PY) -m sphinx -W --keep-going -b html docs docs/_build/html

# Benchmarks (minutes to an hour; see README.md "Benchmarks" for each table).
bench: $(STAMP)
	$(PY) bench/bench_floor.py
	$(PY) bench/bench_vs_sklearn.py --repeats 2
	$(PY) bench/bench_mnist.py
	$(PY) bench/bench_scale.py --sizes 1e6,1e7,5e7
	$(PY) bench/bench_accuracy.py --n 20000 --m 100 300 1000 3000 --seeds 0 1 2
	$(PY) bench/bench_update.py
	$(PY) bench/bench_denoising.py --n-landmarks 3000 --gamma-factors 2 --components 32 64 --alphas 0.003
	$(PY) bench/bench_novelty.py

clean:
	rm -rf $(VENV) demo-output .pytest_cache docs/_build docs/generated
