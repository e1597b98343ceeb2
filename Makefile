# `make demo` and `make test` each create .venv when missing and install what they need.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo demo-flyte test lint bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

demo: $(VENV)/.installed
	$(PY) examples/demo.py

$(VENV)/.installed-flyte: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[flyte]'
	touch $@

# The Flyte example through `pyflyte run` on the local runtime (no cluster): a clean run, then a preempted one.
demo-flyte: $(VENV)/.installed-flyte
	$(VENV)/bin/pyflyte run examples/flyte_train.py train_wf
	$(VENV)/bin/pyflyte run examples/flyte_train.py train_preempted_wf

test: $(VENV)/.installed
	$(PY) -m pytest -q
	$(VENV)/bin/ruff check .

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

bench: $(VENV)/.installed
	$(PY) -m benchmarks.run

clean:
	rm -rf $(VENV) build *.egg-info
