# `make demo` runs the main job on the offline demo model; `make test` runs every test.
# Both start from nothing: they create .venv, install the Python and npm packages, and (for the
# browser tests) Debian's chromium.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
OUT := out

.PHONY: demo test check lint lab js install install-test chromium bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip

install: $(PY)
	$(PY) -m pip install -e '.[demo]'

install-test: $(PY)
	$(PY) -m pip install -e '.[test,demo,lab,plot]'

js:
	cd js && npm ci --no-audit --no-fund && npm run build

chromium:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; \
	fi
	chromium --version

demo: install
	$(PY) -m mmsp_notebook.run notebooks/quickstart.ipynb --out $(OUT)

# lint and types: ruff (pyflakes, bugbear, import order, pyupgrade) and mypy on core/, engine/, traces/
lint: install-test
	$(VENV)/bin/ruff check mmsp_notebook tests bench
	$(VENV)/bin/mypy

# pytest runs in two phases. First the tests that can share the machine, on two pytest-xdist workers
# (--dist loadfile: a module's tests stay together, with its module fixtures); then, in one process,
# the browser tests (one JupyterLab and one Chromium for them all) and the tests marked `serial`
# (they time something or need the cores to themselves). Every test is in exactly one phase:
# tests/test_suite.py checks that the two selections below are complements. Both phases run even if
# the first fails; the target fails if either does.
PARALLEL := not browser and not serial
SERIAL := browser or serial

test: install-test js chromium lint
	cd js && npm test
	status=0; \
	$(PY) -m pytest -ra -n 2 --dist loadfile -m "$(PARALLEL)" || status=$$?; \
	$(PY) -m pytest -ra -m "$(SERIAL)" || status=$$?; \
	exit $$status

# the fast local loop: lint, types, the layer rules and the tests that need no browser (a few minutes)
check: lint
	$(PY) -m pytest -q -x -p no:cacheprovider -n 2 --dist loadfile -m "$(PARALLEL)"
	$(PY) -m pytest -q -x -p no:cacheprovider -m "serial and not browser"

lab: $(PY)
	$(PY) -m pip install -e '.[notebooks]'
	$(VENV)/bin/jupyter lab notebooks

# every benchmark of bench/RESULTS.md (bench_dataset.py at 1M turns needs ~5 GB of disk: run it alone)
bench: install-test
	$(PY) bench/bench_magic.py
	$(PY) bench/bench_chat.py
	$(PY) bench/bench_compare.py
	$(PY) bench/bench_traces.py
	$(PY) bench/bench_memory.py
	$(PY) bench/bench_explore.py
	$(PY) bench/bench_first_cell.py
	$(PY) bench/bench_finish.py
	$(PY) bench/bench_wire_redact.py 20000 80000

clean:
	rm -rf $(VENV) $(OUT) js/node_modules cache
