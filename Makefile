# Two entry points: `make demo` (the package and matplotlib, nothing else) and `make test`
# (every extra: tests, docs, notebooks, deploy checks). Both create .venv on first use and
# install the versions pinned in constraints.txt.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --quiet --constraint constraints.txt
STAMP  := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: demo test test-min test-deploy lint docs bench constraints clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# The demo writes a PNG, hence the plot extra.
$(DEMO_STAMP): pyproject.toml constraints.txt | $(PY)
	$(PIP) -e ".[plot]"
	touch $(DEMO_STAMP)

# Bytecode is written as each module is first imported, for the few thousand files the tests
# and tools import, rather than by pip for all 16 000 installed ones (half of the install's
# time, on one core). An environment that sets PYTHONDONTWRITEBYTECODE (some images do) would
# have every process of the suite compile its imports from source again: not here.
unexport PYTHONDONTWRITEBYTECODE

$(STAMP): pyproject.toml constraints.txt | $(PY)
	$(PIP) --no-compile -e ".[dev]"
	touch $(STAMP) $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(PY) -m kpca_dask.demo

# On two processes (pytest-xdist): each module goes to one process (its shared cluster or
# fitted model is set up once), the longest first; the busy clusters of tests/distributed and
# tests/faults run one at a time, and the tests that must not share the machine (marked serial)
# with no other test beside them (tests/conftest.py). The slowest 15 tests and the time by
# directory are listed at the end: the suite must stay within ten minutes on 2 cores.
# OPENBLAS_THREAD_TIMEOUT=4: OpenBLAS's idle threads wait 2^4 cycles, not 2^28 (about 0.1 s),
# spinning, after each product before they sleep; with two test processes and their clusters
# on two cores that spinning took the cores from the other process (engine and model tests:
# 130 s against 90 s). Read when OpenBLAS loads, before any conftest runs (zarr's pytest
# plugin imports numpy), so it is set here; every process the tests start inherits it.
test: $(STAMP)
	OPENBLAS_THREAD_TIMEOUT=4 $(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder \
		--durations=15

# The declared minimum versions (constraints-min.txt, pyproject.toml's lower bounds) in a
# venv of their own, .venv-min, and the model, engine and block tests on them (about five
# minutes on 2 cores). Run before each release; not part of `make test` or CI. numba's cache
# goes in that venv: its compiled code is not the other numba's.
VENV_MIN   ?= .venv-min
PY_MIN     := $(VENV_MIN)/bin/python
MIN_STAMP  := $(VENV_MIN)/.installed

$(PY_MIN):
	$(PYTHON) -m venv $(VENV_MIN)
	$(PY_MIN) -m pip install --quiet --upgrade pip

$(MIN_STAMP): pyproject.toml constraints-min.txt | $(PY_MIN)
	$(PY_MIN) -m pip install --quiet --constraint constraints-min.txt -e ".[test,formats]"
	touch $(MIN_STAMP)

test-min: $(MIN_STAMP)
	NUMBA_CACHE_DIR=$(VENV_MIN)/numba-cache $(PY_MIN) -m pytest tests/model tests/eof \
		tests/exact tests/checkpoints tests/engine tests/blocks --durations=15

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

# Re-pin constraints.txt to what .venv holds now (after `make test` passed with it).
constraints: $(STAMP)
	{ sed -n '/^#/p' constraints.txt; \
	  $(PY) -m pip freeze --exclude-editable | grep -v -E '^#|^-e|^kpca-dask=='; \
	} > constraints.txt.new && mv constraints.txt.new constraints.txt

clean:
	rm -rf $(VENV) $(VENV_MIN) demo-output .pytest_cache docs/_build docs/generated
