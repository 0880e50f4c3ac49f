# Two entry points: `make demo` and `make test`. Each creates .venv on first use.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m kpca_dask.demo

test: $(STAMP)
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# Benchmarks (minutes to an hour; see README.md "Benchmarks" for each table).
bench: $(STAMP)
	$(PY) bench/bench_floor.py
	$(PY) bench/bench_vs_sklearn.py --repeats 2
	$(PY) bench/bench_mnist.py
	$(PY) bench/bench_scale.py --sizes 1e6,1e7,5e7
	$(PY) bench/bench_accuracy.py --n 20000 --m 100 300 1000 3000 --seeds 0 1 2

clean:
	rm -rf $(VENV) demo-output .pytest_cache
