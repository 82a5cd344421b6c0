# Every target bootstraps what it needs, so each works as the first command on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.PHONY: venv test test-runtime lint run bench synth soak clean browser docs

WHEELS_STAMP := $(VENV)/.wheels

# Everything the tests, the bench and a deploy need. `make run` needs only the first part: the
# local stack runs the functions in its own process, with no Lambda bundle and no CDK CLI.
venv: $(STAMP) $(WHEELS_STAMP) $(NODE_STAMP)

# The development lock (hashes) for the tools, then the project itself; pyproject.toml changes
# need `python -m infra.bundling lock` (a test fails while a lock is out of date).
$(STAMP): pyproject.toml requirements/dev.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q --require-hashes -r requirements/dev.lock
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

# The locked aarch64 wheels of the layer: Lambda bundles build offline from them.
$(WHEELS_STAMP): $(STAMP) requirements/runtime.lock
	$(BIN)/python -m infra.bundling download
	touch $(WHEELS_STAMP)

# The CDK CLI pinned in package-lock.json, for `npx cdk ...` (skipped where npm is missing).
$(NODE_STAMP): package-lock.json
	if command -v npm >/dev/null; then npm ci --no-audit --no-fund -s && touch $(NODE_STAMP); \
	else echo "npm not found: install Node.js to use npx cdk"; fi

# Two pytest runs side by side, one per core: the long, CPU-bound model-based reliability suite
# (2,000 schedules), then the reputation guard's browser tests, beside everything else (the two
# take about as long). Each prints its own summary; either failing fails.
BESIDE := tests/reliability tests/e2e/test_reputation.py
test: venv browser
	@rel=$$(mktemp); \
	$(BIN)/python -m pytest -q -p no:cacheprovider $(BESIDE) $(PYTEST_ARGS) >$$rel 2>&1 & \
	pid=$$!; status=0; \
	$(BIN)/python -m pytest -q $(addprefix --ignore=,$(BESIDE)) $(PYTEST_ARGS) || status=$$?; \
	wait $$pid || status=$$?; \
	echo; echo "== $(BESIDE)"; cat $$rel; rm -f $$rel; exit $$status

# The unit and integration suites again on the functions' Python minor (3.13, as Lambda runs
# them), in a venv of its own at the development lock's versions. Hashes are left out: the lock
# holds this machine's Python's wheels, and 3.13 needs others of the same versions.
RUNTIME_PYTHON ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python3.13) $(shell command -v python3.13))
RUNTIME_VENV := .venv-3.13
RUNTIME_STAMP := $(RUNTIME_VENV)/.installed

$(RUNTIME_STAMP): pyproject.toml requirements/dev.lock
	@test -n "$(RUNTIME_PYTHON)" || { echo "test-runtime needs python3.13 (pyenv install 3.13)"; exit 2; }
	test -x $(RUNTIME_VENV)/bin/python || $(RUNTIME_PYTHON) -m venv $(RUNTIME_VENV)
	$(RUNTIME_VENV)/bin/pip install -q --upgrade pip
	grep -E '^[A-Za-z0-9_.-]+==' requirements/dev.lock | sed 's/ \\$$//' > $(RUNTIME_VENV)/constraints.txt
	$(RUNTIME_VENV)/bin/pip install -q -c $(RUNTIME_VENV)/constraints.txt -e '.[dev]'
	touch $(RUNTIME_STAMP)

test-runtime: $(RUNTIME_STAMP)
	$(RUNTIME_VENV)/bin/python -c 'import sys; assert sys.version_info[:2] == (3, 13), sys.version'
	$(RUNTIME_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/unit tests/integration $(PYTEST_ARGS)

# Headless Chromium from Debian for the console's browser tests (tests/e2e/test_console.py);
# `make test` installs it when missing (apt-get as root, or through sudo).
browser:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then sudo=; elif command -v sudo >/dev/null; then sudo=sudo; \
	  else sudo=false; fi; \
	  { $$sudo apt-get update -q && $$sudo apt-get install -y -q chromium; } || \
	  echo "chromium could not be installed (needs root or sudo, and apt): the console's" \
	    "browser tests will skip"; }

lint: venv
	$(BIN)/ruff check shared functions infra tests bench docsite
	$(BIN)/mypy

run: $(STAMP)  # the whole system on loopback: moto as AWS, SES and Twilio sandboxes (PORT=8765)
	$(BIN)/vdq local --port $(or $(PORT),8765)

# SOAK_EXAMPLES schedules of the model in two processes side by side, one per core, each with
# its own random seed (the second runs the rest of the reliability suite at soak size too). A
# process's memory stays flat (tests/reliability/support.py, forget_items).
SOAK_EXAMPLES ?= 20000
soak: venv
	@half=$$(( $(SOAK_EXAMPLES) / 2 )); log=$$(mktemp); \
	VDQ_SOAK=1 VDQ_MODEL_EXAMPLES=$$half $(BIN)/python -m pytest -q -p no:cacheprovider \
	  tests/reliability/test_model.py $(PYTEST_ARGS) >$$log 2>&1 & \
	pid=$$!; status=0; \
	VDQ_SOAK=1 VDQ_MODEL_EXAMPLES=$$half $(BIN)/python -m pytest -q -p no:cacheprovider \
	  tests/reliability $(PYTEST_ARGS) || status=$$?; \
	wait $$pid || status=$$?; \
	echo; echo "== the model's other half"; cat $$log; rm -f $$log; exit $$status

# The documentation site (mkdocs.yml), rebuilt on every change; `make test` builds it with
# --strict (tests/infra/test_docs.py).
docs: venv
	$(BIN)/mkdocs serve -a 127.0.0.1:$(or $(DOCS_PORT),8000)

bench: venv
	$(BIN)/python -m bench

# vdq:sesIdentities (the SES identities VDQ sends from) has no default a deploy could use, so a
# fresh clone's cdk.json has none: synth then checks the app with the example identity
# example.com and says so. SES_IDENTITIES=example.org,shop@example.net synth with yours.
synth: venv
	@if [ -n "$(SES_IDENTITIES)" ]; then ctx="-c vdq:sesIdentities=$(SES_IDENTITIES)"; \
	elif ! grep -q '"vdq:sesIdentities"' cdk.json; then ctx="-c vdq:sesIdentities=example.com"; \
	  echo "make synth: cdk.json has no vdq:sesIdentities, so this synth uses the example" \
	    "identity example.com; a deploy needs yours (cdk.json, or -c vdq:sesIdentities=...)"; fi; \
	npx cdk synth -q $$ctx

clean:
	rm -rf $(VENV) $(RUNTIME_VENV) cdk.out build node_modules .pytest_cache .mypy_cache .ruff_cache
