# sparktrail — one command per job. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
EVENTLOG ?= ../shared/eventlogs/local-1532512550423
RUN_DIR ?= .run

.DEFAULT_GOAL := help
.PHONY: help setup java-check run run-batch run-eventlog test test-fast lint wheel-check bench clean

help: ## list the commands
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-11s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP) java-check ## create .venv and install sparktrail with its dev tools

java-check: ## check that Java 17+ is present (Spark needs it)
	@bash scripts/check-java.sh

run: setup ## a live-traced Spark workload with a moving hotspot, on the live dashboard (Ctrl-C stops)
	$(PY) -m sparktrail demo --serve --minutes 3 -o $(RUN_DIR)/live

run-batch: setup ## trace three short workloads live, then profile them into .run/profile/report.html
	$(PY) -m sparktrail demo -o $(RUN_DIR)/demo
	$(PY) -m sparktrail profile $(RUN_DIR)/demo --window 1s -o $(RUN_DIR)/profile
	@echo "report: $(RUN_DIR)/profile/report.html"

run-eventlog: setup ## import the bundled Spark event log and profile it
	$(PY) -m sparktrail import $(EVENTLOG) -o $(RUN_DIR)/trace
	$(PY) -m sparktrail profile $(RUN_DIR)/trace --window 1s -o $(RUN_DIR)/eventlog-profile

test: setup ## run every test (unit, property, doctest, Spark integration)
	$(PY) -m pytest -q

test-fast: setup ## run the tests that start neither Spark nor a browser
	$(PY) -m pytest -q -m "not integration"

lint: setup ## ruff lint and format check, mypy on the packages
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	bash scripts/typecheck.sh

wheel-check: setup ## build the wheel, install it in a fresh venv, import every module, profile the shared log
	bash scripts/check-wheel.sh

bench: setup ## run the benchmarks and print the tables for BENCHMARKS.md
	$(PY) bench/run.py
	$(PY) bench/tracer_overhead.py --tasks 20000 --repeat 5
	$(PY) bench/cli_startup.py --repeat 15

clean: ## remove the venv, build and run outputs
	rm -rf $(VENV) .build $(RUN_DIR) .pytest_cache .mypy_cache .hypothesis
