# sknet: `make demo`, `make test`, `make lint`, `make docs`, `make bench`, `make gpu-check`,
# `make dist`.
# demo/test/bench create a virtual environment in $(VENV) and install what they
# need into it; gpu-check installs nothing (the GPU machine has no package index).

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
RESULTS ?= results
# gpu-check: wall-clock limit of each of its five steps, in seconds.
STEP_TIMEOUT ?= 300
# Tests run in parallel processes; one BLAS thread each avoids oversubscription.
TEST_ENV := OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

.PHONY: demo test lint docs bench gpu-check dist clean

$(PY):
	$(PYTHON) -m venv $(VENV)

demo: $(PY)
	$(PY) -m pip install --quiet -e .
	$(PY) examples/digits_pipeline.py

# The loggers' extras (tensorboard, mlflow, optuna) are wheels from the package index, so
# their tests run against the real libraries here rather than skip. Numba comes with sknet
# itself (a dependency where it has wheels): tests/backend/test_cpu_kernels.py checks it.
test: $(PY)
	$(PY) -m pip install --quiet -e ".[test,plot,progress,images,distributed,skops,onnx,tensorboard,mlflow,optuna]"
	$(TEST_ENV) $(PY) -m pytest -n auto --durations=30

# ruff: the linter (rules in pyproject.toml) and the formatter, checked, not applied
# (`ruff format .` applies it).
lint: $(PY)
	$(PY) -m pip install --quiet -e ".[lint]"
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# The documentation site into docs/_build/html, warnings as errors and every
# cross-reference checked; the gallery runs the quick examples (and the MNIST ones when
# SKNET_MNIST_DIR is set; SKNET_DOCS_GALLERY=0 runs none, for work on other pages).
# Every page is read and written anew (in DOCS_JOBS processes); the gallery's outputs
# in docs/auto_examples are kept, and an example runs again when its source, sknet's
# code or a library's version changed (docs/conf.py; a clean clone runs them all, in
# DOCS_JOBS worker processes). `make clean` or `rm -rf docs/auto_examples` forgets them.
DOCS_JOBS ?= auto
docs: $(PY)
	$(PY) -m pip install --quiet -e ".[docs]"
	rm -rf docs/_build docs/generated
	$(PY) -m sphinx -W --keep-going -q -j $(DOCS_JOBS) -b html docs docs/_build/html
	@echo "docs built: docs/_build/html/index.html"

# PyTorch from the package index pip is configured with (PyPI's Linux wheel is the CUDA
# build); `make bench TORCH_INDEX=https://download.pytorch.org/whl/cpu` takes the smaller
# CPU build from PyTorch's own index instead. No second index by default: an offline
# machine would retry it before falling back.
TORCH_INDEX ?=
bench: $(PY)
	$(PY) -m pip install --quiet $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) -e ".[bench]"
	$(PY) benchmarks/bench_cpu.py --repeats 3

# On a GPU machine, without installing anything: the GPU-marked tests, the
# scikit-learn estimator checks on device="cuda", and the GPU benchmark. Every
# step runs and leaves its log in $(RESULTS); the target fails if any step did.
gpu-check: XDIST = $(shell $(PYTHON) -c "import xdist" 2>/dev/null && echo "-n 4")
gpu-check:
	mkdir -p $(RESULTS)
	status=0; \
	echo "== GPU tests (pytest -m gpu)"; \
	SKNET_DEVICE=cuda PYTHONPATH=. timeout $(STEP_TIMEOUT) $(PYTHON) -m pytest -m gpu -p no:cacheprovider -p no:benchmark -q -rfE --tb=short $(XDIST) \
		> $(RESULTS)/gpu-tests.log 2>&1 || status=1; tail -n 3 $(RESULTS)/gpu-tests.log; \
	echo "== estimator checks on cuda"; \
	SKNET_DEVICE=cuda PYTHONPATH=. timeout $(STEP_TIMEOUT) $(PYTHON) -m pytest tests/test_common.py -p no:cacheprovider -p no:benchmark -q -rfE --tb=short $(XDIST) \
		> $(RESULTS)/gpu-estimator-checks.log 2>&1 || status=1; \
		tail -n 3 $(RESULTS)/gpu-estimator-checks.log; \
	echo "== GPU benchmark"; \
	PYTHONPATH=. timeout $(STEP_TIMEOUT) $(PYTHON) benchmarks/bench_gpu.py --results $(RESULTS) \
		> $(RESULTS)/gpu-bench.log 2>&1 || status=1; cat $(RESULTS)/gpu-bench.log; \
	echo "== streaming from host memory, memory estimate"; \
	PYTHONPATH=. timeout $(STEP_TIMEOUT) $(PYTHON) benchmarks/bench_streaming.py --results $(RESULTS) \
		> $(RESULTS)/gpu-streaming.log 2>&1 || status=1; cat $(RESULTS)/gpu-streaming.log; \
	echo "== forward-only (autodiff) layers against Dense on cuda"; \
	PYTHONPATH=. timeout $(STEP_TIMEOUT) $(PYTHON) benchmarks/bench_autodiff.py --device cuda \
		> $(RESULTS)/gpu-autodiff.log 2>&1 || status=1; cat $(RESULTS)/gpu-autodiff.log; \
	exit $$status

# The sdist and wheel a release would upload (into dist/), checked by twine and
# installed into a fresh virtual environment that imports and fits a model.
dist: $(PY)
	$(PY) -m pip install --quiet build twine
	rm -rf dist
	$(PY) -m build --outdir dist . > /dev/null
	$(PY) -m twine check --strict dist/*
	rm -rf .dist-venv && $(PYTHON) -m venv .dist-venv
	.dist-venv/bin/python -m pip install --quiet dist/*.whl
	cd /tmp && $(CURDIR)/.dist-venv/bin/python -c "import sknet, sklearn.datasets as d; \
		X, y = d.load_digits(return_X_y=True); \
		print('sknet', sknet.__version__, 'from the wheel:', \
		sknet.MLPClassifier(max_iter=50, device='cpu').fit(X / 16, y).score(X / 16, y))"
	rm -rf .dist-venv

clean:
	rm -rf $(VENV) .dist-venv build dist *.egg-info .pytest_cache $(RESULTS)
	rm -rf docs/_build docs/generated docs/auto_examples docs/sg_execution_times.rst
