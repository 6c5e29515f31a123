# sknet: `make demo`, `make test`, `make bench`, `make gpu-check`.
# demo/test/bench create a virtual environment in $(VENV) and install what they
# need into it; gpu-check installs nothing (the GPU machine has no package index).

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
RESULTS ?= results
# Tests run in parallel processes; one BLAS thread each avoids oversubscription.
TEST_ENV := OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

.PHONY: demo test bench gpu-check clean

$(PY):
	$(PYTHON) -m venv $(VENV)

demo: $(PY)
	$(PY) -m pip install --quiet -e .
	$(PY) examples/digits_pipeline.py

test: $(PY)
	$(PY) -m pip install --quiet -e ".[test]"
	$(TEST_ENV) $(PY) -m pytest -n auto

bench: $(PY)
	$(PY) -m pip install --quiet -e ".[bench]"
	$(PY) benchmarks/bench_mlp.py

gpu-check:
	mkdir -p $(RESULTS)
	SKNET_DEVICE=cuda PYTHONPATH=. $(PYTHON) -m pytest -m gpu -p no:cacheprovider \
		2>&1 | tee $(RESULTS)/gpu-tests.log
	SKNET_DEVICE=cuda PYTHONPATH=. $(PYTHON) -m pytest tests/test_common.py \
		-p no:cacheprovider -q 2>&1 | tee $(RESULTS)/gpu-estimator-checks.log

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache $(RESULTS)
