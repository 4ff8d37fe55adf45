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

test: install-test js chromium lint
	cd js && npm test
	$(PY) -m pytest -ra

# the fast local loop: lint, types, the layer rules and the tests that need no browser (a few minutes)
check: lint
	$(PY) -m pytest -q -x -m "not browser" -p no:cacheprovider

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

clean:
	rm -rf $(VENV) $(OUT) js/node_modules cache
