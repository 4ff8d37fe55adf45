# `make demo` runs the main job on the offline demo model; `make test` runs every test.
# Both start from nothing: they create .venv, install the Python and npm packages, and (for the
# browser tests) Debian's chromium.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
OUT := out

.PHONY: demo test lab js install install-test chromium bench clean

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

test: install-test js chromium
	cd js && npm test
	$(PY) -m pytest -ra

lab: install-test js
	$(VENV)/bin/jupyter lab notebooks

bench: install-test
	$(PY) bench/bench_magic.py
	$(PY) bench/bench_traces.py

clean:
	rm -rf $(VENV) $(OUT) js/node_modules cache
