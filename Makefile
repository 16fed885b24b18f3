# Two set-up commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP_RUN := $(VENV)/.stamp-run
STAMP_DEV := $(VENV)/.stamp-dev

.PHONY: run test bench ui lint typecheck clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(STAMP_RUN): pyproject.toml | $(PY)
	$(PIP) install -q -e .
	touch $@

$(STAMP_DEV): pyproject.toml | $(PY)
	# torch first, pinned to the CPU build that lies on disk, so [bench] adds only triton.
	$(PIP) install -q "torch==2.13.0" || $(PIP) install -q torch
	$(PIP) install -q -e ".[dev,bench,browser,sweep]"
	touch $(STAMP_RUN) $@

run: $(STAMP_RUN)
	$(VENV)/bin/planner plan --model llama-3.1-70b --gpu h200 --max-gpus 8 --isl 4000 --osl 500 \
	  --ttft-ms 1000 --tpot-ms 30 --percentile p90

test: $(STAMP_DEV)
	$(VENV)/bin/ruff check hardware kernels_db planner solvers app tests lab
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -n 2

bench: $(STAMP_DEV)
	$(PY) -m tests.bench

ui: $(STAMP_RUN)
	$(VENV)/bin/planner ui

clean:
	rm -rf $(VENV) build *.egg-info
