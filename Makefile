# `make demo`, `make demo-flyte`, `make demo-airflow` and `make test` each create .venv when missing and
# install what they need (the demo: the core alone).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo demo-flyte demo-airflow test test-loaded test-install test-images test-airflow-versions lint bench clean

# The core alone (kubernetes, tenacity, pyyaml, the schema checkers): all `make demo` needs.
$(VENV)/.installed-core: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $@

# Everything the tests use: both extras and the tools.
$(VENV)/.installed: $(VENV)/.installed-core
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

demo: $(VENV)/.installed-core
	$(PY) examples/demo.py

$(VENV)/.installed-flyte: $(VENV)/.installed-core
	$(PY) -m pip install --quiet -e '.[flyte]'
	touch $@

$(VENV)/.installed-airflow: $(VENV)/.installed-core
	$(PY) -m pip install --quiet -e '.[airflow]'
	touch $@

# The Flyte example through `pyflyte run` on the local runtime (no cluster): a clean run, then a preempted one.
demo-flyte: $(VENV)/.installed-flyte
	$(VENV)/bin/pyflyte run examples/flyte_train.py train_wf
	$(VENV)/bin/pyflyte run examples/flyte_train.py train_preempted_wf

# The example DAG under `airflow dags test` on the local runtime, in a throwaway AIRFLOW_HOME (about a minute).
demo-airflow: $(VENV)/.installed-airflow
	export AIRFLOW_HOME=$$(mktemp -d) AIRFLOW__CORE__LOAD_EXAMPLES=False AIRFLOW__CORE__DAGS_FOLDER=$(CURDIR)/examples && \
	$(VENV)/bin/airflow db migrate > /dev/null && $(VENV)/bin/airflow dags test jobset_example; \
	status=$$?; rm -rf "$$AIRFLOW_HOME"; exit $$status

# The tests in TEST_WORKERS processes (pytest-xdist; two on a 2-core machine, where much of a test's time is waiting
# on Airflow, Flyte or a replica process): a process takes the next test module when it is free, and runs all of it,
# so a module's or the session's fixture (Airflow's components, a connector server, one DAG run read by several
# tests) starts once. The modules go in file order: the longest (Airflow's components) first. `--dist loadgroup`
# would not keep them together: its groups are lost on pytest 9.2 (pytest-xdist issue 1386).
# `make test TEST_WORKERS=0` runs everything in one process.
TEST_WORKERS ?= 2

test: $(VENV)/.installed
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
	$(VENV)/bin/ruff check .

# `make test` on a busy machine: the same command with two CPU-bound processes beside it, started before and
# killed after, also when the tests fail or on Ctrl-C (the trap); a loop whose shell is gone anyway (kill -9)
# ends on its own.
test-loaded: $(VENV)/.installed
	@busy=""; trap 'kill $$busy 2>/dev/null' EXIT; trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM; \
	for n in 1 2; do $(PY) -c 'import os; shell = os.getppid(); exec("while os.getppid() == shell: pass")' & busy="$$busy $$!"; done; \
	echo "two busy loops beside the tests (pids$$busy)"; \
	$(MAKE) --no-print-directory test

# Each extra resolves with pip 23.2 and the current pip, in throwaway venvs (a dry run against the index); the
# wheel installs in a fresh venv outside the clone and runs the demo, a Flyte task and an Airflow DAG from it.
test-install: $(VENV)/.installed
	$(PY) -m pytest -q -m install tests/test_install.py tests/test_wheel.py

# Each Dockerfile under plugins/ built without Docker, in a throwaway root with the base image's users, ownership
# and sticky /tmp, then its entry point run as the image's non-root user (about two minutes; needs root, as CI
# runs: tests/test_images.py says what is emulated). Not in `make test`: over a minute, and root only.
test-images: $(VENV)/.installed
	$(PY) -m pytest -q -m images tests/test_images.py

# The Airflow tests on each older Airflow minor the package claims (3.1, 3.2) and on the newest minor the package
# index has above the installed one (its final release, else its newest pre-release: 3.4.0b2 now), one after the
# other, each in a throwaway venv (about 25 minutes on 2 cores; `make test` runs the installed 3.3).
test-airflow-versions: $(VENV)/.installed
	$(PY) -m pytest -q -m airflow_versions tests/test_airflow_versions.py

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

bench: $(VENV)/.installed
	$(PY) -m benchmarks.run

clean:
	rm -rf $(VENV) build *.egg-info
