# `make run` starts the web workspace, `make test` runs every test; both install first.
# `make test-live` runs tests/live against a real model server (llama.cpp) of its own.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
PY_STAMP := $(VENV)/.requirements.stamp
LOCK := requirements.lock
JS_STAMP := static/vendor/.stamp

.PHONY: install lock lock-upgrade run cli demo test test-live lint bench system-test-deps mcp-conformance

install: $(PY_STAMP) $(JS_STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The packages exactly as the lock has them (each file checked against its hash), then the
# project itself (workspace_client importable anywhere), built by the lock's setuptools, as a
# plain path: setuptools' default editable finder is imported by every Python start (+15 ms).
$(PY_STAMP): $(LOCK) pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --disable-pip-version-check -q --require-hashes -r $(LOCK)
	$(BIN)/python -m pip install --disable-pip-version-check -q --no-deps --no-build-isolation -e . --config-settings editable_mode=compat
	touch $@

# The lock: what requirements.txt asks for, resolved on PyPI itself (never on other indexes
# pip may be set to use on a machine) for every platform from Python 3.11 on, each package at
# one version with the hashes of all its files. `make lock` keeps the versions that still fit
# and resolves what changed; `make lock-upgrade` takes the newest each range allows. Both need
# the network; uv comes from the lock. tests/test_lock.py fails while the two files disagree.
LOCK_COMMAND = $(BIN)/uv pip compile requirements.txt --output-file $(LOCK) --universal \
	--python-version 3.11 --generate-hashes --no-config --index-url https://pypi.org/simple \
	--custom-compile-command "make lock" --quiet

lock: $(PY_STAMP)
	$(LOCK_COMMAND)

lock-upgrade: $(PY_STAMP)
	$(LOCK_COMMAND) --upgrade

$(JS_STAMP): package.json package-lock.json scripts/vendor.mjs scripts/editor-entry.mjs
	@command -v npm >/dev/null || { echo "npm is needed for the browser assets: apt-get install npm"; exit 1; }
	npm ci --ignore-scripts --no-audit --no-fund --prefer-offline --loglevel=error
	node scripts/vendor.mjs
	touch $@

# make run PORT=5050 WORKSPACE=~/project: another port, another workspace (which must exist).
run: install
	$(BIN)/python main.py web $(if $(PORT),--port '$(PORT)') $(if $(WORKSPACE),--workspace '$(WORKSPACE)')

cli: install
	$(BIN)/python main.py cli

# The product without a key: a scripted model on a copy of demo/workspace (made once, then
# kept: your changes stay). DEMO_FRONT=cli for the terminal. scripts/foreground.py gives it the
# terminal, so a Ctrl-C reaches the agent alone (make would end with "Interrupt").
DEMO_WORKSPACE ?= data/demo/workspace
DEMO_FRONT ?= web
demo: install
	@test -e $(DEMO_WORKSPACE) || { mkdir -p $(dir $(DEMO_WORKSPACE)) && cp -R demo/workspace $(DEMO_WORKSPACE); }
	AGENT_PROVIDER=demo $(BIN)/python scripts/foreground.py $(BIN)/python main.py $(DEMO_FRONT) --workspace $(DEMO_WORKSPACE) --data-dir data/demo/data --mode thinking

# Start the demo over: the sample workspace back as it was, its conversations, proposals and
# memory gone. With the demo stopped; while it runs, "Start over" on the page's banner does it.
DEMO_DATA ?= data/demo/data
.PHONY: demo-reset
demo-reset:
	rm -rf $(DEMO_WORKSPACE) $(DEMO_DATA)
	mkdir -p $(dir $(DEMO_WORKSPACE)) && cp -R demo/workspace $(DEMO_WORKSPACE)
	@echo "The demo starts over: $(DEMO_WORKSPACE) is the sample again. Run: make demo"

system-test-deps:
	@bash scripts/install_test_system.sh

# Two workers, a test file each at a time: the end-to-end tests mostly wait on processes (a
# third gained 6% here, and more contention on CI's loaded machine). Then, alone, the tests
# that add network interfaces to the host (Docker networks): Chromium aborts its requests on
# any such change, so no browser test runs beside them. Exit 5 (nothing collected) is fine.
test: install system-test-deps
	@$(BIN)/python -m pytest -n 2 --dist loadfile -m "not host_network"; rc=$$?; \
	[ $$rc -eq 5 ] && rc=0; \
	$(BIN)/python -m pytest -m host_network; alone=$$?; \
	[ $$alone -eq 5 ] && alone=0; \
	exit $$(( rc ? rc : alone ))

# The MCP conformance suite's server scenarios against main.py web's MCP over HTTP (Node 22
# and the suite installed with npm into ~/.cache/workspace-agent the first time).
mcp-conformance: install
	$(BIN)/python scripts/mcp_conformance.py

# The real server's environment: built once (llama-cpp-python compiles from source the first
# time), then quick. Its requirements pin every package; see tests/live/requirements.txt.
LIVE_VENV := .venv-live
LIVE_STAMP := $(LIVE_VENV)/.requirements.stamp
LIVE_REQUIREMENTS := tests/live/requirements.txt
CORES := $(shell nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)

$(LIVE_VENV)/bin/python:
	$(PYTHON) -m venv $(LIVE_VENV)

$(LIVE_STAMP): $(LIVE_REQUIREMENTS) | $(LIVE_VENV)/bin/python
	@echo "Installing the live tests' model server into $(LIVE_VENV) (the first time llama-cpp-python is built from source: a C/C++ compiler and cmake, about 20 minutes on 2 cores)"
	CMAKE_BUILD_PARALLEL_LEVEL=$(CORES) $(LIVE_VENV)/bin/python -m pip install --disable-pip-version-check -q --no-deps -r $(LIVE_REQUIREMENTS)
	touch $@

test-live: install $(LIVE_STAMP)
	@$(BIN)/python -m pytest tests/live; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 0; fi; exit $$rc

# mypy checks the Python as pyproject.toml's [tool.mypy] says (files, exclusions, plugins).
# tsc type-checks the page's files that start with // @ts-check (jsconfig.json); --no: never from the registry.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	npx --no -- tsc -p jsconfig.json

bench: install
	$(BIN)/python bench/history.py
