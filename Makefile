# Every target bootstraps what it needs, so each works as the first command on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.PHONY: venv test lint run bench synth soak clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,cdk]'
	touch $(STAMP)

test: venv
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check shared functions infra tests bench
	$(BIN)/mypy

run: venv
	$(BIN)/python -m vdq.demo

bench: venv
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) cdk.out .pytest_cache .mypy_cache .ruff_cache
