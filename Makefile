# The two set-up commands: `make run` and `make test`. Each creates or reuses .venv; `make run`
# installs what running needs (the package), `make test` adds the test and lint tools.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HASH := $(shell cksum < pyproject.toml | cut -d' ' -f1)
RUN_STAMP := $(VENV)/.installed-run-$(HASH)
DEV_STAMP := $(VENV)/.installed-dev-$(HASH)

.PHONY: run test lint typecheck check clean bench bench-quick chaos

# What running needs: tidings and its dependencies, nothing else.
$(RUN_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	@rm -f $(VENV)/.installed-run-*
	@touch $@

# The tests, linters and benchmarks need the dev extra too; it includes what running needs.
$(DEV_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@rm -f $(VENV)/.installed-*
	@touch $@ $(RUN_STAMP)

run: $(RUN_STAMP)
	$(BIN)/tidings serve

# The tests run in this many processes (pytest-xdist), each with its own PostgreSQL database:
# alone they kept about one of two cores busy (24 min here), two take 12.
TEST_PROCESSES ?= 2
test: $(DEV_STAMP)
	$(BIN)/python -m pytest -n $(TEST_PROCESSES) --dist worksteal

bench: $(DEV_STAMP)
	$(BIN)/python -m bench

bench-quick: $(DEV_STAMP)
	$(BIN)/python -m bench --quick

# The full chaos mix (minutes, not in CI): faults at random with a printed seed, the ledger's
# table, chaos/results/latest.json. Pass options through CHAOS, e.g. CHAOS="--minutes 10".
CHAOS ?=
chaos: $(DEV_STAMP)
	$(BIN)/python -m tests.chaos $(CHAOS)

# ruff, then the layer contracts of pyproject.toml's [tool.importlinter] (STYLE.md's layers).
lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/lint-imports

typecheck: $(DEV_STAMP)
	$(BIN)/mypy

check: lint typecheck test

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
